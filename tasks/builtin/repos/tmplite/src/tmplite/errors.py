"""Exception classes raised by tmplite."""

from __future__ import annotations


class TemplateError(Exception):
    """Base class for all template errors."""


class TemplateSyntaxError(TemplateError):
    """Raised when a template cannot be tokenized or parsed.

    :ivar message: the bare error message.
    :ivar lineno: 1-based line number in the template source.
    :ivar name: the template name, if known.
    """

    def __init__(self, message: str, lineno: int, name: str | None = None) -> None:
        self.message = message
        self.lineno = lineno
        self.name = name
        where = f"{name}, line {lineno}" if name else f"line {lineno}"
        super().__init__(f"{message} ({where})")


class TemplateNotFound(TemplateError):
    """Raised by loaders when a template does not exist."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"template not found: {name!r}")


class UndefinedError(TemplateError):
    """Raised when a strict undefined value is used."""
