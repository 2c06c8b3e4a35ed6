"""Parsing of a single cron field into the set of values it selects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Optional, Tuple

from .errors import CronSyntaxError

__all__ = [
    "FieldSpec",
    "MINUTE",
    "HOUR",
    "DAY_OF_MONTH",
    "MONTH",
    "DAY_OF_WEEK",
    "FIELDS",
    "parse_field",
]


@dataclass(frozen=True)
class FieldSpec:
    """Describes one of the five cron fields.

    ``names`` maps upper-case symbolic names (``"JAN"``, ``"MON"``) to values.
    """

    name: str
    min: int
    max: int
    names: Dict[str, int] = field(default_factory=dict)
    allow_question_mark: bool = False

    @property
    def bounds(self) -> str:
        return f"{self.min}-{self.max}"

    def all_values(self) -> FrozenSet[int]:
        return frozenset(range(self.min, self.max + 1))


_MONTH_NAMES = {
    name: index
    for index, name in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
        start=1,
    )
}
_DAY_NAMES = {name: index for index, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}

MINUTE = FieldSpec("minute", 0, 59)
HOUR = FieldSpec("hour", 0, 23)
DAY_OF_MONTH = FieldSpec("day-of-month", 1, 31, allow_question_mark=True)
MONTH = FieldSpec("month", 1, 12, _MONTH_NAMES)
# 0 and 7 both mean Sunday; 7 is folded into 0 by CronExpression.
DAY_OF_WEEK = FieldSpec("day-of-week", 0, 7, _DAY_NAMES, allow_question_mark=True)

FIELDS: Tuple[FieldSpec, ...] = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)


def _error(spec: FieldSpec, text: str, reason: str) -> CronSyntaxError:
    return CronSyntaxError(reason, field=spec.name, text=text)


def _parse_value(token: str, spec: FieldSpec, text: str) -> int:
    """Parse a number or a symbolic name and check it is within bounds."""
    if not token:
        raise _error(spec, text, "missing value")
    if token.isdigit():
        value = int(token)
    else:
        upper = token.upper()
        if upper not in spec.names:
            if spec.names:
                known = ", ".join(spec.names)
                raise _error(spec, text, f"unknown name {token!r} (expected a number or one of {known})")
            raise _error(spec, text, f"{token!r} is not a number")
        value = spec.names[upper]
    if not spec.min <= value <= spec.max:
        raise _error(spec, text, f"value {value} out of range ({spec.bounds})")
    return value


def _parse_step(token: str, spec: FieldSpec, text: str) -> int:
    if not token.isdigit():
        raise _error(spec, text, f"step {token!r} is not a positive integer")
    step = int(token)
    if step == 0:
        raise _error(spec, text, "step must be at least 1")
    if step > spec.max - spec.min + 1:
        raise _error(spec, text, f"step {step} is larger than the field's range ({spec.bounds})")
    return step


def _parse_item(item: str, spec: FieldSpec, text: str) -> range:
    """Parse one comma-separated item into a ``range`` of values."""
    base, slash, step_text = item.partition("/")
    step: Optional[int] = None
    if slash:
        step = _parse_step(step_text, spec, text)
    if base in ("*", "?"):
        if base == "?" and not spec.allow_question_mark:
            raise _error(spec, text, "'?' is only allowed in the day-of-month and day-of-week fields")
        low, high = spec.min, spec.max
    elif "-" in base:
        first, _, last = base.partition("-")
        low = _parse_value(first, spec, text)
        high = _parse_value(last, spec, text)
        if low > high:
            raise _error(spec, text, f"range start {low} is greater than range end {high}")
    else:
        low = _parse_value(base, spec, text)
        # "5/15" means "from 5 to the end of the field, every 15"
        high = spec.max if step is not None else low
    return range(low, high + 1, step or 1)


def parse_field(text: str, spec: FieldSpec) -> FrozenSet[int]:
    """Return the set of values selected by field ``text``.

    >>> sorted(parse_field("1-10/3,20", MINUTE))
    [1, 4, 7, 10, 20]
    """
    if not text:
        raise _error(spec, text, "field is empty")
    values = set()
    for item in text.split(","):
        if not item:
            raise _error(spec, text, "empty item in list")
        values.update(_parse_item(item, spec, text))
    return frozenset(values)
