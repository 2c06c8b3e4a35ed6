from minimark import markdown, parse, to_dict


def test_atx_headings_levels():
    assert markdown("# One") == "<h1>One</h1>\n"
    assert markdown("###### Six") == "<h6>Six</h6>\n"


def test_seven_hashes_is_paragraph():
    assert markdown("####### Seven") == "<p>####### Seven</p>\n"


def test_atx_heading_requires_space():
    assert markdown("#hashtag") == "<p>#hashtag</p>\n"


def test_atx_heading_closing_sequence_removed():
    assert markdown("## Title ##") == "<h2>Title</h2>\n"
    assert markdown("### Spaced   ###   ") == "<h3>Spaced</h3>\n"


def test_setext_headings():
    assert markdown("Big\n===\n\nSmall\n---") == "<h1>Big</h1>\n<h2>Small</h2>\n"


def test_paragraphs_separated_by_blank_lines():
    assert markdown("one\ntwo\n\nthree") == "<p>one\ntwo</p>\n<p>three</p>\n"


def test_thematic_breaks():
    assert markdown("***\n- - -\n___") == "<hr />\n<hr />\n<hr />\n"


def test_fenced_code_with_info_string():
    src = "```python extra\nprint('<hi>')\n```"
    assert markdown(src) == (
        '<pre><code class="language-python">print(\'&lt;hi&gt;\')\n</code></pre>\n'
    )


def test_tilde_fence_and_unclosed_fence():
    assert markdown("~~~\na\n~~~") == "<pre><code>a\n</code></pre>\n"
    assert markdown("```\nrest of doc\n\nmore") == (
        "<pre><code>rest of doc\n\nmore\n</code></pre>\n"
    )


def test_fenced_code_strips_opening_indent():
    assert markdown("  ```\n  a\n    b\n  ```") == "<pre><code>a\n  b\n</code></pre>\n"


def test_indented_code_block():
    src = "    def f():\n        return 1\n\n\nafter"
    assert markdown(src) == (
        "<pre><code>def f():\n    return 1\n</code></pre>\n<p>after</p>\n"
    )


def test_block_quote_with_lazy_line():
    assert markdown("> quoted\nlazy") == "<blockquote>\n<p>quoted\nlazy</p>\n</blockquote>\n"


def test_nested_block_quote():
    assert markdown("> outer\n>\n> > inner") == (
        "<blockquote>\n<p>outer</p>\n<blockquote>\n<p>inner</p>\n</blockquote>\n</blockquote>\n"
    )


def test_tight_bullet_list():
    assert markdown("- a\n- b\n- c") == "<ul>\n<li>a</li>\n<li>b</li>\n<li>c</li>\n</ul>\n"


def test_loose_list_when_items_separated_by_blank():
    assert markdown("- a\n\n- b") == (
        "<ul>\n<li>\n<p>a</p>\n</li>\n<li>\n<p>b</p>\n</li>\n</ul>\n"
    )


def test_ordered_list_start_number():
    assert markdown("3. x\n4. y") == '<ol start="3">\n<li>x</li>\n<li>y</li>\n</ol>\n'
    assert markdown("1) x") == "<ol>\n<li>x</li>\n</ol>\n"


def test_nested_lists():
    src = "- a\n  - b\n    - c\n- d"
    assert markdown(src) == (
        "<ul>\n<li>a\n<ul>\n<li>b\n<ul>\n<li>c</li>\n</ul>\n</li>\n</ul>\n</li>\n"
        "<li>d</li>\n</ul>\n"
    )


def test_changing_bullet_starts_new_list():
    assert markdown("- a\n+ b") == "<ul>\n<li>a</li>\n</ul>\n<ul>\n<li>b</li>\n</ul>\n"


def test_list_item_with_code_block():
    src = "1. step\n\n   ```\n   run\n   ```"
    assert markdown(src) == (
        "<ol>\n<li>\n<p>step</p>\n<pre><code>run\n</code></pre>\n</li>\n</ol>\n"
    )


def test_ast_structure():
    doc = parse("# T\n\n- a\n")
    data = to_dict(doc)
    assert data["type"] == "document"
    heading, lst = data["children"]
    assert heading == {"type": "heading", "level": 1,
                       "children": [{"type": "text", "text": "T"}]}
    assert lst["type"] == "list" and lst["tight"] is True and lst["ordered"] is False


def test_crlf_line_endings():
    assert markdown("a\r\nb\r\n\r\nc") == "<p>a\nb</p>\n<p>c</p>\n"


def test_empty_document():
    assert markdown("") == ""
    assert markdown("\n\n   \n") == ""
