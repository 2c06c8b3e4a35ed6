"""How much, and how slowly, one request may send to ``deepgym serve``: a cap on HTTP bodies
(declared by Content-Length or streamed in chunks) and, in the WebSocket route, on each message; a
deadline for a whole body; and the defaults of the connection limits (:mod:`.server`). Plain ASGI,
so the command's options can name the defaults without the ``serve`` extra installed.

Without them a client with the token could make the server hold any amount of memory, or hold it
for good by sending a body slowly (one without the token never gets this far: :mod:`.gate` answers
it from its headers). The cap sits well above what an agent sends: a 1 MiB ``bash`` command is a
few MiB as escaped JSON.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_BODY_TIMEOUT = 60.0
"""Seconds a whole request body may take to arrive (8 MiB at ~140 KB/s)."""
DEFAULT_HEAD_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's headers, from connecting or from its last answer."""
DEFAULT_MAX_PENDING_CONNECTIONS = 256
"""Connections still sending a request's headers (so not yet shown to hold the token) at once."""

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def too_large(max_bytes: int) -> str:
    return (f"the request is larger than this server's limit of {max_bytes} bytes "
            "(deepgym serve --max-body-bytes); send less per request")


class BodyLimit:
    """ASGI middleware: an HTTP body over ``max_bytes`` is answered 413 with the reason before the
    application sees any of it, and one that has not all arrived ``timeout`` seconds after the
    headers (0: no deadline) is answered 408; either way the connection is closed (the rest of the
    body is never read).

    A body within the cap is read whole and handed on as one message: the routes parse all of it
    anyway, so this costs no memory they would not use.
    """

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], max_bytes: int,
                 timeout: float = DEFAULT_BODY_TIMEOUT) -> None:
        self.app, self.max_bytes, self.timeout = app, max_bytes, timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await refuse(send, 413, too_large(self.max_bytes))
            return
        try:
            chunks = await asyncio.wait_for(self._read(receive), self.timeout or None)
        except _TooLarge:  # chunked, or a Content-Length that lied
            await refuse(send, 413, too_large(self.max_bytes))
            return
        except asyncio.TimeoutError:
            await refuse(send, 408, f"the request body did not arrive within {self.timeout:g} s "
                                    "(deepgym serve --body-timeout)")
            return
        if chunks is None:  # the client went away mid-body: nobody to answer
            return
        body, handed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal handed
            if handed:
                return await receive()  # what follows the body: http.disconnect
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> list[bytes] | None:
        """The body's chunks, or None if the client left; _TooLarge once it is over the cap."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return chunks


class _TooLarge(Exception):
    pass


async def refuse(send: Send, status: int, detail: str, headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """``status`` with the reason, as FastAPI words its errors; ``Connection: close`` because the
    request's body (if any) is left unread."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server (h11) refuses a malformed one before we are called
    return None
