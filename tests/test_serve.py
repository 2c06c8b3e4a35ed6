"""``deepgym serve``: a real uvicorn server on 127.0.0.1, driven by httpx, a WebSocket client and
:class:`RemoteEnv`, with real sandboxes behind it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
websockets_sync = pytest.importorskip("websockets.sync.client")
websockets_exceptions = pytest.importorskip("websockets.exceptions")

import gymnasium as gym  # noqa: E402
from _readme import readme_blocks  # noqa: E402
from conftest import leftovers, requires_namespace  # noqa: E402

import deepgym_envs  # noqa: E402
from deepgym_envs.errors import DeepgymError  # noqa: E402
from deepgym_envs.serve.app import ServeConfig, create_app  # noqa: E402
from deepgym_envs.serve.cli import serve_token  # noqa: E402
from deepgym_envs.serve.server import uvicorn_config  # noqa: E402
from deepgym_envs.serve.client import RemoteEnv, RemoteError  # noqa: E402
from deepgym_envs.serve.sessions import SessionTable, ShuttingDown  # noqa: E402

TOKEN = "test-token-" + "x" * 20
TASK_ID = "deepgym__tmplite-002"  # the smallest gold patch of the built-in set
TASKS = [t for t in deepgym_envs.load_tasks("builtin") if t.instance_id == TASK_ID]


@contextmanager
def serving(**options) -> Iterator[str]:
    """A uvicorn server in a thread on a free loopback port, set up as the command sets it up; yields its
    URL, stops it after."""
    config = ServeConfig(**{"token": TOKEN, **options})
    server = uvicorn.Server(uvicorn_config(create_app(config, tasks=TASKS), config, log_level="warning",
                                           ws="websockets-sansio", lifespan="on"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # bound before uvicorn starts: no race for the port
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def gold_patch_call(task) -> dict:
    return {"name": "bash", "arguments": {"command": f"git apply <<'DEEPGYM_EOF'\n{task.patch}\nDEEPGYM_EOF"}}


def wait_for_sessions(url: str, n: int, polls: int = 400) -> int:
    """The server's open-session count once it equals ``n`` (or after ``polls`` tries)."""
    count = -1
    for _ in range(polls):
        count = httpx.get(f"{url}/health").json()["sessions"]
        if count == n:
            break
        time.sleep(0.02)
    return count


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving() as u:
        yield u


@requires_namespace
def test_an_oracle_episode_over_http_is_resolved_and_hides_the_hidden_test_log(url):
    before = leftovers()
    env = gym.make("deepgym/Remote-v0", url=url, token=TOKEN, task_id=TASK_ID, reward_mode="outcome")
    try:
        obs, info = env.reset(seed=0)
        assert "Resolve the issue" in obs and info["task_id"] == TASK_ID
        assert {t["function"]["name"] for t in info["tools"]} >= {"bash", "submit"}
        assert env.action_space.contains(gold_patch_call(TASKS[0]))
        obs, reward, terminated, truncated, info = env.step(gold_patch_call(TASKS[0]))
        assert not terminated and not truncated and info["invalid_action"] is False
        obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
        assert terminated and not truncated
        assert info["verdict"]["status"] == "resolved" and reward == 1.0
        assert info["reward_components"]["outcome"] == 1.0
        assert "log" not in info["verdict"]  # the hidden tests' own output stays on the server
        assert env.unwrapped.state()["done"] is True
        json.dumps(info, allow_nan=False)  # strict JSON all the way through
    finally:
        env.close()
    assert wait_for_sessions(url, 0) == 0
    assert leftovers() == before  # closing the remote env closed its sandbox


def test_requests_without_or_with_a_wrong_token_are_refused(url):
    assert httpx.get(f"{url}/health").status_code == 200  # says nothing about sessions' contents
    for headers in ({}, auth("wrong"), {"Authorization": TOKEN}, auth(TOKEN + "x")):
        response = httpx.post(f"{url}/sessions", headers=headers, json={})
        assert response.status_code == 401, headers
        assert response.json()["detail"] == "missing or wrong bearer token"
        assert response.headers["www-authenticate"] == "Bearer"
    with pytest.raises(RemoteError, match="401"):
        RemoteEnv(url, "wrong")
    with pytest.raises(Exception, match="1008|403|rejected"):
        with websockets_sync.connect(url.replace("http", "ws") + "/ws", additional_headers=auth("wrong")) as ws:
            ws.recv(timeout=10)


