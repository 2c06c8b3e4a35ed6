"""One local stand-in for an OpenAI-compatible endpoint, shared by the tests of every client."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

#: respond(body, n) -> (status, payload, headers): n counts requests from 1; a str payload is sent as is.
Respond = Callable[[dict[str, Any], int], tuple[int, "dict[str, Any] | str", dict[str, str]]]


@contextmanager
def chat_server(respond: Respond) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Serve ``respond`` on 127.0.0.1; yields (base URL ending in /v1, the requests seen so far).

    Each request is recorded as ``{"path", "auth", "body"}`` (``auth``: the Authorization header).
    """
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                n = len(seen)
            status, payload, headers = respond(body, n)
            raw = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def answers_in_turn(answers: list[tuple[int, "dict[str, Any] | str"]]) -> Respond:
    """A ``respond`` giving these (status, payload) answers in turn; the last one repeats."""
    return lambda body, n: (*answers[min(n, len(answers)) - 1], {})
