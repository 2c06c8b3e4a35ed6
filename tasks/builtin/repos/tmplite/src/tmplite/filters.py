"""Built-in filters.

A filter is a plain callable receiving the value as first argument and the
filter arguments after it.  Filters that need the environment set the
attribute ``needs_env = True`` and receive it as their first argument.
"""

from __future__ import annotations

from collections.abc import Mapping

from .markup import Markup, escape, soft_str
from .runtime import Undefined


def needs_env(func):
    func.needs_env = True
    return func


def do_upper(value) -> str:
    return soft_str(value).upper()


def do_lower(value) -> str:
    return soft_str(value).lower()


def do_title(value) -> str:
    return soft_str(value).title()


def do_capitalize(value) -> str:
    return soft_str(value).capitalize()


def do_trim(value, chars=None) -> str:
    return soft_str(value).strip(chars)


def do_replace(value, old, new, count=-1) -> str:
    return soft_str(value).replace(old, new, count)


def do_default(value, default_value="", boolean=False):
    """Return *default_value* if *value* is undefined (or falsy with *boolean*)."""
    if isinstance(value, Undefined) or (boolean and not value):
        return default_value
    return value


def do_length(value) -> int:
    return len(value)


@needs_env
def do_join(env, value, separator="", attribute=None) -> str:
    items = list(value)
    if attribute is not None:
        items = [_item_attr(item, attribute) for item in items]
    if env.autoescape:
        return Markup(separator).join(items) if not isinstance(separator, Markup) \
            else separator.join(items)
    return soft_str(separator).join(str(item) for item in items)


def _item_attr(item, attribute):
    if isinstance(item, Mapping):
        return item.get(attribute)
    return getattr(item, attribute, None)


def do_truncate(value, length=255, end="...", killwords=False) -> str:
    """Shorten *value* to at most *length* characters, appending *end*.

    Unless *killwords* is true the cut happens at the last whole word.
    """
    text = soft_str(value)
    if len(text) <= length:
        return text
    keep = max(length - len(end), 0)
    if killwords:
        return text[:keep] + end
    cut = text[:keep]
    if " " in cut and not text[keep:keep + 1].isspace():
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + end


def do_escape(value) -> Markup:
    return escape(value)


def do_safe(value) -> Markup:
    return Markup(value)


def do_first(value):
    for item in value:
        return item
    return Undefined("first")


def do_last(value):
    items = list(value)
    return items[-1] if items else Undefined("last")


def do_reverse(value):
    if isinstance(value, str):
        return value[::-1]
    return list(reversed(list(value)))


def do_sort(value, reverse=False, attribute=None):
    key = (lambda item: _item_attr(item, attribute)) if attribute else None
    return sorted(value, key=key, reverse=reverse)


def do_int(value, default=0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return default


def do_float(value, default=0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def do_round(value, precision=0, method="common"):
    if method == "common":
        return round(value, precision)
    import math
    factor = 10 ** precision
    func = math.ceil if method == "ceil" else math.floor
    return func(value * factor) / factor


def do_list(value) -> list:
    return list(value)


def do_string(value) -> str:
    return soft_str(value)


def do_wordcount(value) -> int:
    return len(soft_str(value).split())


def do_dictsort(value, reverse=False):
    return sorted(value.items(), key=lambda kv: kv[0], reverse=reverse)


DEFAULT_FILTERS = {
    "abs": abs,
    "capitalize": do_capitalize,
    "count": do_length,
    "d": do_default,
    "default": do_default,
    "dictsort": do_dictsort,
    "e": do_escape,
    "escape": do_escape,
    "first": do_first,
    "float": do_float,
    "int": do_int,
    "join": do_join,
    "last": do_last,
    "length": do_length,
    "list": do_list,
    "lower": do_lower,
    "replace": do_replace,
    "reverse": do_reverse,
    "round": do_round,
    "safe": do_safe,
    "sort": do_sort,
    "string": do_string,
    "title": do_title,
    "trim": do_trim,
    "truncate": do_truncate,
    "upper": do_upper,
    "wordcount": do_wordcount,
}
