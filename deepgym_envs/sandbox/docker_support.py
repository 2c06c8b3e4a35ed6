"""deepgym's files inside a docker sandbox: the pytest runner and plugin, and two tiny commands.

The host's support directory (``support.py``) holds ``python`` wrappers that start the *host's*
interpreter, which does not exist inside an image; this one holds wrappers that make sense in a
container, and is bound read-only at ``/deepgym``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

from deepgym_envs.sandbox.support import _FILES

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
    here = Path(__file__).parent
    for src, dst in _FILES:
        shutil.copyfile(here / src, os.path.join(path, dst))
        os.chmod(os.path.join(path, dst), 0o444)
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
