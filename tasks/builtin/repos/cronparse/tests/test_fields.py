import pytest

from cronparse import DAY_OF_MONTH, DAY_OF_WEEK, HOUR, MINUTE, MONTH, CronSyntaxError, parse_field


def test_star_selects_whole_field():
    assert parse_field("*", MINUTE) == frozenset(range(60))
    assert parse_field("*", MONTH) == frozenset(range(1, 13))


def test_single_value_and_list():
    assert parse_field("5", MINUTE) == {5}
    assert parse_field("1,15,30", MINUTE) == {1, 15, 30}


def test_range():
    assert parse_field("9-17", HOUR) == frozenset(range(9, 18))


def test_star_step():
    assert parse_field("*/15", MINUTE) == {0, 15, 30, 45}
    assert parse_field("*/6", HOUR) == {0, 6, 12, 18}


def test_range_step_from_zero():
    assert parse_field("0-30/10", MINUTE) == {0, 10, 20, 30}


def test_list_of_ranges_and_values():
    assert parse_field("1-3,10,20-21", DAY_OF_MONTH) == {1, 2, 3, 10, 20, 21}


def test_month_names_case_insensitive():
    assert parse_field("JAN", MONTH) == {1}
    assert parse_field("mar-May", MONTH) == {3, 4, 5}
    assert parse_field("dec,jan", MONTH) == {1, 12}


def test_weekday_names():
    assert parse_field("MON-FRI", DAY_OF_WEEK) == {1, 2, 3, 4, 5}
    assert parse_field("sun,sat", DAY_OF_WEEK) == {0, 6}


def test_question_mark_only_for_day_fields():
    assert parse_field("?", DAY_OF_MONTH) == frozenset(range(1, 32))
    with pytest.raises(CronSyntaxError):
        parse_field("?", HOUR)


@pytest.mark.parametrize(
    "spec,text",
    [
        (MINUTE, "60"),
        (DAY_OF_WEEK, "8"),
        (MINUTE, "*/0"),
        (MINUTE, "1,,2"),
        (MONTH, "FOO"),
        (HOUR, "-5"),
    ],
    ids=["minute_60", "dow_8", "step_zero", "empty_item", "bad_name", "leading_dash"],
)
def test_invalid_fields(spec, text):
    with pytest.raises(CronSyntaxError) as info:
        parse_field(text, spec)
    assert info.value.field == spec.name


def test_error_message_names_field_and_bounds():
    with pytest.raises(CronSyntaxError) as info:
        parse_field("61", MINUTE)
    assert str(info.value) == "invalid minute field '61': value 61 out of range (0-59)"
