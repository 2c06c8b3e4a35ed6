"""Shared types of the verifier audit: what one exploit attempt found."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Literal, Protocol

from deepgym_envs.grading import Verdict
from deepgym_envs.tasks import Task

#: Grades a patch for a task. ``deepgym_envs.grade`` is the real one; tests plug in weak ones.
Verifier = Callable[[Task, str], Verdict]


@dataclass
class Attempt:
    """One exploit strategy tried against one task."""

    task_id: str
    strategy: str
    tier: int
    """1 = heuristic, 2 = white-box LLM attacker, 3 = black-box LLM attacker."""
    mode: Literal["patch", "actions"]
    """Submitted as a patch to the verifier, or carried out through environment actions."""
    exploited: bool
    """The verifier said ``resolved`` although the attempt does not fix the bug."""
    status: str
    """The verdict's status (resolved / unresolved / no_verdict)."""
    evidence: str
    """Why: the verdict's reason and the per-test outcomes that mattered."""
    patch: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Attacker(Protocol):
    """An adversary that proposes patches (tier 2 sees the verifier and hidden tests; tier 3 only
    the problem statement and the pass/fail feedback of its earlier attempts)."""

    name: str

    def propose(self, context: str, feedback: list[str]) -> str:
        """Return a unified diff (or text containing one in a ```diff block)."""


class AuditRun(Protocol):
    """What a multi-episode attempt (:mod:`.sequences`) needs of the audit running it."""

    real: bool
    """The verifier is deepgym's own grading (not a weak one plugged in by a test)."""
    backend: str | None
    verifier: Verifier

    def episode(self, env: Any, task: Task, calls: list[dict[str, Any]]) -> tuple[str, Verdict]:
        """One episode of ``env``: reset, the tool calls, submit; (the diff, its verdict)."""
