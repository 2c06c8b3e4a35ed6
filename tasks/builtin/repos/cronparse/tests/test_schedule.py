from datetime import datetime, timedelta, timezone

import pytest

from cronparse import (
    CronExpression,
    NoFireTimeError,
    days_in_month,
    is_leap_year,
    iter_fires,
    next_fire,
    next_fires,
    prev_fire,
)


def test_next_is_strictly_after_start():
    assert next_fire("0 12 * * *", datetime(2024, 1, 1, 12, 0)) == datetime(2024, 1, 2, 12, 0)


def test_next_with_seconds_rounds_up():
    assert next_fire("* * * * *", datetime(2024, 1, 1, 10, 0, 30)) == datetime(2024, 1, 1, 10, 1)


def test_next_rolls_over_year():
    assert next_fire("@yearly", datetime(2024, 6, 1)) == datetime(2025, 1, 1)


def test_next_business_hours():
    expr = CronExpression("*/15 9-17 * * MON-FRI")
    assert expr.next(datetime(2024, 5, 3, 17, 50)) == datetime(2024, 5, 6, 9, 0)


def test_next_skips_short_months():
    assert next_fire("0 0 31 * *", datetime(2024, 4, 1)) == datetime(2024, 5, 31)


def test_next_leap_day():
    assert next_fire("0 0 29 2 *", datetime(2023, 3, 1)) == datetime(2024, 2, 29)


def test_prev_is_strictly_before_start():
    assert prev_fire("0 12 * * *", datetime(2024, 1, 2, 12, 0)) == datetime(2024, 1, 1, 12, 0)


def test_prev_rolls_back_over_month():
    assert prev_fire("30 6 1 * *", datetime(2024, 3, 1, 6, 0)) == datetime(2024, 2, 1, 6, 30)


def test_prev_weekly():
    assert prev_fire("@weekly", datetime(2024, 6, 5, 8, 0)) == datetime(2024, 6, 2, 0, 0)


def test_next_fires_list():
    got = next_fires("0 */6 * * *", datetime(2024, 1, 1, 5, 0), 3)
    assert got == [datetime(2024, 1, 1, 6), datetime(2024, 1, 1, 12), datetime(2024, 1, 1, 18)]


def test_next_fires_reverse():
    got = next_fires("0 0 * * *", datetime(2024, 3, 2), 2, reverse=True)
    assert got == [datetime(2024, 3, 1), datetime(2024, 2, 29)]


def test_iter_fires_is_lazy_and_increasing():
    it = iter_fires("*/20 * * * *", datetime(2024, 1, 1, 23, 50))
    first = [next(it) for _ in range(3)]
    assert first == [datetime(2024, 1, 2, 0, 0), datetime(2024, 1, 2, 0, 20), datetime(2024, 1, 2, 0, 40)]


def test_timezone_is_preserved():
    tz = timezone(timedelta(hours=2))
    got = next_fire("0 8 * * *", datetime(2024, 1, 1, 9, 0, tzinfo=tz))
    assert got == datetime(2024, 1, 2, 8, 0, tzinfo=tz)
    assert got.tzinfo is tz


def test_horizon_exhausted_raises():
    with pytest.raises(NoFireTimeError):
        next_fire("0 0 29 2 *", datetime(2024, 3, 1), horizon_years=2)


def test_leap_year_helpers():
    assert is_leap_year(2024)
    assert not is_leap_year(2023)
    assert days_in_month(2024, 2) == 29
    assert days_in_month(2023, 2) == 28
    assert days_in_month(2023, 12) == 31
