"""urlroute: a small URL router with typed converters, reverse URL building and mounts."""

from .converters import (
    DEFAULT_CONVERTERS,
    AnyConverter,
    BaseConverter,
    FloatConverter,
    IntConverter,
    PathConverter,
    SlugConverter,
    StringConverter,
    UUIDConverter,
)
from .errors import (
    BuildError,
    MethodNotAllowed,
    NotFound,
    RequestRedirect,
    RoutingError,
    RuleError,
    ValidationError,
)
from .pattern import Pattern, parse_rule
from .querystring import QueryParams, encode_query, parse_query, split_target
from .router import Match, Route, Router

__version__ = "0.1.0"

__all__ = [
    "AnyConverter",
    "BaseConverter",
    "BuildError",
    "DEFAULT_CONVERTERS",
    "FloatConverter",
    "IntConverter",
    "Match",
    "MethodNotAllowed",
    "NotFound",
    "PathConverter",
    "Pattern",
    "QueryParams",
    "RequestRedirect",
    "Route",
    "Router",
    "RoutingError",
    "RuleError",
    "SlugConverter",
    "StringConverter",
    "UUIDConverter",
    "ValidationError",
    "encode_query",
    "parse_query",
    "parse_rule",
    "split_target",
]
