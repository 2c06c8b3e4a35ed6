"""Reading and writing CSV with type inference."""

from __future__ import annotations

import csv
import io
import os
from typing import IO, Any, Iterable, Mapping, Optional, Sequence, Union

from .infer import DEFAULT_NA_VALUES, convert_column, infer_column, to_text
from .table import Table

__all__ = ["read_csv", "read_csv_string", "write_csv", "to_csv_string"]

Source = Union[str, "os.PathLike[str]", IO[str]]


def _dedupe_header(header: Sequence[str]) -> list[str]:
    """Make header names unique by appending ``.1``, ``.2``... to repeats."""
    seen: dict[str, int] = {}
    result = []
    for raw in header:
        name = raw.strip() or "column"
        if name in seen:
            seen[name] += 1
            candidate = f"{name}.{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}.{seen[name]}"
            name = candidate
        seen.setdefault(name, 0)
        result.append(name)
    return result


def _read_records(
    lines: Iterable[str], delimiter: str, skip_blank_lines: bool
) -> tuple[list[str], list[list[str]]]:
    reader = csv.reader(lines, delimiter=delimiter)
    header: Optional[list[str]] = None
    records: list[list[str]] = []
    for lineno, record in enumerate(reader, start=1):
        if not record or (skip_blank_lines and all(cell.strip() == "" for cell in record)):
            if header is None or skip_blank_lines:
                continue
        if header is None:
            header = _dedupe_header(record)
            continue
        if len(record) > len(header):
            raise ValueError(
                f"line {lineno}: expected at most {len(header)} fields, got {len(record)}"
            )
        records.append(record + [""] * (len(header) - len(record)))
    return header or [], records


def _build_table(
    header: list[str],
    records: list[list[str]],
    infer_types: bool,
    na_values: Sequence[str],
    dtypes: Optional[Mapping[str, str]],
) -> Table:
    dtypes = dict(dtypes or {})
    unknown = [name for name in dtypes if name not in header]
    if unknown:
        raise KeyError(f"dtypes given for unknown column(s): {unknown}")
    columns_data: dict[str, list[Any]] = {}
    for index, name in enumerate(header):
        texts = [record[index] for record in records]
        if name in dtypes:
            type_name = dtypes[name]
        elif infer_types:
            type_name = infer_column(texts, na_values)
        else:
            type_name = "str"
        if type_name == "none":
            type_name = "str"
        columns_data[name] = convert_column(texts, type_name, na_values)
    rows = [[columns_data[name][i] for name in header] for i in range(len(records))]
    return Table(header, rows)


def read_csv(
    source: Source,
    *,
    delimiter: str = ",",
    infer_types: bool = True,
    na_values: Sequence[str] = DEFAULT_NA_VALUES,
    dtypes: Optional[Mapping[str, str]] = None,
    skip_blank_lines: bool = True,
    encoding: str = "utf-8",
) -> Table:
    """Read a CSV file (path or open text file) into a :class:`Table`.

    The first record is the header.  Each column gets a single type inferred
    from all its cells (see :mod:`tabkit.infer`); cells equal to one of
    *na_values* become ``None``.  *dtypes* forces the type of some columns.
    """
    if hasattr(source, "read"):
        header, records = _read_records(source, delimiter, skip_blank_lines)  # type: ignore[arg-type]
    else:
        with open(source, newline="", encoding=encoding) as handle:  # type: ignore[arg-type]
            header, records = _read_records(handle, delimiter, skip_blank_lines)
    return _build_table(header, records, infer_types, tuple(na_values), dtypes)


def read_csv_string(text: str, **options: Any) -> Table:
    """Like :func:`read_csv` but parse CSV held in a string."""
    return read_csv(io.StringIO(text, newline=""), **options)


def _write(table: Table, handle: IO[str], delimiter: str, header: bool) -> None:
    writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
    if header:
        writer.writerow(table.columns)
    for row in table.to_rows():
        writer.writerow([to_text(value) for value in row])


def write_csv(
    table: Table,
    destination: Source,
    *,
    delimiter: str = ",",
    header: bool = True,
    encoding: str = "utf-8",
) -> None:
    """Write *table* as CSV to a path or an open text file.

    Values are written so that :func:`read_csv` infers them back to the same
    types (``None`` becomes an empty cell, booleans ``true``/``false``).
    """
    if hasattr(destination, "write"):
        _write(table, destination, delimiter, header)  # type: ignore[arg-type]
        return
    with open(destination, "w", newline="", encoding=encoding) as handle:  # type: ignore[arg-type]
        _write(table, handle, delimiter, header)


def to_csv_string(table: Table, **options: Any) -> str:
    """Return *table* serialised as CSV text."""
    buffer = io.StringIO()
    write_csv(table, buffer, **options)
    return buffer.getvalue()
