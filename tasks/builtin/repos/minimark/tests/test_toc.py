from minimark import (Slugger, build_toc, escape_html, markdown, nest_toc,
                      normalize_url, render_toc, slugify)


def test_slugify_basic():
    assert slugify("Hello, World!") == "hello-world"
    assert slugify("  Multiple   spaces -- and_underscores ") == "multiple-spaces-and-underscores"


def test_slugify_unicode():
    assert slugify("Café Crème") == "café-crème"


def test_slugger_deduplicates():
    s = Slugger()
    assert [s.slug("Intro"), s.slug("Intro"), s.slug("Intro")] == ["intro", "intro-1", "intro-2"]
    assert s.slug("!!!") == "section"


def test_build_toc_entries():
    entries = build_toc("# Guide\n\n## Install\n\n### From source\n\n## Usage")
    assert [(e.level, e.title, e.slug) for e in entries] == [
        (1, "Guide", "guide"), (2, "Install", "install"),
        (3, "From source", "from-source"), (2, "Usage", "usage"),
    ]


def test_build_toc_level_filter():
    entries = build_toc("# Top\n## Mid\n### Low", min_level=2, max_level=2)
    assert [e.title for e in entries] == ["Mid"]


def test_build_toc_uses_plain_text_of_heading():
    entries = build_toc("## The `run()` *method*")
    assert entries[0].title == "The run() method"
    assert entries[0].slug == "the-run-method"


def test_nest_and_render_toc():
    entries = build_toc("# Alpha\n## Beta\n## Gamma\n# Delta")
    tree = nest_toc(entries)
    assert [e.title for e in tree] == ["Alpha", "Delta"]
    assert [e.title for e in tree[0].children] == ["Beta", "Gamma"]
    assert render_toc(entries) == (
        '<ul>\n<li><a href="#alpha">Alpha</a>\n<ul>\n<li><a href="#beta">Beta</a></li>\n'
        '<li><a href="#gamma">Gamma</a></li>\n</ul>\n</li>\n'
        '<li><a href="#delta">Delta</a></li>\n</ul>\n'
    )


def test_render_toc_empty():
    assert render_toc([]) == ""


def test_heading_ids_match_toc():
    src = "# Overview\n\n## Details\n\n## Details"
    html = markdown(src, heading_ids=True)
    assert html == (
        '<h1 id="overview">Overview</h1>\n<h2 id="details">Details</h2>\n'
        '<h2 id="details-1">Details</h2>\n'
    )
    assert [e.slug for e in build_toc(src)] == ["overview", "details", "details-1"]


def test_heading_ids_reset_between_documents():
    assert markdown("# Same", heading_ids=True) == '<h1 id="same">Same</h1>\n'
    assert markdown("# Same", heading_ids=True) == '<h1 id="same">Same</h1>\n'


def test_escape_html():
    assert escape_html('<a href="x">&</a>') == "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
    assert escape_html('"q"', quote_attr=False) == '"q"'


def test_normalize_url():
    assert normalize_url("/a b/ü") == "/a%20b/%C3%BC"
    assert normalize_url("/already%20encoded") == "/already%20encoded"


def test_link_title_with_quotes_is_escaped():
    assert markdown('[x](/y "say \\"hi\\"")') == (
        '<p><a href="/y" title="say &quot;hi&quot;">x</a></p>\n'
    )
