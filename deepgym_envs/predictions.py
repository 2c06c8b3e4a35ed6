"""``deepgym grade-predictions``: a predictions file in, the official harness's report out.

Predictions are SWE-bench's: one JSON object per line (or one JSON list) with ``instance_id``,
``model_patch`` and ``model_name_or_path``. Each is graded against the task of its own
``instance_id`` (:func:`deepgym_envs.grading.grade`, a fresh sandbox each), ``workers`` at a time,
and the run's report has the official harness's shape (``resolved_ids``, ``unresolved_ids``,
``error_ids``, ``empty_patch_ids``, ... ``schema_version`` 2), with, under ``instances``, each
instance's ``report.json`` as the harness writes it (``tests_status`` by FAIL_TO_PASS /
PASS_TO_PASS, success and failure) plus deepgym's verdict and reason.

>>> report = grade_predictions(read_predictions("preds.jsonl"), load_tasks("lite"))   # doctest: +SKIP
>>> report["resolved_ids"]
['psf__requests-2317']
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepgym_envs.errors import TaskFormatError
from deepgym_envs.gate import gate
from deepgym_envs.grading import GRADING_TIMEOUT, Verdict, counts_as_passing, grade
from deepgym_envs.progress import progress_bar
from deepgym_envs.tasks import Task


@dataclass
class Prediction:
    instance_id: str
    model_patch: str | None
    model_name_or_path: str = ""


def read_predictions(path: str | Path) -> list[Prediction]:
    """Predictions from JSONL (or a JSON list); TaskFormatError naming the line of a bad one."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        items = [(i + 1, row) for i, row in enumerate(json.loads(text))]
    else:
        items = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append((lineno, json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise TaskFormatError(str(path), lineno, None, f"invalid JSON: {exc.msg}") from None
    out = []
    for lineno, row in items:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise TaskFormatError(str(path), lineno, "instance_id", "each prediction names its instance_id")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise TaskFormatError(str(path), lineno, "model_patch", "expected a unified diff (text) or null")
        out.append(Prediction(row["instance_id"], patch, str(row.get("model_name_or_path") or "")))
    return out


def instance_report(task: Task, prediction: Prediction, verdict: Verdict | None) -> dict[str, Any]:
    """One instance's entry, as the official harness's ``report.json`` has it (plus deepgym's verdict)."""
    patch = prediction.model_patch
    applied = verdict is not None and not verdict.reason.startswith("patch does not apply")
    f2p = set(task.FAIL_TO_PASS)
    tests = verdict.tests if verdict is not None else {}
    # Rows whose harness is not pytest were imported with node ids; report the ids they publish.
    published = task.extra.get("swebench_ids")
    if not (isinstance(published, dict) and all(isinstance(v, list) and v for v in published.values())):
        published = {t: [t] for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]}
    status: dict[str, dict[str, list[str]]] = {}
    for name, deciding in (("FAIL_TO_PASS", True), ("PASS_TO_PASS", False)):
        ids = [t for t, nodes in published.items() if bool(f2p.intersection(nodes)) == deciding]
        ok = [t for t in ids if all(counts_as_passing(tests.get(n, "missing"), deciding, task.swebench_semantics)
                                    for n in published[t])]
        status[name] = {"success": ok, "failure": [t for t in ids if t not in ok]}
    status["FAIL_TO_FAIL"] = {"success": [], "failure": []}
    status["PASS_TO_FAIL"] = {"success": [], "failure": []}
    return {"patch_is_None": patch is None, "patch_exists": bool(patch and patch.strip()),
            "patch_successfully_applied": applied and verdict is not None and verdict.status != "no_verdict",
            "resolved": verdict is not None and verdict.resolved, "tests_status": status,
            "deepgym": {"status": verdict.status if verdict else "not graded",
                        "reason": verdict.reason if verdict else "", "duration": verdict.duration if verdict else 0.0}}


def grade_predictions(predictions: list[Prediction], tasks: list[Task], *, workers: int = 2,
                      backend: str | None = None, timeout: float = GRADING_TIMEOUT,
                      show_progress: bool = False, validate_first: bool | None = None) -> dict[str, Any]:
    """Grade each prediction against its own instance; the run report (see the module docstring).
    An imported instance that does not validate is an error (``no_verdict``, the validation's
    reason), never unresolved (:mod:`deepgym_envs.gate`; ``validate_first=False`` grades anyway)."""

    def graded(task: Task, patch: str) -> Verdict:
        return gate(task, backend=backend, validate_first=validate_first) or grade(
            task, patch, backend=backend, timeout=timeout)

    by_id = {t.instance_id: t for t in tasks}
    errors: dict[str, str] = {}
    todo: list[tuple[Prediction, Task]] = []
    empty: list[str] = []
    seen: set[str] = set()
    for pred in predictions:
        if pred.instance_id in seen:
            errors[pred.instance_id] = "predicted twice: the first prediction is graded"
            continue
        seen.add(pred.instance_id)
        if pred.instance_id not in by_id:
            errors[pred.instance_id] = "no task with this instance_id in the task set"
        elif not (pred.model_patch or "").strip():
            empty.append(pred.instance_id)
        else:
            todo.append((pred, by_id[pred.instance_id]))
    with progress_bar("grade", len(todo), enabled=show_progress) as advance, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(graded, task, pred.model_patch or "") for pred, task in todo]
        verdicts = []
        for (pred, _), fut in zip(todo, futures):
            verdicts.append(fut.result())
            advance(f"{pred.instance_id}: {verdicts[-1].status}")
    instances: dict[str, Any] = {}
    resolved, unresolved = [], []
    for (pred, task), verdict in zip(todo, verdicts):
        entry = instance_report(task, pred, verdict)
        instances[pred.instance_id] = entry
        if verdict.status == "no_verdict" or not entry["patch_successfully_applied"]:
            errors[pred.instance_id] = verdict.reason
        elif verdict.resolved:
            resolved.append(pred.instance_id)
        else:
            unresolved.append(pred.instance_id)
    for pred in predictions:
        if pred.instance_id in empty and pred.instance_id in by_id:
            instances[pred.instance_id] = instance_report(by_id[pred.instance_id], pred, None)
    completed = sorted(resolved + unresolved)
    submitted = sorted(seen)
    return {
        "total_instances": len(tasks), "submitted_instances": len(submitted),
        "completed_instances": len(completed), "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved), "empty_patch_instances": len(empty),
        "error_instances": len(errors), "completed_ids": completed,
        "incomplete_ids": sorted(set(by_id) - set(completed) - set(empty) - set(errors)),
        "empty_patch_ids": sorted(empty), "submitted_ids": submitted, "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved), "error_ids": sorted(errors), "schema_version": 2,
        "errors": {k: errors[k] for k in sorted(errors)}, "instances": instances,
    }
