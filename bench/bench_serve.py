"""``deepgym serve`` under load: N concurrent HTTP sessions on 127.0.0.1, then a leak check. Prints JSON.

    python bench/bench_serve.py [--sessions 32] [--steps 5] [--task deepgym__tmplite-002] [--sandbox namespace]

The server is the real command (``deepgym serve`` in a subprocess, namespace sandboxes); the
clients are :class:`RemoteEnv` instances, one thread each. Every session opens and resets before
any steps (a barrier), so they are concurrent, not merely many. Each then takes ``--steps`` tool
steps (view, bash, search in turn) and closes. Bounded by count: sessions × steps requests.

Reported: reset and step latency (p50 / p95, ms, as the client sees them), steps per second over
the stepping phase, and the server's resources (descendant processes, deepgym temp dirs, mounts)
after one warm-up session, once every session is closed, and after the server stops. The baseline
follows a warm-up because some helpers live as long as the process, not a session (as root, the
mount namespace that stages root-only paths for sandboxes starts with the first sandbox); they
must be gone once the server stops. The load average is printed too: on a shared 2-core machine
the latencies say as much about the neighbours as about the server.

Target (DESIGN § 8): 32 concurrent sessions held, nothing leaked.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from _common import descendants
from deepgym_envs.serve.client import RemoteEnv

STEPS = [{"name": "view", "arguments": {"path": "."}}, {"name": "bash", "arguments": {"command": "echo $((6*7))"}},
         {"name": "search", "arguments": {"pattern": "def "}}]


def resources(pid: int) -> dict:
    try:
        mounts = open(f"/proc/{pid}/mountinfo").read().count("deepgym")
    except OSError:
        mounts = 0
    return {"processes": len(descendants(pid)), "tmpdirs": len(glob.glob(f"/tmp/deepgym-*-{pid}-*")),
            "mounts": mounts}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def start_server(token: str, sessions: int, sandbox: str | None) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "deepgym_envs.cli", "serve", "--port", str(port), "--max-sessions", str(sessions)]
    if sandbox:
        # --sandbox local is a host shell for whoever reaches the server: the bench says so for its own loopback server
        cmd += ["--sandbox", sandbox, *(["--allow-host-shell"] if sandbox == "local" else [])]
    server = subprocess.Popen(cmd, env={**os.environ, "DEEPGYM_SERVE_TOKEN": token},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return server, url
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise SystemExit(f"the server did not start: {server.stderr.read().decode()[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--task", default="deepgym__tmplite-002")
    parser.add_argument("--sandbox", default=None)
    args = parser.parse_args()

    token = secrets.token_urlsafe(32)
    server, url = start_server(token, args.sessions, args.sandbox)
    warm_up = RemoteEnv(url, token, task_id=args.task, reward_mode="outcome")
    warm_up.reset(seed=0)  # builds the task's pristine tree once, starts the process-wide helpers
    warm_up.close()
    before = resources(server.pid)
    resets: list[float] = []
    steps: list[float] = []
    barrier = threading.Barrier(args.sessions)
    stepping: dict[str, float] = {}

    def session(i: int) -> bool:
        env = RemoteEnv(url, token, task_id=args.task, reward_mode="outcome", max_steps=args.steps + 1)
        try:
            t0 = time.perf_counter()
            env.reset(seed=i)
            resets.append(time.perf_counter() - t0)
            barrier.wait()  # every session is open before any steps
            stepping.setdefault("start", time.perf_counter())
            for k in range(args.steps):
                t0 = time.perf_counter()
                obs, *_ = env.step(STEPS[k % len(STEPS)])
                steps.append(time.perf_counter() - t0)
            held = httpx.get(f"{url}/health", timeout=120).json()["sessions"]
            stepping["end"] = time.perf_counter()
            return held > 0
        finally:
            env.close()

    try:
        with ThreadPoolExecutor(max_workers=args.sessions) as pool:
            ok = all(pool.map(session, range(args.sessions)))
        for _ in range(100):  # closes are answered before the sandboxes' last processes are reaped
            if resources(server.pid) == before:
                break
            time.sleep(0.05)
        after_close = resources(server.pid)
        open_sessions = httpx.get(f"{url}/health", timeout=120).json()["sessions"]
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=120)
    elapsed = stepping["end"] - stepping["start"]
    print(json.dumps({
        "sessions": args.sessions, "steps_per_session": args.steps, "all_succeeded": ok,
        "reset_ms": {"p50": percentile(resets, 0.5), "p95": percentile(resets, 0.95)},
        "step_ms": {"p50": percentile(steps, 0.5), "p95": percentile(steps, 0.95),
                    "mean": round(1000 * statistics.mean(steps), 2)},
        "steps_per_s": round(len(steps) / elapsed, 1),
        "server_resources": {"before": before, "after_all_closed": after_close,
                             "open_sessions_after": open_sessions},
        "leaked": after_close != before or open_sessions != 0,
        "left_after_server_stopped": {"tmpdirs": len(glob.glob(f"/tmp/deepgym-*-{server.pid}-*")),
                                      "processes": len(descendants(server.pid))},
        "cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 1),
    }, indent=2))


if __name__ == "__main__":
    main()
