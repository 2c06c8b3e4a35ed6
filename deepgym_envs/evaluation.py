"""Run agents over a task set and collect per-task verdicts (``deepgym eval``)."""

from __future__ import annotations

import difflib
import fnmatch
import json
import platform
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from rich.markup import escape
from rich.table import Table

from deepgym_envs.defaults import MAX_STEPS
from deepgym_envs.env import SWEEnv
from deepgym_envs.errors import DeepgymError
from deepgym_envs.gate import gate
from deepgym_envs.progress import console, print_no_verdicts, print_table, progress_bar
from deepgym_envs.sandbox import default_backend
from deepgym_envs.tasks import Task

_COLORS = {"resolved": "green", "unresolved": "red", "no_verdict": "yellow"}


@dataclass
class EpisodeResult:
    task_id: str
    status: str
    steps: int
    episode_return: float
    duration: float
    invalid_actions: int
    reason: str = ""
    fail_to_pass: dict[str, int] = field(default_factory=dict)
    pass_to_pass: dict[str, int] = field(default_factory=dict)

    #: The columns of :func:`print_report`'s table; :meth:`cells` fills one row of them.
    COLUMNS: ClassVar[tuple[str, ...]] = ("task", "verdict", "F2P", "P2P", "steps", "return", "time (s)")

    def cells(self) -> tuple[str, ...]:
        """This episode's row of the results table (rich markup, names escaped)."""
        return (escape(self.task_id), self.verdict_cell(), *self.test_cells(), str(self.steps),
                f"{self.episode_return:.2f}", f"{self.duration:.1f}")

    def verdict_cell(self) -> str:
        return f"[{_COLORS.get(self.status, 'white')}]{self.status}[/]"

    def test_cells(self) -> tuple[str, str]:
        """FAIL_TO_PASS and PASS_TO_PASS as passed/total."""
        f2p, p2p = self.fail_to_pass or {}, self.pass_to_pass or {}
        return f"{f2p.get('passed', 0)}/{f2p.get('total', 0)}", f"{p2p.get('passed', 0)}/{p2p.get('total', 0)}"


