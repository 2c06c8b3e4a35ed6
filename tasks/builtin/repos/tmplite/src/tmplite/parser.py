"""Parser: tokens -> abstract syntax tree.

Template structure (text, output, ``if``, ``for``...) is parsed from the
tag tokens produced by :func:`tmplite.lexer.tokenize`; expressions inside
tags are parsed with a precedence-climbing parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import TemplateSyntaxError
from .lexer import BLOCK, TEXT, VAR, ExprToken, Token, tokenize, tokenize_expression

# -- AST nodes ---------------------------------------------------------------


@dataclass
class Node:
    lineno: int = field(default=0, kw_only=True, compare=False)


@dataclass
class Const(Node):
    value: Any


@dataclass
class Name(Node):
    name: str


@dataclass
class ListLiteral(Node):
    items: list


@dataclass
class Getattr(Node):
    obj: Node
    attr: Any


@dataclass
class Getitem(Node):
    obj: Node
    key: Node


@dataclass
class Call(Node):
    func: Node
    args: list
    kwargs: dict = field(default_factory=dict)


@dataclass
class Filter(Node):
    value: Node
    name: str
    args: list
    kwargs: dict = field(default_factory=dict)


@dataclass
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass
class UnaryOp(Node):
    op: str
    operand: Node


@dataclass
class CondExpr(Node):
    test: Node
    then: Node
    otherwise: Node


@dataclass
class Text(Node):
    text: str


@dataclass
class Output(Node):
    expr: Node


@dataclass
class If(Node):
    branches: list  # [(test, body), ...]
    else_body: list


@dataclass
class For(Node):
    targets: list
    iterable: Node
    body: list
    else_body: list


@dataclass
class Set(Node):
    name: str
    expr: Node


@dataclass
class Include(Node):
    template: Node


@dataclass
class TemplateNode(Node):
    body: list


# Binary operator precedence: higher binds tighter.
BINARY_PRECEDENCE = {
    "or": 1,
    "and": 2,
    "in": 4, "not in": 4, "==": 4, "!=": 4, "<": 4, ">": 4, "<=": 4, ">=": 4,
    "~": 5,
    "+": 6, "-": 6,
    "*": 7, "/": 7, "//": 7, "%": 7,
}
_NOT_PRECEDENCE = 3


class ExpressionParser:
    """Parse a single expression from a list of expression tokens."""

    def __init__(self, tokens: list[ExprToken], name: str | None = None) -> None:
        self.tokens = tokens
        self.pos = 0
        self.name = name

    # -- token helpers -----------------------------------------------------

    @property
    def current(self) -> ExprToken:
        return self.tokens[self.pos]

    def next(self) -> ExprToken:
        tok = self.tokens[self.pos]
        if tok.kind != "eof":
            self.pos += 1
        return tok

    def fail(self, message: str, tok: ExprToken | None = None):
        tok = tok or self.current
        raise TemplateSyntaxError(message, tok.lineno, self.name)

    def at(self, kind: str, value=None) -> bool:
        tok = self.current
        return tok.kind == kind and (value is None or tok.value == value)

    def skip(self, kind: str, value=None) -> bool:
        if self.at(kind, value):
            self.next()
            return True
        return False

    def expect(self, kind: str, value=None) -> ExprToken:
        if not self.at(kind, value):
            wanted = value if value is not None else kind
            self.fail(f"expected {wanted!r}, got {self.describe(self.current)}")
        return self.next()

    @staticmethod
    def describe(tok: ExprToken) -> str:
        if tok.kind == "eof":
            return "end of expression"
        return repr(tok.value)

    def expect_end(self) -> None:
        if not self.at("eof"):
            self.fail(f"unexpected {self.describe(self.current)}")

    # -- grammar -----------------------------------------------------------

    def parse_expression(self) -> Node:
        expr = self.parse_binary(0)
        if self.skip("name", "if"):
            test = self.parse_binary(0)
            otherwise = self.parse_expression() if self.skip("name", "else") else Const(None)
            expr = CondExpr(test, expr, otherwise, lineno=expr.lineno)
        return expr

    def _binary_op(self) -> str | None:
        tok = self.current
        if tok.kind == "op" and tok.value in BINARY_PRECEDENCE:
            return tok.value
        if tok.kind == "name":
            if tok.value in ("and", "or", "in"):
                return tok.value
            if tok.value == "not" and self.tokens[self.pos + 1][:2] == ("name", "in"):
                return "not in"
        return None

    def parse_binary(self, min_prec: int) -> Node:
        if self.at("name", "not"):
            tok = self.next()
            operand = self.parse_binary(_NOT_PRECEDENCE)
            left: Node = UnaryOp("not", operand, lineno=tok.lineno)
        else:
            left = self.parse_unary()
        while True:
            op = self._binary_op()
            if op is None or BINARY_PRECEDENCE[op] <= min_prec:
                return left
            tok = self.next()
            if op == "not in":
                self.next()
            right = self.parse_binary(BINARY_PRECEDENCE[op])
            left = BinOp(op, left, right, lineno=tok.lineno)

    def parse_unary(self) -> Node:
        if self.at("op", "-") or self.at("op", "+"):
            tok = self.next()
            return UnaryOp(tok.value, self.parse_unary(), lineno=tok.lineno)
        return self.parse_filters(self.parse_postfix(self.parse_primary()))

    def parse_primary(self) -> Node:
        tok = self.next()
        if tok.kind == "const":
            return Const(tok.value, lineno=tok.lineno)
        if tok.kind == "name":
            literals = {"true": True, "false": False, "none": None,
                        "True": True, "False": False, "None": None}
            if tok.value in literals:
                return Const(literals[tok.value], lineno=tok.lineno)
            return Name(tok.value, lineno=tok.lineno)
        if tok.kind == "op" and tok.value == "(":
            expr = self.parse_expression()
            self.expect("op", ")")
            return expr
        if tok.kind == "op" and tok.value == "[":
            items = self.parse_sequence("]")
            return ListLiteral(items, lineno=tok.lineno)
        self.fail(f"unexpected {self.describe(tok)}", tok)

    def parse_sequence(self, closer: str) -> list[Node]:
        items = []
        while not self.skip("op", closer):
            if items:
                self.expect("op", ",")
                if self.skip("op", closer):
                    break
            items.append(self.parse_expression())
        return items

    def parse_arguments(self) -> tuple[list[Node], dict[str, Node]]:
        """Parse call arguments after ``(`` up to and including ``)``."""
        args: list[Node] = []
        kwargs: dict[str, Node] = {}
        while not self.skip("op", ")"):
            if args or kwargs:
                self.expect("op", ",")
                if self.skip("op", ")"):
                    break
            if self.at("name") and self.tokens[self.pos + 1][:2] == ("op", "="):
                key = self.next().value
                self.next()
                kwargs[key] = self.parse_expression()
            elif kwargs:
                self.fail("positional argument follows keyword argument")
            else:
                args.append(self.parse_expression())
        return args, kwargs

    def parse_postfix(self, node: Node) -> Node:
        while True:
            if self.skip("op", "."):
                tok = self.next()
                if tok.kind == "name" or (tok.kind == "const" and isinstance(tok.value, int)):
                    node = Getattr(node, tok.value, lineno=tok.lineno)
                else:
                    self.fail("expected attribute name after '.'", tok)
            elif self.at("op", "["):
                tok = self.next()
                key = self.parse_expression()
                self.expect("op", "]")
                node = Getitem(node, key, lineno=tok.lineno)
            elif self.at("op", "("):
                tok = self.next()
                args, kwargs = self.parse_arguments()
                node = Call(node, args, kwargs, lineno=tok.lineno)
            else:
                return node

    def parse_filters(self, node: Node) -> Node:
        while self.skip("op", "|"):
            tok = self.expect("name")
            args, kwargs = self.parse_arguments() if self.skip("op", "(") else ([], {})
            node = Filter(node, tok.value, args, kwargs, lineno=tok.lineno)
        return node


class Parser:
    """Build a :class:`TemplateNode` from template source."""

    def __init__(self, source: str, name: str | None = None, trim_blocks: bool = False) -> None:
        self.name = name
        self.tokens: list[Token] = tokenize(source, name, trim_blocks)
        self.pos = 0

    def parse(self) -> TemplateNode:
        body, end = self.parse_body(())
        return TemplateNode(body, lineno=1)

    # -- helpers -----------------------------------------------------------

    def _expr_parser(self, source: str, lineno: int) -> ExpressionParser:
        return ExpressionParser(tokenize_expression(source, lineno, self.name), self.name)

    def parse_expr_source(self, source: str, lineno: int) -> Node:
        if not source.strip():
            raise TemplateSyntaxError("empty expression", lineno, self.name)
        parser = self._expr_parser(source, lineno)
        expr = parser.parse_expression()
        parser.expect_end()
        return expr

    @staticmethod
    def _split_tag(value: str) -> tuple[str, str]:
        parts = value.split(None, 1)
        if not parts:
            return "", ""
        return parts[0], parts[1] if len(parts) > 1 else ""

    # -- structure ---------------------------------------------------------

    def parse_body(self, end_tags: tuple[str, ...], opener: Token | None = None):
        """Parse nodes until one of *end_tags*; return ``(nodes, end_token)``."""
        body: list[Node] = []
        while self.pos < len(self.tokens):
            tok = self.tokens[self.pos]
            self.pos += 1
            if tok.kind == TEXT:
                body.append(Text(tok.value, lineno=tok.lineno))
            elif tok.kind == VAR:
                body.append(Output(self.parse_expr_source(tok.value, tok.lineno),
                                   lineno=tok.lineno))
            else:
                tag, rest = self._split_tag(tok.value)
                if tag in end_tags:
                    return body, tok
                handler = getattr(self, f"parse_{tag}", None) if tag.isidentifier() else None
                if handler is None:
                    if tag.startswith("end") or tag in ("elif", "else"):
                        raise TemplateSyntaxError(f"unexpected '{tag}' tag", tok.lineno, self.name)
                    raise TemplateSyntaxError(f"unknown tag {tag!r}", tok.lineno, self.name)
                body.append(handler(tok, rest))
        if end_tags:
            tag = self._split_tag(opener.value)[0]
            raise TemplateSyntaxError(
                f"unclosed '{tag}' block (expected '{end_tags[-1]}')", opener.lineno, self.name)
        return body, None

    def parse_if(self, tok: Token, rest: str) -> If:
        branches = [(self.parse_expr_source(rest, tok.lineno), None)]
        else_body: list[Node] = []
        while True:
            body, end = self.parse_body(("elif", "else", "endif"), tok)
            branches[-1] = (branches[-1][0], body)
            tag, rest_end = self._split_tag(end.value)
            if tag == "elif":
                branches.append((self.parse_expr_source(rest_end, end.lineno), None))
            elif tag == "else":
                else_body, end = self.parse_body(("endif",), tok)
                break
            else:
                break
        return If(branches, else_body, lineno=tok.lineno)

    def parse_for(self, tok: Token, rest: str) -> For:
        parser = self._expr_parser(rest, tok.lineno)
        targets = [parser.expect("name").value]
        while parser.skip("op", ","):
            targets.append(parser.expect("name").value)
        parser.expect("name", "in")
        iterable = parser.parse_expression()
        parser.expect_end()
        body, end = self.parse_body(("else", "endfor"), tok)
        else_body: list[Node] = []
        if self._split_tag(end.value)[0] == "else":
            else_body, end = self.parse_body(("endfor",), tok)
        return For(targets, iterable, body, else_body, lineno=tok.lineno)

    def parse_set(self, tok: Token, rest: str) -> Set:
        parser = self._expr_parser(rest, tok.lineno)
        name = parser.expect("name").value
        parser.expect("op", "=")
        expr = parser.parse_expression()
        parser.expect_end()
        return Set(name, expr, lineno=tok.lineno)

    def parse_include(self, tok: Token, rest: str) -> Include:
        return Include(self.parse_expr_source(rest, tok.lineno), lineno=tok.lineno)


def parse(source: str, name: str | None = None, trim_blocks: bool = False) -> TemplateNode:
    """Parse template *source* into an AST."""
    return Parser(source, name, trim_blocks).parse()
