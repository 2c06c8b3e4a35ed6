"""tmplite: a small text template engine with a Jinja-like syntax.

>>> from tmplite import render_string
>>> render_string("Hello {{ name|title }}!", name="world")
'Hello World!'
"""

from .environment import BaseLoader, DictLoader, Environment, FileSystemLoader, Template
from .errors import TemplateError, TemplateNotFound, TemplateSyntaxError, UndefinedError
from .markup import Markup, escape
from .runtime import LoopContext, StrictUndefined, Undefined

__all__ = [
    "BaseLoader", "DictLoader", "Environment", "FileSystemLoader", "LoopContext", "Markup",
    "StrictUndefined", "Template", "TemplateError", "TemplateNotFound", "TemplateSyntaxError",
    "Undefined", "UndefinedError", "escape", "render_string",
]

__version__ = "0.1.0"


def render_string(source: str, /, **variables) -> str:
    """Render *source* with a default :class:`Environment`."""
    return Environment().from_string(source).render(**variables)
