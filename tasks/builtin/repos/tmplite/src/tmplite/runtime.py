"""Runtime: contexts, undefined values, loop helpers and the renderer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import TemplateError, UndefinedError
from .markup import Markup, escape
from .parser import (BinOp, Call, CondExpr, Const, Filter, For, Getattr, Getitem, If,
                     Include, ListLiteral, Name, Node, Output, Set, Text, UnaryOp)

if TYPE_CHECKING:  # pragma: no cover
    from .environment import Environment


class Undefined:
    """Value of a missing variable or attribute: renders as an empty string."""

    __slots__ = ("_hint",)

    def __init__(self, hint: str = "") -> None:
        self._hint = hint

    def __str__(self) -> str:
        return ""

    def __repr__(self) -> str:
        return f"Undefined({self._hint!r})"

    def __bool__(self) -> bool:
        return False

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __eq__(self, other) -> bool:
        return isinstance(other, Undefined)

    def __hash__(self) -> int:
        return 0

    def __getattr__(self, name: str) -> "Undefined":
        if name.startswith("__"):
            raise AttributeError(name)
        return type(self)(f"{self._hint}.{name}")


class StrictUndefined(Undefined):
    """Undefined that raises :class:`UndefinedError` when it is used."""

    __slots__ = ()

    def _fail(self, *args, **kwargs):
        raise UndefinedError(f"{self._hint!r} is undefined")

    __str__ = __bool__ = __iter__ = __len__ = _fail  # type: ignore[assignment]


class LoopContext:
    """The ``loop`` variable available inside ``{% for %}`` blocks."""

    def __init__(self, length: int, parent: "LoopContext | None" = None) -> None:
        self.length = length
        self.index0 = -1
        self.parent = parent

    def _advance(self) -> None:
        self.index0 += 1

    @property
    def index(self) -> int:
        return self.index0 + 1

    @property
    def revindex0(self) -> int:
        return self.length - self.index0 - 1

    @property
    def revindex(self) -> int:
        return self.length - self.index0

    @property
    def first(self) -> bool:
        return self.index0 == 0

    @property
    def last(self) -> bool:
        return self.index0 == self.length - 1

    def cycle(self, *values):
        """Return ``values[index0 % len(values)]``."""
        if not values:
            raise TemplateError("loop.cycle() needs at least one value")
        return values[self.index0 % len(values)]


class Context:
    """A stack of variable scopes."""

    def __init__(self, variables: Mapping[str, Any] | None = None) -> None:
        self.scopes: list[dict[str, Any]] = [dict(variables or {})]

    def push(self, scope: dict[str, Any] | None = None) -> None:
        self.scopes.append(dict(scope or {}))

    def pop(self) -> None:
        self.scopes.pop()

    def lookup(self, name: str, default: Any) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return default

    def set(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value


_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
}


class Renderer:
    """Evaluate a template AST against a :class:`Context`."""

    def __init__(self, env: "Environment", name: str | None = None) -> None:
        self.env = env
        self.name = name

    def undefined(self, hint: str) -> Undefined:
        return self.env.undefined(hint)

    def fail(self, message: str, node: Node):
        where = f"{self.name}, line {node.lineno}" if self.name else f"line {node.lineno}"
        raise TemplateError(f"{message} ({where})")

    # -- statements --------------------------------------------------------

    def render(self, nodes: list[Node], ctx: Context, out: list[str]) -> None:
        for node in nodes:
            if isinstance(node, Text):
                out.append(node.text)
            elif isinstance(node, Output):
                out.append(self.to_string(self.eval(node.expr, ctx)))
            elif isinstance(node, If):
                self.render_if(node, ctx, out)
            elif isinstance(node, For):
                self.render_for(node, ctx, out)
            elif isinstance(node, Set):
                ctx.set(node.name, self.eval(node.expr, ctx))
            elif isinstance(node, Include):
                self.render_include(node, ctx, out)
            else:  # pragma: no cover - parser never produces other nodes
                self.fail(f"cannot render {type(node).__name__}", node)

    def to_string(self, value: Any) -> str:
        if value is None:
            return ""
        if self.env.autoescape:
            return str(escape(value))
        return str(value)

    def render_if(self, node: If, ctx: Context, out: list[str]) -> None:
        for test, body in node.branches:
            if self.eval(test, ctx):
                self.render(body, ctx, out)
                return
        self.render(node.else_body, ctx, out)

    def render_for(self, node: For, ctx: Context, out: list[str]) -> None:
        iterable = self.eval(node.iterable, ctx)
        if isinstance(iterable, Mapping):
            iterable = iterable.keys()
        try:
            items = list(iterable)
        except TypeError:
            self.fail(f"{type(iterable).__name__!r} object is not iterable", node)
        if not items:
            self.render(node.else_body, ctx, out)
            return
        loop = LoopContext(len(items), ctx.lookup("loop", None))
        ctx.push({"loop": loop})
        try:
            for item in items:
                loop._advance()
                if len(node.targets) == 1:
                    ctx.set(node.targets[0], item)
                else:
                    values = list(item)
                    if len(values) != len(node.targets):
                        self.fail(f"cannot unpack {len(values)} values into "
                                  f"{len(node.targets)} loop variables", node)
                    for target, value in zip(node.targets, values):
                        ctx.set(target, value)
                self.render(node.body, ctx, out)
        finally:
            ctx.pop()

    def render_include(self, node: Include, ctx: Context, out: list[str]) -> None:
        name = self.eval(node.template, ctx)
        template = self.env.get_template(str(name))
        ctx.push()
        try:
            Renderer(self.env, template.name).render(template.root.body, ctx, out)
        finally:
            ctx.pop()

    # -- expressions -------------------------------------------------------

    def eval(self, node: Node, ctx: Context) -> Any:
        method = getattr(self, f"eval_{type(node).__name__}")
        return method(node, ctx)

    def eval_Const(self, node: Const, ctx: Context) -> Any:
        return node.value

    def eval_Name(self, node: Name, ctx: Context) -> Any:
        value = ctx.lookup(node.name, _MISSING)
        if value is _MISSING:
            return self.undefined(node.name)
        return value

    def eval_ListLiteral(self, node: ListLiteral, ctx: Context) -> Any:
        return [self.eval(item, ctx) for item in node.items]

    def eval_Getattr(self, node: Getattr, ctx: Context) -> Any:
        return self.getattr(self.eval(node.obj, ctx), node.attr)

    def eval_Getitem(self, node: Getitem, ctx: Context) -> Any:
        obj = self.eval(node.obj, ctx)
        key = self.eval(node.key, ctx)
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError):
            if isinstance(key, str):
                return self.getattr(obj, key)
            return self.undefined(f"{obj!r}[{key!r}]")

    def getattr(self, obj: Any, attr: Any) -> Any:
        """Look up ``obj.attr``: mapping keys and indices first, then attributes."""
        if isinstance(obj, Undefined):
            return self.undefined(f"{obj._hint}.{attr}")
        if isinstance(attr, int):
            try:
                return obj[attr]
            except (IndexError, KeyError, TypeError):
                return self.undefined(f"[{attr}]")
        if isinstance(obj, Mapping) and attr in obj:
            return obj[attr]
        if attr.startswith("_"):
            return self.undefined(attr)
        try:
            return getattr(obj, attr)
        except AttributeError:
            return self.undefined(attr)

    def eval_Call(self, node: Call, ctx: Context) -> Any:
        func = self.eval(node.func, ctx)
        if not callable(func):
            self.fail(f"{func!r} is not callable", node)
        args = [self.eval(a, ctx) for a in node.args]
        kwargs = {k: self.eval(v, ctx) for k, v in node.kwargs.items()}
        return func(*args, **kwargs)

    def eval_Filter(self, node: Filter, ctx: Context) -> Any:
        func = self.env.filters.get(node.name)
        if func is None:
            self.fail(f"unknown filter {node.name!r}", node)
        value = self.eval(node.value, ctx)
        args = [self.eval(a, ctx) for a in node.args]
        kwargs = {k: self.eval(v, ctx) for k, v in node.kwargs.items()}
        if getattr(func, "needs_env", False):
            return func(self.env, value, *args, **kwargs)
        return func(value, *args, **kwargs)

    def eval_UnaryOp(self, node: UnaryOp, ctx: Context) -> Any:
        value = self.eval(node.operand, ctx)
        if node.op == "not":
            return not value
        return -value if node.op == "-" else +value

    def eval_BinOp(self, node: BinOp, ctx: Context) -> Any:
        if node.op == "and":
            left = self.eval(node.left, ctx)
            return self.eval(node.right, ctx) if left else left
        if node.op == "or":
            left = self.eval(node.left, ctx)
            return left if left else self.eval(node.right, ctx)
        left = self.eval(node.left, ctx)
        right = self.eval(node.right, ctx)
        if node.op == "~":
            return self.concat(left, right)
        try:
            return _BINARY[node.op](left, right)
        except (TypeError, ZeroDivisionError) as exc:
            self.fail(f"cannot evaluate {node.op!r}: {exc}", node)

    def concat(self, left: Any, right: Any) -> str:
        parts = ["" if v is None else v for v in (left, right)]
        if any(isinstance(p, Markup) for p in parts):
            return Markup("").join(parts)
        return "".join(str(p) for p in parts)

    def eval_CondExpr(self, node: CondExpr, ctx: Context) -> Any:
        if self.eval(node.test, ctx):
            return self.eval(node.then, ctx)
        return self.eval(node.otherwise, ctx)


_MISSING = object()
