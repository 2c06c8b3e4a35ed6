"""deepgym's own files that must be readable inside every sandbox: the pytest runner and plugin."""

from __future__ import annotations

import atexit
import functools
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

#: (file in this package, name inside the support directory)
_FILES = (("_report_plugin.py", "deepgym_report.py"), ("_pytest_runner.py", "deepgym_pytest.py"),
          ("_warm_server.py", "deepgym_warm.py"))
RUNNER = "deepgym_pytest.py"


@functools.lru_cache(maxsize=1)
def support_host_dir() -> str:
    """A private copy of the support files for this process, removed when it exits."""
    path = tempfile.mkdtemp(prefix="deepgym-support-")
    here = Path(__file__).parent
    for src, dst in _FILES:
        shutil.copyfile(here / src, os.path.join(path, dst))
        os.chmod(os.path.join(path, dst), 0o444)
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
