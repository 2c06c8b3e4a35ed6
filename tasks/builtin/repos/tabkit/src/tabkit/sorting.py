"""Multi-key sorting of rows.

Sort keys can be given as:

* ``"name"``          -- ascending on column ``name``
* ``"-name"``         -- descending on column ``name``
* ``("name", True)``  -- ``(column, descending)`` pair

Missing values (``None``) always sort **last**, whichever the direction, so
that the interesting rows stay at the top of a report.  Sorting is stable:
rows that compare equal on every key keep their original order.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Iterable, Mapping, Sequence, Union

SortKey = Union[str, tuple[str, bool]]

__all__ = ["SortKey", "normalize_keys", "sort_rows"]


def normalize_keys(keys: Iterable[SortKey]) -> list[tuple[str, bool]]:
    """Turn user-supplied sort keys into ``(column, descending)`` pairs."""
    result: list[tuple[str, bool]] = []
    for key in keys:
        if isinstance(key, tuple):
            if len(key) != 2:
                raise ValueError(f"sort key tuples must be (column, descending), got {key!r}")
            name, descending = key
            result.append((str(name), bool(descending)))
        elif isinstance(key, str):
            if key.startswith("-") and len(key) > 1:
                result.append((key[1:], True))
            elif key.startswith("+") and len(key) > 1:
                result.append((key[1:], False))
            else:
                result.append((key, False))
        else:
            raise TypeError(f"invalid sort key: {key!r}")
    if not result:
        raise ValueError("at least one sort key is required")
    return result


def _rank(value: Any) -> tuple[int, Any]:
    """Key making values of different kinds comparable.

    Numbers (including booleans) sort before dates, which sort before strings;
    anything else is compared by its ``str()``.
    """
    if isinstance(value, (bool, int, float)):
        return (0, value)
    if isinstance(value, date):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, str(value))


def sort_rows(
    rows: Sequence[Mapping[str, Any]], keys: Iterable[SortKey]
) -> list[Mapping[str, Any]]:
    """Return *rows* sorted by *keys* (see module docstring)."""
    normalized = normalize_keys(keys)
    result = list(rows)
    # Apply the keys from least to most significant; each pass is stable.
    for name, descending in reversed(normalized):
        present = [row for row in result if row.get(name) is not None]
        missing = [row for row in result if row.get(name) is None]
        present.sort(key=lambda row: _rank(row[name]), reverse=descending)
        result = present + missing
    return result
