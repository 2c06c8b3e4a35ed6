from datetime import date, datetime

import pytest

from cronparse import ALIASES, CronExpression, CronSyntaxError, is_valid, parse, validate


def test_parse_basic_fields():
    expr = CronExpression("30 9 * * MON-FRI")
    assert expr.minutes == {30}
    assert expr.hours == {9}
    assert expr.weekdays == {1, 2, 3, 4, 5}
    assert expr.dom_star and not expr.dow_star


def test_extra_whitespace_is_ignored():
    assert CronExpression("  0   12  *  *  * ") == CronExpression("0 12 * * *")


def test_wrong_number_of_fields():
    with pytest.raises(CronSyntaxError) as info:
        CronExpression("* * * *")
    assert "expected 5 fields" in str(info.value)
    assert "got 4" in str(info.value)


def test_field_error_mentions_whole_expression():
    with pytest.raises(CronSyntaxError) as info:
        CronExpression("0 25 * * *")
    assert info.value.field == "hour"
    assert info.value.expression == "0 25 * * *"


@pytest.mark.parametrize("alias", sorted(ALIASES), ids=[a.lstrip("@") for a in sorted(ALIASES)])
def test_aliases_equal_their_expansion(alias):
    assert CronExpression(alias) == CronExpression(ALIASES[alias])


def test_alias_is_case_insensitive():
    assert CronExpression("@Daily") == CronExpression("0 0 * * *")


def test_reboot_and_unknown_alias_rejected():
    assert "not supported" in validate("@reboot")
    assert "unknown alias" in validate("@fortnightly")


def test_impossible_day_of_month_rejected():
    message = validate("0 0 30 2 *")
    assert message is not None
    assert "never occurs in February" in message
    assert is_valid("0 0 29 2 *")
    assert is_valid("0 0 31 1,2 *")


def test_matches():
    expr = CronExpression("*/15 9-17 * * MON-FRI")
    assert expr.matches(datetime(2024, 5, 3, 9, 45))
    assert not expr.matches(datetime(2024, 5, 4, 9, 45))  # Saturday
    assert not expr.matches(datetime(2024, 5, 3, 18, 0))


def test_day_matches_with_only_weekday_restricted():
    expr = CronExpression("0 0 * * SUN")
    assert expr.day_matches(date(2024, 6, 2))
    assert not expr.day_matches(date(2024, 6, 3))


def test_str_and_parse_passthrough():
    expr = parse("0 12 * * *")
    assert parse(expr) is expr
    assert str(expr) == "0 12 * * *"
    assert repr(CronExpression("@hourly")) == "CronExpression('@hourly')"


def test_validate_valid_expression_returns_none():
    assert validate("0 0 1 1 *") is None
    assert is_valid("*/5 * * * *")
    assert not is_valid("*/5 * * *")
