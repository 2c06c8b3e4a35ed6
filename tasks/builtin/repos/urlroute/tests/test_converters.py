import uuid

import pytest

from urlroute import (
    AnyConverter,
    FloatConverter,
    IntConverter,
    PathConverter,
    RuleError,
    SlugConverter,
    StringConverter,
    UUIDConverter,
    ValidationError,
)


def test_int_converter_round_trip():
    conv = IntConverter()
    assert conv.to_python("42") == 42
    assert conv.to_url(7) == "7"
    with pytest.raises(ValidationError):
        conv.to_url(-1)


def test_int_converter_min_bound():
    conv = IntConverter(min=1, max=100)
    assert conv.to_python("1") == 1
    assert conv.to_python("50") == 50
    with pytest.raises(ValidationError):
        conv.to_python("0")
    with pytest.raises(RuleError):
        IntConverter(min=5, max=1)


def test_signed_int_regex():
    assert IntConverter(signed=True).regex == r"-?\d+"
    assert IntConverter().regex == r"\d+"


def test_float_converter():
    assert FloatConverter().to_python("0.5") == 0.5
    assert FloatConverter(max=1.0).to_url(0.25) == "0.25"


def test_string_converter_lengths():
    conv = StringConverter(minlength=2, maxlength=4)
    assert conv.to_python("abc") == "abc"
    with pytest.raises(ValidationError):
        conv.to_python("a")
    with pytest.raises(ValidationError):
        conv.to_python("abcde")


def test_uuid_converter():
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    conv = UUIDConverter()
    assert conv.to_python(str(value)) == value
    assert conv.to_url(value) == str(value)


def test_any_converter():
    conv = AnyConverter("png", "jpg")
    assert conv.regex == "(?:png|jpg)"
    assert conv.to_url("png") == "png"
    with pytest.raises(ValidationError):
        conv.to_url("gif")
    with pytest.raises(RuleError):
        AnyConverter()


def test_weights_order_specificity():
    assert AnyConverter("a").weight < IntConverter().weight < SlugConverter().weight
    assert SlugConverter().weight < StringConverter().weight < PathConverter().weight
