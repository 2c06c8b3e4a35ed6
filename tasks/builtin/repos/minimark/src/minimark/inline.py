"""Inline parser: emphasis, code spans, links, images, autolinks, breaks.

Emphasis is resolved with a (simplified) CommonMark delimiter-run
algorithm so that ``*a **b** c*`` and ``**a*b*a**`` nest correctly.
"""

from __future__ import annotations

import re
import string
import unicodedata

from .escape import ESCAPABLE, unescape_backslashes
from .nodes import (AutoLink, CodeSpan, Emphasis, Image, LineBreak, Link, Node,
                    SoftBreak, Strong, Text)

_AUTOLINK_RE = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*)>")
_EMAIL_RE = re.compile(r"<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)>")
_BACKTICKS_RE = re.compile(r"`+")


def _is_punct(ch: str) -> bool:
    return ch in string.punctuation or unicodedata.category(ch).startswith("P")


def _identity_index(items: list, obj) -> int:
    for idx, item in enumerate(items):
        if item is obj:
            return idx
    raise ValueError("node not found")


class _Delim:
    __slots__ = ("node", "char", "count", "orig", "can_open", "can_close")

    def __init__(self, node, char, count, can_open, can_close):
        self.node = node
        self.char = char
        self.count = count
        self.orig = count
        self.can_open = can_open
        self.can_close = can_close


class _Bracket:
    __slots__ = ("node", "image", "delim_bottom", "active")

    def __init__(self, node, image, delim_bottom):
        self.node = node
        self.image = image
        self.delim_bottom = delim_bottom
        self.active = True


