"""Typed converters for route variables.

A converter describes the text a variable accepts (:attr:`regex`), turns the
captured text into a Python value (:meth:`to_python`) and turns a value back
into URL text (:meth:`to_url`).  :meth:`to_url` returns text that is already
percent-encoded and safe to insert into a path.

:attr:`weight` orders dynamic segments when routes are prioritised: a lower
weight means a more specific converter, tried first.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Optional
from urllib.parse import quote

from .errors import RuleError, ValidationError

__all__ = [
    "BaseConverter",
    "StringConverter",
    "IntConverter",
    "FloatConverter",
    "SlugConverter",
    "PathConverter",
    "UUIDConverter",
    "AnyConverter",
    "DEFAULT_CONVERTERS",
]


class BaseConverter:
    """Base class for converters; accepts one non-empty path segment."""

    regex: str = "[^/]+"
    weight: int = 100

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise RuleError(f"{type(self).__name__} takes no arguments")

    def to_python(self, value: str) -> Any:
        """Convert captured (already percent-decoded) text to a Python value."""
        return value

    def to_url(self, value: Any) -> str:
        """Convert *value* to percent-encoded URL text."""
        return quote(str(value), safe="")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.regex!r}>"


class StringConverter(BaseConverter):
    """A single path segment, optionally with length limits.

    ``<name>``, ``<string:name>``, ``<string(minlength=2,maxlength=8):name>``.
    """

    def __init__(self, minlength: int = 1, maxlength: Optional[int] = None) -> None:
        if minlength < 1 or (maxlength is not None and maxlength < minlength):
            raise RuleError("invalid length limits for string converter")
        self.minlength = minlength
        self.maxlength = maxlength

    def to_python(self, value: str) -> str:
        if len(value) < self.minlength:
            raise ValidationError(f"{value!r} is shorter than {self.minlength}")
        if self.maxlength is not None and len(value) > self.maxlength:
            raise ValidationError(f"{value!r} is longer than {self.maxlength}")
        return value


class _NumberConverter(BaseConverter):
    weight = 50
    num_type: type = int

    def __init__(
        self,
        min: Optional[float] = None,
        max: Optional[float] = None,
        signed: bool = False,
    ) -> None:
        if min is not None and max is not None and min > max:
            raise RuleError("min must not be greater than max")
        self.min = min
        self.max = max
        self.signed = signed
        if signed:
            self.regex = "-?" + self.regex

    def to_python(self, value: str) -> Any:
        number = self.num_type(value)
        if self.min is not None and number < self.min:
            raise ValidationError(f"{number} is below the minimum {self.min}")
        if self.max is not None and number > self.max:
            raise ValidationError(f"{number} is above the maximum {self.max}")
        return number

    def to_url(self, value: Any) -> str:
        number = self.num_type(value)
        if number < 0 and not self.signed:
            raise ValidationError(f"{number} is negative but the converter is unsigned")
        return str(number)


class IntConverter(_NumberConverter):
    """Non-negative integers (``signed=True`` allows a leading minus).

    ``<int:id>``, ``<int(min=1,max=100):page>``; both bounds are inclusive.
    """

    regex = r"\d+"
    num_type = int


class FloatConverter(_NumberConverter):
    """Decimal numbers written with a dot, e.g. ``<float:ratio>`` matches ``0.5``."""

    regex = r"\d+\.\d+"
    num_type = float


class SlugConverter(BaseConverter):
    """ASCII letters, digits, hyphens and underscores (``<slug:title>``)."""

    regex = r"[-a-zA-Z0-9_]+"
    weight = 80


class PathConverter(BaseConverter):
    """The rest of the path, slashes included (``<path:rest>``).

    Slashes in the value are kept as path separators when building URLs.
    """

    regex = r"[^/].*?"
    weight = 200

    def to_url(self, value: Any) -> str:
        return quote(str(value), safe="/")


class UUIDConverter(BaseConverter):
    """A UUID in its canonical 8-4-4-4-12 hex form; converted to :class:`uuid.UUID`."""

    regex = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    weight = 40

    def to_python(self, value: str) -> uuid.UUID:
        return uuid.UUID(value)

    def to_url(self, value: Any) -> str:
        return str(uuid.UUID(str(value)))


class AnyConverter(BaseConverter):
    """One of a fixed set of words: ``<any(png,jpg,gif):ext>``."""

    weight = 30

    def __init__(self, *items: str) -> None:
        if not items:
            raise RuleError("any() needs at least one choice")
        self.items = tuple(str(item) for item in items)
        self.regex = "(?:" + "|".join(re.escape(item) for item in self.items) + ")"

    def to_url(self, value: Any) -> str:
        if str(value) not in self.items:
            raise ValidationError(f"{value!r} is not one of {self.items}")
        return quote(str(value), safe="")


DEFAULT_CONVERTERS: dict[str, type[BaseConverter]] = {
    "default": StringConverter,
    "string": StringConverter,
    "int": IntConverter,
    "float": FloatConverter,
    "slug": SlugConverter,
    "path": PathConverter,
    "uuid": UUIDConverter,
    "any": AnyConverter,
}
