"""tabkit: a small in-memory table library.

Read CSV with type inference, select/filter/sort rows, group and aggregate,
join tables and render them as aligned text.
"""

from .aggregate import AGGREGATORS, GroupBy, aggregate, register_aggregator
from .csvio import read_csv, read_csv_string, to_csv_string, write_csv
from .formatting import format_cell, format_table, truncate
from .infer import DEFAULT_NA_VALUES, detect_type, infer_column, parse_value, to_text
from .join import join
from .predicates import (
    and_,
    between,
    contains,
    eq,
    ge,
    gt,
    isin,
    isnull,
    le,
    lt,
    ne,
    not_,
    notnull,
    or_,
    startswith,
)
from .sorting import sort_rows
from .table import Table

__version__ = "0.1.0"

__all__ = [
    "AGGREGATORS",
    "DEFAULT_NA_VALUES",
    "GroupBy",
    "Table",
    "aggregate",
    "and_",
    "between",
    "contains",
    "detect_type",
    "eq",
    "format_cell",
    "format_table",
    "ge",
    "gt",
    "infer_column",
    "isin",
    "isnull",
    "join",
    "le",
    "lt",
    "ne",
    "not_",
    "notnull",
    "or_",
    "parse_value",
    "read_csv",
    "read_csv_string",
    "register_aggregator",
    "sort_rows",
    "startswith",
    "to_csv_string",
    "to_text",
    "truncate",
    "write_csv",
]
