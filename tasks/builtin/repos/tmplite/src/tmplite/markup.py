"""Safe strings and HTML escaping.

:class:`Markup` marks a string as already safe for HTML output.  Operations
that combine a ``Markup`` with plain strings escape the plain parts, and
the common string methods return ``Markup`` again so that safe strings stay
safe when passed through filters.
"""

from __future__ import annotations

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&#34;", "'": "&#39;"}


def escape(value) -> "Markup":
    """Escape *value* for HTML unless it is already :class:`Markup`."""
    if hasattr(value, "__html__"):
        return Markup(value.__html__())
    text = str(value)
    for char, repl in _ESCAPES.items():
        text = text.replace(char, repl)
    return Markup(text)


def soft_str(value) -> str:
    """Convert *value* to ``str`` but keep ``Markup`` (and other str) as is."""
    return value if isinstance(value, str) else str(value)


class Markup(str):
    """A string that is safe to insert into HTML without escaping."""

    __slots__ = ()

    def __new__(cls, value="") -> "Markup":
        if hasattr(value, "__html__"):
            value = value.__html__()
        return super().__new__(cls, value)

    def __html__(self) -> "Markup":
        return self

    def __add__(self, other):
        if isinstance(other, str):
            return Markup(str.__add__(self, escape(other)))
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, str):
            return Markup(str.__add__(escape(other), self))
        return NotImplemented

    def __repr__(self) -> str:
        return f"Markup({str.__repr__(self)})"

    def join(self, iterable) -> "Markup":
        return Markup(str.join(self, (escape(item) for item in iterable)))

    def unescape(self) -> str:
        """Return the plain text with HTML entities decoded."""
        text = str(self)
        for char, repl in _ESCAPES.items():
            text = text.replace(repl, char)
        return text


def _wrap(name: str):
    original = getattr(str, name)

    def method(self, *args, **kwargs):
        args = tuple(escape(a) if isinstance(a, str) else a for a in args)
        return Markup(original(self, *args, **kwargs))

    method.__name__ = name
    method.__doc__ = original.__doc__
    return method


for _name in ("upper", "lower", "title", "capitalize", "strip", "lstrip", "rstrip",
              "replace", "center", "ljust", "rjust", "swapcase"):
    setattr(Markup, _name, _wrap(_name))
del _name
