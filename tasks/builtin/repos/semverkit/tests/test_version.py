import pytest

from semverkit import (
    InvalidVersion,
    Version,
    coerce,
    compare,
    compare_identifiers,
    is_valid,
    parse,
    sort_versions,
)


def test_parse_full_version():
    v = Version.parse("1.2.3-rc.1+build.5")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert v.prerelease == ("rc", "1")
    assert v.build == ("build", "5")
    assert v.is_prerelease


def test_str_round_trip():
    for text in ["0.0.0", "1.2.3", "10.20.30-alpha.1", "1.0.0+20130313144700", "1.0.0-x-y-z.--"]:
        assert str(Version.parse(text)) == text


@pytest.mark.parametrize(
    "text",
    ["1.2", "01.2.3", "1.2.3-", "1.2.3-01", "v1.2.3", ""],
    ids=["two_parts", "leading_zero_major", "empty_pre", "pre_leading_zero", "v_prefix", "empty"],
)
def test_invalid_versions_rejected(text):
    with pytest.raises(InvalidVersion):
        Version.parse(text)
    assert not is_valid(text)


def test_loose_parse_accepts_prefix():
    assert Version.parse("v1.2.3", loose=True) == Version(1, 2, 3)
    assert parse("  =1.2.3 ", loose=True) == Version(1, 2, 3)


def test_build_metadata_leading_zero_allowed():
    assert Version.parse("1.0.0+001").build == ("001",)


def test_prerelease_lower_than_release():
    assert Version.parse("1.0.0-alpha") < Version.parse("1.0.0")
    assert Version.parse("1.0.0") > "1.0.0-rc.1"


def test_spec_precedence_chain():
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
             "1.0.0-beta.2", "1.0.0-rc.1", "1.0.0"]
    parsed = [Version.parse(v) for v in chain]
    for low, high in zip(parsed, parsed[1:]):
        assert low < high, (low, high)


def test_numeric_identifiers_before_alphanumeric():
    assert compare_identifiers("1", "alpha") == -1
    assert compare_identifiers("alpha", "1") == 1
    assert compare_identifiers("7", "7") == 0


def test_core_compared_numerically():
    assert Version.parse("1.10.0") > Version.parse("1.9.0")
    assert Version.parse("2.0.0") > Version.parse("1.99.99")


def test_build_metadata_ignored_in_precedence():
    a = Version.parse("1.0.0+a")
    b = Version.parse("1.0.0+b")
    assert a == b
    assert hash(a) == hash(b)
    assert compare("1.0.0+a", "1.0.0+b") == 0


def test_equality_with_strings_and_other_types():
    assert Version(1, 2, 3) == "1.2.3"
    assert Version(1, 2, 3) != "1.2.4"
    assert (Version(1, 2, 3) == 3) is False


def test_replace_and_finalize():
    v = Version.parse("1.2.3-beta+exp")
    assert v.finalize() == Version(1, 2, 3)
    assert str(v.replace(minor=5, build=None)) == "1.5.3-beta"


def test_negative_component_rejected():
    with pytest.raises(InvalidVersion):
        Version(1, -1, 0)


def test_coerce():
    assert coerce("release v2.4 final") == Version(2, 4, 0)
    assert coerce("3") == Version(3, 0, 0)
    assert coerce("1.2.3.4") == Version(1, 2, 3)
    assert coerce("no digits") is None


def test_sort_versions_keeps_objects():
    items = ["1.2.0", "v1.0.0", "1.10.0", "1.2.0-rc.1"]
    assert sort_versions(items) == ["v1.0.0", "1.2.0-rc.1", "1.2.0", "1.10.0"]
    assert sort_versions(items, reverse=True)[0] == "1.10.0"


def test_sort_versions_non_strict_drops_invalid():
    assert sort_versions(["2.0.0", "junk", "1.0.0"], strict=False) == ["1.0.0", "2.0.0"]
    with pytest.raises(InvalidVersion):
        sort_versions(["2.0.0", "junk"])
