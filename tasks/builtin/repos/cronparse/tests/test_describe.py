import pytest

from cronparse import CronExpression, describe


@pytest.mark.parametrize(
    "expression,expected",
    [
        ("* * * * *", "Every minute"),
        ("*/15 * * * *", "Every 15 minutes"),
        ("5 * * * *", "At minute 5 past every hour"),
        ("0 9 * * *", "At 09:00"),
        ("0 9,17 * * *", "At 09:00 and 17:00"),
        ("30 */2 * * *", "At minute 30, every 2 hours"),
        ("*/15 9-17 * * MON-FRI", "Every 15 minutes, between 09:00 and 17:59, Monday through Friday"),
        ("0 9 1 * *", "At 09:00, on day 1 of the month"),
        ("0 0 * JAN-MAR SUN", "At 00:00, on Sunday, January through March"),
    ],
    ids=["every_minute", "every_15", "minute_past_hour", "daily", "twice_daily", "hour_step",
         "business_hours", "monthly", "winter_sundays"],
)
def test_describe(expression, expected):
    assert describe(expression) == expected


def test_describe_both_day_fields_uses_or():
    assert describe("0 0 1,15 * MON") == "At 00:00, on days 1 and 15 of the month or on Monday"


def test_describe_method_and_alias():
    assert CronExpression("@daily").describe() == "At 00:00"
