"""What the benchmarks share: medians, a padded task, and how a missing backend is reported.

The scripts run as ``python bench/NAME.py``, so this directory is on ``sys.path``.
"""

from __future__ import annotations

import os
import shutil
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from deepgym_envs.tasks import Task, find_task, load_tasks


def median_ms(samples: list[float]) -> float:
    return round(1000 * statistics.median(samples), 3)


def ratio(a: float, b: float) -> float | None:
    """a / b, rounded; None when b is zero (nothing to compare)."""
    return round(a / b, 2) if b else None


def builtin_task(task_id: str) -> Task:
    return find_task(load_tasks("builtin"), task_id)


def padded(task: Task, files: int, tmp: Path) -> Task:
    """The task with ``files`` extra small files in its repository (a ~2,000-file repo for reset)."""
    if not files:
        return task
    repo = tmp / "repo"
    shutil.copytree(task.repo_path, repo)
    for i in range(files):
        d = repo / "data" / f"d{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")
    return replace(task, repo_path=str(repo), instance_id=f"{task.instance_id}-pad{files}")


def try_backend(name: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, or ``"unavailable: <reason>"`` when the backend cannot run here.

    The docker backend is optional on a machine: its absence is a result to report, not a crash.
    """
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - any failure to start a backend is reported as such
        reason = " ".join(str(exc).split())[:300] or type(exc).__name__
        return f"unavailable: {reason}"


def descendants(root: int) -> list[int]:
    """Every process below ``root``, read from /proc (what a leak check counts)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out
