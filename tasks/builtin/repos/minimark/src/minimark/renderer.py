"""HTML renderer for minimark document trees."""

from __future__ import annotations

from .escape import escape_html, normalize_url
from .nodes import (AutoLink, BlockQuote, CodeBlock, CodeSpan, Document, Emphasis,
                    Heading, Image, LineBreak, Link, List, ListItem, Node, Paragraph,
                    SoftBreak, Strong, Text, ThematicBreak, plain_text)
from .toc import Slugger


class HtmlRenderer:
    """Render a :class:`~minimark.nodes.Document` to an HTML string.

    :param heading_ids: add ``id`` attributes to headings (see
        :func:`minimark.toc.build_toc` for the matching anchors).
    :param softbreak: string emitted for a soft line break.
    """

    def __init__(self, heading_ids: bool = False, softbreak: str = "\n") -> None:
        self.heading_ids = heading_ids
        self.softbreak = softbreak
        self._slugger = Slugger()

    def render(self, doc: Document) -> str:
        self._slugger = Slugger()
        out = self._blocks(doc.children, tight=False)
        return out + "\n" if out else ""

    # -- blocks ------------------------------------------------------------

    def _blocks(self, nodes: list[Node], tight: bool) -> str:
        return "\n".join(self._block(node, tight) for node in nodes)

    def _block(self, node: Node, tight: bool = False) -> str:
        if isinstance(node, Paragraph):
            inner = self.inlines(node.children)
            return inner if tight else f"<p>{inner}</p>"
        if isinstance(node, Heading):
            tag = f"h{node.level}"
            attrs = ""
            if self.heading_ids:
                slug = self._slugger.slug(plain_text(node.children).strip())
                attrs = f' id="{escape_html(slug)}"'
            return f"<{tag}{attrs}>{self.inlines(node.children)}</{tag}>"
        if isinstance(node, CodeBlock):
            cls = f' class="language-{escape_html(node.info)}"' if node.info else ""
            return f"<pre><code{cls}>{escape_html(node.code, quote_attr=False)}</code></pre>"
        if isinstance(node, ThematicBreak):
            return "<hr />"
        if isinstance(node, BlockQuote):
            inner = self._blocks(node.children, tight=False)
            return f"<blockquote>\n{inner}\n</blockquote>" if inner else "<blockquote>\n</blockquote>"
        if isinstance(node, List):
            return self._list(node)
        raise TypeError(f"cannot render block node {node!r}")

    def _list(self, node: List) -> str:
        if node.ordered:
            start = f' start="{node.start}"' if node.start != 1 else ""
            open_tag, close_tag = f"<ol{start}>", "</ol>"
        else:
            open_tag, close_tag = "<ul>", "</ul>"
        items = [self._item(item, node.tight) for item in node.children]
        return "\n".join([open_tag, *items, close_tag])

    def _item(self, item: ListItem, tight: bool) -> str:
        if not item.children:
            return "<li></li>"
        parts = [self._block(child, tight) for child in item.children]
        if tight:
            # Paragraph text hugs the <li>; nested blocks go on their own lines.
            out = ""
            for child, html in zip(item.children, parts):
                if isinstance(child, Paragraph):
                    out += html
                else:
                    out += "\n" + html + "\n"
            return f"<li>{out}</li>".replace("\n\n", "\n")
        return "<li>\n" + "\n".join(parts) + "\n</li>"

    # -- inlines -----------------------------------------------------------

    def inlines(self, nodes: list[Node]) -> str:
        return "".join(self._inline(node) for node in nodes)

    def _inline(self, node: Node) -> str:
        if isinstance(node, Text):
            return escape_html(node.text, quote_attr=False)
        if isinstance(node, SoftBreak):
            return self.softbreak
        if isinstance(node, LineBreak):
            return "<br />\n"
        if isinstance(node, CodeSpan):
            return f"<code>{escape_html(node.code, quote_attr=False)}</code>"
        if isinstance(node, Emphasis):
            return f"<em>{self.inlines(node.children)}</em>"
        if isinstance(node, Strong):
            return f"<strong>{self.inlines(node.children)}</strong>"
        if isinstance(node, Link):
            title = f' title="{escape_html(node.title)}"' if node.title is not None else ""
            href = escape_html(normalize_url(node.url))
            return f'<a href="{href}"{title}>{self.inlines(node.children)}</a>'
        if isinstance(node, Image):
            title = f' title="{escape_html(node.title)}"' if node.title is not None else ""
            src = escape_html(normalize_url(node.url))
            alt = escape_html(plain_text(node.children))
            return f'<img src="{src}" alt="{alt}"{title} />'
        if isinstance(node, AutoLink):
            target = ("mailto:" + node.url) if node.email else node.url
            href = escape_html(normalize_url(target))
            return f'<a href="{href}">{escape_html(node.url, quote_attr=False)}</a>'
        raise TypeError(f"cannot render inline node {node!r}")


def render_html(doc: Document, **options) -> str:
    """Render a parsed document to HTML (see :class:`HtmlRenderer`)."""
    return HtmlRenderer(**options).render(doc)
