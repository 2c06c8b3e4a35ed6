"""Block-level parser: turns Markdown source into a tree of block nodes.

The parser works line by line.  Container blocks (block quotes and list
items) are handled by stripping their markers and recursively parsing the
remaining lines.  Inline content of paragraphs and headings is parsed
afterwards by :mod:`minimark.inline`.
"""

from __future__ import annotations

import re

from .inline import parse_inline
from .nodes import (BlockQuote, CodeBlock, Document, Heading, List, ListItem,
                    Node, Paragraph, ThematicBreak)

_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)(.*)$")
_ATX_CLOSE_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_FENCE_OPEN_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")
_HR_RE = re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_LIST_RE = re.compile(r"^( {0,3})([*+-]|\d{1,9}[.)])(?=[ \t]|$)([ \t]*)(.*)$")
_QUOTE_RE = re.compile(r"^ {0,3}> ?(.*)$")
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _is_blank(line: str) -> bool:
    return not line.strip()


def _list_kind(marker: str) -> tuple[bool, str]:
    """Return ``(ordered, delimiter)`` for a list marker such as ``-`` or ``3.``."""
    if marker[-1] in ".)":
        return True, marker[-1]
    return False, marker


class BlockParser:
    """Parse Markdown text into a :class:`~minimark.nodes.Document`."""

    def parse(self, text: str) -> Document:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        lines = [line.expandtabs(4) for line in text.split("\n")]
        doc = Document(self.parse_lines(lines))
        self._parse_inlines(doc)
        return doc

    # -- helpers -----------------------------------------------------------

    def _starts_block(self, line: str) -> bool:
        """True if *line* would interrupt a paragraph."""
        if _is_blank(line):
            return True
        if _ATX_RE.match(line) or _FENCE_OPEN_RE.match(line) or _HR_RE.match(line):
            return True
        if _QUOTE_RE.match(line):
            return True
        m = _LIST_RE.match(line)
        if m and m.group(4).strip():
            ordered, _ = _list_kind(m.group(2))
            return not ordered or m.group(2)[:-1] == "1"
        return False

    def _parse_inlines(self, node: Node) -> None:
        for child in node.children:
            if isinstance(child, (Paragraph, Heading)):
                child.children = parse_inline(child.source)
            else:
                self._parse_inlines(child)

    # -- main loop ---------------------------------------------------------

    def parse_lines(self, lines: list[str]) -> list[Node]:
        """Parse a list of lines into a list of block nodes."""
        blocks: list[Node] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if _is_blank(line):
                i += 1
                continue
            if _indent(line) >= 4:
                node, i = self._code_block(lines, i)
            elif _FENCE_OPEN_RE.match(line) and self._valid_fence(line):
                node, i = self._fenced_code(lines, i)
            elif _ATX_RE.match(line):
                node, i = self._atx_heading(lines, i)
            elif _HR_RE.match(line):
                node, i = ThematicBreak(), i + 1
            elif _QUOTE_RE.match(line):
                node, i = self._block_quote(lines, i)
            elif _LIST_RE.match(line):
                node, i = self._list(lines, i)
            else:
                node, i = self._paragraph(lines, i)
            blocks.append(node)
        return blocks

    # -- leaf blocks -------------------------------------------------------

    def _code_block(self, lines, i):
        body = []
        while i < len(lines) and (_is_blank(lines[i]) or _indent(lines[i]) >= 4):
            body.append(lines[i][4:])
            i += 1
        while body and _is_blank(body[-1]):
            body.pop()
        return CodeBlock("\n".join(body) + "\n"), i

    @staticmethod
    def _valid_fence(line: str) -> bool:
        m = _FENCE_OPEN_RE.match(line)
        return not (m.group(2)[0] == "`" and "`" in m.group(3))

    def _fenced_code(self, lines, i):
        m = _FENCE_OPEN_RE.match(lines[i])
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        body = []
        i += 1
        while i < len(lines):
            close = _FENCE_CLOSE_RE.match(lines[i])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                i += 1
                break
            line = lines[i]
            strip = min(indent, _indent(line))
            body.append(line[strip:])
            i += 1
        code = "\n".join(body) + "\n" if body else ""
        info = info.split()[0] if info else ""
        return CodeBlock(code, info), i

    def _atx_heading(self, lines, i):
        m = _ATX_RE.match(lines[i])
        content = _ATX_CLOSE_RE.sub("", m.group(2).strip())
        heading = Heading(len(m.group(1)))
        heading.source = content.strip()
        return heading, i + 1

    def _paragraph(self, lines, i):
        body = [lines[i].lstrip()]
        i += 1
        while i < len(lines):
            line = lines[i]
            setext = _SETEXT_RE.match(line)
            if setext:
                heading = Heading(1 if setext.group(1)[0] == "=" else 2)
                heading.source = "\n".join(body).strip()
                return heading, i + 1
            if self._starts_block(line):
                break
            body.append(line.lstrip())
            i += 1
        para = Paragraph()
        para.source = "\n".join(body).rstrip()
        return para, i

    # -- container blocks --------------------------------------------------

    def _block_quote(self, lines, i):
        body = []
        while i < len(lines):
            m = _QUOTE_RE.match(lines[i])
            if m:
                body.append(m.group(1))
            elif body and not _is_blank(body[-1]) and not self._starts_block(lines[i]):
                body.append(lines[i])  # lazy paragraph continuation
            else:
                break
            i += 1
        return BlockQuote(self.parse_lines(body)), i

    def _list(self, lines, i):
        first = _LIST_RE.match(lines[i])
        ordered, delim = _list_kind(first.group(2))
        start = int(first.group(2)[:-1]) if ordered else None
        items: list[Node] = []
        loose = False
        while i < len(lines):
            m = _LIST_RE.match(lines[i])
            if not m or _HR_RE.match(lines[i]) or _list_kind(m.group(2)) != (ordered, delim):
                break
            lead, marker, spaces, content = m.groups()
            if not content or len(spaces) > 4:
                width = len(lead) + len(marker) + 1
                content = " " * max(len(spaces) - 1, 0) + content if content else ""
            else:
                width = len(lead) + len(marker) + len(spaces)
            body = [content]
            i += 1
            while i < len(lines):
                line = lines[i]
                if _is_blank(line):
                    body.append("")
                elif _indent(line) >= width:
                    body.append(line[width:])
                elif (not _is_blank(body[-1]) and not self._starts_block(line)
                      and not _LIST_RE.match(line)):
                    body.append(line)  # lazy paragraph continuation
                else:
                    break
                i += 1
            trailing = 0
            while body and _is_blank(body[-1]):
                body.pop()
                trailing += 1
            if trailing and i < len(lines):
                nxt = _LIST_RE.match(lines[i])
                if nxt and _list_kind(nxt.group(2)) == (ordered, delim):
                    loose = True
            if self._blank_between_blocks(body):
                loose = True
            items.append(ListItem(self.parse_lines(body)))
        return List(ordered, start, not loose, items), i

    @staticmethod
    def _blank_between_blocks(body: list[str]) -> bool:
        """True if a blank line separates two top-level blocks of an item."""
        fence = None
        for idx, line in enumerate(body):
            m = _FENCE_OPEN_RE.match(line)
            if fence is None and m:
                fence = m.group(2)[0]
                continue
            if fence is not None:
                close = _FENCE_CLOSE_RE.match(line)
                if close and close.group(1)[0] == fence:
                    fence = None
                continue
            if _is_blank(line) and idx + 1 < len(body):
                nxt = body[idx + 1]
                if not _is_blank(nxt) and _indent(nxt) < 2:
                    return True
        return False


def parse(text: str) -> Document:
    """Parse Markdown *text* into a document tree."""
    return BlockParser().parse(text)
