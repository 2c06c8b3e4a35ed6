"""Remove what crashed runs left behind: namespace temp dirs and pids cgroups of dead owners.

A sandbox's temp dir (``/tmp/deepgym-ns-<pid>-*``) and cgroup (``deepgym-<pid>-*``) carry the pid
of the process that owns them; the holder itself exits with its owner, so only these remain.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile

from deepgym_envs.sandbox.cgroup import _ROOTS, PidsCgroup

_TMP = re.compile(r"deepgym-ns-(\d+)-")
_CGROUP = re.compile(r"deepgym-(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap() -> list[str]:
    """Delete leftovers whose owner process is gone; returns what was removed."""
    removed = []
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "deepgym-ns-*")):
        m = _TMP.match(os.path.basename(path))
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    for root in _ROOTS:
        for path in glob.glob(os.path.join(root, "deepgym-*")):
            m = _CGROUP.match(os.path.basename(path))
            if m and os.path.isdir(path) and not _alive(int(m.group(1))):
                PidsCgroup(path).close()
                removed.append(path)
    return removed
