import pytest

from tmplite import (DictLoader, Environment, FileSystemLoader, Markup, TemplateNotFound,
                     UndefinedError, escape)


def test_autoescape_escapes_output():
    env = Environment(autoescape=True)
    assert env.from_string("{{ x }}").render(x="<a href='x'>&</a>") == (
        "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"
    )


def test_autoescape_off_by_default():
    assert Environment().from_string("{{ x }}").render(x="<b>") == "<b>"


def test_safe_and_escape_filters():
    env = Environment(autoescape=True)
    assert env.from_string("{{ x|safe }}").render(x="<b>") == "<b>"
    assert env.from_string("{{ x|e }}").render(x="<b>") == "&lt;b&gt;"
    assert Environment().from_string("{{ x|escape }}").render(x='"q"') == "&#34;q&#34;"


def test_markup_objects_are_not_escaped():
    env = Environment(autoescape=True)
    assert env.from_string("{{ m }}").render(m=Markup("<i>ok</i>")) == "<i>ok</i>"


def test_markup_concatenation_escapes_plain_strings():
    assert Markup("<b>") + "<i>" == Markup("<b>&lt;i&gt;")
    assert "<i>" + Markup("<b>") == Markup("&lt;i&gt;<b>")
    assert escape(Markup("<x>")) == "<x>"


def test_join_escapes_items_under_autoescape():
    env = Environment(autoescape=True)
    assert env.from_string("{{ xs|join('<br>'|safe) }}").render(xs=["<a>", "b"]) == "&lt;a&gt;<br>b"


def test_dict_loader_and_cache():
    loader = DictLoader({"hello.txt": "Hello {{ name }}"})
    env = Environment(loader=loader)
    tmpl = env.get_template("hello.txt")
    assert tmpl.render(name="you") == "Hello you"
    assert env.get_template("hello.txt") is tmpl


def test_missing_template():
    env = Environment(loader=DictLoader({}))
    with pytest.raises(TemplateNotFound):
        env.get_template("nope.html")


def test_include_shares_context():
    env = Environment(loader=DictLoader({
        "row.html": "<li>{{ loop.index }} {{ item }}</li>",
        "list.html": "{% for item in items %}{% include 'row.html' %}{% endfor %}",
    }))
    assert env.get_template("list.html").render(items=["a", "b"]) == "<li>1 a</li><li>2 b</li>"


def test_include_set_does_not_leak():
    env = Environment(loader=DictLoader({"inc": "{% set x = 2 %}{{ x }}", "main": "{{ x }}{% include 'inc' %}{{ x }}"}))
    assert env.get_template("main").render(x=1) == "121"


def test_filesystem_loader(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("A{{ v }}", encoding="utf-8")
    env = Environment(loader=FileSystemLoader(tmp_path))
    assert env.get_template("sub/a.txt").render(v=1) == "A1"
    with pytest.raises(TemplateNotFound):
        env.get_template("../secret.txt")


def test_strict_undefined():
    env = Environment(undefined="strict")
    with pytest.raises(UndefinedError):
        env.from_string("{{ missing }}").render()
    assert env.from_string("{{ missing|default('ok') }}").render() == "ok"



def test_globals_available_everywhere():
    env = Environment(globals={"site": "Docs"})
    assert env.from_string("{{ site }}").render() == "Docs"
    assert env.from_string("{{ site }}").render(site="Override") == "Override"
