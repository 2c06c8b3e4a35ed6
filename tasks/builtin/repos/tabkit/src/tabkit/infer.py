"""Type inference for textual cell values.

CSV files only contain text.  This module decides, for a single cell or for a
whole column, which Python type best represents the values, and converts the
text accordingly.  Supported types, from most to least specific, are:

``"none"``  -- the cell is missing (one of the configured NA tokens)
``"bool"``  -- ``true``/``false``/``yes``/``no`` (case-insensitive)
``"int"``   -- an optionally signed integer such as ``42`` or ``-7``
``"float"`` -- a decimal or scientific number such as ``3.5`` or ``1e-3``
``"date"``  -- an ISO-8601 calendar date such as ``2024-02-29``
``"str"``   -- anything else
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, Iterable, Sequence

__all__ = [
    "DEFAULT_NA_VALUES",
    "detect_type",
    "parse_value",
    "unify_types",
    "infer_column",
    "convert_column",
    "to_text",
]

#: Tokens that are read as a missing value (``None``) by default.
DEFAULT_NA_VALUES: tuple[str, ...] = ("", "NA", "N/A", "null", "None")

_INT_RE = re.compile(r"^[+-]?\d+$")
_FLOAT_RE = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TRUE = frozenset({"true", "yes"})
_FALSE = frozenset({"false", "no"})

_NUMERIC = frozenset({"int", "float"})


def detect_type(text: str, na_values: Sequence[str] = DEFAULT_NA_VALUES) -> str:
    """Return the name of the most specific type that can represent *text*."""
    stripped = text.strip()
    if stripped in na_values or text in na_values:
        return "none"
    lowered = stripped.lower()
    if lowered in _TRUE or lowered in _FALSE:
        return "bool"
    if _INT_RE.match(stripped):
        return "int"
    if _FLOAT_RE.match(stripped) or lowered in ("nan", "inf", "-inf", "+inf"):
        return "float"
    if _DATE_RE.match(stripped):
        try:
            date.fromisoformat(stripped)
        except ValueError:
            return "str"
        return "date"
    return "str"


def parse_value(text: str, type_name: str, na_values: Sequence[str] = DEFAULT_NA_VALUES) -> Any:
    """Convert *text* to a Python value of type *type_name*.

    Missing tokens always become ``None`` whatever the requested type.
    """
    stripped = text.strip()
    if stripped in na_values or text in na_values:
        return None
    if type_name == "str":
        return text
    if type_name == "bool":
        return stripped.lower() in _TRUE
    if type_name == "int":
        return int(stripped)
    if type_name == "float":
        return float(stripped)
    if type_name == "date":
        return date.fromisoformat(stripped)
    if type_name == "none":
        return None
    raise ValueError(f"unknown type name: {type_name!r}")


def unify_types(first: str, second: str) -> str:
    """Return the narrowest type able to hold values of both *first* and *second*."""
    if first == second:
        return first
    if first == "none":
        return second
    if second == "none":
        return first
    if first in _NUMERIC and second in _NUMERIC:
        return "float"
    return "str"


def infer_column(texts: Iterable[str], na_values: Sequence[str] = DEFAULT_NA_VALUES) -> str:
    """Infer a single type for a whole column of text cells.

    A column made only of missing values is reported as ``"none"``.
    """
    result = "none"
    for text in texts:
        result = unify_types(result, detect_type(text, na_values))
        if result == "str":
            break
    return result


def convert_column(
    texts: Sequence[str], type_name: str, na_values: Sequence[str] = DEFAULT_NA_VALUES
) -> list[Any]:
    """Convert every cell of a column to *type_name* (see :func:`parse_value`)."""
    return [parse_value(text, type_name, na_values) for text in texts]


def to_text(value: Any) -> str:
    """Serialise a Python value the way :func:`detect_type` can read it back."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e16:
            return f"{value:.1f}"
        return repr(value)
    if isinstance(value, date):
        return value.isoformat()
    return str(value)
