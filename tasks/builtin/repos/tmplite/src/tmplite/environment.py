"""Environment, templates and loaders."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Callable

from .errors import TemplateNotFound
from .filters import DEFAULT_FILTERS
from .parser import TemplateNode, parse
from .runtime import Context, Renderer, StrictUndefined, Undefined


class BaseLoader:
    """Loaders return the source of a template by name."""

    def get_source(self, name: str) -> str:  # pragma: no cover - interface
        raise NotImplementedError


class DictLoader(BaseLoader):
    """Load templates from a dictionary ``{name: source}``."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = mapping

    def get_source(self, name: str) -> str:
        try:
            return self.mapping[name]
        except KeyError:
            raise TemplateNotFound(name) from None


class FileSystemLoader(BaseLoader):
    """Load templates from a directory; names use ``/`` as separator."""

    def __init__(self, searchpath: str | os.PathLike, encoding: str = "utf-8") -> None:
        self.searchpath = os.fspath(searchpath)
        self.encoding = encoding

    def get_source(self, name: str) -> str:
        pieces = [p for p in name.split("/") if p and p != "."]
        if any(p == ".." for p in pieces):
            raise TemplateNotFound(name)
        path = os.path.join(self.searchpath, *pieces)
        if not os.path.isfile(path):
            raise TemplateNotFound(name)
        with open(path, encoding=self.encoding) as fh:
            return fh.read()


class Template:
    """A compiled template bound to an :class:`Environment`."""

    def __init__(self, env: "Environment", root: TemplateNode, name: str | None = None) -> None:
        self.env = env
        self.root = root
        self.name = name

    def render(self, *args: Mapping[str, Any], **kwargs: Any) -> str:
        """Render with variables from a mapping and/or keyword arguments."""
        variables: dict[str, Any] = dict(self.env.globals)
        for mapping in args:
            variables.update(mapping)
        variables.update(kwargs)
        out: list[str] = []
        Renderer(self.env, self.name).render(self.root.body, Context(variables), out)
        return "".join(out)

    def __repr__(self) -> str:
        return f"<Template {self.name or '(string)'}>"


class Environment:
    """Holds configuration, filters and the template cache.

    :param loader: where :meth:`get_template` finds templates.
    :param autoescape: HTML-escape every ``{{ }}`` output (except ``Markup``).
    :param undefined: ``"lenient"`` (missing values render empty) or
        ``"strict"`` (using a missing value raises ``UndefinedError``).
    :param trim_blocks: drop the first newline after a block tag.
    """

    def __init__(self, loader: BaseLoader | None = None, *, autoescape: bool = False,
                 undefined: str = "lenient", trim_blocks: bool = False,
                 filters: Mapping[str, Callable] | None = None,
                 globals: Mapping[str, Any] | None = None) -> None:
        if undefined not in ("lenient", "strict"):
            raise ValueError("undefined must be 'lenient' or 'strict'")
        self.loader = loader
        self.autoescape = autoescape
        self.undefined = StrictUndefined if undefined == "strict" else Undefined
        self.trim_blocks = trim_blocks
        self.filters: dict[str, Callable] = dict(DEFAULT_FILTERS)
        if filters:
            self.filters.update(filters)
        self.globals: dict[str, Any] = dict(globals or {})
        self._cache: dict[str, Template] = {}

    def from_string(self, source: str, name: str | None = None) -> Template:
        """Compile *source* into a :class:`Template`."""
        return Template(self, parse(source, name, self.trim_blocks), name)

    def get_template(self, name: str) -> Template:
        """Load, compile and cache the template called *name*."""
        if name in self._cache:
            return self._cache[name]
        if self.loader is None:
            raise TemplateNotFound(name)
        template = self.from_string(self.loader.get_source(name), name)
        self._cache[name] = template
        return template

    def clear_cache(self) -> None:
        self._cache.clear()
