"""npm-style version range expressions.

Supported syntax (whitespace separated comparators are ANDed, ``||``
separates alternatives)::

    1.2.3  =1.2.3  >1.2.3  >=1.2.3  <1.2.3  <=1.2.3
    1.x  1.2.*  *  ""            (x-ranges / wildcards)
    ~1.2.3  ~1.2  ~1              (tilde: patch-level changes)
    ^1.2.3  ^0.2.3  ^0.0.3  ^1.x  (caret: changes that keep the left-most
                                   non-zero component)
    1.2.3 - 2.3.4  1.2 - 2        (hyphen ranges, inclusive)

Every expression is "desugared" into plain comparators; ``str(Range(...))``
shows the desugared form.

Prerelease versions only satisfy a range when at least one comparator of
the matching alternative names a prerelease of the same
``major.minor.patch`` (so ``1.3.0-beta`` does not satisfy ``>=1.2.0`` but
``1.2.4-rc.2`` satisfies ``>=1.2.4-rc.1``), unless ``include_prerelease``
is requested.
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple, Union

from .errors import InvalidRange, InvalidVersion
from .version import Version, VersionLike

__all__ = ["Comparator", "Range", "satisfies", "valid_range", "RangeLike"]

_OPERATORS = ("<=", ">=", "<", ">", "=")

_XR = r"(?:0|[1-9]\d*|[xX*])"
_PARTIAL_RE = re.compile(
    rf"^v?(?P<major>{_XR})"
    rf"(?:\.(?P<minor>{_XR})"
    rf"(?:\.(?P<patch>{_XR})"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r")?)?$"
)
_HYPHEN_RE = re.compile(r"^\s*(?P<low>\S+)\s+-\s+(?P<high>\S+)\s*$")
_OPERATOR_SPACE_RE = re.compile(r"(<=|>=|<|>|=|~>?|\^)\s+")


class _Partial:
    """A possibly incomplete version such as ``1``, ``1.2`` or ``1.x``."""

    __slots__ = ("major", "minor", "patch", "prerelease", "text")

    def __init__(self, major, minor, patch, prerelease, text):
        self.major: Optional[int] = major
        self.minor: Optional[int] = minor
        self.patch: Optional[int] = patch
        self.prerelease: Tuple[str, ...] = prerelease
        self.text = text

    @classmethod
    def parse(cls, text: str, whole: str) -> "_Partial":
        match = _PARTIAL_RE.match(text)
        if match is None:
            raise InvalidRange(whole, f"cannot parse version {text!r}")
        parts: List[Optional[int]] = []
        wildcard = False
        for name in ("major", "minor", "patch"):
            raw = match.group(name)
            if wildcard or raw is None or raw in ("x", "X", "*"):
                wildcard = True
                parts.append(None)
            else:
                parts.append(int(raw))
        pre = match.group("pre")
        prerelease = tuple(pre.split(".")) if pre and parts[2] is not None else ()
        return cls(parts[0], parts[1], parts[2], prerelease, text)

    @property
    def is_any(self) -> bool:
        return self.major is None

    @property
    def is_complete(self) -> bool:
        return self.patch is not None

    def floor(self) -> Version:
        """The lowest version matched by this partial (``1.2`` -> ``1.2.0``)."""
        return Version(self.major or 0, self.minor or 0, self.patch or 0, self.prerelease)


def _v(major: int, minor: int, patch: int, prerelease=None) -> Version:
    return Version(major, minor, patch, prerelease)


class Comparator:
    """A single ``<operator><version>`` test; ``Comparator.any()`` matches all."""

    __slots__ = ("operator", "version")

    def __init__(self, operator: str, version: Optional[Version]) -> None:
        if version is not None and operator not in _OPERATORS:
            raise ValueError(f"unknown operator {operator!r}")
        self.operator = operator
        self.version = version

    @classmethod
    def any(cls) -> "Comparator":
        return cls("", None)

    @classmethod
    def none(cls) -> "Comparator":
        """A comparator that no version satisfies (``<0.0.0-0``)."""
        return cls("<", Version(0, 0, 0, "0"))

    @property
    def matches_all(self) -> bool:
        return self.version is None

    def test(self, version: Version) -> bool:
        if self.version is None:
            return True
        cmp = version.compare(self.version)
        op = self.operator
        if op == "=":
            return cmp == 0
        if op == "<":
            return cmp < 0
        if op == "<=":
            return cmp <= 0
        if op == ">":
            return cmp > 0
        return cmp >= 0

    def __str__(self) -> str:
        if self.version is None:
            return "*"
        op = "" if self.operator == "=" else self.operator
        return f"{op}{self.version}"

    def __repr__(self) -> str:
        return f"Comparator({str(self)!r})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, Comparator):
            return NotImplemented
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


# -- desugaring -------------------------------------------------------------

def _caret(p: _Partial) -> List[Comparator]:
    if p.is_any:
        return [Comparator.any()]
    M = p.major
    if p.minor is None:
        return [Comparator(">=", _v(M, 0, 0)), Comparator("<", _v(M + 1, 0, 0, "0"))]
    m = p.minor
    if p.patch is None:
        if M == 0:
            upper = _v(0, m + 1, 0, "0")
        else:
            upper = _v(M + 1, 0, 0, "0")
        return [Comparator(">=", _v(M, m, 0)), Comparator("<", upper)]
    if M != 0:
        upper = _v(M + 1, 0, 0, "0")
    elif m != 0:
        upper = _v(0, m + 1, 0, "0")
    else:
        upper = _v(0, 0, p.patch + 1, "0")
    return [Comparator(">=", p.floor()), Comparator("<", upper)]


def _tilde(p: _Partial) -> List[Comparator]:
    if p.is_any:
        return [Comparator.any()]
    M = p.major
    if p.minor is None:
        return [Comparator(">=", _v(M, 0, 0)), Comparator("<", _v(M + 1, 0, 0, "0"))]
    upper = _v(M, p.minor + 1, 0, "0")
    return [Comparator(">=", p.floor()), Comparator("<", upper)]


def _next_partial(p: _Partial) -> Version:
    """The first version *above* every version matched by an incomplete partial."""
    if p.minor is None:
        return _v(p.major + 1, 0, 0)
    return _v(p.major, p.minor + 1, 0)


def _primitive(op: str, p: _Partial) -> List[Comparator]:
    """Desugar ``<op><partial>``, e.g. ``>=1.2`` or ``<1.x``."""
    if p.is_complete:
        return [Comparator(op or "=", p.floor())]
    if p.is_any:
        if op in ("<", ">"):
            return [Comparator.none()]
        return [Comparator.any()]
    if op in ("", "="):
        upper = _next_partial(p).replace(prerelease="0")
        return [Comparator(">=", p.floor()), Comparator("<", upper)]
    if op == ">":
        return [Comparator(">=", _next_partial(p))]
    if op == ">=":
        return [Comparator(">=", p.floor())]
    if op == "<":
        return [Comparator("<", p.floor().replace(prerelease="0"))]
    # "<="
    return [Comparator("<", _next_partial(p).replace(prerelease="0"))]


def _hyphen(low: _Partial, high: _Partial) -> List[Comparator]:
    comparators: List[Comparator] = []
    if not low.is_any:
        comparators.append(Comparator(">=", low.floor()))
    if high.is_any:
        pass
    elif high.is_complete:
        comparators.append(Comparator("<=", high.floor()))
    else:
        comparators.append(Comparator("<", _next_partial(high).replace(prerelease="0")))
    return comparators or [Comparator.any()]


_SIMPLE_RE = re.compile(r"^(?P<op><=|>=|<|>|=|~>|~|\^)?(?P<ver>.+)$")


def _parse_simple(token: str, whole: str) -> List[Comparator]:
    match = _SIMPLE_RE.match(token)
    if match is None:
        raise InvalidRange(whole, f"unexpected token {token!r}")
    op = match.group("op") or ""
    partial = _Partial.parse(match.group("ver"), whole)
    if op == "^":
        return _caret(partial)
    if op in ("~", "~>"):
        return _tilde(partial)
    return _primitive(op, partial)


def _parse_alternative(text: str, whole: str) -> List[Comparator]:
    text = text.strip()
    if not text:
        return [Comparator.any()]
    hyphen = _HYPHEN_RE.match(text)
    if hyphen:
        return _hyphen(
            _Partial.parse(hyphen.group("low"), whole),
            _Partial.parse(hyphen.group("high"), whole),
        )
    text = _OPERATOR_SPACE_RE.sub(r"\1", text)
    comparators: List[Comparator] = []
    for token in text.split():
        comparators.extend(_parse_simple(token, whole))
    # drop redundant match-all comparators when something else is present
    concrete = [c for c in comparators if not c.matches_all]
    return concrete or [Comparator.any()]


class Range:
    """A parsed range expression: a union (``||``) of comparator sets."""

    __slots__ = ("raw", "alternatives")

    def __init__(self, text: Union[str, "Range"]) -> None:
        if isinstance(text, Range):
            self.raw = text.raw
            self.alternatives = [list(alt) for alt in text.alternatives]
            return
        if not isinstance(text, str):
            raise TypeError(f"expected a str, not {type(text).__name__}")
        self.raw = text
        self.alternatives: List[List[Comparator]] = [
            _parse_alternative(part, text) for part in text.split("||")
        ]

    def test(self, version: VersionLike, include_prerelease: bool = False) -> bool:
        """Return True if ``version`` satisfies this range."""
        if not isinstance(version, Version):
            try:
                version = Version.parse(version, loose=True)
            except InvalidVersion:
                return False
        for comparators in self.alternatives:
            if self._test_set(comparators, version, include_prerelease):
                return True
        return False

    @staticmethod
    def _test_set(
        comparators: Sequence[Comparator], version: Version, include_prerelease: bool
    ) -> bool:
        if not all(c.test(version) for c in comparators):
            return False
        if not version.is_prerelease or include_prerelease:
            return True
        # A prerelease is only allowed when a comparator opts in to
        # prereleases of that very major.minor.patch.
        for c in comparators:
            if c.version is not None and c.version.is_prerelease:
                if c.version.core == version.core:
                    return True
        return False

    __contains__ = test

    def __str__(self) -> str:
        return " || ".join(" ".join(str(c) for c in alt) for alt in self.alternatives)

    def __repr__(self) -> str:
        return f"Range({self.raw!r})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, Range):
            return NotImplemented
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


RangeLike = Union[Range, str]


def _to_range(value: RangeLike) -> Range:
    return value if isinstance(value, Range) else Range(value)


def satisfies(version: VersionLike, range_: RangeLike, include_prerelease: bool = False) -> bool:
    """Return True if ``version`` satisfies ``range_``.

    Invalid versions never satisfy anything; an invalid range raises
    :class:`~semverkit.errors.InvalidRange`.
    """
    return _to_range(range_).test(version, include_prerelease=include_prerelease)


def valid_range(text: str) -> Optional[str]:
    """Return the desugared form of ``text``, or ``None`` if it is invalid."""
    try:
        return str(Range(text))
    except InvalidRange:
        return None
