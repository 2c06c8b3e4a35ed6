"""Pretty text rendering of tables.

Numbers are right-aligned and everything else left-aligned unless an explicit
alignment is given.  Cells longer than *max_width* characters are truncated
and end with an ellipsis, so that no column is ever wider than *max_width*.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .table import Table

__all__ = ["format_cell", "truncate", "format_table", "ELLIPSIS"]

ELLIPSIS = "\u2026"
_ALIGNMENTS = {"left": "<", "right": ">", "center": "^"}


def format_cell(value: Any, float_precision: int = 2, none_text: str = "") -> str:
    """Render a single value as text."""
    if value is None:
        return none_text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.{float_precision}f}"
    if isinstance(value, date):
        return value.isoformat()
    text = str(value)
    return text.replace("\r\n", " ").replace("\n", " ").replace("\t", " ")


def truncate(text: str, max_width: Optional[int]) -> str:
    """Shorten *text* to at most *max_width* characters, ending with an ellipsis."""
    if max_width is None or len(text) <= max_width:
        return text
    if max_width < 1:
        raise ValueError("max_width must be at least 1")
    return text[: max_width - 1] + ELLIPSIS


def _is_numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _column_alignment(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(_is_numeric(v) for v in present):
        return "right"
    return "left"


def format_table(
    table: "Table",
    *,
    max_width: Optional[int] = 30,
    align: Optional[Mapping[str, str]] = None,
    float_precision: int = 2,
    none_text: str = "",
    border: bool = True,
    max_rows: Optional[int] = None,
) -> str:
    """Render *table* as an aligned plain-text grid.

    :param max_width: maximum width of any cell (header included); ``None``
        disables truncation.
    :param align: per-column ``"left"``, ``"right"`` or ``"center"``.
    :param border: draw ``|`` separators and a ``+---+`` rule.
    :param max_rows: show at most this many rows followed by a ``...`` line.
    """
    align = dict(align or {})
    for name, how in align.items():
        if how not in _ALIGNMENTS:
            raise ValueError(f"invalid alignment {how!r} for column {name!r}")
    columns = list(table.columns)
    rows = table.to_records()
    hidden = 0
    if max_rows is not None and len(rows) > max_rows:
        hidden = len(rows) - max_rows
        rows = rows[:max_rows]

    headers = [truncate(name, max_width) for name in columns]
    cells = [
        [truncate(format_cell(row[name], float_precision, none_text), max_width) for name in columns]
        for row in rows
    ]
    widths = [len(h) for h in headers]
    for line in cells:
        for i, cell in enumerate(line):
            widths[i] = max(widths[i], len(cell))
    alignments = [
        align.get(name) or _column_alignment([row[name] for row in rows]) for name in columns
    ]

    def render(parts: list[str], aligns: list[str]) -> str:
        padded = [f"{part:{_ALIGNMENTS[a]}{w}}" for part, a, w in zip(parts, aligns, widths)]
        if border:
            return "| " + " | ".join(padded) + " |"
        return "  ".join(padded).rstrip()

    lines = []
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    if border:
        lines.append(rule)
    lines.append(render(headers, alignments))
    lines.append(rule if border else "  ".join("-" * w for w in widths))
    for line in cells:
        lines.append(render(line, alignments))
    if border:
        lines.append(rule)
    if hidden:
        lines.append(f"... ({hidden} more rows)")
    return "\n".join(lines)
