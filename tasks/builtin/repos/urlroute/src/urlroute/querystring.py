"""Query-string parsing and encoding (``application/x-www-form-urlencoded``)."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Optional, Union
from urllib.parse import quote, unquote

__all__ = ["QueryParams", "parse_query", "encode_query", "split_target"]

QueryInput = Union[Mapping[str, Any], Iterable[tuple[str, Any]]]


class QueryParams(Mapping[str, str]):
    """An immutable multi-value mapping of query parameters.

    Indexing returns the **first** value of a key; :meth:`getlist` returns
    all of them, in order.
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] = ()) -> None:
        self._pairs: list[tuple[str, str]] = [(str(k), str(v)) for k, v in pairs]

    def __getitem__(self, key: str) -> str:
        for name, value in self._pairs:
            if name == key:
                return value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        seen: dict[str, None] = {}
        for name, _ in self._pairs:
            seen.setdefault(name, None)
        return iter(seen)

    def __len__(self) -> int:
        return len({name for name, _ in self._pairs})

    def getlist(self, key: str) -> list[str]:
        """All values of *key* (an empty list when absent)."""
        return [value for name, value in self._pairs if name == key]

    def multi_items(self) -> list[tuple[str, str]]:
        """Every ``(key, value)`` pair, duplicates included, in order."""
        return list(self._pairs)

    def to_dict(self) -> dict[str, list[str]]:
        """Return ``{key: [values...]}``."""
        result: dict[str, list[str]] = {}
        for name, value in self._pairs:
            result.setdefault(name, []).append(value)
        return result

    def __eq__(self, other: object) -> bool:
        if isinstance(other, QueryParams):
            return self._pairs == other._pairs
        return NotImplemented

    def __repr__(self) -> str:
        return f"QueryParams({self._pairs!r})"


def _decode(text: str) -> str:
    """Decode one form-encoded component: ``+`` is a space, then %-escapes."""
    return unquote(text.replace("+", " "), errors="replace")


def parse_query(query: str, *, keep_blank_values: bool = True) -> QueryParams:
    """Parse a query string such as ``"a=1&b=x+y&a=2"``.

    A leading ``?`` is ignored.  Both ``&`` and ``;`` separate pairs.  A key
    without ``=`` gets an empty value.  Blank values are kept unless
    *keep_blank_values* is false.
    """
    if query.startswith("?"):
        query = query[1:]
    pairs: list[tuple[str, str]] = []
    for chunk in query.replace(";", "&").split("&"):
        if not chunk:
            continue
        name, sep, value = chunk.partition("=")
        name, value = _decode(name), _decode(value)
        if not name:
            continue
        if not value and not keep_blank_values:
            continue
        pairs.append((name, value))
    return QueryParams(pairs)


def _encode(value: str) -> str:
    return quote(value, safe="").replace("%20", "+")


def _flatten(params: QueryInput) -> list[tuple[str, Any]]:
    items = params.items() if isinstance(params, Mapping) else params
    flat: list[tuple[str, Any]] = []
    for key, value in items:
        if isinstance(value, (list, tuple)):
            flat.extend((key, item) for item in value)
        else:
            flat.append((key, value))
    return flat


def _to_text(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def encode_query(params: Optional[QueryInput]) -> str:
    """Encode *params* as a query string (without the leading ``?``).

    Lists and tuples produce repeated keys; ``None`` values are skipped;
    booleans become ``true``/``false``.
    """
    if not params:
        return ""
    if isinstance(params, QueryParams):
        params = params.multi_items()
    return "&".join(
        f"{_encode(str(key))}={_encode(_to_text(value))}"
        for key, value in _flatten(params)
        if value is not None
    )


def split_target(target: str) -> tuple[str, str]:
    """Split a request target into ``(path, query)``, dropping any fragment."""
    target = target.split("#", 1)[0]
    path, _, query = target.partition("?")
    return path or "/", query
