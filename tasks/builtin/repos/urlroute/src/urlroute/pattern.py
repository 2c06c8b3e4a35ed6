"""Parsing and compiling route patterns such as ``/users/<int:id>/posts``."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union
from urllib.parse import unquote

from .converters import DEFAULT_CONVERTERS, BaseConverter
from .errors import BuildError, RuleError, ValidationError

__all__ = ["Pattern", "parse_rule", "parse_converter_args"]

_VARIABLE_RE = re.compile(
    r"""
    <
    (?:
        (?P<converter>[a-zA-Z_][a-zA-Z0-9_]*)   # converter name
        (?:\((?P<args>[^)]*)\))?                # optional arguments
        :
    )?
    (?P<name>[a-zA-Z_][a-zA-Z0-9_]*)            # variable name
    >
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Static:
    """Literal text in a pattern."""

    text: str


@dataclass(frozen=True)
class Variable:
    """A ``<converter:name>`` placeholder."""

    name: str
    converter: BaseConverter


Part = Union[Static, Variable]


def parse_converter_args(text: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Parse converter arguments written like a Python call: ``min=1, max=9``.

    Bare words are accepted as strings, so ``any(png, jpg)`` works.
    """
    if not text.strip():
        return (), {}
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except SyntaxError as exc:
        raise RuleError(f"invalid converter arguments: {text!r}") from exc
    assert isinstance(call, ast.Call)

    def value_of(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            return node.id
        try:
            return ast.literal_eval(node)
        except ValueError as exc:
            raise RuleError(f"invalid converter argument in {text!r}") from exc

    args = tuple(value_of(arg) for arg in call.args)
    kwargs = {kw.arg: value_of(kw.value) for kw in call.keywords if kw.arg}
    return args, kwargs


def parse_rule(
    rule: str, converters: Optional[Mapping[str, type[BaseConverter]]] = None
) -> list[Part]:
    """Split *rule* into static parts and variables."""
    if not rule.startswith("/"):
        raise RuleError(f"rule must start with '/': {rule!r}")
    converters = converters or DEFAULT_CONVERTERS
    parts: list[Part] = []
    names: set[str] = set()
    position = 0
    for found in _VARIABLE_RE.finditer(rule):
        if found.start() > position:
            parts.append(Static(rule[position : found.start()]))
        name = found.group("name")
        if name in names:
            raise RuleError(f"variable {name!r} used twice in {rule!r}")
        names.add(name)
        conv_name = found.group("converter") or "default"
        try:
            conv_class = converters[conv_name]
        except KeyError:
            raise RuleError(f"unknown converter {conv_name!r} in {rule!r}") from None
        args, kwargs = parse_converter_args(found.group("args") or "")
        try:
            converter = conv_class(*args, **kwargs)
        except TypeError as exc:
            raise RuleError(f"bad arguments for converter {conv_name!r}: {exc}") from exc
        parts.append(Variable(name, converter))
        position = found.end()
    if position < len(rule):
        parts.append(Static(rule[position:]))
    for part in parts:
        if isinstance(part, Static) and ("<" in part.text or ">" in part.text):
            raise RuleError(f"malformed variable in {rule!r}")
    return parts


class Pattern:
    """A compiled route pattern."""

    def __init__(
        self, rule: str, converters: Optional[Mapping[str, type[BaseConverter]]] = None
    ) -> None:
        self.rule = rule
        self.parts = parse_rule(rule, converters)
        regex = "".join(
            re.escape(part.text)
            if isinstance(part, Static)
            else f"(?P<{part.name}>{part.converter.regex})"
            for part in self.parts
        )
        self.regex = re.compile(regex)
        self.variables = tuple(p.name for p in self.parts if isinstance(p, Variable))
        self.is_static = not self.variables

    @property
    def priority(self) -> tuple[tuple[int, ...], ...]:
        """Sort key: static segments first, then lighter converters.

        Each ``/``-separated segment contributes ``(0,)`` when it is fully
        static and ``(1, weight)`` otherwise (using the heaviest converter in
        the segment).
        """
        key: list[tuple[int, ...]] = []
        segment_weight: Optional[int] = None
        for part in self.parts:
            if isinstance(part, Variable):
                weight = part.converter.weight
                segment_weight = weight if segment_weight is None else max(segment_weight, weight)
                continue
            pieces = part.text.split("/")
            for piece_index in range(len(pieces) - 1):
                key.append((0,) if segment_weight is None else (1, segment_weight))
                segment_weight = None
        key.append((0,) if segment_weight is None else (1, segment_weight))
        return tuple(key)

    def match(self, path: str) -> Optional[dict[str, Any]]:
        """Return converted variables when *path* (percent-encoded) matches, else ``None``."""
        found = self.regex.fullmatch(path)
        if found is None:
            return None
        values: dict[str, Any] = {}
        for part in self.parts:
            if isinstance(part, Variable):
                raw = unquote(found.group(part.name))
                try:
                    values[part.name] = part.converter.to_python(raw)
                except (ValidationError, ValueError):
                    return None
        return values

    def build(self, values: Mapping[str, Any]) -> str:
        """Build the path for *values*; raise :class:`BuildError` if impossible."""
        missing = [name for name in self.variables if name not in values]
        if missing:
            raise BuildError(f"missing values for {self.rule!r}: {', '.join(missing)}")
        pieces: list[str] = []
        for part in self.parts:
            if isinstance(part, Static):
                pieces.append(part.text)
                continue
            value = values[part.name]
            try:
                text = part.converter.to_url(value)
            except (ValidationError, ValueError, TypeError) as exc:
                raise BuildError(f"cannot use {value!r} for {part.name!r}: {exc}") from exc
            if not re.fullmatch(part.converter.regex, text):
                raise BuildError(f"{value!r} does not fit {part.name!r} in {self.rule!r}")
            try:
                part.converter.to_python(unquote(text))
            except (ValidationError, ValueError) as exc:
                raise BuildError(f"cannot use {value!r} for {part.name!r}: {exc}") from exc
            pieces.append(text)
        return "".join(pieces)

    def __repr__(self) -> str:
        return f"<Pattern {self.rule!r}>"
