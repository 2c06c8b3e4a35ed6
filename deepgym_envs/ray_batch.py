"""``run_batch(..., executor="ray")``: grade candidate patches as Ray tasks across a cluster.

Each candidate is one Ray task asking for one CPU, placed with the ``SPREAD`` strategy so a group
fills every node rather than queueing on the first. A grading is a whole sandbox lifetime (build or
reuse the pristine tree, apply, run the hidden tests), hundreds of milliseconds at least, so a task
per candidate costs little next to the work. The pristine tree is built on the node that grades, in
that node's deepgym cache.

Verdicts are the local executor's: the same :func:`deepgym_envs.grading.grade` runs on the node.
What Ray adds is handled the way grading handles its own failures:

* a worker or node lost mid-grading (OOM, preemption, a removed node) is re-run elsewhere, up to
  ``retries`` more times (grading has no side effects outside its own sandbox); after that the
  candidate is a ``no_verdict`` whose reason says so. Never a fake 0.
* with ``straggler_after``, a candidate still running after that many seconds, while the cluster
  has a free CPU and nothing else waits, gets a second copy; the first result wins and the other
  is cancelled (Ray raises ``KeyboardInterrupt`` in it, so grading's own ``with`` blocks close its
  sandbox). One slow node then costs one duplicate, not the whole batch's latency.
* an exception raised by grading itself is that candidate's ``no_verdict``, as with threads; only
  a configuration mistake propagates (:func:`deepgym_envs.grading.graded_alone`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from deepgym_envs._ray import RepoBundle, connect, localise, pack_repos, reap_node_once, reap_nodes, should_ship
from deepgym_envs.grading import GRADING_TIMEOUT, Verdict, grade, graded_alone
from deepgym_envs.sandbox import SandboxLimits
from deepgym_envs.tasks import Task

#: Re-runs of a candidate whose worker or node was lost, after its first attempt.
RETRIES = 2


def grade_on_node(task: Task, bundles: dict[str, RepoBundle], patch: str, backend: str | None,
                  limits: SandboxLimits | None, timeout: float) -> Verdict:
    """What each Ray task runs: grading, on this node's copy of the repository."""
    reap_node_once()  # sandboxes a killed worker on this node left behind
    [task] = localise([task], bundles)
    return grade(task, patch, backend=backend, limits=limits, timeout=timeout)


@lru_cache(maxsize=1)
def _remote_grade() -> Any:
    ray = connect()
    # max_retries=0: the loop below re-runs lost candidates itself, so that it can count the
    # attempts, say why a candidate gave up, and treat a straggler's copy as one more attempt.
    return ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")(grade_on_node)


@dataclass
class _Candidate:
    patch: str
    attempts: int = 0
    running: dict[Any, float] = field(default_factory=dict)
    """In-flight refs and when each was submitted."""
    duplicated: bool = False
    lost: str = ""
    """Why the last attempt was lost, for the no_verdict once the retries run out."""


def run_batch_ray(task: Task, patches: list[str], workers: int | None = None, *, backend: str | None = None,
                  limits: SandboxLimits | None = None, timeout: float = GRADING_TIMEOUT,
                  ship_repos: bool | None = None, retries: int = RETRIES,
                  straggler_after: float | None = None) -> list[Verdict]:
    """One Verdict per patch, in order.

    ``workers`` caps the gradings in flight, duplicates included (None: as many as the cluster's
    CPUs allow, which Ray decides). ``ship_repos`` sends the task's local repository through the
    object store (None: only when the cluster has more than one node; a single node already has
    the driver's files). ``retries``: re-runs of a candidate lost with its worker or node.
    ``straggler_after``: seconds before a still-running candidate gets a second copy (None: never).
    """
    ray = connect()
    if not patches:
        return []
    bundles = pack_repos([task]) if should_ship(ray, ship_repos) else {}
    task_ref, bundles_ref = ray.put(task), ray.put(bundles)  # sent once, not once per candidate
    remote = _remote_grade()
    limit = workers or len(patches)
    candidates = [_Candidate(p) for p in patches]
    verdicts: list[Verdict | None] = [None] * len(patches)
    owner: dict[Any, int] = {}  # in-flight ref -> candidate index
    waiting = list(range(len(patches)))  # not yet (or no longer) in flight, first in first out

    def submit(i: int) -> None:
        c = candidates[i]
        ref = remote.remote(task_ref, bundles_ref, c.patch, backend, limits, timeout)
        c.attempts += 1
        c.running[ref] = time.monotonic()
        owner[ref] = i

    def settle(i: int, verdict: Verdict) -> None:
        verdicts[i] = verdict
        for ref in candidates[i].running:  # the straggler's other copy: cancelled, sandbox closed
            ray.cancel(ref)
            owner.pop(ref, None)
        candidates[i].running.clear()

    lost_any = False
    try:
        while waiting or owner:
            while waiting and len(owner) < limit:
                submit(waiting.pop(0))
            done, _ = ray.wait(list(owner), num_returns=1, timeout=_poll(straggler_after))
            for ref in done:
                i = owner.pop(ref)
                c = candidates[i]
                del c.running[ref]
                try:
                    settle(i, ray.get(ref))
                except ray.exceptions.RayTaskError as exc:  # grading itself raised: as with threads
                    settle(i, graded_alone(exc.cause if isinstance(exc.cause, Exception) else exc))
                except ray.exceptions.RayError as exc:  # the worker, its node or the result was lost
                    c.lost = f"{type(exc).__name__}: {str(exc).strip()[:300]}"
                    lost_any = True
                    if c.running:
                        continue  # its other copy may still win
                    if c.attempts <= retries:
                        waiting.insert(0, i)  # ahead of fresh candidates: it has waited longest
                    else:
                        settle(i, Verdict.no_verdict(f"ray: lost on all {c.attempts} attempts; last: {c.lost}"))
            if straggler_after is not None and not waiting:
                _duplicate_stragglers(ray, candidates, owner, limit, straggler_after, submit)
    finally:
        for ref in owner:  # a configuration mistake is propagating: stop the rest of the group
            ray.cancel(ref)
    if lost_any:  # a killed worker cannot remove its sandbox's temp dirs; the node's reaper can
        reap_nodes(ray)
    return [v for v in verdicts if v is not None]


def _poll(straggler_after: float | None) -> float | None:
    """How long one ray.wait may block: forever without straggler checks."""
    return None if straggler_after is None else max(0.05, min(straggler_after / 4, 1.0))


def _duplicate_stragglers(ray: Any, candidates: list[_Candidate], owner: dict[Any, int], limit: int,
                          after: float, submit: Any) -> None:
    """A second copy of each candidate running longer than ``after``, while a CPU is free: a copy
    that could only queue behind the straggler would win nothing."""
    now = time.monotonic()
    for i in sorted(set(owner.values())):
        c = candidates[i]
        if c.duplicated or len(owner) >= limit or not c.running or now - min(c.running.values()) < after:
            continue
        if ray.available_resources().get("CPU", 0) < 1:
            return
        c.duplicated = True
        submit(i)
