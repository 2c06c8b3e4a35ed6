"""Incrementing versions and describing the difference between two versions."""

from __future__ import annotations

from typing import Optional, Tuple, Union

from .version import Version, VersionLike

__all__ = ["RELEASE_TYPES", "bump", "bump_version", "diff"]

RELEASE_TYPES = (
    "major",
    "minor",
    "patch",
    "premajor",
    "preminor",
    "prepatch",
    "prerelease",
    "release",
)


def _start_prerelease(identifier: Optional[str]) -> Tuple[str, ...]:
    return (identifier, "0") if identifier else ("0",)


def _next_prerelease(current: Tuple[str, ...], identifier: Optional[str]) -> Tuple[str, ...]:
    """Advance a prerelease tuple: ``rc.1 -> rc.2``, ``beta -> beta.0``.

    When ``identifier`` is given and differs from the current leading
    identifier, a fresh ``identifier.0`` series is started.
    """
    if identifier and (not current or current[0] != identifier):
        return (identifier, "0")
    parts = list(current)
    for index in range(len(parts) - 1, -1, -1):
        if parts[index].isdigit():
            parts[index] = str(int(parts[index]) + 1)
            return tuple(parts)
    return tuple(parts) + ("0",)


def bump_version(version: Version, release: str, identifier: Optional[str] = None) -> Version:
    """Return ``version`` incremented by ``release`` (see :data:`RELEASE_TYPES`).

    Follows npm's ``semver.inc`` rules: bumping a prerelease of the target
    version finalises it instead of skipping ahead, so
    ``bump("2.0.0-rc.1", "major") == "2.0.0"``.  Build metadata is always
    dropped.
    """
    if release not in RELEASE_TYPES:
        raise ValueError(
            f"unknown release type {release!r}; expected one of {', '.join(RELEASE_TYPES)}"
        )
    M, m, p = version.core
    pre = version.prerelease

    if release == "major":
        if pre and m == 0 and p == 0:
            return Version(M, 0, 0)
        return Version(M + 1, 0, 0)
    if release == "minor":
        if pre and p == 0:
            return Version(M, m, 0)
        return Version(M, m + 1, 0)
    if release == "patch":
        if pre:
            return Version(M, m, p)
        return Version(M, m, p + 1)
    if release == "premajor":
        return Version(M + 1, 0, 0, _start_prerelease(identifier))
    if release == "preminor":
        return Version(M, m + 1, 0, _start_prerelease(identifier))
    if release == "prepatch":
        return Version(M, m, p + 1, _start_prerelease(identifier))
    if release == "prerelease":
        if not pre:
            return Version(M, m, p + 1, _start_prerelease(identifier))
        return Version(M, m, p, _next_prerelease(pre, identifier))
    # "release"
    return Version(M, m, p)


def bump(version: VersionLike, release: str, identifier: Optional[str] = None) -> Union[str, Version]:
    """Increment ``version``; returns the same type it was given (str or Version)."""
    parsed = Version.parse(version, loose=True) if isinstance(version, str) else version
    result = bump_version(parsed, release, identifier)
    return str(result) if isinstance(version, str) else result


def diff(a: VersionLike, b: VersionLike) -> Optional[str]:
    """Name the most significant difference between two versions.

    Returns ``None`` for equal precedence, otherwise one of ``"major"``,
    ``"minor"``, ``"patch"`` or ``"prerelease"``.
    """
    va = Version.parse(a, loose=True) if isinstance(a, str) else a
    vb = Version.parse(b, loose=True) if isinstance(b, str) else b
    if va.compare(vb) == 0:
        return None
    if va.major != vb.major:
        return "major"
    if va.minor != vb.minor:
        return "minor"
    if va.patch != vb.patch:
        return "patch"
    return "prerelease"
