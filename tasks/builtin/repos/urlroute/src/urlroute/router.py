"""The :class:`Router`: registering routes, matching requests, building URLs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional
from urllib.parse import quote

from .converters import DEFAULT_CONVERTERS, BaseConverter
from .errors import BuildError, MethodNotAllowed, NotFound, RequestRedirect, RuleError
from .pattern import Pattern
from .querystring import QueryParams, encode_query, parse_query, split_target

__all__ = ["Route", "Match", "Router", "TRAILING_SLASH_POLICIES"]

TRAILING_SLASH_POLICIES = ("strict", "ignore", "redirect")
_counter = itertools.count()


@dataclass
class Route:
    """A registered route."""

    rule: str
    endpoint: Any
    methods: frozenset[str]
    name: str
    pattern: Pattern
    order: int = field(default_factory=lambda: next(_counter))

    def accepts(self, method: str) -> bool:
        """Whether *method* is allowed (``HEAD`` is implied by ``GET``)."""
        return method in self.methods or (method == "HEAD" and "GET" in self.methods)

    @property
    def allowed_methods(self) -> set[str]:
        """The methods to advertise in an ``Allow`` header."""
        allowed = set(self.methods)
        if "GET" in allowed:
            allowed.add("HEAD")
        return allowed

    @property
    def sort_key(self) -> tuple[Any, ...]:
        return (self.pattern.priority, self.order)


@dataclass
class Match:
    """The result of a successful :meth:`Router.match`."""

    route: Route
    params: dict[str, Any]
    query: QueryParams
    path: str
    name: str

    @property
    def endpoint(self) -> Any:
        return self.route.endpoint

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the endpoint with the captured parameters as keyword arguments."""
        return self.route.endpoint(*args, **self.params, **kwargs)


@dataclass
class _Mount:
    prefix: str
    router: "Router"
    name: Optional[str]


def _normalize_prefix(prefix: str) -> str:
    if not prefix.startswith("/"):
        raise RuleError(f"mount prefix must start with '/': {prefix!r}")
    prefix = prefix.rstrip("/")
    if not prefix:
        raise RuleError("cannot mount at the root; add the routes directly instead")
    return prefix


def _prefix_matches(prefix: str, path: str) -> bool:
    """Whether *path* lies under *prefix* (on a segment boundary)."""
    return path == prefix or path.startswith(prefix + "/")


