"""The command server: an agent's ``bash`` steps without starting bubblewrap per command.

A cold command on the namespace backend is ``nsenter`` + ``bwrap`` (~25 ms before the command's own
work). The server (``deepgym_exec.py`` in testrun's ``in_sandbox`` folder) is started once per
sandbox as one such command, with the same view, limits, cgroup, uid, capabilities (none) and
seccomp filter as any other, and then forks per command (~1-2 ms). What each command sees is what
a cold one sees: the same environment (the one bubblewrap gave the server, byte for byte), working
directory, descriptors and signal dispositions; what it starts is killed before the next command
runs, as a cold command's PID namespace dies with it.

The agent may attack its own server (its commands run as the same uid in the same PID namespace):
kill or stop it. That step then reports exit status -9 and the host starts a new server for the
next step; a command is never run twice. Nothing else of the server is reachable: its channel is
an inherited anonymous socketpair, it is not dumpable (no ptrace, no ``/proc/<pid>/fd``, no
memory), and it runs nothing of the workspace.

Only the agent's own commands go through it (``Tools.bash``): grading, hidden tests and the audit's
leak scan run cold, each in its own sandbox.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from deepgym_envs.sandbox.base import ExecResult, HostsResidents, Sandbox, command_argv
from deepgym_envs.sandbox.resident import ForkServer

SERVER = "deepgym_exec.py"
#: Under this key a sandbox keeps its command server (:meth:`HostsResidents.resident`).
KEY = "deepgym-exec"
#: Requests larger than this run cold: one datagram must fit the socket's send buffer.
MAX_REQUEST = 100_000
#: Appended to stderr when a command killed or stopped the server that ran it.
LOST = "\n[deepgym: this command killed or stopped the sandbox's command server; its exit status is lost]\n"


class ExecServer(ForkServer):
    """Runs the agent's commands in a sandbox through a resident forking server."""

    script = SERVER
    # deepgym's own interpreter, isolated (-I; -S: no site packages, it needs none): nothing of the
    # workspace or of the task's environment variables reaches the server's imports.
    python = (os.path.abspath(sys.executable), "-I", "-S")
    start_timeout = 10.0
    # Started in the next reset's view ahead of that reset: the first command after a reset
    # then finds it ready instead of waiting for an interpreter to start (~60-90 ms).
    ahead = True

    def __init__(self, sandbox: Sandbox) -> None:
        super().__init__(sandbox, {})  # the environment every cold command gets (env=None)
        self.lost = 0  # commands whose server was killed or stopped under them

    def exec(self, cmd: list[str] | str, timeout: float | None = None) -> ExecResult | None:
        """Run ``cmd`` as ``sandbox.exec(cmd, timeout)`` would; None if it was not started (run it cold)."""
        argv = command_argv(cmd)  # the caller's mistakes raise here exactly as they do cold
        request = {"argv": argv, "cwd": self.sandbox.workdir}
        if len(json.dumps(request)) > MAX_REQUEST:
            return None
        with self._lock:
            if not self._serving():
                return None
            return self._run(request, timeout or self.sandbox.limits.timeout)

    def _run(self, request: dict, timeout: float) -> ExecResult | None:
        cap = self.sandbox.limits.output_bytes or (1 << 62)
        got = self._exchange(request, [os.pipe(), os.pipe()], [cap, cap], timeout)
        if got is None:
            self.stop()
            self.fallbacks += 1
            return None
        out, err = got.texts
        if got.timed_out:  # the server is stopped already, as a cold timeout kills the whole command tree
            return ExecResult(-signal.SIGKILL, out, err, True, got.duration, got.truncated)
        code = got.reply.get("exit") if got.reply else None
        if not isinstance(code, int):
            # Dead, stopped or confused, perhaps by the command itself: it may have run, so it is
            # not run again. The next command starts a new server.
            self.stop()
            self.lost += 1
            return ExecResult(-signal.SIGKILL, out, err + LOST, False, got.duration, got.truncated)
        if got.reply.get("clean") is not True:  # something the command started would not die
            self.stop()
        self.runs += 1
        return ExecResult(code, out, err, False, got.duration, got.truncated)


def exec_server(sb: Sandbox) -> ExecServer | None:
    """The sandbox's command server, made at the first call; None where the sandbox cannot host one
    or its user turned warm helpers off (:attr:`SandboxSpec.warm_tests`)."""
    if not isinstance(sb, HostsResidents) or not sb.warm_tests:
        return None
    return sb.resident(KEY, lambda: ExecServer(sb))


def agent_exec(sb: Sandbox, cmd: list[str] | str, timeout: float | None = None) -> ExecResult:
    """One of the agent's own commands: through the sandbox's command server where it has one,
    else (or when the server cannot take it) cold. Never for grading or anything the agent must
    not influence: the server is the agent's, and the agent can disturb it."""
    server = exec_server(sb)
    if server is not None:
        result = server.exec(cmd, timeout)
        if result is not None:
            return result
    return sb.exec(cmd, timeout)
