"""Selecting and ordering collections of versions."""

from __future__ import annotations

from typing import Iterable, List, Optional, Tuple, TypeVar

from .errors import InvalidVersion
from .ranges import Range, RangeLike, _to_range
from .version import Version, VersionLike

__all__ = [
    "sort_versions",
    "filter_satisfying",
    "max_satisfying",
    "min_satisfying",
    "min_version",
]

V = TypeVar("V", str, Version)


def _parsed(versions: Iterable[V], strict: bool) -> List[Tuple[Version, V]]:
    pairs: List[Tuple[Version, V]] = []
    for item in versions:
        try:
            parsed = item if isinstance(item, Version) else Version.parse(item, loose=True)
        except InvalidVersion:
            if strict:
                raise
            continue
        pairs.append((parsed, item))
    return pairs


def sort_versions(versions: Iterable[V], reverse: bool = False, strict: bool = True) -> List[V]:
    """Return ``versions`` sorted by precedence, keeping the original objects.

    Strings are parsed loosely (``"v1.2.3"`` is fine).  With ``strict=False``
    invalid entries are dropped instead of raising.  The sort is stable, so
    versions of equal precedence (differing only in build metadata) keep
    their input order.
    """
    from functools import cmp_to_key

    pairs = _parsed(versions, strict)
    pairs.sort(key=cmp_to_key(lambda x, y: x[0].compare(y[0])), reverse=reverse)
    return [item for _, item in pairs]


def filter_satisfying(
    versions: Iterable[V], range_: RangeLike, include_prerelease: bool = False
) -> List[V]:
    """Return the versions that satisfy ``range_``, in input order; invalid ones are skipped."""
    rng = _to_range(range_)
    return [
        item
        for parsed, item in _parsed(versions, strict=False)
        if rng.test(parsed, include_prerelease=include_prerelease)
    ]


def _best(versions, range_, include_prerelease, want_max: bool):
    rng = _to_range(range_)
    best: Optional[Tuple[Version, object]] = None
    for parsed, item in _parsed(versions, strict=False):
        if not rng.test(parsed, include_prerelease=include_prerelease):
            continue
        if best is None:
            best = (parsed, item)
            continue
        cmp = parsed.compare(best[0])
        if (want_max and cmp > 0) or (not want_max and cmp < 0):
            best = (parsed, item)
    return None if best is None else best[1]


def max_satisfying(
    versions: Iterable[V], range_: RangeLike, include_prerelease: bool = False
) -> Optional[V]:
    """Return the highest version in ``versions`` satisfying ``range_`` (or None)."""
    return _best(versions, range_, include_prerelease, want_max=True)


def min_satisfying(
    versions: Iterable[V], range_: RangeLike, include_prerelease: bool = False
) -> Optional[V]:
    """Return the lowest version in ``versions`` satisfying ``range_`` (or None)."""
    return _best(versions, range_, include_prerelease, want_max=False)


def min_version(range_: RangeLike) -> Optional[Version]:
    """Return the lowest version that could possibly satisfy ``range_``.

    ``min_version("^1.2.3") == Version(1, 2, 3)``, ``min_version(">1.2.3")
    == Version(1, 2, 4)``, ``min_version("*") == Version(0, 0, 0)``.
    Returns None when nothing can satisfy the range.
    """
    rng = _to_range(range_)
    candidates: List[Version] = []
    zero = Version(0, 0, 0)
    if rng.test(zero):
        return zero
    for comparators in rng.alternatives:
        for comparator in comparators:
            if comparator.version is None:
                continue
            base = comparator.version
            if comparator.operator == ">":
                if base.is_prerelease:
                    candidate = base.replace(prerelease=base.prerelease + ("0",), build=None)
                else:
                    candidate = Version(base.major, base.minor, base.patch + 1)
            elif comparator.operator in (">=", "="):
                candidate = base.replace(build=None)
            else:
                continue
            if Range._test_set(comparators, candidate, include_prerelease=True):
                candidates.append(candidate)
    if not candidates:
        return None
    return min(candidates)
