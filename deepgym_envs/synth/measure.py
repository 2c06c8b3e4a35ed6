"""Does a task's problem statement reproduce its bug? Run the script it quotes and see.

:func:`reproduction_shows_bug` takes the statement's first ```python block, runs it in the
task's sandbox on the base state (it must fail) and with the gold patch applied (it must pass).
:func:`reproduction_share` is the figure for a task set: the share of tasks whose statement
holds such a script (synthesis aims at 100 %: it keeps no task without one).

    python -c "from deepgym_envs.tasks import load_tasks; from deepgym_envs.synth.measure import reproduction_share; print(reproduction_share(load_tasks('tasks/synth')))"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deepgym_envs.pyenv import sandbox_spec
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.tasks import Task
from deepgym_envs.trees import pristine_tree

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@dataclass(frozen=True)
class ReproCheck:
    task_id: str
    shows_bug: bool
    why: str = ""


def statement_script(statement: str) -> str:
    """The first ```python block of a statement ('' when there is none)."""
    match = _BLOCK.search(statement)
    return match.group(1) if match else ""


def reproduction_shows_bug(task: Task, *, backend: str | None = None, timeout: float = 120.0) -> ReproCheck:
    script = statement_script(task.problem_statement)
    if not script.strip():
        return ReproCheck(task.instance_id, False, "the statement holds no ```python block")
    limits = SandboxLimits(timeout=timeout)
    with make_sandbox(pristine_tree(task), backend, limits, spec=sandbox_spec(task)) as sb:
        buggy = sb.exec(["python", "-c", script], timeout)
        if buggy.exit_code == 0:
            return ReproCheck(task.instance_id, False, "the script passes on the buggy code")
        sb.reset()
        sb.apply_patch(task.patch)
        fixed = sb.exec(["python", "-c", script], timeout)
        if fixed.exit_code != 0:
            return ReproCheck(task.instance_id, False, "the script fails with the fix too: "
                              + (fixed.stderr.strip().splitlines() or [""])[-1])
    return ReproCheck(task.instance_id, True)


def reproduction_share(tasks: list[Task], *, backend: str | None = None) -> float:
    if not tasks:
        return 0.0
    return sum(reproduction_shows_bug(t, backend=backend).shows_bug for t in tasks) / len(tasks)
