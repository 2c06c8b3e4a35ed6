"""``deepgym serve`` holds against whoever can reach it, with or without the token.

Before the fix the server read every request body (up to 8 MiB, with no deadline) before it
checked the token, so stalled unauthenticated uploads held host memory for good; a connection that
never finished its request head was held forever; and a ``--no-auth`` server on loopback answered
any web page the operator opened (no ``Origin`` or ``Host`` check: cross-site WebSocket hijacking,
DNS rebinding), which with ``--sandbox local`` is a shell on the host.

Each test runs the real command (``python -m deepgym_envs.cli serve``) and talks to it over raw
sockets, httpx or a WebSocket client. Nothing here times the server: a connection the server
holds past a generous socket timeout fails the test, one it answers or closes passes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed")
httpx = pytest.importorskip("httpx")
websockets_sync = pytest.importorskip("websockets.sync.client")
websockets_exceptions = pytest.importorskip("websockets.exceptions")

TOKEN = "security-token-" + "y" * 24
EVIL = "http://evil.example"
#: How long a test waits for the server's answer (or its close) before it calls the connection held.
HELD = 10.0


@contextmanager
def serve_command(*flags: str, token: str | None = TOKEN) -> Iterator[int]:
    """``deepgym serve`` in a process of its own on a free loopback port; yields the port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "DEEPGYM_SERVE_TOKEN"}
    if token:
        env["DEEPGYM_SERVE_TOKEN"] = token
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: the server's log never blocks it
        server = subprocess.Popen([sys.executable, "-m", "deepgym_envs.cli", "serve", "--port", str(port), *flags],
                                  env=env, stdout=log, stderr=log, start_new_session=True)
        try:
            _wait_until_serving(server, port, log)
            yield port
        finally:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGINT)
                try:
                    server.wait(timeout=30)
                except subprocess.TimeoutExpired:  # a graceful stop waits for connections a failed test left
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait(timeout=30)


def _wait_until_serving(server: subprocess.Popen, port: int, log) -> None:
    for _ in range(600):
        if server.poll() is not None:
            log.seek(0)
            raise AssertionError(f"deepgym serve exited {server.returncode}: {log.read().decode()[-2000:]}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("deepgym serve did not start")


def connect(port: int, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=HELD)
    if data:
        sock.sendall(data)
    return sock


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; fails if it holds it."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    except socket.timeout:
        raise AssertionError(f"the server held the connection open (received {received[:200]!r})") from None
    finally:
        sock.close()
    return received


def head(method: str, path: str, port: int, **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}",
             *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def ws_handshake(port: int, host: str) -> bytes:
    """The server's answer to a WebSocket handshake that names ``host`` (a client library would
    send its own Host header beside it)."""
    with connect(port, head("GET", "/ws", port, Upgrade="websocket", Connection="Upgrade",
                            Sec_WebSocket_Key="dGhlIHNhbXBsZSBub25jZQ==", Sec_WebSocket_Version="13")
                 .replace(f"Host: 127.0.0.1:{port}".encode(), f"Host: {host}".encode())) as sock:
        answer = b""
        while b"\r\n\r\n" not in answer and (chunk := sock.recv(4096)):
            answer += chunk
        return answer


@pytest.fixture(scope="module")
def token_server() -> Iterator[int]:
    with serve_command() as port:
        yield port


@pytest.fixture(scope="module")
def no_auth_server() -> Iterator[int]:
    with serve_command("--no-auth", token=None) as port:
        yield port


@pytest.fixture(scope="module")
def strict_server() -> Iterator[int]:
    """Short deadlines and a small cap, so that the tests see them act."""
    with serve_command("--head-timeout", "1", "--body-timeout", "1", "--max-pending-connections", "4",
                       "--allow-origin", "http://127.0.0.1:5173") as port:
        yield port


# -- authenticate before reading a body --------------------------------------------------------
def test_uploads_without_the_token_are_refused_before_their_body_is_read(token_server):
    port = token_server
    # 40 uploads announce 8 MiB each and send none of it: each is answered 401 and hung up on at once.
    stalled = [connect(port, head("POST", "/sessions", port, Content_Length=str(8 << 20),
                                  Content_Type="application/json", **({"Authorization": "Bearer wrong"} if i % 2 else {})))
               for i in range(40)]
    for sock in stalled:
        reply = until_closed(sock)
        assert reply.startswith(b"HTTP/1.1 401"), reply[:200]
        assert b"missing or wrong bearer token" in reply
    # The one route open to all takes no body either.
    for framing in ({"Content_Length": str(8 << 20)}, {"Transfer_Encoding": "chunked"}):
        reply = until_closed(connect(port, head("POST", "/health", port, **framing)))
        assert reply.startswith(b"HTTP/1.1 413") and b"takes no request body" in reply, reply[:200]
    assert httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "healthy"
    # The token opens the same route, and a server with a token answers any Host name it is reached by.
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        opened = http.post("/sessions", json={}, headers={"Host": "serve.internal.example"})
        assert opened.status_code == 201
        assert http.delete(f"/sessions/{opened.json()['session_id']}").status_code == 204


def test_a_stalled_upload_with_the_token_is_cut_off_at_the_body_deadline(strict_server):
    port = strict_server
    sock = connect(port, head("POST", "/sessions", port, Content_Length="1000", Content_Type="application/json",
                              Authorization=f"Bearer {TOKEN}") + b'{"max_steps": ')
    reply = until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:200]
    assert b"--body-timeout" in reply


