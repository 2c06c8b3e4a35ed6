from datetime import date

from tabkit import detect_type, infer_column, parse_value, to_text
from tabkit.infer import convert_column, unify_types


def test_detect_basic_types():
    assert detect_type("42") == "int"
    assert detect_type("3.25") == "float"
    assert detect_type("1e-3") == "float"
    assert detect_type("TRUE") == "bool"
    assert detect_type("no") == "bool"
    assert detect_type("2024-02-29") == "date"
    assert detect_type("hello") == "str"


def test_detect_missing_tokens():
    assert detect_type("") == "none"
    assert detect_type("NA") == "none"
    assert detect_type("  ") == "none"
    assert detect_type("n/a", na_values=("n/a",)) == "none"


def test_invalid_date_is_string():
    assert detect_type("2023-02-29") == "str"
    assert detect_type("2023-13-01") == "str"


def test_unify_types():
    assert unify_types("int", "float") == "float"
    assert unify_types("none", "date") == "date"
    assert unify_types("int", "bool") == "str"
    assert unify_types("date", "date") == "date"


def test_infer_column_widens():
    assert infer_column(["1", "2", "3"]) == "int"
    assert infer_column(["1", "2.5", ""]) == "float"
    assert infer_column(["1", "x"]) == "str"
    assert infer_column(["", "NA"]) == "none"


def test_parse_and_convert():
    assert parse_value("7", "int") == 7
    assert parse_value("7", "float") == 7.0
    assert parse_value("Yes", "bool") is True
    assert parse_value("2020-01-31", "date") == date(2020, 1, 31)
    assert convert_column(["1", "", "3"], "int") == [1, None, 3]


def test_to_text_round_trip():
    for value in [3, 2.5, True, False, date(2024, 2, 29), "plain"]:
        text = to_text(value)
        assert parse_value(text, detect_type(text)) == value
    assert to_text(None) == ""
    assert to_text(4.0) == "4.0"
