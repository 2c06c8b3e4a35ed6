"""Tokenizers: template source -> tag tokens, and expression -> expression tokens."""

from __future__ import annotations

import re
from typing import NamedTuple

from .errors import TemplateSyntaxError

TEXT = "text"
VAR = "var"
BLOCK = "block"

_OPEN_RE = re.compile(r"\{\{|\{%|\{#")
_CLOSERS = {"{{": "}}", "{%": "%}"}


class Token(NamedTuple):
    """A template-level token: literal text, a ``{{ }}`` or a ``{% %}`` tag."""

    kind: str
    value: str
    lineno: int


class ExprToken(NamedTuple):
    """A token inside an expression (``name``, ``int``, ``op``...)."""

    kind: str
    value: object
    lineno: int


def _find_close(source: str, closer: str, pos: int) -> int:
    """Find *closer* starting at *pos*, skipping over quoted strings."""
    quote = None
    while pos < len(source):
        ch = source[pos]
        if quote:
            if ch == "\\":
                pos += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif source.startswith(closer, pos):
            return pos
        pos += 1
    return -1


def tokenize(source: str, name: str | None = None, trim_blocks: bool = False) -> list[Token]:
    """Split *source* into text, variable and block tokens.

    Comments are dropped.  A ``-`` just inside a delimiter (``{%-``, ``-}}``)
    strips the whitespace before or after the tag; with *trim_blocks* the
    first newline after a block tag is removed.
    """
    tokens: list[Token] = []
    pos = 0
    lineno = 1
    strip_next = False
    newline_next = False
    while True:
        m = _OPEN_RE.search(source, pos)
        end = m.start() if m else len(source)
        text = source[pos:end]
        text_lineno = lineno
        lineno += text.count("\n")
        if strip_next:
            stripped = text.lstrip()
            text_lineno += text[:len(text) - len(stripped)].count("\n")
            text = stripped
        elif newline_next and text.startswith("\n"):
            text = text[1:]
            text_lineno += 1
        if m and source.startswith("-", m.end()):
            text = text.rstrip()
        if text:
            tokens.append(Token(TEXT, text, text_lineno))
        if not m:
            break
        opener = m.group()
        start = m.end()
        if opener == "{#":
            close = source.find("#}", start)
            if close == -1:
                raise TemplateSyntaxError("unclosed comment", lineno, name)
            comment = source[start:close]
            lineno += comment.count("\n")
            strip_next = comment.endswith("-")
            newline_next = False
            pos = close + 2
            continue
        closer = _CLOSERS[opener]
        close = _find_close(source, closer, start)
        if close == -1:
            kind = "variable" if opener == "{{" else "block"
            raise TemplateSyntaxError(f"unclosed {kind} tag", lineno, name)
        inner = source[start:close]
        strip_next = inner.endswith("-")
        inner = inner[1:] if inner.startswith("-") else inner
        inner = inner[:-1] if strip_next else inner
        tokens.append(Token(VAR if opener == "{{" else BLOCK, inner.strip(), lineno))
        lineno += inner.count("\n")
        newline_next = trim_blocks and opener == "{%"
        pos = close + 2
    return tokens


_EXPR_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<float>\d+\.\d+)
  | (?P<int>\d+)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|//|[-+*/%<>()\[\],.|:~=])
""", re.VERBOSE)

_STRING_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


def _unquote(literal: str) -> str:
    body = literal[1:-1]
    return re.sub(r"\\(.)", lambda m: _STRING_ESCAPES.get(m.group(1), "\\" + m.group(1)), body)


def tokenize_expression(source: str, lineno: int = 1, name: str | None = None) -> list[ExprToken]:
    """Tokenize the inside of a ``{{ }}`` or ``{% %}`` tag."""
    tokens: list[ExprToken] = []
    pos = 0
    while pos < len(source):
        m = _EXPR_RE.match(source, pos)
        if not m:
            raise TemplateSyntaxError(f"unexpected character {source[pos]!r}",
                                      lineno + source.count("\n", 0, pos), name)
        kind = m.lastgroup
        text = m.group()
        line = lineno + source.count("\n", 0, pos)
        if kind == "int":
            tokens.append(ExprToken("const", int(text), line))
        elif kind == "float":
            tokens.append(ExprToken("const", float(text), line))
        elif kind == "string":
            tokens.append(ExprToken("const", _unquote(text), line))
        elif kind == "name":
            tokens.append(ExprToken("name", text, line))
        elif kind == "op":
            tokens.append(ExprToken("op", text, line))
        pos = m.end()
    tokens.append(ExprToken("eof", None, lineno + source.count("\n")))
    return tokens
