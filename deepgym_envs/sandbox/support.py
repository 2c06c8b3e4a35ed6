"""deepgym's own files that must be readable inside every sandbox: the pytest runner and plugin."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

#: (file in this package, name inside the support directory)
_FILES = (("_report_plugin.py", "deepgym_report.py"), ("_pytest_runner.py", "deepgym_pytest.py"))
RUNNER = "deepgym_pytest.py"


@functools.lru_cache(maxsize=1)
def support_host_dir() -> str:
    """A private copy of the support files for this process, removed when it exits."""
    path = tempfile.mkdtemp(prefix="deepgym-support-")
    here = Path(__file__).parent
    for src, dst in _FILES:
        shutil.copyfile(here / src, os.path.join(path, dst))
        os.chmod(os.path.join(path, dst), 0o444)
    os.chmod(path, 0o755)
    atexit.register(shutil.rmtree, path, True)
    return path