class Router:
    """Match request paths to endpoints and build URLs back from route names.

    :param trailing_slash: what to do when a path only matches after adding
        or removing a trailing slash: ``"strict"`` (404), ``"ignore"`` (match
        anyway) or ``"redirect"`` (raise :class:`RequestRedirect` to the
        canonical URL, query string preserved).
    :param converters: extra converters, by name, on top of the defaults.
    """

    def __init__(
        self,
        trailing_slash: str = "redirect",
        converters: Optional[Mapping[str, type[BaseConverter]]] = None,
    ) -> None:
        if trailing_slash not in TRAILING_SLASH_POLICIES:
            raise ValueError(f"trailing_slash must be one of {TRAILING_SLASH_POLICIES}")
        self.trailing_slash = trailing_slash
        self.converters: dict[str, type[BaseConverter]] = dict(DEFAULT_CONVERTERS)
        self.converters.update(converters or {})
        self._routes: list[Route] = []
        self._by_name: dict[str, Route] = {}
        self._mounts: list[_Mount] = []
        self._sorted: Optional[list[Route]] = None

    # -- registration ---------------------------------------------------------

    def add(
        self,
        rule: str,
        endpoint: Any,
        methods: Iterable[str] = ("GET",),
        name: Optional[str] = None,
    ) -> Route:
        """Register *endpoint* for *rule* and the given HTTP *methods*."""
        methods = frozenset(m.upper() for m in methods)
        if not methods:
            raise RuleError("a route needs at least one method")
        if name is None:
            name = getattr(endpoint, "__name__", None) or rule
        if name in self._by_name:
            raise RuleError(f"duplicate route name {name!r}")
        route = Route(rule, endpoint, methods, name, Pattern(rule, self.converters))
        self._routes.append(route)
        self._by_name[name] = route
        self._sorted = None
        return route

    def route(
        self, rule: str, methods: Iterable[str] = ("GET",), name: Optional[str] = None
    ) -> Callable[[Any], Any]:
        """Decorator form of :meth:`add`."""

        def decorator(endpoint: Any) -> Any:
            self.add(rule, endpoint, methods=methods, name=name)
            return endpoint

        return decorator

    def get(self, rule: str, name: Optional[str] = None) -> Callable[[Any], Any]:
        return self.route(rule, ("GET",), name)

    def post(self, rule: str, name: Optional[str] = None) -> Callable[[Any], Any]:
        return self.route(rule, ("POST",), name)

    def put(self, rule: str, name: Optional[str] = None) -> Callable[[Any], Any]:
        return self.route(rule, ("PUT",), name)

    def patch(self, rule: str, name: Optional[str] = None) -> Callable[[Any], Any]:
        return self.route(rule, ("PATCH",), name)

    def delete(self, rule: str, name: Optional[str] = None) -> Callable[[Any], Any]:
        return self.route(rule, ("DELETE",), name)

    def mount(self, prefix: str, router: "Router", name: Optional[str] = None) -> None:
        """Serve every route of *router* under *prefix*.

        With *name*, the sub-router's route names are reachable as
        ``"name.route_name"`` in :meth:`url_for` and :attr:`Match.name`.
        """
        if router is self:
            raise RuleError("cannot mount a router inside itself")
        if name is not None and any(m.name == name for m in self._mounts):
            raise RuleError(f"duplicate mount name {name!r}")
        self._mounts.append(_Mount(_normalize_prefix(prefix), router, name))

    @property
    def routes(self) -> list[Route]:
        """Own routes, in matching order (highest priority first)."""
        if self._sorted is None:
            self._sorted = sorted(self._routes, key=lambda r: r.sort_key)
        return list(self._sorted)

    # -- matching ---------------------------------------------------------------

    def _match_path(self, path: str, method: str, query: str) -> Match:
        """Match without applying the trailing-slash policy."""
        allowed: set[str] = set()
        for route in self.routes:
            params = route.pattern.match(path)
            if params is None:
                continue
            if route.accepts(method):
                return Match(route, params, parse_query(query), path, route.name)
            allowed.update(route.allowed_methods)

        for mount in self._mounts:
            if not _prefix_matches(mount.prefix, path):
                continue
            rest = path[len(mount.prefix) :]
            if not rest.startswith("/"):
                rest = "/" + rest
            target = rest + ("?" + query if query else "")
            try:
                found = mount.router.match(target, method)
            except NotFound:
                continue
            except MethodNotAllowed as exc:
                allowed.update(exc.allowed)
                continue
            except RequestRedirect as redirect:
                raise RequestRedirect(mount.prefix + redirect.location) from None
            name = f"{mount.name}.{found.name}" if mount.name else found.name
            return Match(found.route, found.params, found.query, path, name)

        if allowed:
            raise MethodNotAllowed(path, method, allowed)
        raise NotFound(path)

    def match(self, target: str, method: str = "GET") -> Match:
        """Find the route for *target* (a path, optionally with ``?query``).

        :raises NotFound: no route matches the path.
        :raises MethodNotAllowed: the path matches, but not for *method*.
        :raises RequestRedirect: see the ``trailing_slash`` policy.
        """
        method = method.upper()
        path, query = split_target(target)
        try:
            return self._match_path(path, method, query)
        except NotFound:
            if self.trailing_slash == "strict" or path == "/":
                raise
            alternative = path[:-1] if path.endswith("/") else path + "/"
            try:
                found = self._match_path(alternative, method, query)
            except NotFound:
                raise NotFound(path) from None
            except MethodNotAllowed:
                if self.trailing_slash == "ignore":
                    raise
                found = None
            if self.trailing_slash == "ignore":
                return found
            raise RequestRedirect(alternative + ("?" + query if query else "")) from None

    def dispatch(self, target: str, method: str = "GET", *args: Any, **kwargs: Any) -> Any:
        """Match *target* and call the endpoint with the captured parameters."""
        return self.match(target, method)(*args, **kwargs)

    # -- URL building -----------------------------------------------------------

    def has_route(self, name: str) -> bool:
        """Whether :meth:`url_for` knows *name*."""
        try:
            self._find_route(name)
        except BuildError:
            return False
        return True

    def _find_route(self, name: str) -> tuple[str, Route]:
        if name in self._by_name:
            return "", self._by_name[name]
        for mount in self._mounts:
            if mount.name is None:
                continue
            namespace = mount.name + "."
            if name.startswith(namespace):
                prefix, route = mount.router._find_route(name[len(namespace) :])
                return mount.prefix + prefix, route
        for mount in self._mounts:
            if mount.name is None and mount.router.has_route(name):
                prefix, route = mount.router._find_route(name)
                return mount.prefix + prefix, route
        raise BuildError(f"no route named {name!r}")

    def url_for(self, name: str, _anchor: Optional[str] = None, **values: Any) -> str:
        """Build the URL of route *name*.

        Values for the route's variables fill the path (percent-encoded by the
        converters); any other values become the query string, in the given
        order (lists repeat the key, ``None`` is skipped).
        """
        prefix, route = self._find_route(name)
        path_values = {k: v for k, v in values.items() if k in route.pattern.variables}
        query_values = {k: v for k, v in values.items() if k not in route.pattern.variables}
        url = prefix + route.pattern.build(path_values)
        query = encode_query(query_values)
        if query:
            url += "?" + query
        if _anchor:
            url += "#" + quote(_anchor, safe="/?")
        return url
