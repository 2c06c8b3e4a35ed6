"""Shared pieces of the agent-loop tests: a tiny model, a recording backend, a fake chat server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agents.base import tool_call
from conftest import NAMESPACE_OK

SANDBOX = "namespace" if NAMESPACE_OK else "local"

#: The toy task's fix, as the tool calls an agent would make.
FIX_CALLS = [
    ("edit", {"command": "str_replace", "path": "src/calc/ops.py", "old_str": "return max(lo, x)",
              "new_str": "return max(lo, min(x, hi))"}),
    ("submit", {}),
]
FIX_SCRIPT = [tool_call(name, **args) for name, args in FIX_CALLS]


class Recording:
    """Wraps a token backend and keeps every (prompt, generation) pair it served."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.tokenizer = llm.tokenizer
        self.model_name = llm.model_name
        self.calls: list[tuple[list[int], Any]] = []
        self.batch_sizes: list[int] = []
        self._lock = threading.Lock()

    def generate(self, prompts: list[list[int]], params: Any) -> list[Any]:
        gens = self.llm.generate(prompts, params)
        with self._lock:
            self.calls += [(list(p), g) for p, g in zip(prompts, gens)]
            self.batch_sizes.append(len(prompts))
        return gens

    def update_weights(self, state_dict: Any) -> None:
        self.llm.update_weights(state_dict)


@contextmanager
def chat_server(respond: Callable[[dict[str, Any], int], tuple[int, dict[str, Any], dict[str, str]]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local stand-in for an OpenAI-compatible endpoint: ``respond(body, n) -> (status, json, headers)``."""
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                seen.append(body)
                n = len(seen)
            status, payload, headers = respond(body, n)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            for key, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message,
            "finish_reason": finish, **extra}], "usage": {"completion_tokens": 7}}