@dataclass
class EvalResult:
    agent: str
    task_set: str
    backend: str
    episodes: list[EpisodeResult]
    wall_time: float
    env_id: str = "deepgym/SWE-v0"
    created_at: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    @property
    def resolved(self) -> int:
        return sum(e.status == "resolved" for e in self.episodes)

    @property
    def no_verdict(self) -> int:
        return sum(e.status == "no_verdict" for e in self.episodes)

    def summary(self) -> dict[str, Any]:
        n = len(self.episodes)
        return {"tasks": n, "resolved": self.resolved, "resolved_rate": self.resolved / n if n else 0.0,
                "no_verdict": self.no_verdict,
                "mean_steps": sum(e.steps for e in self.episodes) / n if n else 0.0,
                "wall_time": self.wall_time}

    def headline(self) -> str:
        """The summary line under the results table."""
        s = self.summary()
        return (f"resolved {s['resolved']}/{s['tasks']} ({100 * s['resolved_rate']:.0f}%), no_verdict "
                f"{s['no_verdict']}, mean steps {s['mean_steps']:.1f}, wall {s['wall_time']:.0f}s")

    def to_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "task_set": self.task_set, "env_id": self.env_id, "backend": self.backend,
                "created_at": self.created_at, "machine": {"python": platform.python_version(),
                                                           "platform": platform.platform()},
                "summary": self.summary(), "episodes": [asdict(e) for e in self.episodes]}

    def write(self, path: str | Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")


def print_report(result: EvalResult, title: str, who: str) -> None:
    """The terminal view of an evaluation, for every agent: a row per episode, why each no_verdict
    happened, then the summary line headed by ``who`` (the agent or the model). ``title`` is rich
    markup: escape the names in it."""
    episode_type = type(result.episodes[0]) if result.episodes else EpisodeResult
    table = Table(title=title)
    for col in episode_type.COLUMNS:
        table.add_column(col, overflow="fold")
    for e in result.episodes:
        table.add_row(*e.cells())
    print_table(table)
    print_no_verdicts(result.episodes)
    console().print(f"[bold]{escape(who)}[/]: {result.headline()}")


def select_tasks(tasks: list[Task], patterns: Sequence[str] = (), limit: int = 0, *, source: object = "") -> list[Task]:
    """The tasks an evaluation runs: those whose id matches one of ``patterns`` (ids or shell-style
    globs; a pattern may hold several, comma-separated; none = all), in task-set order, then the
    first ``limit`` of them (0 = all).

    An empty result is an error, never a quiet ``resolved 0/0``: an empty task set, or a pattern
    that matches no id (a typo), names itself.
    """
    where = f" {source}" if source else ""
    if not tasks:
        raise DeepgymError(f"the task set{where} holds no tasks; nothing to run")
    wanted = [p.strip() for value in patterns for p in value.split(",") if p.strip()]
    ids = [t.instance_id for t in tasks]
    for pattern in wanted:
        if not any(fnmatch.fnmatchcase(i, pattern) for i in ids):
            close = difflib.get_close_matches(pattern, ids, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise DeepgymError(f"no task id in{where or ' the task set'} matches {pattern!r}{hint}")
    if wanted:
        tasks = [t for t in tasks if any(fnmatch.fnmatchcase(t.instance_id, p) for p in wanted)]
    return tasks[:limit] if limit > 0 else tasks


def run_episode(env: SWEEnv, agent: Any, task_id: str, seed: int = 0) -> EpisodeResult:
    """The whole agent loop: reset, then act until the episode ends."""
    started = time.monotonic()
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    agent.reset(obs, info)
    total, steps, invalid = 0.0, 0, 0
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        total += reward
        steps += 1
        invalid += bool(info.get("invalid_action"))
    verdict = info["verdict"]
    return EpisodeResult(task_id, verdict["status"], steps, total, time.monotonic() - started, invalid,
                         verdict["reason"], verdict["fail_to_pass"], verdict["pass_to_pass"])


def evaluate(agent_name: str, make_agent: Callable[[Task], Any], tasks: list[Task], *, task_set: str = "builtin",
             backend: str | None = None, max_steps: int = MAX_STEPS, concurrency: int = 2,
             env_kwargs: dict[str, Any] | None = None, show_progress: bool = True,
             validate_first: bool | None = None) -> EvalResult:
    """Run one episode per task, ``concurrency`` at a time, each in its own environment.
    An imported task that does not validate (:mod:`deepgym_envs.gate`) runs no episode: it is
    ``no_verdict`` with the validation's reason. ``validate_first=False`` runs it anyway."""
    if concurrency < 1:
        raise DeepgymError("concurrency must be at least 1")
    started = time.monotonic()

    def one(task: Task) -> EpisodeResult:
        begun = time.monotonic()
        blocked = gate(task, backend=backend, validate_first=validate_first)
        if blocked is not None:  # no agent's time spent on a task no change can resolve
            return EpisodeResult(task.instance_id, "no_verdict", 0, 0.0, time.monotonic() - begun, 0, blocked.reason)
        env = SWEEnv(tasks, task_id=task.instance_id, sandbox=backend, max_steps=max_steps,
                     **{"validate_first": validate_first, **(env_kwargs or {})})
        try:
            return run_episode(env, make_agent(task), task.instance_id)
        except DeepgymError as exc:  # the harness failed (sandbox could not start, ...): not the agent's 0
            return EpisodeResult(task.instance_id, "no_verdict", 0, 0.0, time.monotonic() - begun, 0, str(exc))
        finally:
            env.close()

    results: dict[str, EpisodeResult] = {}
    with progress_bar(f"eval {agent_name}", len(tasks), enabled=show_progress) as advance, \
            ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {pool.submit(one, t): t for t in tasks}
        for fut in as_completed(futures):
            res = fut.result()
            results[res.task_id] = res
            advance(f"{res.task_id}: {res.status}")
    ordered = [results[t.instance_id] for t in tasks]
    return EvalResult(agent_name, task_set, backend or default_backend(), ordered, time.monotonic() - started)
