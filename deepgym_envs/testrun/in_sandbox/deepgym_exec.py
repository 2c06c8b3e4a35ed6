"""The command server: runs *inside* a sandbox, ``python -I /deepgym/deepgym_exec.py CONTROL_FD``.

Copied into the sandbox's support directory (never imported by deepgym on the host). It serves the
agent's ``bash`` steps: per request it starts exactly the process a cold command would be
(bubblewrap's ``execvp`` of the same argv, with the same environment, working directory,
descriptors 0-2 and signal dispositions). Starting bubblewrap per command is what this saves:
~25 ms against ~1 ms.

The only way in is the control descriptor inherited from the host: one end of a socketpair, no
path and no name. The server is not dumpable, so commands (the same uid, in the same PID namespace)
cannot ptrace it, read its memory or open its descriptors through ``/proc``. They *can* signal it:
then their own step loses its exit status and the host starts a new server (they cost themselves
speed, nothing else). After each command the server kills every other process in its PID
namespace before it answers, so nothing a command started survives into the next one, as nothing
survives a cold command's PID namespace.

Protocol (SOCK_SEQPACKET, one message per datagram): the server sends ``{"ready": pid}``; the host
sends ``{"argv": [...], "cwd": str}`` with two descriptors attached (stdout, stderr); the server
answers ``{"exit": code, "clean": bool}`` once the command and all it started are gone.
"""

import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

_PR_SET_DUMPABLE = 4
#: How long killing what a command left may take before the host is told to replace the server.
_KILL_TIMEOUT = 5.0


def _environment():
    """The environment bubblewrap gave this process, exactly: every command starts from it.

    Read from ``/proc/self/environ`` (what ``execve`` received), not ``os.environ``, which the
    interpreter may have adjusted at start-up (locale coercion)."""
    with open("/proc/self/environ", "rb") as fh:
        items = fh.read().split(b"\0")
    return dict(item.split(b"=", 1) for item in items if b"=" in item)


def _alone_in_pid_namespace():
    """True only where kill(-1) is safe: bubblewrap's one command (pid 2, child of its init) in a
    PID namespace of our own. Anywhere else kill(-1) reaches every process of this user."""
    pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    return os.getpid() == 2 and os.getppid() == 1 and pids == {1, 2}


def _kill_the_rest():
    """Kill every process of this PID namespace but its init and us; False if some will not go.

    kill(-1) fails with ESRCH only once none is left, zombies included (bubblewrap's init reaps
    them), so this also waits for them to be gone."""
    deadline = time.monotonic() + _KILL_TIMEOUT
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return True
        time.sleep(0.0005)
    return False


def _wait(pid, ctrl):
    """The child's wait status, or None if the host hung up first (nobody is left to read it)."""
    pidfd = os.pidfd_open(pid)
    with select.epoll() as ep:
        ep.register(pidfd, select.EPOLLIN)
        ep.register(ctrl.fileno(), select.EPOLLIN | select.EPOLLHUP)
        try:
            for fd, _ in ep.poll():
                if fd == pidfd:
                    return os.waitpid(pid, 0)[1]
            return None  # the host sends nothing during a command: this is its hang-up
        finally:
            os.close(pidfd)


def _start(request, fds, env):
    """Start the command as bubblewrap would have: its own session (``--new-session``), stdin from
    /dev/null, the given stdout and stderr, no other descriptor, the signals the interpreter
    ignores back to their defaults (an ignored signal stays ignored across exec), ``execvp`` with
    the command's own ``PATH``. Returns its Popen, or None with bubblewrap's error written to the
    command's stderr.

    ``subprocess`` starts it with vfork where it can (a third of a fork's cost here) and resets
    dispositions from C, unlike ``posix_spawn``, whose child leaves glibc's internal signals
    (32, 33) ignored for good. The server moves itself to the working directory first, so that a
    failure there reads as bubblewrap's (it uses no relative path)."""
    argv, cwd = request["argv"], request["cwd"]
    try:
        os.chdir(cwd)
    except OSError as exc:
        os.write(fds[1], f"bwrap: Can't chdir to {cwd}: {exc.strerror}\n".encode())
        return None
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fds[0], stderr=fds[1], env=env,
                                close_fds=True, start_new_session=True, restore_signals=True)
    except OSError as exc:
        os.write(fds[1], f"bwrap: execvp {argv[0]}: {exc.strerror}\n".encode())
        return None


def _serve(ctrl, env):
    while True:
        msg, fds, _, _ = socket.recv_fds(ctrl, 1 << 20, 2)
        if not msg:
            return
        request = json.loads(msg)
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            ctrl.send(json.dumps({"error": "expected 2 descriptors"}).encode())
            continue
        try:
            proc = _start(request, fds, env)
        finally:
            for fd in fds:
                os.close(fd)
        status = 1 << 8 if proc is None else _wait(proc.pid, ctrl)
        if proc is not None:
            proc.returncode = status  # reaped here: subprocess must never wait for that pid again
        clean = _kill_the_rest()
        if status is None:  # the host is gone: so is everything here
            return
        # bubblewrap reports a command killed by signal N as 128 + N: so do we.
        code = os.waitstatus_to_exitcode(status)
        ctrl.send(json.dumps({"exit": 128 - code if code < 0 else code, "clean": clean}).encode())


def main():
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    ctrl.set_inheritable(False)
    env = _environment()
    if not _alone_in_pid_namespace():
        sys.exit("deepgym_exec: refusing to run outside a private PID namespace")
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    ctrl.send(json.dumps({"ready": os.getpid()}).encode())
    _serve(ctrl, env)


if __name__ == "__main__":
    main()
