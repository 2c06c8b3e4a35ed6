"""The validation gate: a task that does not validate is never graded as if it did.

An imported row whose environment cannot pass its own gold patch (a fixture plugin missing, a pin
too old) would grade every change ``unresolved``: a wrong 0 in an evaluation, a fake negative in
training. So before such a task is graded, its validation (:func:`deepgym_envs.validate.validate_task`:
FAIL_TO_PASS fails at base, PASS_TO_PASS passes, the gold patch resolves) is looked up, and an
invalid task's verdict is ``no_verdict`` carrying the validation's reason: masked, never scored.

Which tasks are gated (:func:`gated`): imported rows, those with ``harness`` set (``deepgym tasks
import`` writes ``swebench``) or carrying SWE-bench's ``environment_setup_commit``. The built-in
and synthesised sets are validated in CI when they change, so they skip the gate and cost nothing
more. ``DEEPGYM_VALIDATE_FIRST=0`` (or ``--no-validate-first``, or ``validate_first=False``) turns
the gate off for users who have validated their rows another way.

A validation runs once per task content and environment (:func:`validity_key`) and is kept under
``$DEEPGYM_CACHE/validity``; ``deepgym tasks validate`` writes the same entries. Concurrent
gradings of one task, in threads or processes, wait on a file lock while the first validates.
A validation whose own base or gold run had no verdict (the sandbox failed, an environment did not
build) says nothing about the task: it is never written to disk, only remembered in this process
for :data:`RETRY_AFTER` seconds so a batch does not validate once per candidate.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Iterator

from deepgym_envs.gitrepo import safe_name
from deepgym_envs.grading import Verdict
from deepgym_envs.tasks import Task
from deepgym_envs.trees import cache_root, tree_fingerprint
from deepgym_envs.validate import TaskValidation, validate_task

#: The variable that turns the gate off (``0``, ``false``, ``no``, ``off``).
GATE_ENV = "DEEPGYM_VALIDATE_FIRST"
#: Seconds an inconclusive validation (no verdict from its own runs) is trusted before it is retried.
RETRY_AFTER = 600.0
#: Bumped when what a validation means changes without the code it hashes changing.
VALIDATION_VERSION = "1"

_PACKAGE = Path(__file__).resolve().parent
#: The code a validation's outcome depends on: grading, the runner, the seal, the canaries, and how
#: environments are built.
_GRADING_CODE = ("grading.py", "validate.py", "testplugins.py", "testrun", "canaries", "pyenv.py", "envspec.py")


@dataclass(frozen=True)
class Validity:
    """What the gate knows of one task."""

    valid: bool
    reason: str = ""
    """Why not, in the validation's words ("" when valid)."""
    conclusive: bool = True
    """False when the validation's own runs had no verdict: retried later, never stored."""


def gated(task: Task) -> bool:
    """Whether ``task`` is graded only once it validates: an imported row (``harness`` set, or
    SWE-bench's ``environment_setup_commit``), not a built-in or synthesised task."""
    return task.imported


def enabled(validate_first: bool | None = None) -> bool:
    """The caller's choice, else ``$DEEPGYM_VALIDATE_FIRST`` (on unless 0/false/no/off)."""
    if validate_first is not None:
        return validate_first
    return os.environ.get(GATE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def gate(task: Task, *, backend: str | None = None, validate_first: bool | None = None) -> Verdict | None:
    """None when ``task`` may be graded; otherwise the ``no_verdict`` every change to it gets."""
    if not (gated(task) and enabled(validate_first)):
        return None
    known = validity(task, backend=backend)
    if known.valid:
        return None
    what = "does not validate" if known.conclusive else "could not be validated"
    return Verdict.no_verdict(f"the task {what}, so no change to it is graded: {known.reason} (see deepgym tasks "
                              f"validate --show-log {task.instance_id}; {GATE_ENV}=0 grades it anyway)")


@functools.lru_cache(maxsize=1)
def _code_version() -> str:
    # deepgym's own interpreter and pytest run the tests of a task that names no environment
    h = hashlib.sha256(f"{VALIDATION_VERSION}\0{sys.version}\0{_version_of('pytest')}".encode())
    for name in _GRADING_CODE:
        root = _PACKAGE / name
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            h.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _version_of(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return ""


def validity_key(task: Task, backend: str | None = None) -> str:
    """A hash of everything a validation's outcome depends on: the tree (repository, base commit),
    the patches, the test lists and arguments, the Python environment and spec, the seal's trust,
    the backend, and deepgym's grading code."""
    parts = [tree_fingerprint(task), task.image, task.patch, task.test_patch, task.FAIL_TO_PASS, task.PASS_TO_PASS,
             task.flaky, task.pytest_args, task.python_env, task.trust, task.swebench_semantics, task.gold_seconds,
             task.extra.get("deepgym_spec", ""), backend or "", _code_version()]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _entry(task: Task, backend: str | None) -> Path:
    return cache_root() / "validity" / f"{safe_name(task.instance_id)}-{validity_key(task, backend)}.json"


def of_validation(result: TaskValidation) -> Validity:
    """The gate's view of a validation: inconclusive when its own runs had no verdict."""
    runs = (result.base.status, result.gold.status)
    return Validity(result.valid, "; ".join(result.problems), conclusive="no_verdict" not in runs)


def store(task: Task, result: TaskValidation, *, backend: str | None = None) -> Validity:
    """Keep a conclusive validation of ``task`` (``deepgym tasks validate`` calls this too)."""
    known = of_validation(result)
    if known.conclusive:
        path = _entry(task, backend)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"task_id": task.instance_id, "valid": known.valid, "reason": known.reason}))
            os.replace(tmp, path)
        except OSError:  # a cache that cannot be written (full, read-only) costs a validation, not the grading
            with contextlib.suppress(OSError):
                tmp.unlink()
    return known


_RECENT: dict[str, tuple[float, Validity]] = {}
_RECENT_LOCK = threading.Lock()


def _recent(path: Path) -> Validity | None:
    """An inconclusive validation of this process, while it is recent enough to stand."""
    with _RECENT_LOCK:
        recent = _RECENT.get(str(path))
    return recent[1] if recent is not None and time.monotonic() - recent[0] < RETRY_AFTER else None


def _read(path: Path) -> Validity | None:
    try:
        data = json.loads(path.read_text())
        return Validity(bool(data["valid"]), str(data.get("reason", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def validity(task: Task, *, backend: str | None = None) -> Validity:
    """The task's validity: from the cache, else validated now (once, whoever else asks)."""
    path = _entry(task, backend)
    known = _recent(path) or _read(path)
    if known is not None:
        return known
    with _locked(path.with_suffix(".lock")):  # others validating this task: wait, then read what they found
        known = _recent(path) or _read(path)
        if known is None:
            known = store(task, validate_task(task, backend=backend), backend=backend)
            if not known.conclusive:
                with _RECENT_LOCK:
                    _RECENT[str(path)] = (time.monotonic(), known)
    return known


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive file lock (threads and processes alike); none where the cache is not writable."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a")
    except OSError:
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
