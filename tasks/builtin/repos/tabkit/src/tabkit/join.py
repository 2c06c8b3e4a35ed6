"""Inner and left joins between two tables.

Keys are compared with SQL semantics: a key containing ``None`` never matches
anything (it still appears, unmatched, in a left join).  Non-key columns of
the right table whose name already exists on the left get *suffix* appended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, Union

if TYPE_CHECKING:  # pragma: no cover
    from .table import Table

__all__ = ["join", "JOIN_TYPES"]

JOIN_TYPES = ("inner", "left")


def _normalize_on(on: Union[str, Sequence[str]]) -> tuple[str, ...]:
    if isinstance(on, str):
        return (on,)
    keys = tuple(on)
    if not keys:
        raise ValueError("join() needs at least one key column")
    return keys


def _output_columns(
    left: "Table", right: "Table", keys: tuple[str, ...], suffix: str
) -> tuple[list[str], dict[str, str]]:
    """Return the output column list and the renaming for right-hand columns."""
    columns = list(left.columns)
    renamed: dict[str, str] = {}
    for name in right.columns:
        if name in keys:
            continue
        out_name = name
        while out_name in columns:
            out_name = out_name + suffix
        renamed[name] = out_name
        columns.append(out_name)
    return columns, renamed


def join(
    left: "Table",
    right: "Table",
    on: Union[str, Sequence[str]],
    how: str = "inner",
    suffix: str = "_right",
) -> "Table":
    """Join *left* and *right* on the key column(s) *on*.

    Output rows follow the order of *left*; for each left row, matching right
    rows appear in their original order.
    """
    if how not in JOIN_TYPES:
        raise ValueError(f"how must be one of {JOIN_TYPES}, got {how!r}")
    if not suffix:
        raise ValueError("suffix must be a non-empty string")
    keys = _normalize_on(on)
    for key in keys:
        left._check_column(key)
        right._check_column(key)

    index: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in right._rows:
        key = tuple(row[k] for k in keys)
        if any(part is None for part in key):
            continue
        index.setdefault(key, []).append(row)

    columns, renamed = _output_columns(left, right, keys, suffix)
    out_rows: list[dict[str, Any]] = []
    for row in left._rows:
        key = tuple(row[k] for k in keys)
        matches = [] if any(part is None for part in key) else index.get(key, [])
        if matches:
            for match in matches:
                out = dict(row)
                for name, out_name in renamed.items():
                    out[out_name] = match[name]
                out_rows.append(out)
        elif how == "left":
            out = dict(row)
            for out_name in renamed.values():
                out[out_name] = None
            out_rows.append(out)
    return left._derive(columns, out_rows)
