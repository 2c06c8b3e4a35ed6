"""Group-by and aggregation functions.

Aggregations ignore missing values (``None``).  When a group has no value at
all for a column, ``sum``/``mean``/``min``/``max`` return ``None`` and
``count`` returns ``0``.  ``size`` counts rows, missing values included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence, Union

if TYPE_CHECKING:  # pragma: no cover
    from .table import Table

Aggregator = Callable[[Sequence[Any]], Any]
AggSpec = Union[str, tuple[str, Union[str, Aggregator]]]

__all__ = ["AGGREGATORS", "GroupBy", "aggregate", "register_aggregator"]


def _present(values: Sequence[Any]) -> list[Any]:
    return [value for value in values if value is not None]


def _sum(values: Sequence[Any]) -> Any:
    vals = _present(values)
    if not vals:
        return None
    return sum(vals)


def _mean(values: Sequence[Any]) -> Any:
    vals = _present(values)
    if not vals:
        return None
    return sum(vals) / len(vals)


def _min(values: Sequence[Any]) -> Any:
    vals = _present(values)
    return min(vals) if vals else None


def _max(values: Sequence[Any]) -> Any:
    vals = _present(values)
    return max(vals) if vals else None


def _count(values: Sequence[Any]) -> int:
    return len(_present(values))


def _size(values: Sequence[Any]) -> int:
    return len(values)


def _first(values: Sequence[Any]) -> Any:
    vals = _present(values)
    return vals[0] if vals else None


AGGREGATORS: dict[str, Aggregator] = {
    "sum": _sum,
    "mean": _mean,
    "min": _min,
    "max": _max,
    "count": _count,
    "size": _size,
    "first": _first,
}


def register_aggregator(name: str, func: Aggregator) -> None:
    """Make *func* available under *name* in :meth:`GroupBy.agg`."""
    if not callable(func):
        raise TypeError("aggregator must be callable")
    AGGREGATORS[name] = func


def aggregate(values: Sequence[Any], how: Union[str, Aggregator]) -> Any:
    """Apply the aggregation *how* (a name or a callable) to *values*."""
    if callable(how):
        return how(list(values))
    try:
        func = AGGREGATORS[how]
    except KeyError:
        raise ValueError(
            f"unknown aggregation {how!r}; expected one of {sorted(AGGREGATORS)}"
        ) from None
    return func(list(values))


class GroupBy:
    """Rows of a table partitioned by the values of one or more key columns.

    Groups are kept in order of first appearance.  Rows whose key contains
    ``None`` form their own group, like any other value.
    """

    def __init__(self, table: "Table", keys: Sequence[str]) -> None:
        if not keys:
            raise ValueError("group_by() needs at least one key column")
        for key in keys:
            table._check_column(key)
        self._table = table
        self.keys = tuple(keys)
        self._groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in table._rows:
            group_key = tuple(row[key] for key in self.keys)
            self._groups.setdefault(group_key, []).append(row)

    def __len__(self) -> int:
        return len(self._groups)

    def __iter__(self) -> Iterable[tuple[tuple[Any, ...], "Table"]]:
        for key, rows in self._groups.items():
            yield key, self._table._derive(self._table.columns, rows)

    def groups(self) -> list[tuple[Any, ...]]:
        """Return the group keys in order of first appearance."""
        return list(self._groups)

    def agg(self, **specs: AggSpec) -> "Table":
        """Aggregate every group into one output row.

        Each keyword maps an output column name to ``(column, how)`` where
        *how* is an aggregation name or a callable.  The shorthand
        ``name="size"`` counts rows.
        """
        if not specs:
            raise ValueError("agg() needs at least one aggregation")
        plan: list[tuple[str, str | None, Union[str, Aggregator]]] = []
        for out_name, spec in specs.items():
            if out_name in self.keys:
                raise ValueError(f"output column {out_name!r} clashes with a group key")
            if isinstance(spec, str):
                if spec != "size":
                    raise ValueError(f"{out_name}: only 'size' may be given without a column")
                plan.append((out_name, None, "size"))
                continue
            column, how = spec
            self._table._check_column(column)
            plan.append((out_name, column, how))

        columns = list(self.keys) + [name for name, _, _ in plan]
        out_rows = []
        for key, rows in self._groups.items():
            out = dict(zip(self.keys, key))
            for out_name, column, how in plan:
                if column is None:
                    out[out_name] = len(rows)
                else:
                    out[out_name] = aggregate([row[column] for row in rows], how)
            out_rows.append(out)
        return self._table._derive(columns, out_rows)

    def count(self) -> "Table":
        """Shorthand for ``agg(count="size")``."""
        return self.agg(count="size")
