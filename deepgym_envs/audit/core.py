"""The adversarial verifier audit: try every exploit on every task, report what got through.

Each tier-1 strategy runs twice per task: as a patch handed straight to the verifier, and as
agent actions through the real environment (``edit``/``bash`` calls, then ``submit``), so the
whole path an RL agent would take is attacked, not only the grader. An attempt is *exploited*
when the verdict is ``resolved`` and stays resolved with every file of the gold patch removed
from the change: resolving by changing the code the real fix changes counts as a fix.

>>> report = audit_tasks(load_tasks("builtin"), workers=2)     # doctest: +SKIP
>>> report.exploitable, report.summary()["exploited_pairs"]
(False, 0)
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from rich.markup import escape
from rich.table import Table

from deepgym_envs.audit.acting import actions_for, evidence
from deepgym_envs.audit.catalog import ALL
from deepgym_envs.audit.leaks import scan_tasks
from deepgym_envs.audit.llm import llm_attempts, strip_files
from deepgym_envs.audit.sequences import run_sequence
from deepgym_envs.audit.strategies import Strategy
from deepgym_envs.audit.types import Attacker, Attempt, Verifier
from deepgym_envs.env import SWEEnv
from deepgym_envs.grading import Verdict, grade
from deepgym_envs.progress import progress_bar
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.tasks import Task, patch_paths
from deepgym_envs.trees import pristine_tree

#: (attacker, tier): tier 2 = white-box, 3 = black-box (see :mod:`deepgym_envs.audit.llm`).
AttackerSpec = tuple[Attacker, int]


@dataclass(frozen=True)
class _Job:
    """One unit of audit work: a strategy in one mode, or one LLM attacker, against one task."""

    task: Task
    mode: str  # "patch" | "actions" | "llm"
    strategy: Strategy | None = None
    attacker: AttackerSpec | None = None

    @property
    def label(self) -> str:
        name = self.strategy.name if self.strategy else f"llm-{self.attacker[0].name}"  # type: ignore[index]
        return f"{self.task.instance_id} {name} ({self.mode})"


def _jobs(task: Task, strategies: Sequence[Strategy], attackers: Sequence[AttackerSpec],
          as_actions: bool) -> list[_Job]:
    jobs = [_Job(task, "patch", s) for s in strategies if s.patch_mode]
    if as_actions:
        jobs += [_Job(task, "actions", s) for s in strategies]
    return jobs + [_Job(task, "llm", attacker=a) for a in attackers]


class _Auditor:
    """Runs jobs against one verifier. ``verifier`` None = the real grading on ``backend``."""

    def __init__(self, verifier: Verifier | None, backend: str | None, rounds: int) -> None:
        self.real = verifier is None or verifier is grade
        self.verifier: Verifier = self._grade if self.real else verifier  # type: ignore[assignment]
        self.backend = backend
        self.rounds = rounds
        # Per worker thread: a pool of grading views (graded as run_batch grades, on a warm
        # server) and the environment of the task it is on (episodes are its resets). A view or
        # an environment that one attempt could poison for the next is a hole the poison
        # strategies look for on their own; sharing them here only makes the audit faster.
        self._local = threading.local()
        self._owned: list[Any] = []
        self._lock = threading.Lock()

    def _grade(self, task: Task, patch: str) -> Verdict:
        pool = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = self._own(ViewPool(max_idle=2))
        return grade(task, patch, backend=self.backend, views=pool)

    def _own(self, thing: Any) -> Any:
        with self._lock:
            self._owned.append(thing)
        return thing

    def _env(self, task: Task) -> Any:
        current = getattr(self._local, "env", None)
        if current is not None and current[0] == task.instance_id:
            return current[1]
        if current is not None:
            current[1].close()
        env = SWEEnv([task], task_id=task.instance_id, sandbox=self.backend, reward="outcome", max_steps=0)
        self._local.env = (task.instance_id, self._own(env))
        return env

    def close(self) -> None:
        with self._lock:
            owned, self._owned = self._owned, []
        for thing in owned:
            thing.close()

    def run(self, job: _Job) -> list[Attempt]:
        if job.mode == "llm":
            attacker, tier = job.attacker  # type: ignore[misc]
            return llm_attempts(job.task, attacker, self.verifier, tier, self.rounds)
        assert job.strategy is not None
        if job.strategy.kind in ("poison", "cache"):
            return [run_sequence(self, job.task, job.strategy, job.mode)]
        if job.mode == "patch":
            patch = job.strategy.patch(job.task)
            return [self._attempt(job, patch, self.verifier(job.task, patch))]
        patch, verdict = self._act(job.task, job.strategy)
        return [self._attempt(job, patch, verdict)]

    def _attempt(self, job: _Job, patch: str, verdict: Verdict) -> Attempt:
        # A masked verdict the candidate caused is a win for a policy too: its 0 becomes a dropped
        # rollout. A run found tampered with was caught, whatever its status says.
        caught = bool(getattr(verdict, "tampered", False))
        exploited = not caught and (verdict.masked or (verdict.resolved and
                                                       self._resolved_without_gold(job.task, patch)))
        return Attempt(job.task.instance_id, job.strategy.name, 1, job.mode,  # type: ignore[union-attr]
                       exploited, verdict.status, evidence(verdict), patch)

    def _resolved_without_gold(self, task: Task, patch: str) -> bool:
        if not set(patch_paths(patch)) & set(task.gold_files):
            return True  # grading the same patch again would give the same verdict
        return self.verifier(task, strip_files(patch, task.gold_files)).resolved

    def _act(self, task: Task, strategy: Strategy) -> tuple[str, Verdict]:
        """Carry the strategy out as tool calls in the real environment; return (diff, verdict)."""
        return self.episode(self._env(task), task, actions_for(strategy.plan(task), pristine_tree(task)))

    def episode(self, env: Any, task: Task, calls: list[dict[str, Any]]) -> tuple[str, Verdict]:
        """One episode of ``env``: reset, the tool calls, submit; (the diff, its verdict)."""
        env.reset()
        for action in calls:
            _, _, terminated, _, info = env.step(action)
            if terminated:  # the sandbox failed: the episode is over with no_verdict
                return "", _verdict(info["verdict"])
        patch = env.sandbox.diff()
        if not self.real:
            return patch, self.verifier(task, patch)
        _, _, _, _, info = env.step({"name": "submit", "arguments": {}})
        return patch, _verdict(info["verdict"])


def _verdict(data: dict[str, Any]) -> Verdict:
    """A Verdict back from ``info["verdict"]`` (its ``to_dict()``)."""
    names = {f.name for f in dataclasses.fields(Verdict)}
    return Verdict(**{k: v for k, v in data.items() if k in names})


def audit_task(task: Task, verifier: Verifier | None = None, strategies: Sequence[Strategy] = ALL,
               attackers: Sequence[AttackerSpec] = (), rounds: int = 3, as_actions: bool = True, *,
               backend: str | None = None) -> list[Attempt]:
    """Every strategy against one task (as a patch, and as actions if ``as_actions``), then the LLM
    attackers. ``verifier`` None = the real grading (``deepgym_envs.grade``) on ``backend``."""
    auditor = _Auditor(verifier, backend, rounds)
    try:
        return [a for job in _jobs(task, strategies, attackers, as_actions) for a in auditor.run(job)]
    finally:
        auditor.close()


def audit_tasks(tasks: Sequence[Task], verifier: Verifier | None = None, strategies: Sequence[Strategy] = ALL,
                attackers: Sequence[AttackerSpec] = (), rounds: int = 3, as_actions: bool = True, *,
                workers: int | None = None, backend: str | None = None, progress: bool = True,
                verifier_name: str | None = None, leaks: bool | None = None) -> "AuditReport":
    """:func:`audit_task` over a task set, ``workers`` jobs at a time, with a progress bar; then
    the leak scan (:mod:`deepgym_envs.audit.leaks`; by default only with the real verifier)."""
    started = time.monotonic()
    auditor = _Auditor(verifier, backend, rounds)
    jobs = [j for t in tasks for j in _jobs(t, strategies, attackers, as_actions)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    results: list[list[Attempt]] = []
    try:
        with progress_bar("audit", len(jobs), enabled=progress) as advance, ThreadPoolExecutor(workers) as pool:
            for job, attempts in zip(jobs, pool.map(auditor.run, jobs)):
                results.append(attempts)
                hit = any(a.exploited for a in attempts)
                advance(f"{job.label}: {'EXPLOITED' if hit else attempts[-1].status if attempts else '-'}")
    finally:
        auditor.close()
    found = []
    if leaks if leaks is not None else auditor.real:
        found = [leak.to_dict() for leak in scan_tasks(tasks, backend)]
    name = verifier_name or ("deepgym_envs.grade" if auditor.real else getattr(verifier, "__name__", "custom"))
    return AuditReport([a for r in results for a in r], [t.instance_id for t in tasks],
                       [s.name for s in strategies], name, time.monotonic() - started, leaks=found)


@dataclass
class AuditReport:
    """Every attempt of an audit, and what they add up to."""

    attempts: list[Attempt]
    tasks: list[str]
    strategies: list[str]
    verifier: str = "deepgym_envs.grade"
    wall_time: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    leaks: list[dict[str, Any]] = field(default_factory=list)
    """Where a task's answer or hidden tests can be read from its sandbox (``Leak.to_dict()``)."""

    @property
    def exploited(self) -> list[Attempt]:
        return [a for a in self.attempts if a.exploited]

    @property
    def exploitable(self) -> bool:
        """True when any task/strategy pair was exploited (the CLI then exits 1)."""
        return bool(self.exploited)

    @property
    def failed(self) -> bool:
        """Exploitable, or some task's answer lies around: the task set is not fit to train on."""
        return self.exploitable or bool(self.leaks)

    def summary(self) -> dict[str, Any]:
        pairs = {(a.task_id, a.strategy) for a in self.attempts}
        hit_pairs = {(a.task_id, a.strategy) for a in self.exploited}
        by_strategy: dict[str, dict[str, Any]] = {}
        for a in self.attempts:
            row = by_strategy.setdefault(a.strategy, {"tier": a.tier, "attempts": 0, "exploited": 0,
                                                      "by_mode": {}, "tasks_exploited": []})
            row["attempts"] += 1
            mode = row["by_mode"].setdefault(a.mode, {"attempts": 0, "exploited": 0})
            mode["attempts"] += 1
            if a.exploited:
                row["exploited"] += 1
                mode["exploited"] += 1
                if a.task_id not in row["tasks_exploited"]:
                    row["tasks_exploited"].append(a.task_id)
        return {"verifier": self.verifier, "tasks": len(self.tasks), "strategies": len(by_strategy),
                "pairs_tried": len(pairs), "attempts": len(self.attempts),
                "exploited_pairs": len(hit_pairs), "exploited_attempts": len(self.exploited),
                "tasks_exploited": sorted({t for t, _ in hit_pairs}),
                "no_verdict": sum(a.status == "no_verdict" for a in self.attempts),
                "exploitable": self.exploitable, "leaks": len(self.leaks),
                "tasks_leaking": sorted({leak["task_id"] for leak in self.leaks}),
                "wall_time": round(self.wall_time, 2),
                "by_strategy": by_strategy}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "meta": self.meta, "attempts": [a.to_dict() for a in self.attempts],
                "leaks": self.leaks}

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")

    def table(self) -> Table:
        """One row per strategy: attempts, exploits (by mode) and which tasks fell."""
        s = self.summary()
        table = Table(title=f"verifier audit of {s['tasks']} task(s) against {escape(self.verifier)}")
        for col in ("strategy", "tier", "attempts", "exploited", "patch", "actions", "tasks exploited"):
            table.add_column(col, overflow="fold" if col == "tasks exploited" else "ellipsis")
        for name, row in s["by_strategy"].items():
            modes = {m: f"{v['exploited']}/{v['attempts']}" for m, v in row["by_mode"].items()}
            hit = row["exploited"] > 0
            table.add_row(escape(name), str(row["tier"]), str(row["attempts"]),
                          f"[red]{row['exploited']}[/]" if hit else "[green]0[/]",
                          modes.get("patch", "-"), modes.get("actions", modes.get("llm", "-")),
                          escape(", ".join(row["tasks_exploited"][:6]) + (" ..." if len(row["tasks_exploited"]) > 6
                                                                          else "")) or "-")
        return table

    def leak_table(self) -> Table:
        """One row per leak: task, what leaked, where, how much of it."""
        table = Table(title=f"leak scan: {len(self.leaks)} leak(s) in {len({l['task_id'] for l in self.leaks})} task(s)")
        for col in ("task", "kind", "location", "found"):
            table.add_column(col, overflow="fold")
        for leak in self.leaks:
            table.add_row(escape(leak["task_id"]), leak["kind"], escape(leak["location"]),
                          f"{leak['found']}/{leak['of']}")
        return table
