"""Who sandboxed code is: never the host's root, never a user with capabilities.

Inside every sandbox, code runs as :data:`SANDBOX_UID` (1000), not 0. On the host that uid is

* the invoking user, when deepgym runs as an ordinary user (a user namespace maps it), or
* :func:`service_uid` (64023 unless ``$DEEPGYM_SANDBOX_UID`` says otherwise), an unprivileged uid
  with no account, when deepgym runs as root: root's own uid is never mapped into a sandbox, so
  a root-owned host file is as foreign to sandboxed code as to any stranger.

The files a sandbox must be able to change (a pristine tree's copy-on-write view, its scratch
space) are owned by that uid; :func:`give` hands them over.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from typing import Iterator

#: The uid and gid sandboxed code sees as its own.
SANDBOX_UID = 1000
_DEFAULT_SERVICE_UID = 64023


def running_as_root() -> bool:
    return os.geteuid() == 0


@functools.lru_cache(maxsize=1)
def service_uid() -> int:
    """The host uid that stands for sandboxed code when deepgym runs as root."""
    raw = os.environ.get("DEEPGYM_SANDBOX_UID", str(_DEFAULT_SERVICE_UID))
    try:
        uid = int(raw)
    except ValueError:
        raise ValueError(f"DEEPGYM_SANDBOX_UID={raw!r} is not a number") from None
    if uid <= 0:
        raise ValueError(f"DEEPGYM_SANDBOX_UID={uid}: sandboxed code must not run as the host's root")
    return uid


def host_owner() -> tuple[int, int] | None:
    """(uid, gid) that sandbox-writable host files must belong to; None when nothing needs changing."""
    return (service_uid(), service_uid()) if running_as_root() else None


def give(path: str, recursive: bool = False) -> None:
    """Make ``path`` (and with ``recursive`` everything under it) the sandbox identity's.

    A no-op for an ordinary user, whose own files are already the sandbox's. Symlinks are changed
    themselves, never followed.
    """
    owner = host_owner()
    if owner is None:
        return
    if recursive and os.path.isdir(path) and not os.path.islink(path):
        own_tree(path, owner)
    else:
        os.lchown(path, *owner)


def own_tree(path: str, owner: tuple[int, int]) -> None:
    """Give ``path`` and everything below it to ``owner``; links are changed, never followed
    (the walk holds each directory open, so a link swapped in meanwhile leads nowhere)."""
    os.chown(path, *owner, follow_symlinks=False)
    for _, dirs, files, fd in os.fwalk(path, follow_symlinks=False):
        for name in (*dirs, *files):
            os.chown(name, *owner, dir_fd=fd, follow_symlinks=False)


@functools.lru_cache(maxsize=4096)
def give_tree(path: str) -> None:
    """:func:`give` a pristine tree once per process (trees are immutable once built)."""
    owner = host_owner()
    if owner is None:
        return
    st = os.lstat(path)
    marker = os.path.join(path, ".git", "deepgym-owner")
    if (st.st_uid, st.st_gid) == owner and os.path.exists(marker):
        return
    give(path, recursive=True)
    with open(marker, "w") as fh:  # written last: a tree given half-way is given again
        fh.write(f"{owner[0]}\n")
    os.lchown(marker, *owner)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def acting_as_sandbox() -> Iterator[None]:
    """Within this block, files this *thread* creates or removes are the sandbox uid's doing.

    A copy-on-write workspace mounted in the sandbox's user namespace refuses new files owned by
    a uid it does not map, and root is never mapped. ``setfsuid`` changes the file-system identity
    of the calling thread only (the kernel keeps credentials per thread), so other threads of
    this process are unaffected; the block restores root's afterwards.
    """
    owner = host_owner()
    if owner is None:
        yield
        return
    libc = _libc()
    libc.setfsgid(owner[1])
    libc.setfsuid(owner[0])
    try:
        yield
    finally:
        libc.setfsuid(0)
        libc.setfsgid(0)
