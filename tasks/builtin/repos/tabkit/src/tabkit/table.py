"""The :class:`Table` class: an immutable, ordered collection of rows."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from . import predicates as _predicates
from .aggregate import GroupBy
from .formatting import format_table
from .join import join as _join
from .sorting import SortKey, normalize_keys, sort_rows

__all__ = ["Table"]


class Table:
    """An in-memory table with named columns.

    Rows are stored as dictionaries.  Every operation returns a **new** table;
    the rows handed out by :meth:`to_records`, iteration and indexing are
    copies, so callers cannot modify a table by accident.

    >>> t = Table(["name", "age"], [["ann", 31], ["bob", 27]])
    >>> t.sort("age").column("name")
    ['bob', 'ann']
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Optional[Iterable[Union[Sequence[Any], Mapping[str, Any]]]] = None,
    ) -> None:
        columns = [str(c) for c in columns]
        if len(set(columns)) != len(columns):
            dupes = sorted({c for c in columns if columns.count(c) > 1})
            raise ValueError(f"duplicate column names: {dupes}")
        self._columns: list[str] = columns
        self._rows: list[dict[str, Any]] = []
        for row in rows or ():
            self._rows.append(self._coerce_row(row))

    # -- construction helpers -------------------------------------------------

    def _coerce_row(self, row: Union[Sequence[Any], Mapping[str, Any]]) -> dict[str, Any]:
        if isinstance(row, Mapping):
            unknown = [key for key in row if key not in self._columns]
            if unknown:
                raise KeyError(f"unknown column(s) in row: {unknown}")
            return {name: row.get(name) for name in self._columns}
        values = list(row)
        if len(values) != len(self._columns):
            raise ValueError(
                f"row has {len(values)} values but the table has {len(self._columns)} columns"
            )
        return dict(zip(self._columns, values))

    @classmethod
    def from_records(
        cls, records: Iterable[Mapping[str, Any]], columns: Optional[Sequence[str]] = None
    ) -> "Table":
        """Build a table from dictionaries.

        Without *columns*, the column order is the order in which keys are
        first seen; keys missing from a record become ``None``.
        """
        records = list(records)
        if columns is None:
            seen: dict[str, None] = {}
            for record in records:
                for key in record:
                    seen.setdefault(key, None)
            columns = list(seen)
        return cls(columns, records)

    @classmethod
    def from_columns(cls, data: Mapping[str, Sequence[Any]]) -> "Table":
        """Build a table from a mapping of column name to values."""
        lengths = {len(values) for values in data.values()}
        if len(lengths) > 1:
            raise ValueError("all columns must have the same length")
        columns = list(data)
        size = lengths.pop() if lengths else 0
        rows = [[data[name][i] for name in columns] for i in range(size)]
        return cls(columns, rows)

    def _derive(self, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> "Table":
        """Create a table sharing nothing mutable with *self*."""
        new = Table.__new__(Table)
        new._columns = list(columns)
        new._rows = [{name: row.get(name) for name in new._columns} for row in rows]
        return new

    def _check_column(self, name: str) -> None:
        if name not in self._columns:
            raise KeyError(f"no such column: {name!r} (columns: {self._columns})")

    # -- basic protocol -------------------------------------------------------

    @property
    def columns(self) -> list[str]:
        """The column names, in order."""
        return list(self._columns)

    @property
    def shape(self) -> tuple[int, int]:
        """``(number of rows, number of columns)``."""
        return len(self._rows), len(self._columns)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self._rows:
            yield dict(row)

    def __getitem__(self, index: Union[int, str, slice]) -> Any:
        if isinstance(index, str):
            return self.column(index)
        if isinstance(index, slice):
            return self._derive(self._columns, self._rows[index])
        return dict(self._rows[index])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Table):
            return NotImplemented
        return self._columns == other._columns and self._rows == other._rows

    def __repr__(self) -> str:
        return f"<Table {len(self._rows)} rows x {len(self._columns)} columns: {self._columns}>"

    def __str__(self) -> str:
        return format_table(self)

    def column(self, name: str) -> list[Any]:
        """Return the values of column *name* as a list."""
        self._check_column(name)
        return [row[name] for row in self._rows]

    def to_records(self) -> list[dict[str, Any]]:
        """Return the rows as a list of (copied) dictionaries."""
        return [dict(row) for row in self._rows]

    def to_rows(self) -> list[list[Any]]:
        """Return the rows as lists of values in column order."""
        return [[row[name] for name in self._columns] for row in self._rows]

    # -- column operations ----------------------------------------------------

    def select(self, *names: str) -> "Table":
        """Keep only the columns *names*, in that order."""
        for name in names:
            self._check_column(name)
        if len(set(names)) != len(names):
            raise ValueError("select() got the same column twice")
        return self._derive(names, self._rows)

    def drop(self, *names: str) -> "Table":
        """Remove the columns *names*."""
        for name in names:
            self._check_column(name)
        return self._derive([c for c in self._columns if c not in names], self._rows)

    def rename(self, mapping: Mapping[str, str]) -> "Table":
        """Rename columns according to *mapping* (old name -> new name)."""
        for old in mapping:
            self._check_column(old)
        new_columns = [mapping.get(c, c) for c in self._columns]
        if len(set(new_columns)) != len(new_columns):
            raise ValueError("rename() would create duplicate column names")
        rows = [{mapping.get(k, k): v for k, v in row.items()} for row in self._rows]
        return self._derive(new_columns, rows)

    def with_column(
        self, name: str, values: Union[Sequence[Any], Callable[[dict[str, Any]], Any]]
    ) -> "Table":
        """Add (or replace) column *name*.

        *values* is either a sequence with one value per row or a function
        computing the value from a copy of each row.
        """
        if callable(values):
            new_values = [values(dict(row)) for row in self._rows]
        else:
            new_values = list(values)
            if len(new_values) != len(self._rows):
                raise ValueError("with_column() needs one value per row")
        columns = list(self._columns)
        if name not in columns:
            columns.append(name)
        rows = []
        for row, value in zip(self._rows, new_values):
            new_row = dict(row)
            new_row[name] = value
            rows.append(new_row)
        return self._derive(columns, rows)

    # -- row operations -------------------------------------------------------

    def where(self, predicate: Optional[_predicates.Predicate] = None, **equals: Any) -> "Table":
        """Keep the rows satisfying *predicate* and every ``column=value`` criterion."""
        for name in equals:
            self._check_column(name)
        checks = []
        if predicate is not None:
            checks.append(predicate)
        if equals:
            checks.append(_predicates.from_kwargs(equals))
        rows = [row for row in self._rows if all(check(row) for check in checks)]
        return self._derive(self._columns, rows)

    filter = where

    def head(self, n: int = 5) -> "Table":
        """The first *n* rows (the last ``-n`` are dropped when *n* is negative)."""
        return self._derive(self._columns, self._rows[:n])

    def tail(self, n: int = 5) -> "Table":
        """The last *n* rows."""
        if n <= 0:
            return self._derive(self._columns, [])
        return self._derive(self._columns, self._rows[-n:])

    def sort(self, *keys: SortKey) -> "Table":
        """Sort by one or more keys (``"col"``, ``"-col"`` or ``(col, descending)``)."""
        for name, _ in normalize_keys(keys):
            self._check_column(name)
        return self._derive(self._columns, sort_rows(self._rows, keys))

    def distinct(self, *names: str) -> "Table":
        """Remove duplicate rows (comparing only *names* when given)."""
        names = names or tuple(self._columns)
        for name in names:
            self._check_column(name)
        seen = set()
        rows = []
        for row in self._rows:
            key = tuple(repr(row[name]) for name in names)
            if key not in seen:
                seen.add(key)
                rows.append(row)
        return self._derive(self._columns, rows)

    def concat(self, other: "Table") -> "Table":
        """Append the rows of *other*, which must have the same columns."""
        if set(other._columns) != set(self._columns):
            raise ValueError("concat() needs tables with the same columns")
        return self._derive(self._columns, self._rows + other._rows)

    # -- grouping, joining, output ------------------------------------------

    def group_by(self, *keys: str) -> GroupBy:
        """Group rows by the values of *keys* (see :class:`tabkit.GroupBy`)."""
        return GroupBy(self, keys)

    def join(
        self, other: "Table", on: Union[str, Sequence[str]], how: str = "inner", suffix: str = "_right"
    ) -> "Table":
        """Join with *other* (see :func:`tabkit.join.join`)."""
        return _join(self, other, on, how=how, suffix=suffix)

    def format(self, **options: Any) -> str:
        """Render as text (see :func:`tabkit.format_table`)."""
        return format_table(self, **options)

    def to_csv(self, destination: Any = None, **options: Any) -> Optional[str]:
        """Write CSV to *destination* (path or file); return a string when omitted."""
        from .csvio import to_csv_string, write_csv

        if destination is None:
            return to_csv_string(self, **options)
        write_csv(self, destination, **options)
        return None
