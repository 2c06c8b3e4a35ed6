"""The :class:`Version` type: parsing, formatting and precedence.

Precedence follows section 11 of the SemVer 2.0.0 specification:

* major, minor and patch are compared numerically;
* a version with a prerelease has *lower* precedence than the same
  version without one (``1.0.0-alpha < 1.0.0``);
* prerelease identifiers are compared one by one: numeric identifiers
  numerically, alphanumeric identifiers in ASCII order, and numeric
  identifiers always sort before alphanumeric ones; a shorter list of
  identifiers sorts first when all preceding identifiers are equal;
* build metadata is ignored for precedence.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional, Tuple, Union

from .errors import InvalidVersion

__all__ = [
    "Version",
    "VersionLike",
    "parse",
    "is_valid",
    "coerce",
    "compare",
    "compare_identifiers",
    "compare_prerelease",
]

_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"

SEMVER_PATTERN = (
    rf"(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<prerelease>{_PRE_ID}(?:\.{_PRE_ID})*))?"
    rf"(?:\+(?P<build>{_BUILD_ID}(?:\.{_BUILD_ID})*))?"
)
_STRICT_RE = re.compile(rf"^{SEMVER_PATTERN}$")
_LOOSE_PREFIX_RE = re.compile(r"^\s*[=v]*\s*")
_COERCE_RE = re.compile(r"(?<!\d)(\d{1,16})(?:\.(\d{1,16}))?(?:\.(\d{1,16}))?(?!\d)")

Identifiers = Tuple[str, ...]


def _is_numeric(identifier: str) -> bool:
    return identifier.isdigit()


def compare_identifiers(a: str, b: str) -> int:
    """Compare two prerelease identifiers; return -1, 0 or 1."""
    a_num, b_num = _is_numeric(a), _is_numeric(b)
    if a_num and b_num:
        x, y = int(a), int(b)
        return (x > y) - (x < y)
    if a_num:
        return -1
    if b_num:
        return 1
    return (a > b) - (a < b)


def compare_prerelease(a: Identifiers, b: Identifiers) -> int:
    """Compare two prerelease identifier tuples; the empty tuple is a release.

    A release (no prerelease) has higher precedence than any prerelease.
    """
    if not a and not b:
        return 0
    if not a:
        return 1
    if not b:
        return -1
    for left, right in zip(a, b):
        result = compare_identifiers(left, right)
        if result:
            return result
    return (len(a) > len(b)) - (len(a) < len(b))


def _split_identifiers(text: Optional[str]) -> Identifiers:
    if not text:
        return ()
    return tuple(text.split("."))


class Version:
    """An immutable semantic version.

    >>> v = Version.parse("1.2.3-rc.1+build.5")
    >>> (v.major, v.minor, v.patch, v.prerelease, v.build)
    (1, 2, 3, ('rc', '1'), ('build', '5'))
    """

    __slots__ = ("_major", "_minor", "_patch", "_prerelease", "_build")

    def __init__(
        self,
        major: int,
        minor: int = 0,
        patch: int = 0,
        prerelease: Union[str, Iterable[Union[str, int]], None] = None,
        build: Union[str, Iterable[Union[str, int]], None] = None,
    ) -> None:
        for name, value in (("major", major), ("minor", minor), ("patch", patch)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 0:
                raise InvalidVersion(f"{major}.{minor}.{patch}", f"{name} must be >= 0")
        self._major = major
        self._minor = minor
        self._patch = patch
        self._prerelease = self._normalize_ids(prerelease, "prerelease")
        self._build = self._normalize_ids(build, "build")

    @staticmethod
    def _normalize_ids(value, kind: str) -> Identifiers:
        if value is None:
            return ()
        if isinstance(value, str):
            ids = _split_identifiers(value)
        else:
            ids = tuple(str(part) for part in value)
        pattern = _PRE_ID if kind == "prerelease" else _BUILD_ID
        for ident in ids:
            if not re.fullmatch(pattern, ident):
                raise InvalidVersion(".".join(ids), f"bad {kind} identifier {ident!r}")
        return ids

    # -- construction -------------------------------------------------
    @classmethod
    def parse(cls, text: Union[str, "Version"], loose: bool = False) -> "Version":
        """Parse ``text`` into a :class:`Version`.

        With ``loose=True`` surrounding whitespace and a leading ``v`` or
        ``=`` (as in ``"v1.2.3"``) are accepted.
        """
        if isinstance(text, Version):
            return text
        if not isinstance(text, str):
            raise TypeError(f"expected a str, not {type(text).__name__}")
        candidate = text
        if loose:
            candidate = _LOOSE_PREFIX_RE.sub("", text).strip()
        match = _STRICT_RE.match(candidate)
        if match is None:
            raise InvalidVersion(text)
        return cls(
            int(match.group("major")),
            int(match.group("minor")),
            int(match.group("patch")),
            match.group("prerelease"),
            match.group("build"),
        )

    def replace(self, **changes) -> "Version":
        """Return a copy with the given fields replaced."""
        fields = {
            "major": self._major,
            "minor": self._minor,
            "patch": self._patch,
            "prerelease": self._prerelease,
            "build": self._build,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"unknown field(s): {', '.join(sorted(unknown))}")
        fields.update(changes)
        return Version(**fields)

    # -- accessors ----------------------------------------------------
    @property
    def major(self) -> int:
        return self._major

    @property
    def minor(self) -> int:
        return self._minor

    @property
    def patch(self) -> int:
        return self._patch

    @property
    def prerelease(self) -> Identifiers:
        return self._prerelease

    @property
    def build(self) -> Identifiers:
        return self._build

    @property
    def core(self) -> Tuple[int, int, int]:
        """The ``(major, minor, patch)`` triple."""
        return (self._major, self._minor, self._patch)

    @property
    def is_prerelease(self) -> bool:
        return bool(self._prerelease)

    @property
    def is_stable(self) -> bool:
        """True for releases with ``major >= 1`` and no prerelease."""
        return self._major >= 1 and not self._prerelease

    def finalize(self) -> "Version":
        """Drop prerelease and build metadata."""
        return Version(self._major, self._minor, self._patch)

    # -- comparison ---------------------------------------------------
    def compare(self, other: "VersionLike") -> int:
        """Return -1, 0 or 1 comparing precedence with ``other``."""
        other = _coerce_operand(other)
        if self.core != other.core:
            return (self.core > other.core) - (self.core < other.core)
        return compare_prerelease(self._prerelease, other._prerelease)

    def _cmp_or_not_implemented(self, other):
        if isinstance(other, (Version, str)):
            try:
                return self.compare(other)
            except InvalidVersion:
                return NotImplemented
        return NotImplemented

    def __eq__(self, other):
        result = self._cmp_or_not_implemented(other)
        return result if result is NotImplemented else result == 0

    def __ne__(self, other):
        result = self._cmp_or_not_implemented(other)
        return result if result is NotImplemented else result != 0

    def __lt__(self, other):
        result = self._cmp_or_not_implemented(other)
        return result if result is NotImplemented else result < 0

    def __le__(self, other):
        result = self._cmp_or_not_implemented(other)
        return result if result is NotImplemented else result <= 0

    def __gt__(self, other):
        result = self._cmp_or_not_implemented(other)
        return result if result is NotImplemented else result > 0

    def __ge__(self, other):
        result = self._cmp_or_not_implemented(other)
        return result if result is NotImplemented else result >= 0

    def __hash__(self) -> int:
        # build metadata does not take part in precedence, so not in the hash
        return hash((self.core, self._prerelease))

    # -- formatting ---------------------------------------------------
    def __str__(self) -> str:
        text = f"{self._major}.{self._minor}.{self._patch}"
        if self._prerelease:
            text += "-" + ".".join(self._prerelease)
        if self._build:
            text += "+" + ".".join(self._build)
        return text

    def __repr__(self) -> str:
        return f"Version({str(self)!r})"

    def to_tuple(self) -> Tuple[int, int, int, Identifiers, Identifiers]:
        return (self._major, self._minor, self._patch, self._prerelease, self._build)


VersionLike = Union[Version, str]


def _coerce_operand(value: VersionLike) -> Version:
    if isinstance(value, Version):
        return value
    if isinstance(value, str):
        return Version.parse(value)
    raise TypeError(f"cannot compare Version with {type(value).__name__}")


def parse(text: VersionLike, loose: bool = False) -> Version:
    """Module-level shortcut for :meth:`Version.parse`."""
    return Version.parse(text, loose=loose)


def is_valid(text: str, loose: bool = False) -> bool:
    """Return True if ``text`` is a valid semantic version."""
    try:
        Version.parse(text, loose=loose)
    except (InvalidVersion, TypeError):
        return False
    return True


def coerce(text: str) -> Optional[Version]:
    """Extract the first version-looking number group from ``text``.

    Missing minor/patch parts default to zero and any prerelease or build
    suffix is discarded: ``coerce("release v2.4 final") == Version(2, 4, 0)``.
    Returns ``None`` when ``text`` holds no number at all.
    """
    match = _COERCE_RE.search(text)
    if match is None:
        return None
    major, minor, patch = (int(g) if g is not None else 0 for g in match.groups())
    return Version(major, minor, patch)


def compare(a: VersionLike, b: VersionLike) -> int:
    """Compare two versions (strings or :class:`Version`); return -1, 0 or 1."""
    return _coerce_operand(a).compare(b)
