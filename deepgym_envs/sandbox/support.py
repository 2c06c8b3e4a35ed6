"""deepgym's own files that must be readable inside every sandbox, read-only: its helper scripts.

The scripts are testrun's (its runner, report plugin and warm server, in
``deepgym_envs/testrun/in_sandbox``); the sandbox copies them and never looks inside. A private
copy per process, read-only to everyone, bound read-only: nothing a sandbox runs can change what
the next command executes.
"""

from __future__ import annotations

import atexit
import functools
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

#: The helper scripts that run inside sandboxes (a data folder: no module here imports them).
HELPERS = Path(__file__).resolve().parent.parent / "testrun" / "in_sandbox"


def helper_files() -> list[Path]:
    """The scripts to copy: the folder's ``.py`` files (an install may have compiled them beside)."""
    return sorted(p for p in HELPERS.iterdir() if p.suffix == ".py" and p.is_file())


def copy_helpers(dest: str) -> None:
    """Copy every helper script into ``dest``, read-only."""
    for src in helper_files():
        shutil.copyfile(src, os.path.join(dest, src.name))
        os.chmod(os.path.join(dest, src.name), 0o444)


@functools.lru_cache(maxsize=1)
def support_host_dir() -> str:
    """A private copy of the support files for this process, removed when it exits."""
    path = tempfile.mkdtemp(prefix=f"deepgym-support-{os.getpid()}-")  # the pid: reap.py finds a dead owner's
    copy_helpers(path)
    # `python` and `python3` inside the sandbox are this interpreter (a venv's, if we run in one),
    # even on systems that ship no `python` command.
    # A wrapper, not a symlink: Python finds its venv from the path it was started by.
    os.mkdir(os.path.join(path, "bin"))
    for name in ("python", "python3"):
        wrapper = os.path.join(path, "bin", name)
        with open(wrapper, "w") as fh:
            fh.write(f'#!/bin/sh\nexec {shlex.quote(os.path.abspath(sys.executable))} "$@"\n')
        os.chmod(wrapper, 0o555)
    os.chmod(path, 0o755)
    atexit.register(shutil.rmtree, path, True)
    return path
