from minimark import markdown, parse_inline, plain_text


def inline(src):
    html = markdown(src)
    assert html.startswith("<p>") and html.endswith("</p>\n")
    return html[3:-5]


def test_emphasis_and_strong():
    assert inline("*a* _b_ **c** __d__") == (
        "<em>a</em> <em>b</em> <strong>c</strong> <strong>d</strong>"
    )


def test_nested_emphasis():
    assert inline("*a **b** c*") == "<em>a <strong>b</strong> c</em>"
    assert inline("***both***") == "<em><strong>both</strong></em>"


def test_intraword_star_emphasis():
    assert inline("un*frigging*believable") == "un<em>frigging</em>believable"


def test_unmatched_delimiters_are_literal():
    assert inline("2 * 3 * 4") == "2 * 3 * 4"
    assert inline("**open") == "**open"


def test_code_spans():
    assert inline("use `x < y`") == "use <code>x &lt; y</code>"
    assert inline("``a ` b``") == "<code>a ` b</code>"


def test_code_span_is_not_parsed_for_emphasis():
    assert inline("`*x*`") == "<code>*x*</code>"


def test_unclosed_backticks_are_literal():
    assert inline("a `b") == "a `b"


def test_backslash_escapes():
    assert inline(r"\*not\* \[x\]") == "*not* [x]"
    assert inline(r"\q") == r"\q"


def test_hard_line_breaks():
    assert inline("a  \nb") == "a<br />\nb"
    assert inline("a\\\nb") == "a<br />\nb"


def test_links():
    assert inline("[home](/index.html)") == '<a href="/index.html">home</a>'
    assert inline('[t](/u "Title")') == '<a href="/u" title="Title">t</a>'


def test_link_with_emphasis_inside():
    assert inline("[*big* deal](/x)") == '<a href="/x"><em>big</em> deal</a>'


def test_link_destination_with_parentheses_and_angle_brackets():
    assert inline("[w](https://en.wikipedia.org/wiki/Foo_(bar))") == (
        '<a href="https://en.wikipedia.org/wiki/Foo_(bar)">w</a>'
    )
    assert inline("[s](<my page.html>)") == '<a href="my%20page.html">s</a>'


def test_not_a_link():
    assert inline("[just brackets]") == "[just brackets]"
    assert inline("[a] (b)") == "[a] (b)"


def test_images():
    assert inline('![a *cat*](cat.png "Cat")') == (
        '<img src="cat.png" alt="a cat" title="Cat" />'
    )


def test_autolinks():
    assert inline("<https://example.com/a>") == (
        '<a href="https://example.com/a">https://example.com/a</a>'
    )
    assert inline("<me@example.org>") == '<a href="mailto:me@example.org">me@example.org</a>'


def test_html_is_escaped():
    assert inline("<div> & </div>") == "&lt;div&gt; &amp; &lt;/div&gt;"


def test_plain_text_helper():
    nodes = parse_inline("a *b* `c` [d](e)")
    assert plain_text(nodes) == "a b c d"
