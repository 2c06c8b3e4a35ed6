"""Grade N candidate patches for one task at once: the group GRPO/RLOO needs.

>>> verdicts = run_batch(task, [gold, broken_1, broken_2])   # doctest: +SKIP
>>> [v.status for v in verdicts]
['resolved', 'unresolved', 'unresolved']

Each patch is graded exactly as an agent's final state is (``deepgym_envs.grade``): in its own
fresh sandbox, isolated from the others, so results are deterministic and independent of
``workers``. Order is preserved. A harness failure for one candidate is that candidate's
``no_verdict``; it never takes the batch down, nor does an exception its grading raises (only a
configuration mistake, the same for every candidate, is raised: :func:`~deepgym_envs.grading.graded_alone`).

With ``warm=True`` (the default) each worker's grading view is kept and renewed between candidates
(a fresh copy-on-write layer, nothing left running: :mod:`deepgym_envs.sandbox.pool`), so its
warm test server serves every candidate after the first without interpreter start-up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from deepgym_envs.errors import DeepgymError, TaskFormatError
from deepgym_envs.gate import gate
from deepgym_envs.grading import GRADING_TIMEOUT, Verdict, grade, graded_alone
from deepgym_envs.sandbox import SandboxLimits
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.tasks import Task


def run_batch(task: Task, patches: Iterable[str], workers: int | None = None, *, backend: str | None = None,
              limits: SandboxLimits | None = None, timeout: float = GRADING_TIMEOUT,
              executor: str = "thread", warm: bool = True, retries: int = 2,
              straggler_after: float | None = None, validate_first: bool | None = None) -> list[Verdict]:
    """Grade every patch against ``task``'s hidden tests; one Verdict per patch, in order.

    ``executor``: ``"thread"`` grades on this machine, ``workers`` at a time (default: the number
    of CPUs; grading is process-bound, threads only wait). ``"ray"`` grades on a Ray cluster
    (:mod:`deepgym_envs.ray_batch`), one CPU per grading, ``workers`` capping how many are in
    flight; it joins the cluster ``ray.init`` was called with, else ``$RAY_ADDRESS``, else starts a
    local instance. Ray only: a candidate whose worker or node is lost is re-run up to ``retries``
    more times, then is a ``no_verdict`` saying so; with ``straggler_after`` (seconds), a candidate
    still running that long gets a second copy on a free CPU, and the first result wins.

    An imported task is validated first (:mod:`deepgym_envs.gate`, once, cached): if it does not
    validate, every candidate's verdict is ``no_verdict`` with the reason, and none is graded.
    ``validate_first=False`` grades anyway (None: ``$DEEPGYM_VALIDATE_FIRST``, on by default).
    """
    patches = list(patches)
    if not all(isinstance(p, str) for p in patches):
        raise DeepgymError("run_batch takes patches as strings (unified diffs)")
    blocked = gate(task, backend=backend, validate_first=validate_first)
    if blocked is not None:
        return [dataclasses.replace(blocked) for _ in patches]
    if executor == "ray":
        from deepgym_envs.ray_batch import run_batch_ray  # Ray is optional: imported only when asked for

        return run_batch_ray(task, patches, workers, backend=backend, limits=limits, timeout=timeout,
                             retries=retries, straggler_after=straggler_after)
    if executor != "thread":
        raise DeepgymError(f"unknown executor {executor!r}; choose 'thread' or 'ray'")
    workers = max(1, min(workers or os.cpu_count() or 1, len(patches) or 1))

    views = ViewPool(max_idle=workers) if warm else None

    def one(patch: str) -> Verdict:
        try:
            return grade(task, patch, backend=backend, limits=limits, timeout=timeout, views=views)
        except Exception as exc:
            return graded_alone(exc)

    with views or contextlib.nullcontext(), ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, patches))


def read_patches(path: str | Path) -> list[str]:
    """Patches from JSONL: each line a JSON string, or an object with a ``patch`` (or
    ``model_patch``, as in SWE-bench predictions) field."""
    patches = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskFormatError(str(path), lineno, None, f"invalid JSON: {exc.msg}") from None
            if isinstance(row, dict):
                row = row.get("patch", row.get("model_patch"))
            if not isinstance(row, str):
                raise TaskFormatError(str(path), lineno, "patch", "expected a string or an object with 'patch'")
            patches.append(row)
    return patches
