"""The uvicorn server ``deepgym serve`` runs, with a deadline and a cap for connections that have
not yet sent a whole request head.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) and a head's size (h11's
``max_incomplete_event_size``), but not the time a head takes: a connection that sends nothing, or
a header a byte at a time, is held for good, and nothing caps how many are. Such a connection has
not shown the token yet (:mod:`.gate` reads it from the complete head), so anyone who can reach
the port could hold them. :func:`guarded_http` is uvicorn's own h11 protocol with both added;
everything after the head (bodies, WebSockets) is bounded by :mod:`.limits` and the session table.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from deepgym_envs.serve.app import ServeConfig

#: The answer to a connection over the cap (it has sent no request yet, so h11 cannot frame one).
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n"
         b"Retry-After: 5\r\nContent-Length: 58\r\n\r\n"
         b"too many connections are waiting to send a request; retry\n")


def guarded_http(head_timeout: float, max_pending: int) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, plus: a connection must send a whole request head within
    ``head_timeout`` seconds of connecting or of its last answer (0: no deadline), or it is closed;
    at most ``max_pending`` connections wait to do so, and one more is answered 503 and closed.
    Each call makes a class with a count of its own (one per server)."""
    pending: set[H11Protocol] = set()

    class GuardedH11Protocol(H11Protocol):
        _head_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(pending) >= max_pending:
                transport.write(_BUSY)
                transport.close()
                return
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the head is in (or the connection is done with)
                self._head_arrived()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # (starts a pipelined request whose head is already here)
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            pending.add(self)
            if head_timeout:
                self._head_deadline = self.loop.call_later(head_timeout, self._head_overdue)

        def _head_arrived(self) -> None:
            pending.discard(self)
            if self._head_deadline is not None:
                self._head_deadline.cancel()
                self._head_deadline = None

        def _head_overdue(self) -> None:
            self._head_arrived()
            self.timeout_keep_alive_handler()  # closed as uvicorn closes an idle keep-alive connection

    return GuardedH11Protocol


def uvicorn_config(app: Any, config: ServeConfig, **options: Any) -> uvicorn.Config:
    """How ``deepgym serve`` runs ``app`` under uvicorn; ``options`` are uvicorn's own (host, port, ...)."""
    return uvicorn.Config(app, http=guarded_http(config.head_timeout, config.max_pending_connections),
                          # uvicorn refuses a larger WebSocket frame before it has read it (the app checks too)
                          ws_max_size=config.max_body_bytes, **options)
