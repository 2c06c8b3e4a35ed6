import pytest

from semverkit import Version, bump, diff


@pytest.mark.parametrize(
    "start,release,expected",
    [
        ("1.2.3", "major", "2.0.0"),
        ("1.2.3", "minor", "1.3.0"),
        ("1.2.3", "patch", "1.2.4"),
        ("1.2.3", "premajor", "2.0.0-0"),
        ("1.2.3", "prerelease", "1.2.4-0"),
        ("1.2.3-rc.1", "release", "1.2.3"),
    ],
    ids=["major", "minor", "patch", "premajor", "prerelease", "release"],
)
def test_bump_release_versions(start, release, expected):
    assert bump(start, release) == expected


def test_bump_major_finalises_premajor():
    assert bump("2.0.0-rc.1", "major") == "2.0.0"
    assert bump("2.1.0-rc.1", "major") == "3.0.0"


def test_bump_minor_finalises_preminor():
    assert bump("1.3.0-beta", "minor") == "1.3.0"


def test_bump_prerelease_increments_last_number():
    assert bump("1.2.3-rc.1", "prerelease") == "1.2.3-rc.2"
    assert bump("1.2.3-beta", "prerelease") == "1.2.3-beta.0"
    assert bump("1.2.3-alpha.1.x", "prerelease") == "1.2.3-alpha.2.x"


def test_bump_with_identifier():
    assert bump("1.2.3", "prerelease", "rc") == "1.2.4-rc.0"
    assert bump("1.2.4-beta.3", "prerelease", "rc") == "1.2.4-rc.0"
    assert bump("1.2.4-rc.0", "prerelease", "rc") == "1.2.4-rc.1"
    assert bump("1.2.3", "preminor", "alpha") == "1.3.0-alpha.0"


def test_bump_drops_build_and_preserves_type():
    v = bump(Version.parse("1.2.3+build.9"), "minor")
    assert isinstance(v, Version)
    assert str(v) == "1.3.0"


def test_bump_unknown_release_type():
    with pytest.raises(ValueError):
        bump("1.2.3", "micro")


def test_diff():
    assert diff("1.2.3", "2.0.0") == "major"
    assert diff("1.2.3", "1.3.0") == "minor"
    assert diff("1.2.3", "1.2.4") == "patch"
    assert diff("1.2.3-rc.1", "1.2.3-rc.2") == "prerelease"
    assert diff("1.2.3+a", "1.2.3+b") is None
