"""Exceptions raised by the router."""

from __future__ import annotations

from typing import Iterable

__all__ = [
    "RoutingError",
    "NotFound",
    "MethodNotAllowed",
    "RequestRedirect",
    "BuildError",
    "RuleError",
    "ValidationError",
]


class RoutingError(Exception):
    """Base class for errors raised while matching a request."""

    status_code = 500


class NotFound(RoutingError):
    """No route matches the requested path (HTTP 404)."""

    status_code = 404

    def __init__(self, path: str) -> None:
        super().__init__(f"no route matches {path!r}")
        self.path = path


class MethodNotAllowed(RoutingError):
    """A route matches the path but not the method (HTTP 405).

    :attr:`allowed` lists every method accepted for the path, sorted, and is
    meant for the ``Allow`` response header.
    """

    status_code = 405

    def __init__(self, path: str, method: str, allowed: Iterable[str]) -> None:
        self.path = path
        self.method = method
        self.allowed = sorted(set(allowed))
        super().__init__(
            f"method {method} not allowed for {path!r}; allowed: {', '.join(self.allowed)}"
        )

    @property
    def allow_header(self) -> str:
        """Value for the HTTP ``Allow`` header."""
        return ", ".join(self.allowed)


class RequestRedirect(RoutingError):
    """The request should be redirected to :attr:`location` (HTTP 308)."""

    status_code = 308

    def __init__(self, location: str) -> None:
        super().__init__(f"redirect to {location!r}")
        self.location = location


class BuildError(LookupError):
    """A URL could not be built (unknown route name or bad/missing values)."""


class RuleError(ValueError):
    """A route pattern is malformed."""


class ValidationError(ValueError):
    """Raised by converters when a captured value is not acceptable.

    The route then simply does not match, and matching continues.
    """
