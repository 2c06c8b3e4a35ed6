import pytest

from tmplite import Environment, TemplateError, render_string


class User:
    def __init__(self, name, tags=()):
        self.name = name
        self.tags = list(tags)

    def greeting(self, punctuation="!"):
        return f"Hi {self.name}{punctuation}"



def test_variables_and_dotted_lookup():
    data = {"user": {"name": "Ann", "langs": ["py", "go"]}}
    assert render_string("{{ user.name }} {{ user.langs.1 }} {{ user['name'] }}", **data) == "Ann go Ann"


def test_attribute_lookup_on_objects_and_method_calls():
    u = User("Bob")
    assert render_string("{{ u.name }}: {{ u.greeting() }} {{ u.greeting(punctuation='?') }}", u=u) == (
        "Bob: Hi Bob! Hi Bob?"
    )


def test_mapping_key_wins_over_method():
    assert render_string("{{ d.items }}", d={"items": 3}) == "3"


def test_missing_values_render_empty():
    assert render_string("[{{ nope }}][{{ nope.deeper }}][{{ d.missing }}]", d={}) == "[][][]"



def test_arithmetic_and_comparison():
    assert render_string("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ 7 % 4 }}") == "7 9 3 3"
    assert render_string("{{ 2 < 3 }} {{ 'a' in 'abc' }} {{ 1 not in [1, 2] }}") == "True True False"


def test_unary_minus_and_negative_literals():
    assert render_string("{{ -n }} {{ -2 + n }} {{ xs[-1] }}", n=5, xs=[1, 2, 3]) == "-5 3 3"


def test_string_concatenation():
    assert render_string('{{ "n=" ~ n ~ "!" }}', n=4) == "n=4!"


def test_conditional_expression():
    assert render_string("{{ 'yes' if ok else 'no' }}", ok=False) == "no"


def test_if_elif_else():
    tmpl = "{% if n > 10 %}big{% elif n > 5 %}medium{% else %}small{% endif %}"
    assert [render_string(tmpl, n=n) for n in (20, 7, 1)] == ["big", "medium", "small"]


def test_boolean_operators():
    assert render_string("{% if a and not b %}ok{% endif %}", a=True, b=False) == "ok"
    assert render_string("{% if a or b %}ok{% endif %}", a=False, b=True) == "ok"
    assert render_string("{{ x or 'fallback' }}", x="") == "fallback"


def test_not_binds_looser_than_comparison():
    assert render_string("{% if not role == 'admin' %}user{% endif %}", role="guest") == "user"


def test_for_loop_with_loop_variables():
    tmpl = "{% for x in xs %}{{ loop.index }}:{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}"
    assert render_string(tmpl, xs=["a", "b", "c"]) == "1:a, 2:b, 3:c"


def test_loop_first_index0_length_and_cycle():
    tmpl = ("{% for x in xs %}{% if loop.first %}[{{ loop.length }}]{% endif %}"
            "{{ loop.index0 }}{{ loop.cycle('o', 'e') }} {% endfor %}")
    assert render_string(tmpl, xs="abc") == "[3]0o 1e 2o "


def test_for_else_on_empty():
    assert render_string("{% for x in xs %}{{ x }}{% else %}none{% endfor %}", xs=[]) == "none"


def test_for_unpacking_and_dict_iteration():
    assert render_string("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}", d={"a": 1, "b": 2}) == "a=1 b=2 "
    assert render_string("{% for k in d %}{{ k }}{% endfor %}", d={"x": 1, "y": 2}) == "xy"


def test_nested_loops_and_parent_loop():
    tmpl = "{% for r in rows %}{% for c in r %}{{ loop.parent.index }}{{ c }} {% endfor %}{% endfor %}"
    assert render_string(tmpl, rows=[["a"], ["b", "c"]]) == "1a 2b 2c "


def test_loop_variable_does_not_leak():
    assert render_string("{% for x in [1, 2] %}{% endfor %}[{{ x }}][{{ loop }}]") == "[][]"


def test_set_statement():
    assert render_string("{% set total = a + b %}{{ total * 2 }}", a=1, b=2) == "6"


def test_render_accepts_mapping_and_kwargs():
    tmpl = Environment().from_string("{{ a }}{{ b }}")
    assert tmpl.render({"a": 1, "b": 2}, b=3) == "13"


def test_runtime_error_for_bad_operands():
    with pytest.raises(TemplateError, match="line 2"):
        render_string("ok\n{{ 1 + 'a' }}")
