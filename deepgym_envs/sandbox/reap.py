"""Remove what crashed runs left behind: temp dirs, pids cgroups and containers of dead owners.

A sandbox's temp dir (``/tmp/deepgym-ns-<pid>-*``, ``/tmp/deepgym-docker-<pid>-*``) and cgroup
(``deepgym-<pid>-*``) carry the pid of the process that owns them; the holder itself exits with
its owner, so only these remain. Docker containers and volumes carry the owner's pid and host as
labels; a container normally stops (and is removed) when its owner dies, but one the engine kept
through a restart, or a volume, is removed here.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import tempfile

from deepgym_envs.docker_engine import LABEL, LABEL_HOST, LABEL_PID, engine
from deepgym_envs.errors import SandboxUnavailable
from deepgym_envs.sandbox.base import rmtree
from deepgym_envs.sandbox.cgroup import _ROOTS, PidsCgroup

_TMP = re.compile(r"deepgym-(?:ns|docker|local|stage|support)-(\d+)-")
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
    # stage and support: a process's root staging dir and helper-script copy (a SIGKILLed Ray worker
    # leaves both; its staging namespace died with it, so the dir holds no mount on the host).
    for pattern in ("deepgym-ns-*", "deepgym-docker-*", "deepgym-local-*", "deepgym-stage-*", "deepgym-support-*"):
        for path in glob.glob(os.path.join(tempfile.gettempdir(), pattern)):
            m = _TMP.match(os.path.basename(path))
            if m and not _alive(int(m.group(1))):
                rmtree(path, ignore_errors=True)
                removed.append(path)
    for root in _ROOTS:
        for path in glob.glob(os.path.join(root, "deepgym-*")):
            m = _CGROUP.match(os.path.basename(path))
            if m and os.path.isdir(path) and not _alive(int(m.group(1))):
                PidsCgroup(path).close()
                removed.append(path)
    return removed + reap_docker()


def reap_docker() -> list[str]:
    """Containers and volumes labelled by this host's deepgym processes that are gone.

    Without an engine (or the docker SDK) there is nothing to reap.
    """
    try:
        client = engine()
    except SandboxUnavailable:
        return []
    host = socket.gethostname()

    def dead(labels: dict[str, str]) -> bool:
        pid = labels.get(LABEL_PID, "")
        return labels.get(LABEL_HOST) == host and pid.isdigit() and not _alive(int(pid))

    removed = []
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}):
        if dead(container.labels):
            try:
                container.remove(force=True, v=True)
                removed.append(f"container {container.name}")
            except Exception:  # removed meanwhile (auto-remove)
                pass
    for volume in client.volumes.list(filters={"label": f"{LABEL}=1"}):
        if dead(volume.attrs.get("Labels") or {}):
            try:
                volume.remove(force=True)
                removed.append(f"volume {volume.name}")
            except Exception:  # still in use by a container being removed
                pass
    return removed
