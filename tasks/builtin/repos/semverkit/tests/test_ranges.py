import pytest

from semverkit import InvalidRange, Range, satisfies, valid_range


def test_exact_and_primitive_operators():
    assert satisfies("1.2.3", "1.2.3")
    assert satisfies("1.2.3", "=1.2.3")
    assert satisfies("1.2.4", ">1.2.3")
    assert not satisfies("1.2.3", "<1.2.3")
    assert satisfies("1.2.3", "<=1.2.3")
    assert satisfies("1.2.3", ">=1.2.3 <2.0.0")


def test_operator_followed_by_space():
    assert str(Range(">= 1.2.3 < 2")) == ">=1.2.3 <2.0.0-0"


def test_caret_desugaring():
    assert str(Range("^1.2.3")) == ">=1.2.3 <2.0.0-0"
    assert str(Range("^0.2.3")) == ">=0.2.3 <0.3.0-0"
    assert str(Range("^1.x")) == ">=1.0.0 <2.0.0-0"
    assert str(Range("^0.x")) == ">=0.0.0 <1.0.0-0"


def test_caret_matching():
    assert satisfies("1.9.9", "^1.2.3")
    assert not satisfies("2.0.0", "^1.2.3")
    assert satisfies("0.2.9", "^0.2.3")
    assert not satisfies("0.3.0", "^0.2.3")


def test_tilde_desugaring():
    assert str(Range("~1.2.3")) == ">=1.2.3 <1.3.0-0"
    assert str(Range("~1.2")) == ">=1.2.0 <1.3.0-0"
    assert str(Range("~1")) == ">=1.0.0 <2.0.0-0"
    assert str(Range("~>1.2.3")) == ">=1.2.3 <1.3.0-0"


def test_x_ranges():
    assert str(Range("1.x")) == ">=1.0.0 <2.0.0-0"
    assert str(Range("1.2.*")) == ">=1.2.0 <1.3.0-0"
    assert str(Range("*")) == "*"
    assert str(Range("")) == "*"
    assert satisfies("1.2.9", "1.2.x")
    assert not satisfies("1.3.0", "1.2.x")


def test_partial_with_ge_and_lt():
    assert str(Range(">=1.2")) == ">=1.2.0"
    assert str(Range("<1.2")) == "<1.2.0-0"
    assert satisfies("1.1.9", "<1.2")
    assert not satisfies("1.2.0", "<1.2")


def test_hyphen_range_full_versions():
    assert str(Range("1.2.3 - 2.3.4")) == ">=1.2.3 <=2.3.4"
    assert satisfies("2.3.4", "1.2.3 - 2.3.4")
    assert not satisfies("2.3.5", "1.2.3 - 2.3.4")


def test_hyphen_range_partial_lower_bound():
    assert str(Range("1.2 - 2.3.4")) == ">=1.2.0 <=2.3.4"


def test_or_alternatives():
    r = Range("1.2.7 || >=1.2.9 <2.0.0")
    assert r.test("1.2.7")
    assert not r.test("1.2.8")
    assert r.test("1.4.6")
    assert not r.test("2.0.0")


def test_prerelease_excluded_by_default():
    assert not satisfies("1.3.0-beta", ">=1.2.0")
    assert satisfies("1.3.0-beta", ">=1.2.0", include_prerelease=True)


def test_prerelease_allowed_by_exact_comparator():
    assert satisfies("1.2.4-rc.1", ">=1.2.4-rc.1")
    assert satisfies("1.2.4-rc.1", "1.2.4-rc.1")


def test_range_caret_excludes_next_major_prerelease():
    assert not satisfies("2.0.0-alpha", "^1.2.3", include_prerelease=True)


def test_invalid_versions_do_not_satisfy():
    assert not satisfies("not.a.version", "*")


@pytest.mark.parametrize("text", [">=abc", "1.2.3.4", "^"],
                         ids=["letters", "four_parts", "bare_caret"])
def test_invalid_ranges(text):
    with pytest.raises(InvalidRange):
        Range(text)
    assert valid_range(text) is None


def test_contains_and_equality():
    assert "1.5.0" in Range("^1.0.0")
    assert Range("^1.2.3") == Range(">=1.2.3 <2.0.0-0")
