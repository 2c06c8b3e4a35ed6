"""Exception types raised by semverkit."""

from __future__ import annotations


class SemverError(ValueError):
    """Base class for every error raised by semverkit."""


class InvalidVersion(SemverError):
    """Raised when a string is not a valid semantic version."""

    def __init__(self, text: object, reason: str = "") -> None:
        self.text = text
        self.reason = reason
        message = f"invalid semantic version: {text!r}"
        if reason:
            message += f" ({reason})"
        super().__init__(message)


class InvalidRange(SemverError):
    """Raised when a range / constraint expression cannot be parsed."""

    def __init__(self, text: object, reason: str = "") -> None:
        self.text = text
        self.reason = reason
        message = f"invalid version range: {text!r}"
        if reason:
            message += f" ({reason})"
        super().__init__(message)
