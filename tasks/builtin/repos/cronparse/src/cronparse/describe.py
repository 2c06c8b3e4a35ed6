"""Human-readable English descriptions of cron expressions.

>>> describe("*/15 9-17 * * MON-FRI")
'Every 15 minutes, between 09:00 and 17:59, Monday through Friday'
"""

from __future__ import annotations

from typing import Callable, FrozenSet, List, Optional, Sequence

from .expression import ExpressionLike, parse
from .fields import DAY_OF_MONTH, DAY_OF_WEEK, HOUR, MINUTE, MONTH, FieldSpec
from .timeutil import DAY_NAMES, MONTH_NAMES, format_time, join_words

__all__ = ["describe"]


def _ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _runs(values: Sequence[int]) -> List[List[int]]:
    """Split sorted ``values`` into runs of consecutive integers."""
    runs: List[List[int]] = []
    for value in values:
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return runs


def _step_of(values: Sequence[int], spec: FieldSpec) -> Optional[int]:
    """If ``values`` is ``*/n`` for ``spec`` return ``n`` (n > 1), else None."""
    if len(values) < 2 or values[0] != spec.min:
        return None
    step = values[1] - values[0]
    if step < 2:
        return None
    expected = list(range(spec.min, spec.max + 1, step))
    return step if list(values) == expected else None


def _is_all(values: FrozenSet[int], spec: FieldSpec) -> bool:
    if spec is DAY_OF_WEEK:
        return values >= frozenset(range(7))
    return values >= spec.all_values()


def _list_phrase(values: Sequence[int], name: Callable[[int], str]) -> str:
    """``[1, 2, 3, 5] -> "1 through 3 and 5"`` (runs of 3+ become ranges)."""
    parts: List[str] = []
    for run in _runs(values):
        if len(run) >= 3:
            parts.append(f"{name(run[0])} through {name(run[-1])}")
        else:
            parts.extend(name(v) for v in run)
    return join_words(parts)


def _time_phrase(minutes: List[int], hours: List[int], expr) -> str:
    all_minutes = _is_all(expr.minutes, MINUTE)
    all_hours = _is_all(expr.hours, HOUR)
    if len(minutes) == 1 and not all_hours and len(hours) <= 6 and _step_of(hours, HOUR) is None \
            and all(len(run) < 3 for run in _runs(hours)):
        return "At " + join_words(format_time(h, minutes[0]) for h in hours)

    if all_minutes:
        minute_part = "Every minute"
    elif _step_of(minutes, MINUTE):
        minute_part = f"Every {_step_of(minutes, MINUTE)} minutes"
    elif len(minutes) == 1:
        minute_part = f"At minute {minutes[0]}"
    else:
        minute_part = "At minutes " + _list_phrase(minutes, str)

    if all_hours:
        if len(minutes) == 1 and not all_minutes:
            return minute_part + " past every hour"
        return minute_part
    step = _step_of(hours, HOUR)
    if step:
        return f"{minute_part}, every {step} hours"
    runs = _runs(hours)
    if len(runs) == 1 and len(runs[0]) > 1:
        return f"{minute_part}, between {format_time(hours[0], 0)} and {format_time(hours[-1], 59)}"
    return f"{minute_part}, during hour{'s' if len(hours) > 1 else ''} " + _list_phrase(
        hours, lambda h: format_time(h, 0)
    )


def _dom_phrase(days: List[int]) -> str:
    step = _step_of(days, DAY_OF_MONTH)
    if step:
        return f"every {step} days of the month"
    label = "day" if len(days) == 1 else "days"
    return f"on {label} " + _list_phrase(days, str) + " of the month"


def _dow_phrase(weekdays: List[int]) -> str:
    runs = _runs(weekdays)
    if len(runs) == 1 and len(runs[0]) >= 3:
        return f"{DAY_NAMES[weekdays[0]]} through {DAY_NAMES[weekdays[-1]]}"
    return "on " + _list_phrase(weekdays, lambda d: DAY_NAMES[d])


def _month_phrase(months: List[int]) -> str:
    runs = _runs(months)
    name = lambda m: MONTH_NAMES[m - 1]  # noqa: E731
    if len(runs) == 1 and len(runs[0]) >= 3:
        return f"{name(months[0])} through {name(months[-1])}"
    return "in " + _list_phrase(months, name)


def describe(expression: ExpressionLike) -> str:
    """Return an English description of ``expression``.

    >>> describe("0 9 1 * *")
    'At 09:00, on day 1 of the month'
    """
    expr = parse(expression)
    minutes = sorted(expr.minutes)
    hours = sorted(expr.hours)
    parts = [_time_phrase(minutes, hours, expr)]

    dom_all = _is_all(expr.days, DAY_OF_MONTH)
    dow_all = _is_all(expr.weekdays, DAY_OF_WEEK)
    day_parts: List[str] = []
    if not dom_all:
        day_parts.append(_dom_phrase(sorted(expr.days)))
    if not dow_all:
        day_parts.append(_dow_phrase(sorted(expr.weekdays)))
    if len(day_parts) == 2:
        joiner = " and " if (expr.dom_star or expr.dow_star) else " or "
        parts.append(joiner.join(day_parts))
    elif day_parts:
        parts.append(day_parts[0])

    if not _is_all(expr.months, MONTH):
        parts.append(_month_phrase(sorted(expr.months)))
    return ", ".join(parts)
