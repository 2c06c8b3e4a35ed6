"""A task's Python environment inside a docker sandbox.

The environment (:mod:`deepgym_envs.pyenv`) is a virtual environment of this host's interpreter:
its ``python`` is a link to that interpreter, whose standard library lies beside it. Both are
bound read-only at their host paths, so the links and the ``pyvenv.cfg`` the environment was
made with hold inside the container as on the host. Whether the image can run that interpreter
(its C library) the backend checks once, by running it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from deepgym_envs.sandbox.hidden import covered, credential_paths, hidden_paths

#: Host directories that are the image's own inside: a host Python there cannot be bound in.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")


def python_env_binds(prefix: str, home: str | None = None) -> list[str]:
    """Host directories a task environment needs, bound read-only at the same path: the
    environment, and the installation of the interpreter it was made from (its ``python`` links
    there, and the standard library lies there): ``home`` where the host found another Python for
    it, else this interpreter's, unless that is among the image's own system directories. Never
    where the environment's link points: a build sandbox wrote that link, and could name any host
    folder with it."""
    binds = [prefix]
    bases = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    for base in sorted({*bases, *([os.path.realpath(home)] if home else [])}, key=len):
        if not any(base == d or base.startswith(d.rstrip("/") + "/") for d in (*_SYSTEM_DIRS, *binds)) and base != "/":
            binds.append(base)
    return binds


def python_env_mounts(binds: list[str], scratch: str, packages: tuple[str, ...] = ()) -> list[Any]:
    """Mounts for :func:`python_env_binds`, with what of deepgym's data and of the host's
    credentials they cover hidden (a ``pip.conf`` in a Python's prefix, a home's ``.netrc``
    beside a Python installed in it).

    What hides is an empty host directory of ``scratch``, bound read-only: a docker tmpfs would
    not do, as the engine copies what lies beneath it into it.
    """
    import docker.types

    def empty(name: str, inside: tuple[str, ...] = ()) -> str:
        path = os.path.join(scratch, name)
        for sub in ("", *inside):  # mount points made here: the bind is read-only to the engine too
            os.makedirs(os.path.join(path, sub), exist_ok=True)
            os.chmod(os.path.join(path, sub), 0o755)
        return path

    mounts = []
    under_root = tuple(os.path.relpath(b, "/root") for b in binds if covered(b, ["/root"]))
    if under_root:
        # An image's /root is its root's alone (0700): the sandbox uid could not reach a Python
        # under it. Nothing of the image's /root is readable by that uid anyway.
        mounts.append(docker.types.Mount("/root", empty("root", under_root), type="bind", read_only=True))
    mounts += [docker.types.Mount(path, path, type="bind", read_only=True) for path in binds]
    # The base installation's site-packages can hold this package's task files (gold patches,
    # hidden tests), as the namespace backend knows; the environment (binds[0]) needs none of it.
    hidden = [p for p in hidden_paths(tuple(binds), packages, binds[0] if binds else None) if covered(p, binds)]
    if hidden:
        mounts += [docker.types.Mount(path, empty("empty"), type="bind", read_only=True) for path in hidden]
    for path, is_dir in credential_paths(tuple(binds), prefixes=tuple(binds[:1])):
        if covered(path, binds) and not covered(path, hidden):
            mounts.append(docker.types.Mount(path, empty("empty") if is_dir else _empty_file(scratch),
                                             type="bind", read_only=True))
    return mounts


def _empty_file(scratch: str) -> str:
    path = os.path.join(scratch, "empty-file")
    if not os.path.exists(path):
        open(path, "w").close()
        os.chmod(path, 0o444)
    return path
