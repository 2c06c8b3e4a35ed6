"""Procedural bugs: small edits to a module's source, found through its AST.

Each :class:`Mutation` is a list of byte-range edits against the original source, so a bug
changes only the characters it has to (formatting, comments and the rest of the file stay as
they were) and the gold patch — the reverse edit — is as small as a human fix would be.
Only code inside functions is mutated: a bug that fires at import breaks every test at once and
says nothing about where it is.

>>> src = "def f(a, b):\\n    return a < b\\n"
>>> sorted({m.kind for m in find_mutations(src, "m.py")})
['flip_comparison', 'off_by_one', 'remove_return', 'swap_operands']
"""

from __future__ import annotations

import ast
import hashlib
import random
from dataclasses import dataclass
from typing import Callable

#: Every kind this module produces, in the order candidates are drawn round-robin.
KINDS = ("flip_comparison", "off_by_one", "swap_operands", "change_operator", "change_constant",
         "invert_condition", "drop_statement", "drop_branch", "remove_return", "remove_raise",
         "break_boolean")

_NEGATE = {ast.Eq: "!=", ast.NotEq: "==", ast.Lt: ">=", ast.GtE: "<", ast.Gt: "<=", ast.LtE: ">",
           ast.Is: "is not", ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in"}
_BOUNDARY = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">"}
_OPERATOR = {ast.Add: "-", ast.Sub: "+", ast.Mult: "/", ast.Div: "*", ast.FloorDiv: "/", ast.Mod: "//",
             ast.Pow: "*", ast.BitAnd: "|", ast.BitOr: "&", ast.LShift: ">>", ast.RShift: "<<"}
_OP_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>"}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


@dataclass(frozen=True)
class Edit:
    """Replace bytes ``[start, end)`` of the original source with ``text``."""

    start: int
    end: int
    text: bytes


@dataclass(frozen=True)
class Mutation:
    """One injected bug (or two, combined) in one module."""

    kind: str
    path: str
    """The module, relative to the repository root."""
    line: int
    """Where the (first) edit is; bookkeeping only, never shown to an agent."""
    edits: tuple[Edit, ...]
    function: str = ""
    """The enclosing function's qualified name (for summaries; not shown to an agent)."""

    def apply(self, source: str) -> str:
        data = source.encode()
        for edit in sorted(self.edits, key=lambda e: e.start, reverse=True):
            data = data[:edit.start] + edit.text + data[edit.end:]
        return data.decode()

    def overlaps(self, other: "Mutation") -> bool:
        return any(a.start < b.end and b.start < a.end for a in self.edits for b in other.edits)

    @property
    def digest(self) -> str:
        h = hashlib.sha256(self.path.encode())
        for e in sorted(self.edits, key=lambda e: e.start):
            h.update(f"{e.start}:{e.end}:".encode() + e.text + b"\0")
        return h.hexdigest()[:10]


def combine(first: Mutation, second: Mutation) -> Mutation | None:
    """Both bugs in one module, or None when they are in different files or touch the same code."""
    if first.path != second.path or first.overlaps(second):
        return None
    return Mutation(f"{first.kind}+{second.kind}", first.path, min(first.line, second.line),
                    first.edits + second.edits, first.function)


class _Source:
    """Byte offsets for AST positions (``col_offset`` counts UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.data = text.encode()
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.line_starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> bytes:
        a, b = self.span(node)
        return self.data[a:b]

    def line_text(self, line: int) -> bytes:
        end = self.line_starts[line] if line < len(self.line_starts) else len(self.data)
        return self.data[self.line_starts[line - 1]:end]

    def lines_span(self, first: int, last: int) -> tuple[int, int]:
        end = self.line_starts[last] if last < len(self.line_starts) else len(self.data)
        return self.line_starts[first - 1], end


def find_mutations(source: str, path: str, *, check: bool = True) -> list[Mutation]:
    """Every mutation site in the module's functions; [] when the source does not parse.

    ``check=False`` leaves out the check that each one still parses and changes the module's AST
    (:class:`Meaning`), for a caller that checks only the ones it draws: a module of mpmath's
    size holds thousands of sites.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    finder = _Finder(_Source(source), path)
    finder.visit(tree)
    out, seen = [], set()
    for m in finder.found:
        if m.digest not in seen:
            seen.add(m.digest)
            out.append(m)
    if check:
        meaning = Meaning(source)
        out = [m for m in out if meaning.differs(m)]
    return out


