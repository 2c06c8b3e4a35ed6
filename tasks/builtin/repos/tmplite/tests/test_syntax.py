import pytest

from tmplite import Environment, TemplateSyntaxError, render_string
from tmplite.lexer import tokenize, tokenize_expression


def test_tokenize_kinds_and_lines():
    tokens = tokenize("Hi {{ name }}\n{% if x %}y{% endif %}")
    assert [(t.kind, t.value, t.lineno) for t in tokens] == [
        ("text", "Hi ", 1), ("var", "name", 1), ("text", "\n", 1),
        ("block", "if x", 2), ("text", "y", 2), ("block", "endif", 2),
    ]


def test_tokenize_expression():
    toks = tokenize_expression('a.b|default("x, y") >= 2.5')
    assert [(t.kind, t.value) for t in toks] == [
        ("name", "a"), ("op", "."), ("name", "b"), ("op", "|"), ("name", "default"),
        ("op", "("), ("const", "x, y"), ("op", ")"), ("op", ">="), ("const", 2.5),
        ("eof", None),
    ]


def test_closing_delimiter_inside_string_literal():
    assert render_string('{{ "%}" ~ "}}" }}') == "%}}}"


def test_comments_are_removed():
    assert render_string("a{# note #}b") == "ab"
    assert render_string("a{# {{ not rendered }} #}b") == "ab"


def test_whitespace_control():
    src = "<ul>\n  {%- for x in xs %}\n  <li>{{ x }}</li>\n  {%- endfor %}\n</ul>"
    assert render_string(src, xs=[1, 2]) == "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>"


def test_whitespace_control_on_variables_and_comments():
    assert render_string("a   {{- x -}}   b", x="X") == "aXb"
    assert render_string("a  {#- c -#}  b") == "ab"


def test_trim_blocks_option():
    env = Environment(trim_blocks=True)
    tmpl = env.from_string("{% for x in xs %}\n{{ x }}\n{% endfor %}\n")
    assert tmpl.render(xs=[1, 2]) == "1\n2\n"


def test_error_unknown_tag_has_line_number():
    with pytest.raises(TemplateSyntaxError) as info:
        render_string("line one\nline two\n{% frobnicate %}")
    assert info.value.lineno == 3
    assert "unknown tag 'frobnicate'" in str(info.value)


def test_error_unclosed_block_reports_opening_line():
    with pytest.raises(TemplateSyntaxError) as info:
        render_string("a\n{% if x %}\nb\n")
    assert info.value.lineno == 2
    assert "endif" in info.value.message


def test_error_unexpected_end_tag():
    with pytest.raises(TemplateSyntaxError, match="unexpected 'endfor' tag"):
        render_string("{% endfor %}")


def test_error_unclosed_variable_tag():
    with pytest.raises(TemplateSyntaxError) as info:
        render_string("ok\n{{ name ")
    assert info.value.lineno == 2


def test_error_bad_expression_line_in_multiline_tag():
    with pytest.raises(TemplateSyntaxError) as info:
        render_string("{{ a +\n b c }}")
    assert info.value.lineno == 2


def test_error_message_includes_template_name():
    env = Environment()
    with pytest.raises(TemplateSyntaxError) as info:
        env.from_string("{{ }}", name="page.html")
    assert str(info.value) == "empty expression (page.html, line 1)"


def test_error_line_after_whitespace_control():
    with pytest.raises(TemplateSyntaxError) as info:
        render_string("a\n\n{%- if x %}\n{% bogus %}{% endif %}")
    assert info.value.lineno == 4