@requires_namespace
def test_bad_requests_get_4xx_with_a_reason(url):
    with httpx.Client(base_url=url, headers=auth(), timeout=120) as http:
        assert http.post("/sessions", json={"sandbox": "local"}).status_code == 422  # not the client's choice
        refused = http.post("/sessions", json={"max_steps": "many"})
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "max_steps"]
        sid = http.post("/sessions", json={"task_id": TASK_ID, "reward_mode": "outcome"}).json()["session_id"]
        try:
            conflict = http.post(f"/sessions/{sid}/step", json={"action": "hello"})
            assert conflict.status_code == 409 and "reset" in conflict.json()["detail"]
            assert http.post(f"/sessions/{sid}/reset", json={"options": {"task_id": "nope"}}).status_code == 404
            assert http.post(f"/sessions/{sid}/reset", json={"seed": -1}).status_code == 422
            assert http.post(f"/sessions/{sid}/reset", json={}).status_code == 200
            for body in ({"action": 5}, {"action": ["view"]}, {}, {"action": "x", "extra": 1}):
                response = http.post(f"/sessions/{sid}/step", json=body)
                assert response.status_code == 422 and response.json()["detail"], body
            broken = http.post(f"/sessions/{sid}/step", content=b"{not json", headers={"content-type": "application/json"})
            assert broken.status_code == 422 and "JSON" in json.dumps(broken.json())
            # A malformed tool call is the agent's mistake: an error observation and a penalty, as locally.
            step = http.post(f"/sessions/{sid}/step", json={"action": "<tool_call>{oops</tool_call>"}).json()
            assert step["observation"]["text"].startswith("Error:") and step["metadata"]["invalid_action"] is True
            # A task id of the wrong type is the client's mistake, said as such (it was a TypeError, a 500)...
            wrong = http.post(f"/sessions/{sid}/reset", json={"options": {"task_id": 5}})
            assert wrong.status_code == 404 and "a task id is a string" in wrong.json()["detail"]
            # ...and the server and the session go on.
            assert http.post(f"/sessions/{sid}/reset", json={}).status_code == 200
            assert http.get(f"/sessions/{sid}/state").json()["step_count"] == 0
        finally:
            assert http.delete(f"/sessions/{sid}").status_code == 204
        assert http.post(f"/sessions/{sid}/step", json={"action": "x"}).status_code == 404
        assert http.delete(f"/sessions/{sid}").status_code == 404


def test_sessions_beyond_the_maximum_get_503_with_a_reason():
    with serving(max_sessions=2) as url, httpx.Client(base_url=url, headers=auth()) as http:
        first, second = (http.post("/sessions", json={}).json()["session_id"] for _ in range(2))
        refused = http.post("/sessions", json={})
        assert refused.status_code == 503 and "all 2 sessions are in use" in refused.json()["detail"]
        http.delete(f"/sessions/{first}")
        assert http.post("/sessions", json={}).status_code == 201  # a freed slot is taken again
        with pytest.raises(RemoteError, match="503"):
            RemoteEnv(url, TOKEN)


@requires_namespace
def test_an_idle_session_is_reaped_and_its_sandbox_closed():
    before = leftovers()
    with serving(idle_timeout=0.3) as url, httpx.Client(base_url=url, headers=auth(), timeout=120) as http:
        sid = http.post("/sessions", json={"task_id": TASK_ID, "reward_mode": "outcome"}).json()["session_id"]
        assert "Resolve the issue" in http.post(f"/sessions/{sid}/reset", json={}).json()["observation"]["text"]
        assert wait_for_sessions(url, 0) == 0  # (a sandbox that outlived it would show in leftovers below)
        assert leftovers() == before
        gone = http.post(f"/sessions/{sid}/step", json={"action": "x"})
        assert gone.status_code == 404 and "reaped" in gone.json()["detail"]
        # A WebSocket session that goes quiet is hung up on (1001), its sandbox closed.
        with websockets_sync.connect(url.replace("http", "ws") + f"/ws?task_id={TASK_ID}&reward_mode=outcome",
                                     additional_headers=auth()) as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(ws.recv(timeout=120))["type"] == "observation"
            with pytest.raises(websockets_exceptions.ConnectionClosed) as closed:
                ws.recv(timeout=60)
            assert closed.value.rcvd.code == 1001
        assert wait_for_sessions(url, 0) == 0
    assert leftovers() == before


