"""Run as root, sandboxes drop to an unprivileged uid: this makes root-only paths reachable to it.

A Python under ``/root/.pyenv`` or a tree cache under ``/root/.cache`` lies behind a directory
only root may search, so the sandbox uid (:mod:`.identity`) could neither mount the tree as its
overlay's lower layer nor bind the interpreter. The stager is one private mount namespace per
process in which each such path is bound, once, at a name under a directory anyone may search.
Sandbox holders start *inside* that namespace (``nsenter``) and only then give up root, so they
see the staged names; nothing else on the host does.

Binding once per path (trees are immutable once built) keeps starting a holder as cheap as an
ordinary user's: no extra process per sandbox or per reset.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import stat
import subprocess
import tempfile
import threading

from deepgym_envs.errors import SandboxError
from deepgym_envs.sandbox import identity
from deepgym_envs.sandbox.base import host_tool, launcher_env, rmtree


def reachable_by_anyone(path: str) -> bool:
    """Every directory on the way to ``path`` (and ``path`` itself) may be searched by others."""
    path = os.path.realpath(path)
    while True:
        try:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


class Stager:
    """A private mount namespace holding read-reachable binds of root-only paths (root only)."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix=f"deepgym-stage-{os.getpid()}-")
        os.chmod(self.dir, 0o711)  # searchable, not listable
        # The namespace's holder: waits on its stdin, which closes when this process dies.
        self._proc = subprocess.Popen([host_tool("unshare"), "--mount", "--propagation", "private", "--",
                                       "sh", "-c", "echo ready; read -r _ || true"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      start_new_session=True, close_fds=True, env=launcher_env(), cwd="/")
        assert self._proc.stdout is not None
        if self._proc.stdout.readline().strip() != b"ready":
            self.close()
            raise SandboxError("could not start the mount namespace that stages root-only paths")
        self.owner = os.getpid()
        self._staged: dict[str, str] = {}
        self._users: dict[str, int] = {}  # how many sandboxes that will unstage a path use it now
        self._permanent: set[str] = set()  # staged for good by someone: never unmounted
        self._names = itertools.count()  # mount points are never reused, even after an unstage
        self._lock = threading.Lock()

    def stage(self, path: str, *, transient: bool = False) -> str:
        """Where the sandbox uid finds ``path`` inside the stager: ``path`` itself if anyone may
        reach it, else a bind of it made the first time it is asked for.

        ``transient``: a path used for a while only (a build step's directories), which the caller
        hands back with :meth:`unstage`; the bind goes when its last user does, so a long run of
        builds does not pile up mounts that every new holder copies."""
        path = os.path.realpath(path)
        if reachable_by_anyone(path):
            return path
        with self._lock:
            if path not in self._staged:
                point = os.path.join(self.dir, str(next(self._names)))
                os.mkdir(point)
                proc = subprocess.run([host_tool("nsenter"), f"--mount=/proc/{self._proc.pid}/ns/mnt", "--",
                                       "mount", "--bind", path, point], capture_output=True, text=True, timeout=30,
                                      env=launcher_env(), cwd="/")
                if proc.returncode != 0:
                    os.rmdir(point)
                    raise SandboxError(f"could not stage {path} for the sandbox uid: {proc.stderr.strip()[:300]}")
                self._staged[path] = point
            if transient:
                self._users[path] = self._users.get(path, 0) + 1
            else:
                self._permanent.add(path)
            return self._staged[path]

    def unstage(self, path: str) -> None:
        """Hand back a path staged with ``transient=True``; unmounted when no user is left."""
        path = os.path.realpath(path)
        with self._lock:
            if path not in self._users:
                return  # reachable by anyone (never bound), or staged for good
            self._users[path] -= 1
            if self._users[path] > 0:
                return
            del self._users[path]
            if path in self._permanent:
                return  # also staged for good (a tree, a Python, an environment)
            point = self._staged.pop(path)
            subprocess.run([host_tool("nsenter"), f"--mount=/proc/{self._proc.pid}/ns/mnt", "--", "umount", "-l",
                            point], capture_output=True, timeout=30, env=launcher_env(), cwd="/")
            with contextlib.suppress(OSError):
                os.rmdir(point)

    def mounts(self) -> int:
        """How many mounts the stager's namespace holds (what every new holder copies)."""
        with open(f"/proc/{self._proc.pid}/mountinfo", "rb") as fh:
            return fh.read().count(b"\n")

    def enter_as_sandbox_uid(self) -> list[str]:
        """argv prefix: run a program in the stager's namespace as the sandbox uid, no groups.

        A program (``nsenter``) rather than a pre-exec hook: a Python hook makes the child a full
        fork of this process running Python, ~25 ms per holder against ~5 ms for the exec.
        """
        uid = str(identity.service_uid())
        return [host_tool("nsenter"), f"--mount=/proc/{self._proc.pid}/ns/mnt", "--setuid", uid, "--setgid", uid, "--"]

    def close(self) -> None:
        if os.getpid() != getattr(self, "owner", os.getpid()):
            return  # a forked child's copy: the namespace is its parent's
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if stream:
                stream.close()
        # The binds lived only in the namespace that just went: these are empty directories.
        rmtree(self.dir, ignore_errors=True)


_STAGERS: dict[int, Stager] = {}
_STAGERS_LOCK = threading.Lock()


def stager() -> Stager:
    """This process's stager, started at first use and stopped at exit (root only)."""
    if not identity.running_as_root():
        raise SandboxError("only a process running as root stages paths for the sandbox uid")
    with _STAGERS_LOCK:
        s = _STAGERS.get(os.getpid())
        if s is None:
            s = _STAGERS[os.getpid()] = Stager()
            atexit.register(s.close)
        return s
