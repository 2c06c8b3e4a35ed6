"""A warm test runner: one pre-imported pytest server per sandbox, forking a child per run.

``python3 -c pass`` alone costs ~0.3 s on a small machine, and importing pytest as much again, so
a one-test ``run_tests`` step is mostly start-up. The server (``in_sandbox/deepgym_warm.py``) starts once,
*inside* the sandbox, as an ordinary sandboxed command (same bubblewrap view, limits and cgroup as
a cold run), imports pytest and its plugins, and then forks per run. Each child becomes exactly the
process the cold runner would be, and imports the repository under test afresh.

Isolation the cold path has, kept here:

* the server's only channel is an anonymous socketpair inherited from this process: the agent's
  own commands (separate bubblewrap instances, separate PID namespaces) cannot reach it;
* one server per sandbox, stopped on ``reset()`` and ``close()``; grading views never share the
  agent's server (grading runs cold in its own fresh sandbox);
* after every run the server kills whatever the run left behind; a timeout kills the whole
  server (as a cold timeout kills the whole command), and the next run starts a new one.

Any failure of the server itself (it will not start, dies, or answers nonsense) returns ``None``
from :meth:`WarmRunner.run`, and the caller runs the same command cold.
"""

from __future__ import annotations

import os
import signal

from deepgym_envs.defaults import REPORT_BYTES
from deepgym_envs.sandbox import ExecResult, HostsResidents, Sandbox
from deepgym_envs.sandbox.base import report_channel
from deepgym_envs.sandbox.resident import ForkServer

SERVER = "deepgym_warm.py"
#: Under this key a sandbox keeps its warm server (:meth:`HostsResidents.resident`).
KEY = "deepgym-warm-pytest"
#: How long the server may take to import pytest before we give up on it and run cold.
START_TIMEOUT = 60.0


class WarmRunner(ForkServer):
    """Runs ``python deepgym_pytest.py ARGS`` in a sandbox through a pre-imported, forking server.

    Only runs whose extra environment equals the one the server was started with are served
    (interpreter start-up reads the environment, so a different one needs a new interpreter).
    """

    script = SERVER
    start_timeout = START_TIMEOUT
    # Its first stage's Landlock rules allow writing under each top-level folder *as mounted when
    # it started*: a pooled view's renewal mounts a new workspace, where every run of this server
    # would be refused writing (a test writing in the repository failed, the seal could not blank
    # the hidden tests: pylint-7080). The renewal restarts it instead.
    bound_to_view = True

    @property
    def python(self) -> tuple[str, ...]:  # type: ignore[override]
        """Started through the sealed runs' first stage (``in_sandbox/deepgym_stage.py``): Landlock
        and not dumpable from the start, inherited by every run it forks, with no ctypes loaded."""
        return ("python", "-S", "-I", f"{self.sandbox.support_dir}/deepgym_stage.py")

    def run(self, args: list[str], timeout: float | None, env: dict[str, str], cwd: str) -> ExecResult | None:
        """One pytest run, or None when the server cannot serve it (then run it cold)."""
        if env != self.env:
            return None
        timeout = timeout or self.sandbox.limits.timeout
        with self._lock:
            if not self._serving():
                return None
            result = self._run(args, timeout, cwd)
            if result is None:
                self.stop()  # dead or confused: the next run starts a new one
                self.fallbacks += 1
            else:
                self.runs += 1
            return result

    def _run(self, args: list[str], timeout: float, cwd: str) -> ExecResult | None:
        cap = self.sandbox.limits.output_bytes or (1 << 62)
        pipes = [os.pipe(), os.pipe(), report_channel()]  # stdout, stderr, report
        got = self._exchange({"args": args, "cwd": cwd}, pipes, [cap, cap, REPORT_BYTES], timeout, report=True)
        if got is None:
            return None
        out, err, report = got.texts
        if got.timed_out:  # the server is stopped already, as a cold timeout kills the whole command tree
            return ExecResult(-signal.SIGKILL, out, err, True, got.duration, got.truncated, report)
        if got.reply is None or not isinstance(got.reply.get("exit"), int):
            return None
        return ExecResult(got.reply["exit"], out, err, False, got.duration, got.truncated, report)


def warm_runner(sb: Sandbox, env: dict[str, str]) -> WarmRunner | None:
    """The sandbox's warm server, made at the first call (that call pays its start-up); None where
    the sandbox cannot host one or its user turned warm runs off (then run cold).

    The server lives until the sandbox's ``reset()`` or ``close()`` and serves only that sandbox.
    """
    if not isinstance(sb, HostsResidents) or not sb.warm_tests:
        return None
    return sb.resident(KEY, lambda: WarmRunner(sb, env))


def warm_server(sb: Sandbox) -> WarmRunner | None:
    """The warm server a sandbox holds already, if any (for tests and benchmarks)."""
    return sb.resident(KEY) if isinstance(sb, HostsResidents) else None