@requires_namespace
def test_websocket_speaks_openenv_and_a_disconnect_closes_the_session(url):
    before = leftovers()
    ws_url = url.replace("http", "ws") + f"/ws?task_id={TASK_ID}&reward_mode=outcome"
    with websockets_sync.connect(ws_url, additional_headers=auth()) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}))
        reset = json.loads(ws.recv(timeout=120))
        assert reset["type"] == "observation" and reset["data"]["done"] is False
        assert "Resolve the issue" in reset["data"]["observation"]["text"]
        ws.send(json.dumps({"type": "step", "data": {"name": "bash", "arguments": {"command": "echo served"}}}))
        step = json.loads(ws.recv(timeout=120))
        assert step["data"]["observation"]["text"].strip() == "served" and step["data"]["reward"] == 0.0
        ws.send(json.dumps({"type": "state"}))
        assert json.loads(ws.recv(timeout=10))["data"]["step_count"] == 1
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "INVALID_JSON"
        ws.send(json.dumps({"type": "dance"}))
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "UNKNOWN_TYPE"
        assert wait_for_sessions(url, 1) == 1
    # The client hung up without a close message: the session and its sandbox go anyway.
    assert wait_for_sessions(url, 0) == 0
    assert leftovers() == before


def test_bodies_and_websocket_messages_over_the_limit_are_refused_with_the_reason():
    limit = 64 * 1024
    big = json.dumps({"action": "x" * (limit + 1)}).encode()

    def chunked(data: bytes, size: int = 8192):  # a generator body: no Content-Length, chunked encoding
        for i in range(0, len(data), size):
            yield data[i:i + size]

    with serving(max_body_bytes=limit) as url:
        for headers, expected in ((auth(), 413), ({}, 401)):  # without the token: refused before any body is read
            for content in (big, chunked(big)):
                with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
                    refused = http.post("/sessions/any/step", content=content,
                                        headers={"content-type": "application/json"})
                assert refused.status_code == expected, (headers, type(content))
                if expected == 413:
                    assert "--max-body-bytes" in refused.json()["detail"] and str(limit) in refused.json()["detail"]
        with httpx.Client(base_url=url, headers=auth(), timeout=60) as http:
            # Under the limit, streamed or not, a body reaches the route whole.
            opened = http.post("/sessions", content=chunked(json.dumps({"max_steps": 7}).encode(), 3),
                               headers={"content-type": "application/json"})
            assert opened.status_code == 201 and opened.json()["max_steps"] == 7
            assert http.delete(f"/sessions/{opened.json()['session_id']}").status_code == 204
        with websockets_sync.connect(url.replace("http", "ws") + f"/ws?task_id={TASK_ID}",
                                     additional_headers=auth(), max_size=None) as ws:
            ws.send(json.dumps({"type": "step", "data": {"name": "bash", "arguments": {"command": "x" * limit}}}))
            # uvicorn (given the same cap, as the command gives it) closes before the frame is read; the
            # app's own check, where it sees the message first, says why before it closes.
            with pytest.raises(websockets_exceptions.ConnectionClosed) as closed:
                while True:
                    error = json.loads(ws.recv(timeout=60))
                    assert error["type"] == "error" and error["data"]["code"] == "MESSAGE_TOO_BIG"
                    assert "--max-body-bytes" in error["data"]["message"]
            assert closed.value.rcvd.code == 1009
        assert wait_for_sessions(url, 0) == 0  # the socket's session went with it
        assert httpx.get(f"{url}/health").status_code == 200  # and the server goes on


