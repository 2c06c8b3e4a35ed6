import io

import pytest

from tabkit import Table, read_csv, read_csv_string, to_csv_string, write_csv

SAMPLE = (
    "id,name,score,active,joined\n"
    "1,Ann,9.5,true,2021-03-04\n"
    "2,Bob,,false,2022-11-30\n"
    "3,Cid,7,yes,\n"
)


def test_read_infers_column_types():
    table = read_csv_string(SAMPLE)
    assert table.columns == ["id", "name", "score", "active", "joined"]
    rows = table.to_records()
    assert rows[0]["id"] == 1
    assert rows[0]["score"] == 9.5
    assert rows[2]["score"] == 7.0 and isinstance(rows[2]["score"], float)
    assert rows[1]["score"] is None
    assert rows[2]["active"] is True
    assert rows[2]["joined"] is None
    assert rows[1]["joined"].year == 2022


def test_read_without_inference_keeps_text():
    table = read_csv_string(SAMPLE, infer_types=False)
    assert table.column("id") == ["1", "2", "3"]
    assert table.column("score")[1] is None


def test_dtypes_override():
    table = read_csv_string("code,n\n007,1\n010,2\n", dtypes={"code": "str"})
    assert table.column("code") == ["007", "010"]
    assert table.column("n") == [1, 2]


def test_custom_na_values_in_text_column():
    table = read_csv_string("name\nann\n-\n", na_values=("-",))
    assert table.column("name") == ["ann", None]


def test_short_rows_are_padded_and_long_rows_rejected():
    table = read_csv_string("a,b,c\n1,2\n")
    assert table.to_rows() == [[1, 2, None]]
    with pytest.raises(ValueError):
        read_csv_string("a,b\n1,2,3\n")


def test_duplicate_header_names_are_renamed():
    table = read_csv_string("x,x,y\n1,2,3\n")
    assert table.columns == ["x", "x.1", "y"]


def test_blank_lines_skipped():
    table = read_csv_string("a\n1\n\n2\n")
    assert table.column("a") == [1, 2]


def test_semicolon_delimiter_and_quotes():
    table = read_csv_string('a;b\n"x;y";2\n', delimiter=";")
    assert table.to_records() == [{"a": "x;y", "b": 2}]


def test_write_and_read_back(tmp_path):
    original = read_csv_string(SAMPLE)
    path = tmp_path / "out.csv"
    write_csv(original, path)
    assert read_csv(path) == original


def test_to_csv_string_format():
    table = Table(["a", "b", "c"], [[1, None, True], [2.0, "x,y", False]])
    assert to_csv_string(table) == 'a,b,c\n1,,true\n2.0,"x,y",false\n'
    buffer = io.StringIO()
    table.to_csv(buffer, header=False)
    assert buffer.getvalue().startswith("1,,true")


def test_empty_input():
    table = read_csv_string("")
    assert table.columns == [] and len(table) == 0
