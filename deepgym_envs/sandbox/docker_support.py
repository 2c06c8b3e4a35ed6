"""deepgym's files inside a docker sandbox, and who owns the sandbox's files.

The host's support directory (``support.py``) holds ``python`` wrappers that start the *host's*
interpreter, which does not exist inside an image; this one holds wrappers that make sense in a
container, and is bound read-only at ``/deepgym``.

Commands in a container never run as uid 0 (:func:`sandbox_user`). When the host user is root,
the files the host writes into a workspace (its copy, patches, ``write_file``, reset) are handed to
that uid (:func:`own_paths`; whole trees by :func:`.identity.own_tree`) so the agent can edit them,
without following any link the agent planted: the host side is root, and a ``chown`` through a link would give a host
file away.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

from collections.abc import Iterable

from deepgym_envs.sandbox.support import copy_helpers

#: The uid and gid of sandboxed commands when the host user is root: not 0, and no one's on the
#: host (Debian hands out 60000-64999 per package, so no system account gets it by chance). Not
#: the namespace backend's host uid either: RLIMIT_NPROC counts a uid's processes host-wide, and a
#: container's would eat into the namespace sandboxes' allowance. The built-in image names it.
SANDBOX_UID = SANDBOX_GID = 64000

SUPPORT_DIR = "/deepgym"
#: Where report files appear inside the container (a host directory of the sandbox, bound rw).
REPORT_DIR = "/deepgym-report"
#: Runs a command, then kills everything it left behind but PID 1 (``kill -1`` spares the caller).
#: Given ``DEEPGYM_REPORT_PATH``, it hands the command fd 9 open on that file as ``DEEPGYM_REPORT_FD``.
EXEC_WRAPPER = f"{SUPPORT_DIR}/bin/deepgym-exec"

_SCRIPTS = {
    # With a report file, the command gets only a descriptor open on it, as on the other backends.
    "deepgym-exec": ('#!/bin/sh\n'
                     'if [ -n "${DEEPGYM_REPORT_PATH:-}" ]; then\n'
                     '  exec 9>>"$DEEPGYM_REPORT_PATH"\n'
                     '  export DEEPGYM_REPORT_FD=9\n'
                     '  unset DEEPGYM_REPORT_PATH\n'
                     'fi\n'
                     '"$@"\n'
                     'rc=$?\n'
                     'kill -KILL -1 2>/dev/null\n'
                     'exit "$rc"\n'),
    # Last on PATH: only used where the image has python3 but no `python` (Debian's own).
    "python": '#!/bin/sh\nexec python3 "$@"\n',
}


@functools.lru_cache(maxsize=1)
def docker_support_dir() -> str:
    """This process's copy of the support files for containers, removed when it exits."""
    # The owner pid in the name, as for sandboxes: `deepgym sandbox reap` removes it after a crash.
    path = tempfile.mkdtemp(prefix=f"deepgym-docker-{os.getpid()}-support-")
    copy_helpers(path)
    os.mkdir(os.path.join(path, "bin"))
    for name, text in _SCRIPTS.items():
        script = os.path.join(path, "bin", name)
        with open(script, "w") as fh:
            fh.write(text)
        os.chmod(script, 0o555)
    os.chmod(os.path.join(path, "bin"), 0o755)
    os.chmod(path, 0o755)
    atexit.register(shutil.rmtree, path, True)
    return path


def sandbox_user() -> tuple[int, int]:
    """(uid, gid) commands run as: the host user's own, or :data:`SANDBOX_UID` in place of root."""
    uid = os.geteuid()
    return (SANDBOX_UID, SANDBOX_GID) if uid == 0 else (uid, os.getegid())


def own_paths(root: str, paths: Iterable[str], owner: tuple[int, int]) -> None:
    """Give ``paths`` (relative to ``root``) and the directories above them to ``owner``.

    Walks down from ``root`` one directory descriptor at a time, opened with ``O_NOFOLLOW``: a
    symbolic link anywhere on the way ends the walk for that path instead of being followed.
    """
    done: set[str] = set()
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for rel in paths:
            parts = [p for p in rel.split("/") if p not in ("", ".")]
            if not parts or ".." in parts or rel in done:
                continue
            done.add(rel)
            _own_path(root_fd, parts, owner)
    finally:
        os.close(root_fd)


def _own_path(root_fd: int, parts: list[str], owner: tuple[int, int]) -> None:
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:  # gone, a link, or not a directory: nothing of ours below it
                return
            os.close(fd)
            fd = nfd
            st = os.fstat(fd)
            if (st.st_uid, st.st_gid) != owner:
                os.fchown(fd, *owner)
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if (st.st_uid, st.st_gid) != owner:
            os.chown(parts[-1], *owner, dir_fd=fd, follow_symlinks=False)
    finally:
        os.close(fd)