class ClosingRecorded(gym.Wrapper):
    closed = 0

    def close(self):
        type(self).closed += 1
        super().close()


def slow_env_factory():
    """make_env for a SessionTable that waits for ``release`` once it has started (``started``)."""
    started, release = threading.Event(), threading.Event()

    def make_env(env_id, kwargs):
        started.set()
        assert release.wait(60)
        return ClosingRecorded(gym.make(env_id, tasks=TASKS, **kwargs))
    return make_env, started, release


def test_a_session_being_made_at_shutdown_is_closed_once_made():
    ClosingRecorded.closed = 0
    make_env, started, release = slow_env_factory()

    async def main():
        table = SessionTable(make_env, max_sessions=2, idle_timeout=0)
        creating = asyncio.create_task(table.create("deepgym/SWE-v0", {}))
        await asyncio.to_thread(started.wait, 60)
        shutdown = asyncio.create_task(table.close_all())
        await asyncio.sleep(0.2)
        assert not shutdown.done()  # it waits for the env being made, which cannot be done yet
        release.set()
        await shutdown
        with pytest.raises(ShuttingDown):
            await creating
        assert len(table) == 0 and ClosingRecorded.closed == 1
        with pytest.raises(ShuttingDown, match="shutting down"):  # and no new one once it has begun
            await table.create("deepgym/SWE-v0", {})

    asyncio.run(main())


def test_a_cancelled_session_creation_closes_the_env_it_made():
    ClosingRecorded.closed = 0
    make_env, started, release = slow_env_factory()

    async def main():
        table = SessionTable(make_env, max_sessions=1, idle_timeout=0)
        creating = asyncio.create_task(table.create("deepgym/SWE-v0", {}))
        await asyncio.to_thread(started.wait, 60)
        creating.cancel()  # as uvicorn cancels requests still running past a graceful-shutdown timeout
        with pytest.raises(asyncio.CancelledError):
            await creating
        assert len(table) == 1  # the env is still being made: its slot stays taken
        release.set()
        for _ in range(3000):
            if len(table) == 0:
                break
            await asyncio.sleep(0.01)
        assert len(table) == 0 and ClosingRecorded.closed == 1  # once made, the env was closed and the slot freed
        session = await table.create("deepgym/SWE-v0", {})
        await table.close_all()
        assert ClosingRecorded.closed == 2 and session.closing

    asyncio.run(main())


def test_serve_needs_a_token_unless_no_auth_on_loopback(monkeypatch):
    monkeypatch.delenv("DEEPGYM_SERVE_TOKEN", raising=False)
    with pytest.raises(DeepgymError, match="give a token"):
        serve_token(None, False, "127.0.0.1")
    with pytest.raises(DeepgymError, match="loopback"):
        serve_token(None, True, "0.0.0.0")
    assert serve_token(None, True, "127.0.0.1") is None and serve_token(None, True, "::1") is None
    monkeypatch.setenv("DEEPGYM_SERVE_TOKEN", "from-env")
    assert serve_token(None, False, "0.0.0.0") == "from-env" and serve_token("given", False, "0.0.0.0") == "given"


def test_openenv_generic_client_drives_the_server(url):
    """OpenEnv's own client (not in the dev extra: openenv pulls gradio, fastmcp, huggingface_hub and
    openai; install openenv to run this)."""
    generic = pytest.importorskip("openenv.core.generic_client", reason="openenv is not installed")
    with generic.GenericEnvClient(base_url=url, headers=auth()).sync() as env:
        result = env.reset(seed=0)
        assert "Resolve the issue" in result.observation["text"] and result.done is False
        result = env.step({"name": "bash", "arguments": {"command": "echo openenv"}})
        assert result.observation["text"].strip() == "openenv" and result.reward == 0.0
        assert env.state()["step_count"] == 1
    assert wait_for_sessions(url, 0) == 0  # its close message ended the session


