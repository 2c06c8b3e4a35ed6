import pytest

from tabkit import Table, and_, contains, gt, isin, isnull, le, ne, not_, notnull, or_


@pytest.fixture
def people():
    return Table(
        ["name", "age", "city"],
        [["ann", 31, "Oslo"], ["bob", 27, "Rome"], ["cid", None, "Oslo"], ["dee", 45, "Lima"]],
    )


def test_construction_and_shape(people):
    assert people.shape == (4, 3)
    assert people[0] == {"name": "ann", "age": 31, "city": "Oslo"}
    assert people["age"] == [31, 27, None, 45]


def test_construction_errors():
    with pytest.raises(ValueError):
        Table(["a", "a"])
    with pytest.raises(ValueError):
        Table(["a", "b"], [[1]])
    with pytest.raises(KeyError):
        Table(["a"], [{"b": 1}])


def test_from_records_and_columns():
    t = Table.from_records([{"a": 1}, {"b": 2, "a": 3}])
    assert t.columns == ["a", "b"]
    assert t.to_rows() == [[1, None], [3, 2]]
    assert Table.from_columns({"x": [1, 2], "y": ["p", "q"]}).to_rows() == [[1, "p"], [2, "q"]]


def test_rows_are_copies(people):
    record = people[0]
    record["age"] = 99
    for row in people:
        row["age"] = 0
    assert people.column("age") == [31, 27, None, 45]


def test_select_drop_rename(people):
    assert people.select("city", "name").columns == ["city", "name"]
    assert people.drop("age").columns == ["name", "city"]
    renamed = people.rename({"name": "who"})
    assert renamed.columns == ["who", "age", "city"]
    assert renamed.column("who")[0] == "ann"
    with pytest.raises(KeyError):
        people.select("missing")


def test_with_column(people):
    t = people.with_column("adult", lambda r: r["age"] is not None and r["age"] >= 30)
    assert t.column("adult") == [True, False, False, True]
    assert "adult" not in people.columns
    with pytest.raises(ValueError):
        people.with_column("x", [1, 2])


def test_where_with_predicates(people):
    assert people.where(gt("age", 30)).column("name") == ["ann", "dee"]
    assert people.where(city="Oslo").column("name") == ["ann", "cid"]
    assert people.where(isnull("age")).column("name") == ["cid"]
    combined = and_(notnull("age"), or_(le("age", 27), contains("city", "im")))
    assert people.where(combined).column("name") == ["bob", "dee"]
    assert people.where(not_(isin("city", ["Oslo", "Rome"]))).column("name") == ["dee"]


def test_comparisons_with_none_are_false(people):
    assert people.where(ne("age", 31)).column("name") == ["bob", "dee"]
    assert people.where(gt("age", None)).column("name") == []


def test_head_tail_slice(people):
    assert people.head(2).column("name") == ["ann", "bob"]
    assert people.tail(1).column("name") == ["dee"]
    assert people.tail(0).shape == (0, 3)
    assert people[1:3].column("name") == ["bob", "cid"]


def test_distinct_and_concat(people):
    assert people.distinct("city").column("name") == ["ann", "bob", "dee"]
    doubled = people.concat(people)
    assert len(doubled) == 8
    assert len(doubled.distinct()) == 4
