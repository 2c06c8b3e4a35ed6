import pytest

from tabkit import Table, sort_rows
from tabkit.sorting import normalize_keys


def test_normalize_keys():
    assert normalize_keys(["a", "-b", "+c", ("d", True)]) == [
        ("a", False),
        ("b", True),
        ("c", False),
        ("d", True),
    ]
    with pytest.raises(ValueError):
        normalize_keys([])


def test_single_key_ascending_and_descending():
    t = Table(["n"], [[3], [1], [2]])
    assert t.sort("n").column("n") == [1, 2, 3]
    assert t.sort("-n").column("n") == [3, 2, 1]


def test_multiple_keys():
    t = Table(
        ["dept", "salary", "name"],
        [["b", 10, "x"], ["a", 20, "y"], ["b", 30, "z"], ["a", 20, "w"]],
    )
    result = t.sort("dept", "-salary", "name")
    assert result.column("name") == ["w", "y", "z", "x"]


def test_sort_is_stable():
    rows = [{"k": 1, "i": 0}, {"k": 0, "i": 1}, {"k": 1, "i": 2}, {"k": 0, "i": 3}]
    assert [r["i"] for r in sort_rows(rows, ["k"])] == [1, 3, 0, 2]


def test_none_last_ascending():
    t = Table(["n"], [[2], [None], [1]])
    assert t.sort("n").column("n") == [1, 2, None]


def test_sort_unknown_column_raises():
    with pytest.raises(KeyError):
        Table(["a"], [[1]]).sort("b")
