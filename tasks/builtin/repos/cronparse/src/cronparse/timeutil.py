"""Calendar helpers and names shared by the other modules."""

from __future__ import annotations

from datetime import date
from typing import Tuple

MONTH_NAMES: Tuple[str, ...] = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)
DAY_NAMES: Tuple[str, ...] = (
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
)

_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap_year(year: int) -> bool:
    """Gregorian leap year rule."""
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    """Number of days in ``month`` (1-12) of ``year``."""
    if not 1 <= month <= 12:
        raise ValueError(f"month must be in 1..12, not {month}")
    if month == 2 and is_leap_year(year):
        return 29
    return _DAYS_IN_MONTH[month - 1]


def max_days_in_month(month: int) -> int:
    """The largest number of days ``month`` can have in any year."""
    return 29 if month == 2 else _DAYS_IN_MONTH[month - 1]


def cron_weekday(day: date) -> int:
    """Day of week in cron numbering: Sunday=0 ... Saturday=6."""
    return (day.weekday() + 1) % 7


def format_time(hour: int, minute: int) -> str:
    """``format_time(9, 5) == "09:05"``."""
    return f"{hour:02d}:{minute:02d}"


def join_words(words) -> str:
    """``["a", "b", "c"] -> "a, b and c"``."""
    words = list(words)
    if not words:
        return ""
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]
