import pytest

from tmplite import Environment, TemplateError, render_string


def test_case_filters():
    assert render_string("{{ s|upper }} {{ s|lower }} {{ s|title }} {{ s|capitalize }}", s="hello wORLD") == (
        "HELLO WORLD hello world Hello World Hello world"
    )


def test_trim_and_replace():
    assert render_string("[{{ s|trim }}] {{ s|trim|replace('a', 'o') }}", s="  banana ") == "[banana] bonono"


def test_chained_filters_with_arguments():
    assert render_string("{{ name|default('anonymous')|upper }}") == "ANONYMOUS"


def test_default_filter_boolean_mode():
    assert render_string("{{ x|default('d') }}|{{ x|default('d', true) }}", x="") == "|d"
    assert render_string("{{ x|d('d', boolean=true) }}", x=0) == "d"


def test_length_join_first_last():
    ctx = {"xs": [3, 1, 2]}
    assert render_string("{{ xs|length }} {{ xs|join('-') }} {{ xs|first }} {{ xs|last }}", **ctx) == "3 3-1-2 3 2"


def test_join_attribute():
    users = [{"name": "a"}, {"name": "b"}]
    assert render_string("{{ users|join(', ', attribute='name') }}", users=users) == "a, b"


def test_sort_reverse_and_list():
    assert render_string("{{ xs|sort|join }} {{ xs|sort(reverse=true)|join }} {{ 'abc'|reverse }}", xs=[2, 3, 1]) == (
        "123 321 cba"
    )


def test_truncate_long_text():
    text = "The quick brown fox jumps"
    assert render_string("{{ t|truncate(12) }}", t=text) == "The quick..."
    assert render_string("{{ t|truncate(12, killwords=true) }}", t=text) == "The quick..."
    assert render_string("{{ t|truncate(10, end='~') }}", t=text) == "The quick~"


def test_truncate_short_text_unchanged():
    assert render_string("{{ t|truncate(20) }}", t="short") == "short"


def test_numeric_filters():
    assert render_string("{{ '42'|int + 1 }} {{ 'x'|int }} {{ '2.5'|float * 2 }} {{ 2.567|round(2) }}") == (
        "43 0 5.0 2.57"
    )
    assert render_string("{{ x|abs }} {{ 2.1|round(0, 'ceil') }}", x=-3) == "3 3.0"



def test_custom_filter():
    env = Environment(filters={"shout": lambda v, n=1: str(v) + "!" * n})
    assert env.from_string("{{ 'hey'|shout(3) }}").render() == "hey!!!"


def test_unknown_filter_raises():
    with pytest.raises(TemplateError, match="unknown filter 'nope'"):
        render_string("{{ x|nope }}", x=1)
