"""``run_batch(..., executor="ray")``: grade candidate patches as Ray tasks across a cluster.

Each candidate is one Ray task asking for one CPU, so Ray spreads a group over every node's cores.
A grading is a whole sandbox lifetime (build or reuse the pristine tree, apply, run the hidden
tests), hundreds of milliseconds at least, so a task per candidate costs little next to the work.
The pristine tree is built on the node that grades, in that node's deepgym cache.

Verdicts are the local executor's: the same :func:`deepgym_envs.grading.grade` runs on the node.
What Ray adds is handled the way grading handles its own failures: a worker or node that dies
(after Ray's retries, grading being idempotent) is that candidate's ``no_verdict``; an exception
raised by grading itself (a configuration mistake) propagates, as it does with threads.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from deepgym_envs._ray import RepoBundle, connect, localise, pack_repos, should_ship
from deepgym_envs.grading import GRADING_TIMEOUT, Verdict, grade
from deepgym_envs.sandbox import SandboxLimits
from deepgym_envs.tasks import Task


def grade_on_node(task: Task, bundles: dict[str, RepoBundle], patch: str, backend: str | None,
                  limits: SandboxLimits | None, timeout: float) -> Verdict:
    """What each Ray task runs: grading, on this node's copy of the repository."""
    [task] = localise([task], bundles)
    return grade(task, patch, backend=backend, limits=limits, timeout=timeout)


@lru_cache(maxsize=1)
def _remote_grade() -> Any:
    ray = connect()
    # max_retries: a worker killed mid-grading (OOM, a lost node) is retried elsewhere; grading has
    # no side effects outside its own sandbox, so a retry is safe.
    return ray.remote(num_cpus=1, max_retries=2)(grade_on_node)


def run_batch_ray(task: Task, patches: list[str], workers: int | None = None, *, backend: str | None = None,
                  limits: SandboxLimits | None = None, timeout: float = GRADING_TIMEOUT,
                  ship_repos: bool | None = None) -> list[Verdict]:
    """One Verdict per patch, in order.

    ``workers`` caps the gradings in flight (None: as many as the cluster's CPUs allow, which Ray
    decides). ``ship_repos`` sends the task's local repository through the object store (None: only
    when the cluster has more than one node; a single node already has the driver's files).
    """
    ray = connect()
    if not patches:
        return []
    bundles = pack_repos([task]) if should_ship(ray, ship_repos) else {}
    task_ref, bundles_ref = ray.put(task), ray.put(bundles)  # sent once, not once per candidate
    remote = _remote_grade()
    limit = workers or len(patches)
    verdicts: list[Verdict | None] = [None] * len(patches)
    pending: dict[Any, int] = {}
    next_index = 0
    while next_index < len(patches) or pending:
        while next_index < len(patches) and len(pending) < limit:
            ref = remote.remote(task_ref, bundles_ref, patches[next_index], backend, limits, timeout)
            pending[ref] = next_index
            next_index += 1
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            verdicts[pending.pop(ref)] = _result(ray, ref)
    return [v for v in verdicts if v is not None]


def _result(ray: Any, ref: Any) -> Verdict:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError:
        raise  # grading itself raised: the same error the thread executor would raise
    except ray.exceptions.RayError as exc:  # the worker, its node or the object died under us
        return Verdict.no_verdict(f"ray: {type(exc).__name__}: {str(exc).strip()[:500]}")
