"""Computing fire times: next / previous occurrence and iteration.

All arithmetic is done on wall-clock fields.  An aware ``start`` keeps its
``tzinfo`` in the results, but no DST adjustment is made.  Seconds and
microseconds of ``start`` are honoured: fire times are whole minutes and
results are always strictly after (``next``) or strictly before (``prev``)
``start``.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from itertools import islice
from typing import Iterator, List, Optional

from .errors import NoFireTimeError
from .expression import ExpressionLike, parse
from .timeutil import days_in_month

__all__ = ["DEFAULT_HORIZON_YEARS", "next_fire", "prev_fire", "iter_fires", "next_fires"]

#: How many calendar years to search before giving up.  Leap-day schedules
#: such as ``0 0 29 2 *`` can be 8 years apart around a century year.
DEFAULT_HORIZON_YEARS = 30


def _first_minute_after(start: datetime) -> datetime:
    return start.replace(second=0, microsecond=0) + timedelta(minutes=1)


def _last_minute_before(start: datetime) -> datetime:
    floor = start.replace(second=0, microsecond=0)
    if floor >= start:
        floor -= timedelta(minutes=1)
    return floor


def next_fire(
    expression: ExpressionLike, start: datetime, horizon_years: int = DEFAULT_HORIZON_YEARS
) -> datetime:
    """Return the first fire time strictly after ``start``.

    Raises :class:`NoFireTimeError` if there is none within ``horizon_years``.
    """
    expr = parse(expression)
    t = _first_minute_after(start)
    months = sorted(expr.months)
    hours = sorted(expr.hours)
    minutes = sorted(expr.minutes)
    for year in range(t.year, t.year + horizon_years + 1):
        for month in months:
            if (year, month) < (t.year, t.month):
                continue
            first_day = t.day if (year, month) == (t.year, t.month) else 1
            for day in range(first_day, days_in_month(year, month) + 1):
                if not expr.day_matches(date(year, month, day)):
                    continue
                same_day = (year, month, day) == (t.year, t.month, t.day)
                for hour in hours:
                    if same_day and hour < t.hour:
                        continue
                    for minute in minutes:
                        if same_day and hour == t.hour and minute < t.minute:
                            continue
                        return t.replace(year=year, month=month, day=day, hour=hour, minute=minute)
    raise NoFireTimeError(
        f"{str(expr)!r} does not fire within {horizon_years} years after {start.isoformat()}"
    )


def prev_fire(
    expression: ExpressionLike, start: datetime, horizon_years: int = DEFAULT_HORIZON_YEARS
) -> datetime:
    """Return the last fire time strictly before ``start``.

    Raises :class:`NoFireTimeError` if there is none within ``horizon_years``.
    """
    expr = parse(expression)
    t = _last_minute_before(start)
    months = sorted(expr.months, reverse=True)
    hours = sorted(expr.hours, reverse=True)
    minutes = sorted(expr.minutes, reverse=True)
    for year in range(t.year, max(t.year - horizon_years, 0) - 1, -1):
        if year < 1:
            break
        for month in months:
            if (year, month) > (t.year, t.month):
                continue
            last_day = t.day if (year, month) == (t.year, t.month) else days_in_month(year, month)
            for day in range(last_day, 0, -1):
                if not expr.day_matches(date(year, month, day)):
                    continue
                same_day = (year, month, day) == (t.year, t.month, t.day)
                for hour in hours:
                    if same_day and hour > t.hour:
                        continue
                    for minute in minutes:
                        if same_day and hour == t.hour and minute > t.minute:
                            continue
                        return t.replace(year=year, month=month, day=day, hour=hour, minute=minute)
    raise NoFireTimeError(
        f"{str(expr)!r} does not fire within {horizon_years} years before {start.isoformat()}"
    )


def iter_fires(
    expression: ExpressionLike, start: datetime, reverse: bool = False
) -> Iterator[datetime]:
    """Yield successive fire times after (or, with ``reverse``, before) ``start``."""
    expr = parse(expression)
    step = prev_fire if reverse else next_fire
    current = start
    while True:
        try:
            current = step(expr, current)
        except NoFireTimeError:
            return
        yield current


def next_fires(
    expression: ExpressionLike, start: datetime, count: int, reverse: bool = False
) -> List[datetime]:
    """Return the next ``count`` fire times (a list)."""
    if count < 0:
        raise ValueError("count must be >= 0")
    return list(islice(iter_fires(expression, start, reverse=reverse), count))
