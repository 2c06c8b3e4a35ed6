"""semverkit: semantic versions, ranges and bumping (SemVer 2.0.0)."""

from .bump import RELEASE_TYPES, bump, bump_version, diff
from .errors import InvalidRange, InvalidVersion, SemverError
from .ranges import Comparator, Range, satisfies, valid_range
from .select import (
    filter_satisfying,
    max_satisfying,
    min_satisfying,
    min_version,
    sort_versions,
)
from .version import (
    Version,
    coerce,
    compare,
    compare_identifiers,
    compare_prerelease,
    is_valid,
    parse,
)

__version__ = "0.1.0"

__all__ = [
    "Comparator",
    "InvalidRange",
    "InvalidVersion",
    "RELEASE_TYPES",
    "Range",
    "SemverError",
    "Version",
    "bump",
    "bump_version",
    "coerce",
    "compare",
    "compare_identifiers",
    "compare_prerelease",
    "diff",
    "filter_satisfying",
    "is_valid",
    "max_satisfying",
    "min_satisfying",
    "min_version",
    "parse",
    "satisfies",
    "sort_versions",
    "valid_range",
]
