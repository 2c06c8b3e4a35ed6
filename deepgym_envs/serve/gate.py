"""Who may talk to ``deepgym serve``: decided from a request's headers, before its body is read or
its WebSocket accepted.

* The bearer token, on every route but ``/health`` (compared in constant time). A request without
  it is answered 401 and hung up on, its body unread: no one without the token makes the server
  hold anything (``/health``, open to all, takes no body).
* ``Origin``: a browser names the page that sends a request; a request from a page not on the
  allow-list (``--allow-origin``) is refused. Clients that are not browsers send no ``Origin``.
  Without this a ``--no-auth`` server on loopback obeys any page the operator opens (cross-site
  WebSocket hijacking: a browser's WebSocket is not held back by the same-origin policy).
* ``Host``, for a server without a token: only a loopback name (``localhost``, ``127.0.0.1``,
  ``[::1]``). A page whose own name an attacker points at 127.0.0.1 (DNS rebinding) reaches the
  server as same-origin, but it still says its own name in ``Host``.

Plain ASGI, so the command's options can use :func:`is_loopback` without the ``serve`` extra.
"""

from __future__ import annotations

import ipaddress
import secrets
from typing import Awaitable, Callable

from deepgym_envs.serve.limits import Receive, Scope, Send, refuse

LOOPBACK_NAMES = ("localhost",)
OPEN_PATHS = ("/health",)
"""Routes answered without the token (they say nothing about sessions' contents)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, without a port) is this machine's loopback."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authorised(token: str | None, header: str | None) -> bool:
    if token is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    # compare_digest: how long a wrong token took to refuse says nothing about the right one
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), token.encode())


class Gate:
    """ASGI middleware: refuses a request whose headers fail the checks above; HTTP with 401 / 403
    and the reason (``Connection: close``, the body unread), a WebSocket before it is accepted
    (403)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], token: str | None,
                 allowed_origins: tuple[str, ...] = ()) -> None:
        self.app, self.token = app, token
        self.allowed_origins = frozenset(_origin(o) for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            status, detail = refusal
            await refuse(send, status, detail,
                         ((b"www-authenticate", b"Bearer"),) if status == 401 else ())
        else:
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008, "reason": refusal[1][:120]})

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """The status and reason to refuse a request with, or None to let it through."""
        headers = _headers(scope)
        if self.token is None and not _loopback_host(headers.get("host", "")):
            return 403, (f"Host {headers.get('host', '')!r} is not a loopback name: a server without a token "
                         "answers only localhost, 127.0.0.1 and [::1]")
        origin = headers.get("origin")
        if origin is not None and _origin(origin) not in self.allowed_origins:
            return 403, (f"requests from web pages are refused (Origin {origin!r}); "
                         "name a page this server may serve with deepgym serve --allow-origin")
        if scope["path"] in OPEN_PATHS:
            if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
                # without the token nothing past the head is read: a body here could hold memory too
                return 413, f"{scope['path']} takes no request body"
        elif not authorised(self.token, headers.get("authorization")):
            return 401, "missing or wrong bearer token"
        return None


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lower-case name; of a repeated one, the first (latin-1, as HTTP's)."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _loopback_host(host: str) -> bool:
    if host.startswith("["):  # [::1]:8000
        name, _, rest = host[1:].partition("]")
        return (rest == "" or (rest.startswith(":") and rest[1:].isdigit())) and is_loopback(name)
    name, colon, port = host.rpartition(":")
    if not colon:
        name = port
    elif not port.isdigit():
        return False
    return is_loopback(name)


def _origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


__all__ = ["Gate", "authorised", "is_loopback"]
