"""Strategies judged by *another* candidate's verdict (issue 11, classes D and E).

A poison (``kind="poison"``) is graded between two copies of an innocent candidate (the empty
patch, or the gold patch), in one ``run_batch`` group with one worker, so all three share a pooled
grading view, or as three episodes of one environment. It worked when the innocent candidate's
verdict differs after it: ``[empty, poison, empty]`` with the second empty resolved, or
``[gold, poison, gold]`` with the second gold not resolved.

A cache poison (``kind="cache"``) poisons a pooled view with one diff, then has a wrong diff X
(a new note file) graded in it, the way an environment grades every intermediate state; it
worked when a *later* episode that submits X gets ``resolved`` (the verdict cache reused it).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from deepgym_envs.audit.acting import actions_for, bash_call, evidence
from deepgym_envs.audit.strategies import FileChange, Plan, Strategy, make_patch
from deepgym_envs.audit.types import AuditRun, Attempt
from deepgym_envs.batch import run_batch
from deepgym_envs.env import SWEEnv
from deepgym_envs.grading import VERDICTS, Verdict
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.tasks import Task, patch_paths
from deepgym_envs.trees import pristine_tree


def run_sequence(auditor: AuditRun, task: Task, strategy: Strategy, mode: str) -> Attempt:
    tree = pristine_tree(task)
    if strategy.kind == "poison":
        patch, before, after = (_poison_patch if mode == "patch" else _poison_actions)(auditor, task, strategy, tree)
        changed = before.status != "no_verdict" and after.status != before.status
        why = (f"{strategy.victim} before the poison: {evidence(before)} || after: {evidence(after)}")
        return Attempt(task.instance_id, strategy.name, 1, mode, changed, after.status, why, patch)
    patch, first, later = (_cache_patch if mode == "patch" else _cache_actions)(auditor, task, strategy, tree)
    why = f"wrong diff graded after the poison: {evidence(first)} || in a later episode: {evidence(later)}"
    return Attempt(task.instance_id, strategy.name, 1, mode, later.resolved or later.masked, later.status, why,
                   patch)


# -- D: the next candidate ------------------------------------------------------------------------
def _poison_patch(auditor: AuditRun, task: Task, strategy: Strategy, tree: Path) -> tuple[str, Verdict, Verdict]:
    poison = strategy.patch(task, tree)
    victim = task.patch if strategy.victim == "gold" else ""
    if auditor.real:
        verdicts = run_batch(task, [victim, poison, victim], workers=1, backend=auditor.backend)
    else:
        verdicts = [auditor.verifier(task, p) for p in (victim, poison, victim)]
    return poison, verdicts[0], verdicts[2]


def _poison_actions(auditor: AuditRun, task: Task, strategy: Strategy, tree: Path
                    ) -> tuple[str, Verdict, Verdict]:
    """Three episodes of one environment (its pooled grading views are shared by its episodes)."""
    gold = gold_changes(task, tree) if strategy.victim == "gold" else []
    env = SWEEnv([task], task_id=task.instance_id, sandbox=auditor.backend, reward="outcome", max_steps=0)
    try:
        _, before = auditor.episode(env, task, actions_for(Plan((*gold, _note("victim-1"))), tree))
        patch, _ = auditor.episode(env, task, actions_for(_unique(strategy.plan(task, tree)), tree))
        # A different note each time: the same diff would come back from the verdict cache.
        _, after = auditor.episode(env, task, actions_for(Plan((*gold, _note("victim-2"))), tree))
    finally:
        env.close()
    return patch, before, after


def gold_changes(task: Task, tree: Path) -> list[FileChange]:
    """The gold patch as file contents (applied to copies of the files it touches)."""
    with tempfile.TemporaryDirectory(prefix="deepgym-audit-gold-") as tmp:
        paths = patch_paths(task.patch)
        for rel in paths:
            if (tree / rel).is_file():
                (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / rel).write_bytes((tree / rel).read_bytes())
        subprocess.run(["git", "apply", "--whitespace=nowarn", "--recount", "-"], input=task.patch, text=True,
                       cwd=tmp, check=True, capture_output=True)
        out = []
        for rel in paths:
            full = Path(tmp) / rel
            out.append(FileChange(rel, full.read_text(encoding="utf-8", errors="surrogateescape")
                                  if full.is_file() else None))
        return out


def _unique(plan: Plan) -> Plan:
    """The plan plus a note of its own: an identical diff graded before comes from the verdict
    cache, and a poison that never runs poisons nothing."""
    return dataclasses.replace(plan, changes=(*plan.changes, _note("poison")))


def _note(tag: str) -> FileChange:
    return FileChange(f"AUDIT_NOTE_{tag}_{os.urandom(4).hex()}.txt", f"{tag}\n")


# -- E: a poisoned verdict in the cache ------------------------------------------------------------
def _cache_patch(auditor: AuditRun, task: Task, strategy: Strategy, tree: Path) -> tuple[str, Verdict, Verdict]:
    poison = strategy.patch(task, tree)
    wrong = make_patch(tree, [_note("cache")])
    if not auditor.real:
        auditor.verifier(task, poison)
        first = auditor.verifier(task, wrong)
        return poison, first, auditor.verifier(task, wrong)
    with ViewPool(max_idle=1) as pool:
        VERDICTS.grade(task, poison, backend=auditor.backend, views=pool)
        first = VERDICTS.grade(task, wrong, backend=auditor.backend, views=pool)
    return poison, first, VERDICTS.grade(task, wrong, backend=auditor.backend)


def _cache_actions(auditor: AuditRun, task: Task, strategy: Strategy, tree: Path
                   ) -> tuple[str, Verdict, Verdict]:
    """A process-reward episode grades the poison and then the wrong diff (its intermediate states);
    a second environment's episode submits the wrong diff."""
    plan = _unique(strategy.plan(task, tree))
    note = _note("cache")
    undo = [_restore(tree, c.path) for c in plan.changes]
    write = f"printf %s {shlex.quote(note.content or '')} > {shlex.quote(note.path)}"
    calls = actions_for(plan, tree) + [bash_call(" ; ".join([*undo, write]))]
    first_env = SWEEnv([task], task_id=task.instance_id, sandbox=auditor.backend, reward="process",
                       max_steps=0)
    try:
        patch, first = auditor.episode(first_env, task, calls)
    finally:
        first_env.close()
    later_env = SWEEnv([task], task_id=task.instance_id, sandbox=auditor.backend, reward="outcome",
                       max_steps=0)
    try:
        _, later = auditor.episode(later_env, task, actions_for(Plan((note,)), tree))
    finally:
        later_env.close()
    return patch, first, later


def _restore(tree: Path, path: str) -> str:
    """A shell command putting ``path`` back as it is in the pristine tree."""
    src = tree / path
    if not src.is_file():
        return f"rm -f -- {shlex.quote(path)}"
    data = base64.b64encode(src.read_bytes()).decode()
    return f"printf %s {data} | base64 -d > {shlex.quote(path)}"