class Meaning:
    """Whether a mutation of one module changes what it means: the mutated module still parses and
    its AST differs from the original's (not just formatting). The original is parsed once: doing
    it again for every site kept the host busy for over ten minutes on mpmath 1.3.0."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._dump: str | None = None

    def differs(self, m: Mutation) -> bool:
        mutated = m.apply(self.source)
        if mutated == self.source:
            return False
        try:
            if self._dump is None:
                self._dump = ast.dump(ast.parse(self.source))
            return ast.dump(ast.parse(mutated)) != self._dump
        except (SyntaxError, ValueError):
            return False


def sample(mutations: list[Mutation], limit: int, rng: random.Random,
           keep: Callable[[Mutation], bool] | None = None) -> list[Mutation]:
    """Up to ``limit`` mutations, drawn round-robin over kinds so that no kind crowds out the rest;
    a drawn one that ``keep`` refuses is passed over (and another drawn in its place)."""
    by_kind: dict[str, list[Mutation]] = {}
    for m in mutations:
        by_kind.setdefault(m.kind, []).append(m)
    for items in by_kind.values():
        rng.shuffle(items)
    order = [k for k in KINDS if k in by_kind] + sorted(k for k in by_kind if k not in KINDS)
    out: list[Mutation] = []
    while len(out) < limit and any(by_kind.values()):
        for kind in order:
            if by_kind[kind] and len(out) < limit:
                m = by_kind[kind].pop()
                if keep is None or keep(m):
                    out.append(m)
    return out


class _Finder(ast.NodeVisitor):
    def __init__(self, src: _Source, path: str) -> None:
        self.src, self.path = src, path
        self.found: list[Mutation] = []
        self.scope: list[str] = []
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self._bounds_seen: set[int] = set()
        """Integer constants already mutated as bounds (off_by_one), not again as constants."""

    def _add(self, kind: str, node: ast.AST, *edits: Edit) -> None:
        self.found.append(Mutation(kind, self.path, node.lineno, tuple(edits),  # type: ignore[attr-defined]
                                   ".".join(self.scope)))

    def _replace(self, node: ast.AST, text: bytes) -> Edit:
        a, b = self.src.span(node)
        return Edit(a, b, text)

    def _between(self, left: ast.AST, right: ast.AST, token: bytes) -> Edit | None:
        """An edit replacing the operator token between two operands (keeps the spacing)."""
        a = self.src.offset(left.end_lineno, left.end_col_offset)  # type: ignore[attr-defined]
        b = self.src.offset(right.lineno, right.col_offset)  # type: ignore[attr-defined]
        gap = self.src.data[a:b]
        stripped = gap.strip(b" \t\r\n\\()")
        if not stripped or b"#" in gap:
            return None
        i = gap.index(stripped)
        return Edit(a + i, a + i + len(stripped), token)

    # -- scopes: only function bodies are mutated ----------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.visit(stmt)
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.functions.append(node)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
        self._statements(body)
        self.functions.pop()
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module) -> None:
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.visit(stmt)

    def _statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.visit(stmt)
                continue
            self._statement(stmt, body)
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self._statements(inner)
            for handler in getattr(stmt, "handlers", []) or []:
                self._statements(handler.body)
            for case in getattr(stmt, "cases", []) or []:
                self._statements(case.body)
            for child in _expressions_of(stmt):
                self._expressions(child)

    # -- statement-level kinds -----------------------------------------------------------------
    def _statement(self, stmt: ast.stmt, block: list[ast.stmt]) -> None:
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            self._add("remove_return", stmt, self._drop(stmt, block, replacement=b"pass"))
        elif isinstance(stmt, ast.Raise):
            self._add("remove_raise", stmt, self._drop(stmt, block, replacement=b"pass"))
        elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)) and len(block) > 1:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                return  # a bare string or constant: dropping it changes nothing
            if isinstance(stmt, ast.Assign) and not self._rebinds(stmt):
                # Dropping a first assignment leaves a NameError (or AttributeError) that names the
                # missing variable: the failure points at its own cause.
                return
            self._add("drop_statement", stmt, self._drop(stmt, block, replacement=b"pass"))
        if isinstance(stmt, (ast.If, ast.While)):
            test = stmt.test
            text = self.src.text(test)
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                self._add("invert_condition", test, self._replace(test, self.src.text(test.operand)))
            else:
                simple = isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
                self._add("invert_condition", test, self._replace(test, b"not " + text if simple else b"not (" + text + b")"))
        if isinstance(stmt, ast.If) and stmt.orelse:
            edit = self._drop_else(stmt)
            if edit is not None:
                self._add("drop_branch", stmt.orelse[0], edit)

    def _rebinds(self, stmt: ast.Assign) -> bool:
        """Every target already holds a value here (a parameter, or assigned on an earlier line of
        the function): dropping the statement leaves the old value, a wrong result and no NameError."""
        for target in stmt.targets:
            for node in ast.walk(target):
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
                    if _target_key(node) not in self._bound_before(stmt.lineno):
                        return False
        return True

    def _bound_before(self, line: int) -> set[str]:
        fn = self.functions[-1] if self.functions else None
        if fn is None:
            return set()
        bound = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        for node in ast.walk(fn):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store) \
                    and node.lineno < line:
                bound.add(_target_key(node))
        return bound

    def _drop(self, stmt: ast.stmt, block: list[ast.stmt], replacement: bytes) -> Edit:
        """Delete the statement's lines, or replace it with ``pass`` when it is alone in its block."""
        first, last = stmt.lineno, stmt.end_lineno or stmt.lineno
        a, b = self.src.span(stmt)
        line_a, line_b = self.src.lines_span(first, last)
        whole_lines = (not self.src.data[line_a:a].strip() and not self.src.data[b:line_b].strip())
        if len(block) > 1 and whole_lines:
            return Edit(line_a, line_b, b"")
        rest = self.src.data[b:line_b]
        if rest.strip().startswith(b"#"):
            # `x = set()  # type: Set[T]` -> `pass`, not `pass  # type: Set[T]`: the comment would
            # describe what was removed.
            b += len(rest.rstrip(b"\r\n"))
        return Edit(a, b, replacement)

    def _drop_else(self, stmt: ast.If) -> Edit | None:
        """Remove an ``else:`` block or an ``elif`` chain: the branch never runs."""
        first = stmt.orelse[0]
        line = first.lineno
        if isinstance(first, ast.If) and self.src.line_text(line).lstrip().startswith(b"elif"):
            start = line
        else:
            start = next((n for n in range(line - 1, stmt.body[-1].end_lineno or 0, -1)
                          if self.src.line_text(n).lstrip().startswith(b"else")), 0)
            if not start:
                return None
        a, _ = self.src.lines_span(start, start)
        _, b = self.src.lines_span(stmt.orelse[-1].end_lineno or line, stmt.orelse[-1].end_lineno or line)
        return Edit(a, b, b"")

    # -- expression-level kinds ----------------------------------------------------------------
    def _expressions(self, root: ast.AST) -> None:
        for node in ast.walk(root):
            if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.Compare) and len(node.ops) == 1:
                self._compare(node)
            elif isinstance(node, ast.BinOp):
                self._binop(node)
            elif isinstance(node, ast.BoolOp):
                self._boolop(node)
            elif isinstance(node, ast.IfExp):
                self._add("invert_condition", node.test, self._replace(node.test, b"not (" + self.src.text(node.test) + b")"))
            elif isinstance(node, ast.Constant):
                self._constant(node)
            if isinstance(node, (ast.Subscript, ast.Call)):
                self._bounds(node)

    def _compare(self, node: ast.Compare) -> None:
        op, left, right = type(node.ops[0]), node.left, node.comparators[0]
        if op in _NEGATE and (edit := self._between(left, right, _NEGATE[op].encode())):
            self._add("flip_comparison", node, edit)
        if op in _BOUNDARY and (edit := self._between(left, right, _BOUNDARY[op].encode())):
            self._add("off_by_one", node, edit)
        if op in (ast.Lt, ast.Gt, ast.LtE, ast.GtE) and not _same(left, right) and _atomic(left) and _atomic(right):
            self._add("swap_operands", node, self._replace(left, self.src.text(right)),
                      self._replace(right, self.src.text(left)))

    def _binop(self, node: ast.BinOp) -> None:
        op = type(node.op)
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) and op is ast.Mod:
            return  # "%s" % x formatting: changing the operator only makes a TypeError
        if op in _OPERATOR and (edit := self._between(node.left, node.right, _OPERATOR[op].encode())):
            self._add("change_operator", node, edit)
        if op in _NON_COMMUTATIVE and not _same(node.left, node.right) and _atomic(node.left) and _atomic(node.right):
            self._add("swap_operands", node, self._replace(node.left, self.src.text(node.right)),
                      self._replace(node.right, self.src.text(node.left)))

    def _boolop(self, node: ast.BoolOp) -> None:
        other = b"or" if isinstance(node.op, ast.And) else b"and"
        if edit := self._between(node.values[0], node.values[1], other):
            self._add("break_boolean", node, edit)
        # Drop the last operand: `a and b and c` -> `a and b`.
        before = node.values[-2]
        a = self.src.offset(before.end_lineno, before.end_col_offset)  # type: ignore[arg-type]
        _, b = self.src.span(node.values[-1])
        self._add("break_boolean", node, Edit(a, b, b""))

    def _constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool):
            self._add("change_constant", node, self._replace(node, repr(not value).encode()))
        elif isinstance(value, int) and not self._is_bound(node):
            self._add("change_constant", node, self._replace(node, str(value + 1 if value != -1 else 0).encode()))
        elif isinstance(value, float):
            self._add("change_constant", node, self._replace(node, repr(value * 2 if value else 1.0).encode()))

    def _is_bound(self, node: ast.Constant) -> bool:
        return id(node) in self._bounds_seen

    def _bounds(self, node: ast.Subscript | ast.Call) -> None:
        """Integer bounds in indexes, slices and range(): the classic off-by-one."""
        if isinstance(node, ast.Subscript):
            sl = node.slice
            targets = [sl.lower, sl.upper] if isinstance(sl, ast.Slice) else [sl] if _is_int(sl) else []
        elif isinstance(node.func, ast.Name) and node.func.id == "range":
            targets = list(node.args)
        else:
            return
        for t in targets:
            if t is None or isinstance(t, ast.Starred):
                continue
            if _is_int(t):
                self._bounds_seen.add(id(t))
                self._add("off_by_one", t, self._replace(t, str(t.value + 1).encode()))  # type: ignore[union-attr]
            elif not isinstance(t, ast.Constant):
                text = self.src.text(t)
                wrapped = b"(" + text + b")" if isinstance(t, (ast.BinOp, ast.IfExp, ast.BoolOp, ast.Compare)) else text
                self._add("off_by_one", t, self._replace(t, wrapped + b" - 1"))


def _atomic(node: ast.AST) -> bool:
    """An operand whose text can move to the other side as it is. ``(lo + hi) // 2`` swapped by
    text is ``(2) // lo + hi`` (the parentheses are not the operand's): nonsense, not a bug."""
    return isinstance(node, (ast.Name, ast.Attribute, ast.Constant, ast.Call, ast.Subscript))


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _target_key(node: ast.Name | ast.Attribute) -> str:
    return node.id if isinstance(node, ast.Name) else ast.unparse(node)


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b)


def _expressions_of(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not those of nested statements or annotations)."""
    out: list[ast.AST] = []
    for name, value in ast.iter_fields(stmt):
        if name in ("body", "orelse", "finalbody", "handlers", "cases", "annotation", "returns",
                    "type_comment", "decorator_list"):
            continue
        if isinstance(value, ast.AST) and not isinstance(value, (ast.stmt, ast.expr_context)):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, ast.AST) and not isinstance(v, ast.stmt))
    return out
