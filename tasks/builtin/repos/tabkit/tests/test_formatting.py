from datetime import date

from tabkit import Table, format_cell, format_table, truncate
from tabkit.formatting import ELLIPSIS


def test_format_cell():
    assert format_cell(None) == ""
    assert format_cell(None, none_text="-") == "-"
    assert format_cell(1.23456) == "1.23"
    assert format_cell(2.5, float_precision=0) == "2"
    assert format_cell(False) == "false"
    assert format_cell(date(2020, 5, 17)) == "2020-05-17"
    assert format_cell("a\nb") == "a b"


def test_truncate_short_text_untouched():
    assert truncate("abc", 3) == "abc"
    assert truncate("abc", None) == "abc"


def test_format_table_layout():
    t = Table(["name", "qty"], [["apple", 3], ["kiwi", 12]])
    assert format_table(t) == "\n".join(
        [
            "+-------+-----+",
            "| name  | qty |",
            "+-------+-----+",
            "| apple |   3 |",
            "| kiwi  |  12 |",
            "+-------+-----+",
        ]
    )


def test_format_without_border():
    t = Table(["a", "b"], [["x", 1.5]])
    assert format_table(t, border=False) == "a     b\n-  ----\nx  1.50"


def test_long_cells_are_shortened():
    t = Table(["text"], [["a" * 50]])
    out = format_table(t, max_width=10)
    assert ELLIPSIS in out
    assert "a" * 50 not in out


def test_alignment_override_and_max_rows():
    t = Table(["n"], [[1], [2], [3]])
    out = t.format(align={"n": "left"}, max_rows=2, border=False)
    assert out.splitlines() == ["n", "-", "1", "2", "... (1 more rows)"]
