"""The :class:`CronExpression` type."""

from __future__ import annotations

from datetime import date, datetime
from typing import FrozenSet, Optional, Tuple, Union

from .errors import CronSyntaxError
from .fields import DAY_OF_MONTH, DAY_OF_WEEK, FIELDS, HOUR, MINUTE, MONTH, parse_field
from .timeutil import MONTH_NAMES, cron_weekday, max_days_in_month

__all__ = ["ALIASES", "CronExpression", "ExpressionLike", "parse", "validate", "is_valid"]

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_FIELD_LIST = "minute hour day-of-month month day-of-week"


class CronExpression:
    """A parsed five-field cron expression.

    Attributes ``minutes``, ``hours``, ``days``, ``months`` and ``weekdays``
    are frozensets of the selected values (weekdays use Sunday=0).
    """

    __slots__ = (
        "source",
        "fields",
        "minutes",
        "hours",
        "days",
        "months",
        "weekdays",
        "dom_star",
        "dow_star",
    )

    def __init__(self, expression: str) -> None:
        if not isinstance(expression, str):
            raise TypeError(f"expected a str, not {type(expression).__name__}")
        self.source = expression
        text = expression.strip()
        if text.startswith("@"):
            alias = text.lower()
            if alias not in ALIASES:
                if alias == "@reboot":
                    raise CronSyntaxError("@reboot has no schedule and is not supported")
                raise CronSyntaxError(
                    f"unknown alias {text!r} (expected one of {', '.join(ALIASES)})"
                )
            text = ALIASES[alias]
        parts = text.split()
        if len(parts) != 5:
            raise CronSyntaxError(
                f"expected 5 fields ({_FIELD_LIST}), got {len(parts)}", expression=expression
            )
        values = []
        for part, spec in zip(parts, FIELDS):
            try:
                values.append(parse_field(part, spec))
            except CronSyntaxError as exc:
                raise exc.with_expression(expression) from None
        self.fields: Tuple[str, ...] = tuple(parts)
        self.minutes: FrozenSet[int] = values[0]
        self.hours: FrozenSet[int] = values[1]
        self.days: FrozenSet[int] = values[2]
        self.months: FrozenSet[int] = values[3]
        weekdays = set(values[4])
        if 7 in weekdays:  # 7 is an alternative spelling of Sunday
            weekdays.discard(7)
            weekdays.add(0)
        self.weekdays: FrozenSet[int] = frozenset(weekdays)
        # Vixie cron: a field is "unrestricted" when it starts with '*' or '?'
        self.dom_star = parts[2][0] in "*?"
        self.dow_star = parts[4][0] in "*?"
        self._check_satisfiable(expression)

    def _check_satisfiable(self, expression: str) -> None:
        """Reject day-of-month/month combinations that can never occur (``30 2``)."""
        if self.dow_star or self.dom_star:
            longest = max(max_days_in_month(m) for m in self.months)
            if min(self.days) > longest:
                months = ", ".join(MONTH_NAMES[m - 1] for m in sorted(self.months))
                raise CronSyntaxError(
                    f"day {min(self.days)} never occurs in {months}",
                    field=DAY_OF_MONTH.name,
                    text=self.fields[2],
                    expression=expression,
                )

    # -- matching -------------------------------------------------------
    def day_matches(self, day: date) -> bool:
        """Return True if the calendar day ``day`` is selected.

        If either day field is unrestricted both must match (the ``*`` one
        always does); if both are restricted, matching either is enough.
        """
        dom_ok = day.day in self.days
        dow_ok = cron_weekday(day) in self.weekdays
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def matches(self, moment: datetime) -> bool:
        """Return True if the minute containing ``moment`` is a fire time."""
        return (
            moment.minute in self.minutes
            and moment.hour in self.hours
            and moment.month in self.months
            and self.day_matches(moment.date() if isinstance(moment, datetime) else moment)
        )

    # -- scheduling shortcuts ---------------------------------------------
    def next(self, start: datetime) -> datetime:
        """The first fire time strictly after ``start``."""
        from .schedule import next_fire

        return next_fire(self, start)

    def prev(self, start: datetime) -> datetime:
        """The last fire time strictly before ``start``."""
        from .schedule import prev_fire

        return prev_fire(self, start)

    def describe(self) -> str:
        from .describe import describe

        return describe(self)

    # -- dunder -----------------------------------------------------------
    def _key(self):
        return (
            self.minutes,
            self.hours,
            self.days,
            self.months,
            self.weekdays,
            self.dom_star,
            self.dow_star,
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, CronExpression):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return " ".join(self.fields)

    def __repr__(self) -> str:
        return f"CronExpression({self.source!r})"


ExpressionLike = Union[CronExpression, str]


def parse(expression: ExpressionLike) -> CronExpression:
    """Parse ``expression`` (a no-op for an existing :class:`CronExpression`)."""
    if isinstance(expression, CronExpression):
        return expression
    return CronExpression(expression)


def validate(expression: str) -> Optional[str]:
    """Return None if ``expression`` is valid, otherwise the error message."""
    try:
        CronExpression(expression)
    except CronSyntaxError as exc:
        return str(exc)
    return None


def is_valid(expression: str) -> bool:
    return validate(expression) is None
