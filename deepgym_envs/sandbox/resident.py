"""The host side of a forking server that lives inside a sandbox (a :class:`Resident`).

Two of deepgym's helpers are such servers: testrun's warm pytest server and the command server
of :mod:`.execserver`. Each is started as an ordinary sandboxed command (:meth:`HostsResidents.spawn`:
the same view, limits and cgroup as a cold command, in a PID namespace of its own), talks to this
process over an anonymous SOCK_SEQPACKET socketpair it inherits (nothing else in the sandbox can
reach it), and gets each run's output pipes with the request (SCM_RIGHTS). What is shared lives
here: starting and stopping, waiting for ``{"ready": ...}``, one request's exchange with its
deadline and output caps, and the host's own look at what a run left behind (``/proc``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass

from deepgym_envs.errors import SandboxError
from deepgym_envs.sandbox.base import HostsResidents, Sandbox, drain_pipes

#: How often a run's watchdog looks at the server (a stopped server is replaced).
_WATCH_INTERVAL = 0.05


@dataclass
class Exchange:
    """One request's outcome: what the pipes carried and the server's answer (None: no sane one)."""

    texts: list[str]
    truncated: bool
    timed_out: bool
    reply: dict | None
    duration: float


class ForkServer:
    """Start, stop, ask and inspect one server script of the sandbox's support directory.

    The server runs ``python SCRIPT CONTROL_FD`` and sends ``{"ready": pid}`` once it can serve.
    Subclasses say which script (``script``) and interpreter options (``python``), and what a
    request is.
    """

    script: str
    python: tuple[str, ...] = ("python",)
    start_timeout = 60.0
    ahead = False
    bound_to_view = False

    def __init__(self, sandbox: Sandbox, env: dict[str, str]) -> None:
        # A server cleans up by signalling its whole PID namespace: only a backend that gives every
        # resident a private one may host it (the server checks again before it starts).
        if not isinstance(sandbox, HostsResidents):
            raise SandboxError(f"{type(self).__name__} needs the namespace backend, not {type(sandbox).__name__}")
        self.sandbox: HostsResidents = sandbox
        self.env = dict(env)
        self._proc: subprocess.Popen | None = None
        self._ctrl: socket.socket | None = None
        self._ready = False
        self._server: int | None = None  # the server's host pid once it is ready
        self._starter: threading.Thread | None = None  # a start in progress
        self._dying: list[subprocess.Popen] = []  # killed, not yet reaped
        self._lock = threading.Lock()
        self.runs = self.fallbacks = 0

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, into: object | None = None) -> None:
        """Start the server without waiting for it (it gets ready while the agent thinks).

        Starting the sandboxed command (building its view's argv, then the process) runs in a
        thread, so a ``reset()`` that restarts the server does not wait for it. ``into``: the
        sandbox's next view (:meth:`HostsResidents.spawn`), where the thread may first wait for
        that view to be mounted."""
        if self.started:
            return
        self._starter = threading.Thread(target=self._spawn, args=(into,), name=f"start-{self.script}", daemon=True)
        self._starter.start()

    def _spawn(self, into: object | None) -> None:
        host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            cmd = [*self.python, f"{self.sandbox.support_dir}/{self.script}", str(server_end.fileno())]
            # "/" not the workspace: nothing of the repository is on the server's path.
            self._proc = self.sandbox.spawn(cmd, self.env, "/", (server_end.fileno(),), into=into)
        except (OSError, SandboxError):  # not started: the caller runs cold
            host_end.close()
            return
        finally:
            server_end.close()
        self._ctrl = host_end
        self._ready = False

    def _started(self) -> None:
        """Wait for a start in progress to have spawned the server (or failed to)."""
        starter, self._starter = self._starter, None
        if starter is not None:
            starter.join()

    def stop(self, wait: bool = True) -> None:
        """Kill the server and everything it runs (its bubblewrap PID namespace goes with it).

        ``wait=False`` (a ``reset()``: the new holder's workspace is out of the old server's reach)
        leaves the killed process to be reaped at a later start or stop instead of waiting here
        for the kernel to tear it down."""
        self._started()
        proc, ctrl = self._proc, self._ctrl
        self._proc, self._ctrl, self._ready, self._server = None, None, False, None
        if proc is not None:  # killed first: closing its channel first wakes it to run for nothing
            _kill(proc)
            self._dying.append(proc)
        if ctrl is not None:
            ctrl.close()
        self._dying = [p for p in self._dying if (p.wait() if wait else p.poll()) is None]

    @property
    def started(self) -> bool:
        return self._proc is not None or self._starter is not None

    @property
    def host_pid(self) -> int | None:
        """The host pid of the sandboxed command that holds the server (None: not started), once a
        start in progress has got that far."""
        self._started()
        return self._proc.pid if self._proc is not None else None

    @property
    def ready(self) -> bool:
        """The server has started and said it is ready (it has served, or can serve, runs)."""
        return self._ready

    def leftovers(self) -> list[int]:
        """Live processes in the server's PID namespace besides bubblewrap's init and the server.

        Read from the host's /proc, not asked of the server: after a run (the server kills what a
        run leaves), anything listed here outlived it and could reach the next run. Every process
        of that namespace descends from its init, so walking the tree from there sees them all.
        A server that is not ready yet counts as a leftover itself: stop it instead.
        """
        self._started()
        if self._proc is None or self._proc.poll() is not None:
            return []
        out: list[int] = []
        for init in live_children(self._proc.pid):
            for pid in live_children(init):
                if pid != self._server:
                    out.append(pid)
                out += descendants(pid)
        return out

    def _silent(self) -> bool:
        """The server is alive and running (not stopped), but has not answered."""
        return self._server is not None and _state(self._server) in ("R", "S", "D")

    def _serving(self) -> bool:
        """Start the server if need be and wait until it is ready; False, with it stopped and the
        fallback counted, when it will not be (the caller then runs the request cold)."""
        self.start()
        if self._await_ready():
            return True
        self.stop()
        self.fallbacks += 1
        return False

    def _await_ready(self) -> bool:
        if self._ready:
            return True
        self._started()
        if self._ctrl is None:
            return False
        msg = _recv(self._ctrl, self.start_timeout)
        self._ready = isinstance(msg, dict) and "ready" in msg
        if self._ready and self._proc is not None:
            # The server's host pid, for leftovers(): the only process its init has started yet.
            inits = live_children(self._proc.pid)
            kids = live_children(inits[0]) if len(inits) == 1 else []
            self._server = kids[0] if len(kids) == 1 else None
        return self._ready

    # -- one request ---------------------------------------------------------------------------
    def _exchange(self, request: dict, pipes: list[tuple[int, int]], caps: list[int], timeout: float,
                  *, report: bool = False) -> Exchange | None:
        """Send ``request`` with the pipes' write ends, drain their read ends, read the answer.

        None: nothing was sent (the caller may run the command another way). Otherwise the server
        may have started it, whatever happened next. A timeout kills the whole server, as a cold
        timeout kills the whole command; so does a server found stopped (SIGSTOP, by what it ran)
        while the run lasts, which would otherwise hold the run to its deadline. A run that closed
        its output and runs on past the deadline has timed out too (cold, bubblewrap itself holds
        the pipes until the command ends, so the output's end waits for the command's).
        """
        assert self._ctrl is not None and self._proc is not None
        start = time.monotonic()
        try:
            socket.send_fds(self._ctrl, [json.dumps(request).encode()], [w for _, w in pipes])
        except OSError:
            for r, w in pipes:
                os.close(r)
                os.close(w)
            return None
        for _, w in pipes:
            os.close(w)
        done = threading.Event()
        watchdog = threading.Thread(target=_watch, args=(self._proc, self._server, done), daemon=True)
        watchdog.start()
        try:
            deadline = start + timeout if timeout else None
            texts, truncated, timed_out = drain_pipes([r for r, _ in pipes], caps, deadline, report=report)
            reply = None
            if timed_out:
                self.stop()
            else:
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0.1)
                msg = _recv(self._ctrl, remaining)
                reply = msg if isinstance(msg, dict) else None
                if msg is None and deadline is not None and time.monotonic() >= deadline and self._silent():
                    timed_out = True
                    self.stop()
        finally:
            done.set()
        return Exchange(texts, truncated, timed_out, reply, time.monotonic() - start)


def _watch(proc: subprocess.Popen, server: int | None, done: threading.Event) -> None:
    """Kill the server if it is found stopped before ``done`` (its answer would never come)."""
    if server is None:
        return
    while not done.wait(_WATCH_INTERVAL):
        if _state(server) in ("T", "t"):
            _kill(proc)
            return


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "X"


def live_children(pid: int) -> list[int]:
    """Children of ``pid`` that are not zombies (a zombie runs nothing and is reaped soon)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            kids = [int(p) for p in fh.read().split()]
    except OSError:
        return []
    return [kid for kid in kids if _state(kid) not in ("Z", "X")]


def descendants(pid: int) -> list[int]:
    out: list[int] = []
    for kid in live_children(pid):
        out += [kid, *descendants(kid)]
    return out


def _recv(ctrl: socket.socket, timeout: float | None) -> object:
    """One message from the server, or None if it hung up, timed out or sent garbage."""
    ctrl.settimeout(timeout)
    try:
        data = ctrl.recv(1 << 16)
        return json.loads(data) if data else None
    except (OSError, ValueError):
        return None