class InlineParser:
    """Parse the inline content of a paragraph or heading."""

    def parse(self, text: str) -> list[Node]:
        self.src = text
        self.pos = 0
        self.nodes: list[Node] = []
        self.delims: list[_Delim] = []
        self.brackets: list[_Bracket] = []
        self._buf: list[str] = []
        while self.pos < len(text):
            ch = text[self.pos]
            handler = self._handlers.get(ch)
            if handler is None or not handler(self):
                self._buf.append(ch)
                self.pos += 1
        self._flush()
        self._process_emphasis(0)
        return _merge_text(self.nodes)

    # -- helpers -----------------------------------------------------------

    def _flush(self) -> None:
        if self._buf:
            self.nodes.append(Text("".join(self._buf)))
            self._buf = []

    def _push(self, node: Node) -> None:
        self._flush()
        self.nodes.append(node)

    # -- handlers (return True when they consumed input) ---------------------

    def _backslash(self) -> bool:
        nxt = self.src[self.pos + 1:self.pos + 2]
        if nxt == "\n":
            self._push(LineBreak())
            self.pos += 2
            self._skip_spaces()
            return True
        if nxt and nxt in ESCAPABLE:
            self._buf.append(nxt)
            self.pos += 2
            return True
        return False

    def _backtick(self) -> bool:
        run = _BACKTICKS_RE.match(self.src, self.pos).group()
        start = self.pos + len(run)
        for m in _BACKTICKS_RE.finditer(self.src, start):
            if m.group() == run:
                code = self.src[start:m.start()].replace("\n", " ")
                if len(code) > 1 and code[0] == code[-1] == " " and code.strip():
                    code = code[1:-1]
                self._push(CodeSpan(code))
                self.pos = m.end()
                return True
        self._buf.append(run)
        self.pos = start
        return True

    def _angle(self) -> bool:
        m = _AUTOLINK_RE.match(self.src, self.pos)
        if m:
            self._push(AutoLink(m.group(1)))
        else:
            m = _EMAIL_RE.match(self.src, self.pos)
            if not m:
                return False
            self._push(AutoLink(m.group(1), email=True))
        self.pos = m.end()
        return True

    def _newline(self) -> bool:
        hard = len(self._buf) >= 2 and self._buf[-1] == " " and self._buf[-2] == " "
        while self._buf and self._buf[-1] == " ":
            self._buf.pop()
        self._push(LineBreak() if hard else SoftBreak())
        self.pos += 1
        self._skip_spaces()
        return True

    def _skip_spaces(self) -> None:
        while self.pos < len(self.src) and self.src[self.pos] == " ":
            self.pos += 1

    def _emphasis(self) -> bool:
        ch = self.src[self.pos]
        end = self.pos
        while end < len(self.src) and self.src[end] == ch:
            end += 1
        before = self.src[self.pos - 1] if self.pos > 0 else " "
        after = self.src[end] if end < len(self.src) else " "
        prev_ws, next_ws = before.isspace(), after.isspace()
        prev_p, next_p = _is_punct(before), _is_punct(after)
        left = not next_ws and (not next_p or prev_ws or prev_p)
        right = not prev_ws and (not prev_p or next_ws or next_p)
        if ch == "*":
            can_open, can_close = left, right
        else:
            can_open = left and (not right or prev_p)
            can_close = right and (not left or next_p)
        node = Text(self.src[self.pos:end])
        self._push(node)
        self.delims.append(_Delim(node, ch, end - self.pos, can_open, can_close))
        self.pos = end
        return True

    def _open_bracket(self) -> bool:
        image = self.src[self.pos] == "!"
        if image and self.src[self.pos + 1:self.pos + 2] != "[":
            return False
        node = Text("![" if image else "[")
        self._push(node)
        self.brackets.append(_Bracket(node, image, len(self.delims)))
        self.pos += 2 if image else 1
        return True

    def _close_bracket(self) -> bool:
        if not self.brackets:
            return False
        bracket = self.brackets.pop()
        if not bracket.active:
            return False
        dest = self._link_destination(self.pos + 1)
        if dest is None:
            return False
        url, title, end = dest
        self._flush()
        start = _identity_index(self.nodes, bracket.node)
        self._process_emphasis(bracket.delim_bottom)
        start = _identity_index(self.nodes, bracket.node)
        children = _merge_text(self.nodes[start + 1:])
        cls = Image if bracket.image else Link
        self.nodes[start:] = [cls(url, title, children)]
        if not bracket.image:
            for earlier in self.brackets:
                if not earlier.image:
                    earlier.active = False
        self.pos = end
        return True

    def _link_destination(self, pos: int):
        """Parse ``(url "title")`` at *pos*; return ``(url, title, end)`` or None."""
        src = self.src
        if src[pos:pos + 1] != "(":
            return None
        pos += 1
        while pos < len(src) and src[pos] in " \n":
            pos += 1
        if src[pos:pos + 1] == "<":
            close = src.find(">", pos)
            if close == -1 or "\n" in src[pos:close]:
                return None
            url = src[pos + 1:close]
            pos = close + 1
        else:
            depth = 0
            begin = pos
            while pos < len(src):
                c = src[pos]
                if c == "\\" and pos + 1 < len(src) and src[pos + 1] in ESCAPABLE:
                    pos += 2
                    continue
                if c.isspace():
                    break
                if c == "(":
                    depth += 1
                elif c == ")":
                    if depth == 0:
                        break
                    depth -= 1
                pos += 1
            url = src[begin:pos]
        title = None
        save = pos
        while pos < len(src) and src[pos] in " \n":
            pos += 1
        if pos < len(src) and src[pos] in "\"'(" and pos > save:
            closer = ")" if src[pos] == "(" else src[pos]
            end = pos + 1
            while end < len(src) and src[end] != closer:
                end += 2 if src[end] == "\\" else 1
            if end >= len(src):
                return None
            title = unescape_backslashes(src[pos + 1:end])
            pos = end + 1
            while pos < len(src) and src[pos] in " \n":
                pos += 1
        if src[pos:pos + 1] != ")":
            return None
        return unescape_backslashes(url), title, pos + 1

    _handlers = {
        "\\": _backslash,
        "`": _backtick,
        "<": _angle,
        "\n": _newline,
        "*": _emphasis,
        "_": _emphasis,
        "[": _open_bracket,
        "!": _open_bracket,
        "]": _close_bracket,
    }

    # -- emphasis resolution -----------------------------------------------

    def _process_emphasis(self, bottom: int) -> None:
        delims = self.delims
        idx = bottom
        while idx < len(delims):
            closer = delims[idx]
            if not closer.can_close:
                idx += 1
                continue
            found = None
            for j in range(idx - 1, bottom - 1, -1):
                opener = delims[j]
                if opener.char != closer.char or not opener.can_open:
                    continue
                both = opener.can_close or closer.can_open
                if both and (opener.orig + closer.orig) % 3 == 0 and not (
                        opener.orig % 3 == 0 and closer.orig % 3 == 0):
                    continue
                found = j
                break
            if found is None:
                idx += 1
                continue
            opener = delims[found]
            use = 2 if opener.count >= 2 and closer.count >= 2 else 1
            opener.count -= use
            closer.count -= use
            opener.node.text = opener.node.text[:opener.count]
            closer.node.text = closer.node.text[:closer.count]
            start = _identity_index(self.nodes, opener.node)
            end = _identity_index(self.nodes, closer.node)
            inner = _merge_text(self.nodes[start + 1:end])
            self.nodes[start + 1:end] = [Strong(inner) if use == 2 else Emphasis(inner)]
            del delims[found + 1:idx]
            idx = found + 1
            if opener.count == 0:
                self.nodes.pop(_identity_index(self.nodes, opener.node))
                del delims[found]
                idx -= 1
            if closer.count == 0:
                self.nodes.pop(_identity_index(self.nodes, closer.node))
                del delims[idx]
        del delims[bottom:]


def _merge_text(nodes: list[Node]) -> list[Node]:
    """Merge adjacent text nodes and drop empty ones."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Text):
            if not node.text:
                continue
            if out and isinstance(out[-1], Text):
                out[-1] = Text(out[-1].text + node.text)
                continue
        out.append(node)
    return out


def parse_inline(text: str) -> list[Node]:
    """Parse inline Markdown *text* into a list of inline nodes."""
    return InlineParser().parse(text)
