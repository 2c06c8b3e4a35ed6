from semverkit import (
    Range,
    Version,
    filter_satisfying,
    max_satisfying,
    min_satisfying,
    min_version,
)

VERSIONS = ["1.0.0", "1.2.0", "1.2.5", "1.9.9", "2.0.0", "2.1.0-beta.1", "3.0.0"]


def test_max_satisfying_basic():
    assert max_satisfying(VERSIONS, "^1.2.0") == "1.9.9"
    assert max_satisfying(VERSIONS, "~1.2") == "1.2.5"
    assert max_satisfying(VERSIONS, ">=2.0.0") == "3.0.0"


def test_max_satisfying_none_when_nothing_matches():
    assert max_satisfying(VERSIONS, "^4") is None
    assert max_satisfying([], "*") is None


def test_max_satisfying_skips_prereleases_by_default():
    assert max_satisfying(["2.0.0", "2.1.0-beta.1"], "^2.0.0") == "2.0.0"


def test_min_satisfying():
    assert min_satisfying(VERSIONS, "^1.2.0") == "1.2.0"
    assert min_satisfying(VERSIONS, ">1.9.9") == "2.0.0"


def test_max_satisfying_accepts_version_objects_and_range():
    versions = [Version.parse(v) for v in VERSIONS]
    assert max_satisfying(versions, Range("<2")) == Version(1, 9, 9)


def test_filter_satisfying_keeps_order_and_skips_invalid():
    assert filter_satisfying(["1.2.5", "bad", "1.0.0", "1.2.0"], "~1.2") == ["1.2.5", "1.2.0"]


def test_filter_satisfying_include_prerelease():
    assert filter_satisfying(VERSIONS, "^2.0.0", include_prerelease=True) == ["2.0.0", "2.1.0-beta.1"]


def test_min_version():
    assert min_version("^1.2.3") == Version(1, 2, 3)
    assert min_version(">1.2.3") == Version(1, 2, 4)
    assert min_version("*") == Version(0, 0, 0)
    assert min_version(">=2.0.0 || 1.5.0") == Version(1, 5, 0)
