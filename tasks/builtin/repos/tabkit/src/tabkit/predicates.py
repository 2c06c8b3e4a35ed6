"""Row predicates used by :meth:`tabkit.Table.where`.

A predicate is any callable taking a row (a ``dict`` mapping column names to
values) and returning a truthy value.  The helpers below build the common
ones.  Comparisons involving ``None`` are always false, like SQL ``NULL``.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Iterable, Mapping

Row = Mapping[str, Any]
Predicate = Callable[[Row], bool]

__all__ = [
    "Predicate",
    "eq",
    "ne",
    "gt",
    "ge",
    "lt",
    "le",
    "isin",
    "between",
    "isnull",
    "notnull",
    "contains",
    "startswith",
    "and_",
    "or_",
    "not_",
    "from_kwargs",
]


def _compare(column: str, value: Any, op: Callable[[Any, Any], bool], symbol: str) -> Predicate:
    def predicate(row: Row) -> bool:
        cell = row.get(column)
        if cell is None or value is None:
            return False
        try:
            return bool(op(cell, value))
        except TypeError:
            return False

    predicate.__name__ = f"{column} {symbol} {value!r}"
    return predicate


def eq(column: str, value: Any) -> Predicate:
    """``row[column] == value``."""
    return _compare(column, value, operator.eq, "==")


def ne(column: str, value: Any) -> Predicate:
    """``row[column] != value`` (false when the cell is missing)."""
    return _compare(column, value, operator.ne, "!=")


def gt(column: str, value: Any) -> Predicate:
    """``row[column] > value``."""
    return _compare(column, value, operator.gt, ">")


def ge(column: str, value: Any) -> Predicate:
    """``row[column] >= value``."""
    return _compare(column, value, operator.ge, ">=")


def lt(column: str, value: Any) -> Predicate:
    """``row[column] < value``."""
    return _compare(column, value, operator.lt, "<")


def le(column: str, value: Any) -> Predicate:
    """``row[column] <= value``."""
    return _compare(column, value, operator.le, "<=")


def between(column: str, low: Any, high: Any) -> Predicate:
    """``low <= row[column] <= high`` (both ends inclusive)."""
    return and_(ge(column, low), le(column, high))


def isin(column: str, values: Iterable[Any]) -> Predicate:
    """``row[column]`` is one of *values*."""
    choices = list(values)

    def predicate(row: Row) -> bool:
        cell = row.get(column)
        return cell is not None and cell in choices

    return predicate


def isnull(column: str) -> Predicate:
    """The cell is missing (``None``)."""
    return lambda row: row.get(column) is None


def notnull(column: str) -> Predicate:
    """The cell is present."""
    return lambda row: row.get(column) is not None


def contains(column: str, needle: str, *, case_sensitive: bool = True) -> Predicate:
    """The cell is a string containing *needle*."""

    def predicate(row: Row) -> bool:
        cell = row.get(column)
        if not isinstance(cell, str):
            return False
        if case_sensitive:
            return needle in cell
        return needle.casefold() in cell.casefold()

    return predicate


def startswith(column: str, prefix: str) -> Predicate:
    """The cell is a string starting with *prefix*."""

    def predicate(row: Row) -> bool:
        cell = row.get(column)
        return isinstance(cell, str) and cell.startswith(prefix)

    return predicate


def and_(*predicates: Predicate) -> Predicate:
    """All *predicates* hold."""
    return lambda row: all(p(row) for p in predicates)


def or_(*predicates: Predicate) -> Predicate:
    """At least one of *predicates* holds."""
    return lambda row: any(p(row) for p in predicates)


def not_(predicate: Predicate) -> Predicate:
    """*predicate* does not hold."""
    return lambda row: not predicate(row)


def from_kwargs(criteria: Mapping[str, Any]) -> Predicate:
    """Build an equality predicate from ``column=value`` keyword arguments."""
    return and_(*(eq(column, value) for column, value in criteria.items()))