@pytest.mark.slow
@requires_namespace
def test_32_concurrent_sessions_leave_nothing_behind():
    before = leftovers()
    steps = [{"name": "view", "arguments": {"path": "."}}, {"name": "bash", "arguments": {"command": "echo $((6*7))"}},
             {"name": "search", "arguments": {"pattern": "def "}}]

    def episode(i: int) -> str:
        env = RemoteEnv(url, TOKEN, task_id=TASK_ID, reward_mode="outcome")
        try:
            env.reset(seed=i)
            outputs = [env.step(action)[0] for action in steps]
            return outputs[1].strip()
        finally:
            env.close()

    with serving(max_sessions=32) as url:
        with ThreadPoolExecutor(max_workers=32) as pool:
            assert list(pool.map(episode, range(32))) == ["42"] * 32
        assert wait_for_sessions(url, 0) == 0
    assert leftovers() == before


# -- the README's snippets ---------------------------------------------------------------------
SERVE_HEADING = "Use over HTTP (deepgym serve)"
#: The section's blocks as written for the README; once README.md has the section, its own blocks run instead.
SERVE_SNIPPETS = [
    ("bash", 'export DEEPGYM_SERVE_TOKEN=$(python -c "import secrets; print(secrets.token_urlsafe(32))")\n'
             "deepgym serve --port 8000 --max-sessions 32 --idle-timeout 600\n"),
    ("python", '''import os

import gymnasium as gym
import deepgym_envs  # registers deepgym/Remote-v0

env = gym.make("deepgym/Remote-v0", url="http://127.0.0.1:8000", token=os.environ["DEEPGYM_SERVE_TOKEN"],
               task_id="deepgym__tmplite-002", reward_mode="outcome", max_steps=20)
obs, info = env.reset(seed=0)
obs, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": "git status --short"}})
obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
print(info["verdict"]["status"])  # unresolved: nothing was fixed
env.close()
'''),
    ("python", '''import os

import httpx

http = httpx.Client(base_url="http://127.0.0.1:8000", timeout=600,
                    headers={"Authorization": f"Bearer {os.environ['DEEPGYM_SERVE_TOKEN']}"})
sid = http.post("/sessions", json={"task_id": "deepgym__tmplite-002", "reward_mode": "outcome"}).json()["session_id"]
first = http.post(f"/sessions/{sid}/reset", json={"seed": 0}).json()
step = http.post(f"/sessions/{sid}/step", json={"action": {"name": "view", "arguments": {"path": "."}}}).json()
print(step["observation"]["text"][:200], step["reward"], step["terminated"], step["metadata"]["reward_components"])
http.delete(f"/sessions/{sid}")
'''),
]


@pytest.mark.slow
@requires_namespace
@pytest.mark.skipif(shutil.which("deepgym") is None, reason="the deepgym command is not installed")
def test_the_readme_serve_snippets_run(tmp_path):
    blocks = readme_blocks(SERVE_HEADING, SERVE_SNIPPETS)
    [serve] = [code for lang, code in blocks if lang == "bash"]
    snippets = [code for lang, code in blocks if lang == "python"]
    assert len(snippets) == 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    token_file = tmp_path / "token"
    # The block as written (its own token), plus one line that hands the token to this test.
    script = serve.replace("8000", port).replace("deepgym serve", f"printf %s \"$DEEPGYM_SERVE_TOKEN\" > {token_file}\n"
                                                                  "exec deepgym serve", 1)
    server = subprocess.Popen(["bash", "-c", script], start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        env = {**os.environ, "DEEPGYM_SERVE_TOKEN": token_file.read_text()}
        outputs = [subprocess.run([sys.executable, "-c", code.replace("8000", port)], env=env, capture_output=True,
                                  text=True, timeout=300) for code in snippets]
        for out in outputs:
            assert out.returncode == 0, out.stderr[-2000:]
        assert outputs[0].stdout.strip() == "unresolved"
        assert "{'invalid_action': 0.0" in outputs[1].stdout and "0.0 False" in outputs[1].stdout
        assert httpx.get(f"http://127.0.0.1:{port}/health").json()["sessions"] == 0  # both snippets closed theirs
    finally:
        os.killpg(server.pid, signal.SIGINT)  # the group this test started: bash exec'd into the server
        server.wait(timeout=120)
