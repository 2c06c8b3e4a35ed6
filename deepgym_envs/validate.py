"""Task validation (``deepgym tasks validate``): prove each task is well-formed by running it.

A task is valid when, through the same grading path agents are scored by,

* every FAIL_TO_PASS test fails on the base state and passes with the gold patch, and
* every PASS_TO_PASS test passes in both.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from deepgym_envs.grading import Verdict, grade
from deepgym_envs.progress import progress_bar
from deepgym_envs.tasks import Task


@dataclass
class TaskValidation:
    task_id: str
    valid: bool
    problems: list[str]
    base: Verdict
    gold: Verdict


def validate_task(task: Task, *, backend: str | None = None) -> TaskValidation:
    base = grade(task, "", backend=backend)
    gold = grade(task, task.patch, backend=backend)
    problems: list[str] = []
    for name, verdict in (("base", base), ("gold", gold)):
        if verdict.status == "no_verdict":
            problems.append(f"{name}: no verdict ({verdict.reason})")
    if not problems:
        flaky = set(task.flaky)
        passing_at_base = [t for t in task.FAIL_TO_PASS if t not in flaky and base.tests.get(t) == "passed"]
        if passing_at_base:
            problems.append(f"FAIL_TO_PASS passes on the base state: {', '.join(passing_at_base)}")
        broken_at_base = [t for t in task.PASS_TO_PASS if t not in flaky and base.tests.get(t) != "passed"]
        if broken_at_base:
            problems.append(f"PASS_TO_PASS not passing on the base state: "
                            f"{', '.join(f'{t} ({base.tests.get(t)})' for t in broken_at_base[:5])}")
        if gold.status != "resolved":
            problems.append(f"gold patch does not resolve: {gold.reason}")
    return TaskValidation(task.instance_id, not problems, problems, base, gold)


def validate_tasks(tasks: list[Task], *, backend: str | None = None, workers: int = 2,
                   show_progress: bool = True) -> list[TaskValidation]:
    """Validate every task, ``workers`` at a time; results in task order."""
    with progress_bar("validate", len(tasks), enabled=show_progress) as advance, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(validate_task, t, backend=backend) for t in tasks]
        out = []
        for fut in futures:
            res = fut.result()
            advance(f"{res.task_id}: {'ok' if res.valid else 'INVALID'}")
            out.append(res)
    return out