# -- idle and slow connections, and how many may wait ------------------------------------------
def test_a_connection_that_does_not_finish_its_request_head_is_closed(strict_server):
    port = strict_server
    assert until_closed(connect(port)) == b""  # connects and says nothing
    assert until_closed(connect(port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")) == b""  # stops mid-head
    # Trickles a head that never ends, a byte at a time: the deadline is for the whole head.
    sock = connect(port, b"GET /health HTTP/1.1\r\nX-Pad: ")
    try:
        for _ in range(int(HELD / 0.25)):
            sock.sendall(b"a")
            time.sleep(0.25)
        raise AssertionError("the server kept reading a head that never ends")
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()
    # A request that does arrive whole is answered as ever.
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200


def test_connections_waiting_to_send_a_request_are_capped(strict_server):
    port = strict_server
    waiting = [connect(port) for _ in range(10)]
    replies = [until_closed(sock) for sock in waiting]
    refused = [r for r in replies if r.startswith(b"HTTP/1.1 503")]
    assert len(refused) == 6, replies  # the cap is 4: the rest are told so and hung up on
    assert replies.count(b"") == 4  # the 4 it held were closed at their head deadline
    assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200  # and then it takes new ones


# -- --no-auth answers only loopback names and no web page -------------------------------------
def test_no_auth_refuses_web_pages_by_their_origin(no_auth_server):
    port = no_auth_server
    base, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}/ws"
    for origin in (EVIL, f"http://127.0.0.1:{port}", "null"):
        with pytest.raises(websockets_exceptions.InvalidStatus) as refused:
            with websockets_sync.connect(ws_url, origin=origin, open_timeout=HELD):
                pass
        assert refused.value.response.status_code == 403, origin
        answer = httpx.post(f"{base}/sessions", json={}, headers={"Origin": origin})
        assert answer.status_code == 403 and "--allow-origin" in answer.json()["detail"], origin
    # A client that is not a browser sends no Origin and is served.
    with websockets_sync.connect(ws_url, open_timeout=HELD) as ws:
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=HELD))["data"]["step_count"] == 0


def test_no_auth_answers_only_a_loopback_host_name(no_auth_server):
    port = no_auth_server
    base = f"http://127.0.0.1:{port}"
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.nip.io:{port}", f"localhost.evil.example:{port}"):
        answer = httpx.post(f"{base}/sessions", json={}, headers={"Host": host})
        assert answer.status_code == 403 and "loopback" in answer.json()["detail"], host
        assert ws_handshake(port, host).startswith(b"HTTP/1.1 403"), host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost"):
        assert httpx.get(f"{base}/schema", headers={"Host": host}).status_code == 200, host
        assert ws_handshake(port, host).startswith(b"HTTP/1.1 101"), host


def test_an_origin_on_the_allow_list_is_served(strict_server):
    port = strict_server
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"http://127.0.0.1:{port}/schema", headers={**auth, "Origin": "http://127.0.0.1:5173"}).status_code == 200
    assert httpx.get(f"http://127.0.0.1:{port}/schema", headers={**auth, "Origin": EVIL}).status_code == 403


# -- the local backend is a host shell: only when the operator says so -------------------------
def test_serve_refuses_the_local_sandbox_unless_the_risk_is_named():
    with pytest.raises(AssertionError, match=r"(?s)exited 2: .*unsandboxed.*--allow-host-shell"):
        with serve_command("--no-auth", "--sandbox", "local", token=None):
            pass
    with serve_command("--sandbox", "local", "--allow-host-shell") as port:
        assert httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "healthy"
