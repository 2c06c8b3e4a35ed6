"""A pids cgroup per sandbox, where this process may create one (root, or a delegated cgroup v2).

RLIMIT_NPROC is not enforced for the host's root user, so a fork bomb run by root inside a user
namespace would not be stopped by it. Where the pids controller is writable, every command of a
sandbox joins the sandbox's own cgroup, whose ``pids.max`` caps the process count; closing kills
whatever is left in it. Elsewhere (ordinary users) the rlimit does the job.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")  # cgroup v1 pids hierarchy, then the v2 unified one


def _writable_root() -> str | None:
    for root in _ROOTS:
        if not os.path.isfile(os.path.join(root, "cgroup.procs")) or not os.access(root, os.W_OK):
            continue
        if root == "/sys/fs/cgroup":
            try:
                with open(os.path.join(root, "cgroup.subtree_control")) as fh:
                    if "pids" not in fh.read().split():
                        continue
            except OSError:
                continue
        return root
    return None


class PidsCgroup:
    """One cgroup with a process cap; ``join()`` is safe to call in a pre-exec hook."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._procs = os.path.join(path, "cgroup.procs")

    @classmethod
    def create(cls, max_pids: int) -> "PidsCgroup | None":
        root = _writable_root() if max_pids else None
        if root is None:
            return None
        path = os.path.join(root, f"deepgym-{os.getpid()}-{uuid.uuid4().hex[:12]}")
        try:
            os.mkdir(path)
            with open(os.path.join(path, "pids.max"), "w") as fh:
                fh.write(str(max_pids))
        except OSError:
            try:
                os.rmdir(path)
            except OSError:
                pass
            return None
        return cls(path)

    def join(self) -> None:
        """Move the calling process (and so all it will spawn) into the cgroup."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)

    def close(self) -> None:
        """Kill every process still in the cgroup, then remove it."""
        for _ in range(100):
            try:
                with open(self._procs) as fh:
                    pids = [int(p) for p in fh.read().split()]
            except FileNotFoundError:
                return
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
