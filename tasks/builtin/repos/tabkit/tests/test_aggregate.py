import pytest

from tabkit import Table, aggregate, register_aggregator


@pytest.fixture
def sales():
    return Table(
        ["region", "rep", "amount"],
        [
            ["north", "ann", 10],
            ["south", "bob", 5],
            ["north", "cid", 30],
            ["south", "dee", 15],
            ["east", "eve", 7],
        ],
    )


def test_group_order_is_first_appearance(sales):
    grouped = sales.group_by("region")
    assert grouped.groups() == [("north",), ("south",), ("east",)]
    assert len(grouped) == 3


def test_agg_sum_mean_min_max(sales):
    result = sales.group_by("region").agg(
        total=("amount", "sum"),
        avg=("amount", "mean"),
        low=("amount", "min"),
        high=("amount", "max"),
    )
    assert result.columns == ["region", "total", "avg", "low", "high"]
    assert result.to_records()[0] == {"region": "north", "total": 40, "avg": 20.0, "low": 10, "high": 30}


def test_count_and_size():
    t = Table(["g", "v"], [["a", 1], ["a", None], ["b", 2]])
    result = t.group_by("g").agg(values=("v", "count"), rows="size")
    assert result.to_rows() == [["a", 1, 2], ["b", 1, 1]]
    assert t.group_by("g").count().column("count") == [2, 1]


def test_all_missing_group():
    t = Table(["g", "v"], [["a", None]])
    result = t.group_by("g").agg(s=("v", "sum"), m=("v", "max"), c=("v", "count"))
    assert result.to_rows() == [["a", None, None, 0]]


def test_custom_and_callable_aggregators(sales):
    register_aggregator("spread", lambda vals: max(vals) - min(vals))
    result = sales.group_by("region").agg(spread=("amount", "spread"), reps=("rep", ",".join))
    assert result.column("spread") == [20, 10, 0]
    assert result.column("reps") == ["ann,cid", "bob,dee", "eve"]


def test_multiple_keys_and_errors(sales):
    result = sales.group_by("region", "rep").agg(n="size")
    assert len(result) == 5
    with pytest.raises(ValueError):
        sales.group_by("region").agg(total=("amount", "median"))
    with pytest.raises(KeyError):
        sales.group_by("nope")


def test_aggregate_function():
    assert aggregate([1, 2, 3], "sum") == 6
    assert aggregate([], "mean") is None
    assert aggregate([4, 2], min) == 2
