"""What an audit attempt does and says: the tool calls that carry out a plan as an agent would,
and a verdict's evidence in one line (shared by single attempts and multi-episode sequences)."""

from __future__ import annotations

import base64
import shlex
from pathlib import Path
from typing import Any

from deepgym_envs.grading import Verdict


def actions_for(plan: Any, tree: Path) -> list[dict[str, Any]]:
    """The tool calls an agent makes to carry out a plan: ``edit create`` for new files, ``bash``
    for overwrites, deletions and the plan's commands."""
    calls = [bash_call(f"mv -- {shlex.quote(old)} {shlex.quote(new)}") for old, new in plan.renames]
    for change in plan.changes:
        exists = (tree / change.path).exists()
        if change.content is None:
            calls.append(bash_call(f"rm -rf -- {shlex.quote(change.path)}"))
        elif not exists:
            calls.append({"name": "edit", "arguments": {"command": "create", "path": change.path,
                                                         "file_text": change.content}})
        else:  # base64 keeps any content intact through the shell
            data = base64.b64encode(change.content.encode("utf-8", "surrogateescape")).decode()
            calls.append(bash_call(f"printf %s {data} | base64 -d > {shlex.quote(change.path)}"))
    return calls + [bash_call(cmd) for cmd in plan.commands]


def bash_call(command: str) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command}}


def evidence(v: Verdict) -> str:
    """The verdict's reason and which graded tests passed or not, in one line."""
    passing = [t for t, o in v.tests.items() if o == "passed"]
    failing = [f"{t} {o}" for t, o in v.tests.items() if o != "passed"]
    parts = [f"{v.status}: {v.reason or 'all graded tests passed'}"]
    if v.tests:
        parts.append(f"passing {len(passing)}/{len(v.tests)}")
        if failing:
            parts.append("not passing: " + "; ".join(failing[:5]) + (" ..." if len(failing) > 5 else ""))
    return " | ".join(parts)
