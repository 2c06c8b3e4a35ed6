"""Heading slugs and table-of-contents generation."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .escape import escape_html
from .nodes import Document, Heading, plain_text

_STRIP_RE = re.compile(r"[^\w\s-]", re.UNICODE)
_SPACE_RE = re.compile(r"[\s_-]+", re.UNICODE)


def slugify(text: str) -> str:
    """Turn heading text into a URL fragment.

    >>> slugify("Hello, World!")
    'hello-world'
    """
    text = _STRIP_RE.sub("", text.strip().lower())
    text = _SPACE_RE.sub("-", text)
    return text.strip("-")


class Slugger:
    """Produce unique slugs: repeated titles get ``-1``, ``-2``... suffixes."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def slug(self, text: str) -> str:
        base = slugify(text) or "section"
        if base not in self._seen:
            self._seen[base] = 0
            return base
        while True:
            self._seen[base] += 1
            candidate = f"{base}-{self._seen[base]}"
            if candidate not in self._seen:
                self._seen[candidate] = 0
                return candidate

    def reset(self) -> None:
        self._seen.clear()


@dataclass
class TocEntry:
    """One heading in a table of contents."""

    level: int
    title: str
    slug: str
    children: list["TocEntry"] = field(default_factory=list)


def _headings(doc: Document):
    for node in doc.walk():
        if isinstance(node, Heading):
            yield node


def build_toc(source, *, min_level: int = 1, max_level: int = 6,
              slugger: Slugger | None = None) -> list[TocEntry]:
    """Return a flat list of :class:`TocEntry` for the headings of *source*.

    *source* may be Markdown text or an already parsed :class:`Document`.
    Every heading consumes a slug (so that anchors match those produced by
    ``markdown(..., heading_ids=True)``) but only headings between
    *min_level* and *max_level* are listed.
    """
    if isinstance(source, str):
        from .blocks import parse
        source = parse(source)
    if slugger is None:
        slugger = Slugger()
    entries = []
    for heading in _headings(source):
        title = plain_text(heading.children).strip()
        slug = slugger.slug(title)
        if min_level <= heading.level <= max_level:
            entries.append(TocEntry(heading.level, title, slug))
    return entries


def nest_toc(entries: list[TocEntry]) -> list[TocEntry]:
    """Arrange a flat entry list into a tree based on heading levels."""
    roots: list[TocEntry] = []
    stack: list[TocEntry] = []
    for entry in entries:
        entry = TocEntry(entry.level, entry.title, entry.slug)
        while stack and stack[-1].level >= entry.level:
            stack.pop()
        if stack:
            stack[-1].children.append(entry)
        else:
            roots.append(entry)
        stack.append(entry)
    return roots


def render_toc(entries: list[TocEntry]) -> str:
    """Render entries (flat or nested) as nested ``<ul>`` HTML."""
    if entries and not any(e.children for e in entries):
        entries = nest_toc(entries)

    def render(items: list[TocEntry]) -> str:
        out = ["<ul>"]
        for item in items:
            link = f'<a href="#{escape_html(item.slug)}">{escape_html(item.title)}</a>'
            if item.children:
                out.append(f"<li>{link}\n{render(item.children)}\n</li>")
            else:
                out.append(f"<li>{link}</li>")
        out.append("</ul>")
        return "\n".join(out)

    return render(entries) + "\n" if entries else ""
