import pytest

from tabkit import Table


@pytest.fixture
def employees():
    return Table(
        ["id", "name", "dept"],
        [[1, "ann", "eng"], [2, "bob", "ops"], [3, "cid", "eng"], [4, "dee", "hr"]],
    )


@pytest.fixture
def depts():
    return Table(
        ["dept", "name", "floor"],
        [["eng", "Engineering", 3], ["ops", "Operations", 1], ["eng", "Eng annex", 4]],
    )


def test_inner_join(employees, depts):
    result = employees.join(depts, on="dept")
    assert result.columns == ["id", "name", "dept", "name_right", "floor"]
    assert result.column("id") == [1, 1, 2, 3, 3]
    assert result.column("name_right")[:2] == ["Engineering", "Eng annex"]


def test_left_join_fills_none(employees, depts):
    result = employees.join(depts, on="dept", how="left")
    last = result.to_records()[-1]
    assert last == {"id": 4, "name": "dee", "dept": "hr", "name_right": None, "floor": None}
    assert len(result) == 6


def test_multi_column_key():
    left = Table(["a", "b", "x"], [[1, "p", "L1"], [1, "q", "L2"]])
    right = Table(["a", "b", "y"], [[1, "q", "R1"]])
    assert left.join(right, on=["a", "b"]).to_rows() == [[1, "q", "L2", "R1"]]


def test_join_errors(employees, depts):
    with pytest.raises(ValueError):
        employees.join(depts, on="dept", how="outer")
    with pytest.raises(KeyError):
        employees.join(depts, on="floor")


def test_custom_suffix(employees, depts):
    result = employees.join(depts, on="dept", suffix="_dept")
    assert "name_dept" in result.columns
