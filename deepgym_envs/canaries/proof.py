"""The gold proof: which copies of a task's graded tests come out as canaries must.

Once per task (and tree), the host grades the gold patch's view with every candidate of
:mod:`.copies` planted, each just before its original, through the same runner as a grading. It
keeps an exact copy that passed, and a perturbed copy that failed by an ``AssertionError`` (in the
cases its change touched; its other cases passed) where the exact copy of the same test passed,
all on a run in which every graded test of the file still passed beside them. The proven pool is
kept in memory and on disk beside the tree cache: a pristine tree and its gold patch never change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from deepgym_envs.canaries.canary import graded_sources
from deepgym_envs.canaries.copies import Candidate, candidates
from deepgym_envs.canaries.placing import render
from deepgym_envs.errors import InfrastructureError, SandboxError, SandboxUnavailable, TaskFormatError, ToolError
from deepgym_envs.sandbox import Sandbox
from deepgym_envs.tasks import Task
from deepgym_envs.trees import cache_root, tree_fingerprint

#: Bump when what a proof keeps changes: it names the pools stored on disk.
_POOL_VERSION = 1
#: Candidates tried per file: the proof runs each once, so this bounds its cost.
_MAX_PER_FILE = 40


@dataclass(frozen=True)
class Pool:
    """A task's proven canaries; ``why`` says why there are none, where there are none."""

    candidates: tuple[Candidate, ...] = ()
    why: str = ""

    @property
    def usable(self) -> bool:
        """Whether a grading can plant from it: at least one perturbed copy and one exact copy."""
        return any(c.perturbed for c in self.candidates) and any(not c.perturbed for c in self.candidates)


_POOLS: dict[str, Pool] = {}
_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()


#: Runs the gold patch's grading view with what the callable plants in it: (planted, report, result).
#: Grading supplies it (``grading.canary_pool``): it owns the view, the runner and the configuration.
GoldRun = Callable[[Task, Callable[[Sandbox], list[tuple[Candidate, str]]]], tuple[list[tuple[Candidate, str]], Any, Any]]


def proven_pool(task: Task, run: GoldRun) -> Pool:
    """The task's proven pool, proving it on first use (one gold run, by ``run``, with the candidates planted)."""
    key = _key(task)
    with _GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        if key not in _POOLS:
            stored = _load(task, key)
            pool = stored if stored is not None else _prove(task, run)
            if stored is None and pool.why != _NO_RUN:
                _store(task, key, pool)
            if pool.why != _NO_RUN:  # a run that failed may be transient: proved again next time
                _POOLS[key] = pool
            return pool
        return _POOLS[key]


def _key(task: Task) -> str:
    spec = json.dumps([_POOL_VERSION, task.instance_id, tree_fingerprint(task), task.test_patch, task.patch,
                       task.FAIL_TO_PASS, task.PASS_TO_PASS, task.flaky, task.test_cmd, task.python_env])
    return hashlib.sha256(spec.encode()).hexdigest()[:20]


_NO_RUN = "the gold patch's run with the candidates planted gave no report"


def _prove(task: Task, run: GoldRun) -> Pool:
    ids = [t for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if t not in task.flaky]
    try:
        tried, report, result = run(task, lambda sb: _plant_all(sb, task, ids))
    except (InfrastructureError, SandboxError, SandboxUnavailable, TaskFormatError, ToolError) as exc:
        return Pool(why=f"the gold patch cannot be run: {exc}")
    if not tried:
        return Pool(why="no graded test has an expected value to change")
    if report is None or result.timed_out:
        return Pool(why=_NO_RUN)
    kept = _kept(tried, report["tests"], _assertion_failures(result.output), ids)
    pool = Pool(tuple(kept))
    return pool if pool.usable else Pool(pool.candidates, "no copy came out as a canary must on the gold patch")


def _plant_all(sb: Sandbox, task: Task, ids: list[str]) -> list[tuple[Candidate, str]]:
    """Plant every candidate of every graded file, each just before its original; (candidate, node id)."""
    rng = random.Random(task.instance_id)
    first = frozenset(task.FAIL_TO_PASS)
    tried = []
    for path, source, file_ids in graded_sources(sb, ids):
        found = candidates(path, source, file_ids, rng, first=first)
        found.sort(key=lambda c: not c.first)
        rendered = render(path, source, found[:_MAX_PER_FILE], rng, beside=True)
        if rendered is not None and rendered[1]:
            sb.write_file(path, rendered[0].encode("utf-8"))
            tried += rendered[1]
    return tried


_FAILED = re.compile(r"^FAILED (.+?) - (.*)$", re.MULTILINE)


def _assertion_failures(output: str) -> set[str]:
    """Node ids whose failure pytest's short summary shows as an ``AssertionError``."""
    return {m[1] for m in _FAILED.finditer(output) if m[2].startswith(("assert", "AssertionError"))}


def _cases(outcomes: dict[str, str], nodeid: str) -> list[str]:
    return [k for k in outcomes if k == nodeid or k.startswith(nodeid + "[")]


def _kept(tried: list[tuple[Candidate, str]], outcomes: dict[str, str], by_assert: set[str],
          ids: list[str]) -> list[Candidate]:
    """The candidates that came out as canaries must, each with what it must come out as."""
    broken = {i.split("::", 1)[0] for i in ids if outcomes.get(i) != "passed"}
    copies_pass = {(c.file, c.cls, c.original) for c, n in tried if not c.perturbed
                   and _cases(outcomes, n) and all(outcomes[k] == "passed" for k in _cases(outcomes, n))}
    kept = []
    for cand, nodeid in tried:
        original = f"{cand.file}::{cand.cls}::{cand.original}" if cand.cls else f"{cand.file}::{cand.original}"
        mine, theirs = _cases(outcomes, nodeid), _cases(outcomes, original)
        if cand.file in broken or (cand.file, cand.cls, cand.original) not in copies_pass or len(mine) != len(theirs):
            continue
        expect = [(k[len(nodeid):], "passed" if outcomes[k] == "passed" else "failed", t[len(original):])
                  for k, t in zip(mine, theirs)]
        failing = [k for k in mine if outcomes[k] != "passed"]
        if cand.perturbed and (not failing or not all(k in by_assert for k in failing)):
            continue
        kept.append(dataclasses.replace(cand, expect=tuple(expect)))
    return kept


def _stored(task: Task, key: str) -> Path:
    return cache_root() / "canary-pools" / f"{task.instance_id.replace('/', '_')}-{key}.json"


def _load(task: Task, key: str) -> Pool | None:
    try:
        data: Any = json.loads(_stored(task, key).read_text())
        return Pool(tuple(Candidate(**{**c, "expect": tuple(tuple(e) for e in c["expect"])})
                          for c in data["candidates"]), str(data["why"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(task: Task, key: str, pool: Pool) -> None:
    stored = _stored(task, key)
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=stored.parent, delete=False, suffix=".tmp") as fh:
            json.dump({"candidates": [dataclasses.asdict(c) for c in pool.candidates], "why": pool.why}, fh)
        os.replace(fh.name, stored)
    except OSError:  # a read-only cache: proved again in the next process
        pass
