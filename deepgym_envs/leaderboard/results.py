"""Reading ``deepgym eval`` results files and ranking them.

A results file is what :meth:`deepgym_envs.evaluation.EvalResult.to_dict` writes. Newer files (from
the LLM agent loop) may also carry a top-level ``model``, ``summary.k``, ``summary.pass_at_k``
(``{"1": p1, ..., "k": pk}``), ``summary.tokens`` and, per episode, ``rollout_index`` and ``tokens``;
older files lack them and get sensible defaults (k = 1, pass@k computed from the episodes).

Every field is checked on the way in, so a hand-edited or truncated file is reported by file and
field (``results/x.json: field 'episodes[3].status': ...``) instead of surfacing as a traceback
from deep inside the page renderer.

Anyone who can drop a file into the results folder decides what it holds, so the episodes are the
record and the summary only restates them: a summary number its own episodes contradict (a
"perfect" summary over failed episodes) refuses the file, naming the field. Only regular files are
read (a link, FIFO or device is refused, never followed or waited on), at most
:data:`MAX_RESULTS_BYTES` of them, and one file that cannot be read is reported and skipped: it
never stops the others from being ranked.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

from deepgym_envs.errors import ResultsFormatError
from deepgym_envs.sandbox.base import read_at_most

STATUSES = ("resolved", "unresolved", "no_verdict")
#: Results files larger than this are refused unread. A full SWE-bench run (2,294 tasks, k = 8) is
#: about 10 MiB; a JSON document costs several times its size once parsed.
MAX_RESULTS_BYTES = 32 << 20
#: pass@k is computed and checked up to this k: the exact estimator's cost grows with k, and a file
#: (up to the size cap) could otherwise ask for pass@100000 and stall the build.
MAX_K = 1000
#: Entries of a results folder looked at (files and folders, ``*.json`` or not): the build's time is
#: bounded by what strangers can drop there, too. A folder past it ranks what was found first.
MAX_RESULTS_ENTRIES = 100_000
_MISSING: Any = object()
T = TypeVar("T")


@dataclass(frozen=True)
class Episode:
    """One episode of a run: the fields the leaderboard shows."""

    task_id: str
    status: str
    steps: int = 0
    episode_return: float = 0.0
    rollout_index: int = 0
    tokens: int | None = None


@dataclass(frozen=True)
class TaskCell:
    """How one run did on one task, over all of its rollouts (one heat-map cell)."""

    resolved: int
    rollouts: int
    no_verdict: int

    @property
    def graded(self) -> int:
        """Rollouts with a verdict: an infrastructure failure says nothing about the agent."""
        return self.rollouts - self.no_verdict

    @property
    def fraction(self) -> float | None:
        """Resolved fraction over graded rollouts; None when no rollout was graded."""
        return self.resolved / self.graded if self.graded else None


@dataclass
class Run:
    """One results file, validated and normalised."""

    path: Path
    agent: str
    task_set: str
    created_at: datetime
    episodes: list[Episode]
    model: str | None = None
    env_id: str = "deepgym/SWE-v0"
    backend: str = ""
    tasks: int = 0
    resolved: int = 0
    resolved_rate: float = 0.0
    no_verdict: int = 0
    mean_steps: float = 0.0
    wall_time: float = 0.0
    k: int = 1
    pass_at_k: dict[int, float] = field(default_factory=dict)
    tokens: int | None = None

    @property
    def name(self) -> str:
        """How the run is labelled: the agent, and the model when there is one."""
        return f"{self.agent} ({self.model})" if self.model else self.agent

    @property
    def key(self) -> tuple[str, str, str]:
        """Runs with the same key compete for one leaderboard row (the newest wins)."""
        return (self.agent, self.model or "", self.task_set)

    @property
    def top_pass(self) -> float:
        """pass@k at this run's own k (pass@1 = the resolved rate when nothing else is known)."""
        return self.pass_at_k.get(self.k, self.resolved_rate)

    @property
    def counts(self) -> tuple[int, int]:
        """(resolved, rollouts) over the episodes, so the pair always matches the rate beside it even
        with k rollouts per task; the summary's counts when a file carries no episodes."""
        if not self.episodes:
            return self.resolved, self.tasks
        return sum(e.status == "resolved" for e in self.episodes), len(self.episodes)

    @property
    def mean_return(self) -> float:
        return sum(e.episode_return for e in self.episodes) / len(self.episodes) if self.episodes else 0.0

    def per_task(self) -> dict[str, TaskCell]:
        """Task id -> resolved/rollouts/no_verdict counts, in the order tasks first appear."""
        counts: dict[str, list[int]] = {}
        for e in self.episodes:
            c = counts.setdefault(e.task_id, [0, 0, 0])
            c[0] += e.status == "resolved"
            c[1] += 1
            c[2] += e.status == "no_verdict"
        return {task: TaskCell(*c) for task, c in counts.items()}


@dataclass
class Ranked:
    """A run with its place on the board (ranks restart for each task set)."""

    rank: int
    run: Run


@dataclass
class Skipped:
    """A results file that could not be read, and why."""

    path: Path
    reason: str


# --- pass@k ---------------------------------------------------------------------------------------

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``n`` samples of which ``c`` passed (Chen et al., 2021).

    The probability that at least one of ``k`` samples drawn without replacement passes:
    ``1 - C(n-c, k) / C(n, k)``.
    """
    if not 0 < k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n samples, got n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k_from_episodes(episodes: Iterable[Episode]) -> dict[int, float]:
    """pass@1..pass@k averaged over tasks, where k is the fewest rollouts any task has.

    A rollout without a verdict counts as not passed, as it does in the resolved rate: a run whose
    infrastructure failed must not score higher for it. (The heat map shows such rollouts apart.)
    """
    samples: dict[str, list[int]] = {}
    for e in episodes:
        n_c = samples.setdefault(e.task_id, [0, 0])
        n_c[0] += 1
        n_c[1] += e.status == "resolved"
    if not samples:
        return {}
    k_max = min(min(n for n, _ in samples.values()), MAX_K)
    return {k: sum(pass_at_k(n, c, k) for n, c in samples.values()) / len(samples) for k in range(1, k_max + 1)}


# --- reading and checking -------------------------------------------------------------------------

class _Fields:
    """Typed access to one JSON object, raising :class:`ResultsFormatError` that names the field."""

    def __init__(self, path: Path, obj: Any, where: str) -> None:
        if not isinstance(obj, dict):
            raise ResultsFormatError(str(path), where or None, f"expected an object, got {_kind(obj)}")
        self.path, self.obj, self.where = path, obj, where

    def _name(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, kind: Callable[[Any], T], default: Any = _MISSING) -> T:
        if key not in self.obj or self.obj[key] is None:
            if default is _MISSING:
                raise ResultsFormatError(str(self.path), self._name(key), "missing")
            return default
        try:
            return kind(self.obj[key])
        except (TypeError, ValueError) as exc:
            raise ResultsFormatError(str(self.path), self._name(key), str(exc)) from None

    def sub(self, key: str, default: Any = _MISSING) -> "_Fields":
        value = self.obj.get(key, default)
        if value is _MISSING:
            raise ResultsFormatError(str(self.path), self._name(key), "missing")
        return _Fields(self.path, value, self._name(key))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), type(value).__name__)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, got {_kind(value)}")
    return value


def _int(value: Any) -> int:
    # bool is an int in Python, but `"steps": true` is a broken file, not one step
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value!r}")
    return float(value)


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {_kind(value)}")
    return value


def _rate(value: Any) -> float:
    rate = _number(value)
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"expected a fraction in [0, 1], got {value!r}")
    return rate


def _status(value: Any) -> str:
    if value not in STATUSES:
        raise ValueError(f"expected one of {', '.join(STATUSES)}, got {value!r}")
    return value


def _tokens(value: Any) -> int:
    """A token count, or a breakdown such as ``{"prompt": p, "completion": c}`` (its total)."""
    if isinstance(value, dict):
        if "total" in value:
            return _int(value["total"])
        return sum(_int(v) for v in value.values())
    return _int(value)


def _model(value: Any) -> str:
    """A model name, or a policy record ``{"model": ..., "version": ...}`` as trajectories carry."""
    if isinstance(value, dict):
        name = value.get("model") or value.get("name") or value.get("path")
        version = value.get("version")
        return _text(name) + (f"@{version}" if version not in (None, "") else "")
    return _text(value)


def _timestamp(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 time, got {_kind(value)}")
    try:  # Python 3.10's fromisoformat does not accept a trailing Z
        stamp = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        raise ValueError(f"expected an ISO 8601 time, got {value!r}") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)


def _pass_table(value: Any) -> dict[int, float]:
    if not isinstance(value, dict):
        raise ValueError(f"expected an object {{\"1\": p1, ...}}, got {_kind(value)}")
    table = {}
    for k, p in value.items():
        if not str(k).isdigit() or int(k) < 1:
            raise ValueError(f"key {k!r} is not a positive integer k")
        table[int(k)] = _rate(p)
    return table


def _episode(path: Path, obj: Any, i: int) -> Episode:
    f = _Fields(path, obj, f"episodes[{i}]")
    return Episode(task_id=f.get("task_id", _text), status=f.get("status", _status),
                   steps=f.get("steps", _int, 0), episode_return=f.get("episode_return", _number, 0.0),
                   rollout_index=f.get("rollout_index", _int, 0), tokens=f.get("tokens", _tokens, None))


def parse_run(path: Path, data: Any) -> Run:
    """Validate one decoded results file; summary fields it lacks are computed from the episodes."""
    top = _Fields(path, data, "")
    agent, task_set = top.get("agent", _text), top.get("task_set", _text)  # checked first: they say what the file is
    raw_episodes = top.get("episodes", _list)
    episodes = [_episode(path, e, i) for i, e in enumerate(raw_episodes)]
    s = top.sub("summary")
    n = len(episodes)
    resolved = sum(e.status == "resolved" for e in episodes)
    computed_pass = pass_at_k_from_episodes(episodes)
    run = Run(path=path, agent=agent, task_set=task_set,
              created_at=top.get("created_at", _timestamp), episodes=episodes, model=top.get("model", _model, None),
              env_id=top.get("env_id", _text, "deepgym/SWE-v0"), backend=top.get("backend", str, ""),
              tasks=s.get("tasks", _int, len({e.task_id for e in episodes})),
              resolved=s.get("resolved", _int, resolved), resolved_rate=s.get("resolved_rate", _rate, resolved / n if n else 0.0),
              no_verdict=s.get("no_verdict", _int, sum(e.status == "no_verdict" for e in episodes)),
              mean_steps=s.get("mean_steps", _number, sum(e.steps for e in episodes) / n if n else 0.0),
              wall_time=s.get("wall_time", _number, 0.0), pass_at_k=s.get("pass_at_k", _pass_table, computed_pass),
              tokens=s.get("tokens", _tokens, None))
    run.k = s.get("k", _int, max(run.pass_at_k, default=1))
    if run.tokens is None and episodes and all(e.tokens is not None for e in episodes):
        run.tokens = sum(e.tokens or 0 for e in episodes)
    _check_summary(path, run, s)
    return run


def _check_summary(path: Path, run: Run, s: "_Fields") -> None:
    """Refuse a summary that its episodes contradict: the episodes are the record, and a summary
    can be written to say anything. Each number the summary carries is recomputed from them the
    way ``deepgym eval`` computes it; wall time (not derivable) is the only one taken on trust."""
    episodes, n = run.episodes, len(run.episodes)
    rollouts: dict[str, list[bool]] = {}
    for e in episodes:
        rollouts.setdefault(e.task_id, []).append(e.status == "resolved")
    resolved = sum(e.status == "resolved" for e in episodes)
    no_verdict = sum(e.status == "no_verdict" for e in episodes)
    expected: dict[str, tuple[float, ...]] = {
        "tasks": (len(rollouts), n),  # eval's baselines count episodes, the agent loop distinct tasks
        "episodes": (n,), "resolved": (resolved,), "resolved_rate": (resolved / n if n else 0.0,),
        "no_verdict": (no_verdict,), "mean_steps": (sum(e.steps for e in episodes) / n if n else 0.0,)}
    if isinstance(s.obj.get("tokens"), int) and episodes and all(e.tokens is not None for e in episodes):
        expected["tokens"] = (sum(e.tokens or 0 for e in episodes),)  # a breakdown may count prompts too
    for name, truths in expected.items():
        claimed = s.get(name, _number, None)
        if claimed is not None and not any(_same(claimed, t) for t in truths):
            _contradiction(path, f"summary.{name}", claimed, truths[0])
    most = max(map(len, rollouts.values()), default=1)
    if "k" in s.obj and run.k > most:
        _contradiction(path, "summary.k", run.k, f"at most {most} rollouts a task")
    if "pass_at_k" in s.obj:
        if max(run.pass_at_k, default=0) > MAX_K:
            raise ResultsFormatError(str(path), "summary.pass_at_k", f"pass@k is checked up to k = {MAX_K}")
        for j, claimed in run.pass_at_k.items():
            # the agent loop's estimator: the mean over the tasks with at least j rollouts
            per_task = [pass_at_k(len(r), sum(r), j) for r in rollouts.values() if len(r) >= j]
            truth = sum(per_task) / len(per_task) if per_task else 0.0
            if not _same(claimed, truth):
                _contradiction(path, "summary.pass_at_k", f"pass@{j} = {claimed!r}", repr(truth))


def _same(claimed: float, truth: float) -> bool:
    return math.isclose(claimed, truth, rel_tol=1e-9, abs_tol=1e-9)  # JSON keeps floats; a sum's order may not


def _contradiction(path: Path, field_name: str, claimed: Any, truth: Any) -> None:
    raise ResultsFormatError(str(path), field_name, f"says {claimed} but the file's own episodes give {truth}; "
                             "the summary must restate the episodes")


def _read_json(path: Path) -> Any:
    try:
        text = _read_regular(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsFormatError(str(path), None, f"cannot be read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # json's messages may end in "at" ("Invalid control character at"), meant to precede a position.
        raise ResultsFormatError(str(path), None, f"not valid JSON (line {exc.lineno}, column {exc.colno}: "
                                 f"{exc.msg.removesuffix(' at')})") from None
    except (ValueError, RecursionError) as exc:  # a number too long to convert, arrays nested too deep
        raise ResultsFormatError(str(path), None, f"not valid JSON ({type(exc).__name__}: {str(exc)[:200]})") from None


def _read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most :data:`MAX_RESULTS_BYTES`.

    Opened without following a link (a ``*.json`` link to ``/dev/zero`` would be read until memory
    runs out) and without blocking (a FIFO with no writer would block the open for good); what is
    open is then checked to be a regular file, and read no further than the cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ResultsFormatError(str(path), None, "is a symbolic link; results files must be regular "
                                     "files (copy the file in instead)") from None
        raise ResultsFormatError(str(path), None, f"cannot be read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ResultsFormatError(str(path), None, "is not a regular file (a FIFO, device or socket); "
                                     "results files must be regular files")
        too_big = f"is larger than the {MAX_RESULTS_BYTES >> 20} MiB cap for results files"
        if info.st_size > MAX_RESULTS_BYTES:
            raise ResultsFormatError(str(path), None, f"{too_big} ({info.st_size} bytes)")
        try:
            data = read_at_most(fh, MAX_RESULTS_BYTES + 1)  # + 1: a file that grew since fstat is caught too
        except OSError as exc:
            raise ResultsFormatError(str(path), None, f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_RESULTS_BYTES:
        raise ResultsFormatError(str(path), None, too_big)
    return data


def _results_files(directory: Path) -> tuple[list[Path], bool]:
    """Every ``*.json`` under ``directory``, sorted, and whether that is all of them (False: the walk
    stopped at :data:`MAX_RESULTS_ENTRIES`). The walk is iterative (a folder thousands of levels
    deep is walked, not a ``RecursionError``) and never enters a linked directory."""
    found, todo, seen = [], [directory], 0
    while todo:
        try:
            with os.scandir(todo.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_RESULTS_ENTRIES:
                        return sorted(found), False
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(Path(entry.path))
                    elif entry.name.endswith(".json"):
                        found.append(Path(entry.path))
        except OSError:  # unreadable, or a path past the system's length limit: nothing to rank there
            continue
    return sorted(found), True


def is_predictions(data: Any) -> bool:
    """A SWE-bench predictions file (a list, or a dict by instance id, of ``{instance_id, model_patch}``).

    ``deepgym eval`` may write one beside the results; it is not a malformed results file.
    """
    items = data if isinstance(data, list) else list(data.values()) if isinstance(data, dict) else []
    return bool(items) and all(isinstance(i, dict) and "model_patch" in i for i in items)


def load_run(path: str | Path) -> Run:
    """Read and validate one results file. Raises :class:`ResultsFormatError` naming the file and field."""
    path = Path(path)
    return parse_run(path, _read_json(path))


def _load_one(path: Path) -> Run | None:
    """One file of a results folder (None: a predictions file). Whatever goes wrong is this file's
    :class:`ResultsFormatError`: the folder's other files are still ranked."""
    try:
        data = _read_json(path)
        return None if is_predictions(data) else parse_run(path, data)
    except ResultsFormatError:
        raise
    except Exception as exc:  # e.g. a shape nested past what the checks can walk
        raise ResultsFormatError(str(path), None, f"cannot be checked: {type(exc).__name__}: {exc}") from None


def load_runs(directory: str | Path, *, strict: bool = False) -> tuple[list[Run], list[Skipped]]:
    """Every ``*.json`` under ``directory``; malformed files are skipped and listed (or raise, if strict).

    One file never stops the others: whatever goes wrong reading it, it is skipped with the reason.
    SWE-bench predictions files found there are passed over in silence.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ResultsFormatError(str(directory), None, "is not a directory of results; write one with "
                                 "`deepgym eval --agent NAME --out DIR/NAME.json`")
    runs: list[Run] = []
    skipped: list[Skipped] = []
    paths, whole = _results_files(directory)
    if not whole:
        skipped.append(Skipped(directory, f"{directory}: holds more than {MAX_RESULTS_ENTRIES} entries; only the "
                                          f"{len(paths)} results files found first are ranked (keep results "
                                          "files, and only those, there)"))
    for path in paths:
        try:
            run = _load_one(path)
        except ResultsFormatError as exc:
            if strict:
                raise
            skipped.append(Skipped(path, str(exc)))
            continue
        if run is not None:
            runs.append(run)
    return runs, skipped


# --- ranking --------------------------------------------------------------------------------------

def newest_per_key(runs: Iterable[Run]) -> list[Run]:
    """One run per (agent, model, task set): the newest (the file name breaks a same-second tie)."""
    best: dict[tuple[str, str, str], Run] = {}
    for run in runs:
        kept = best.get(run.key)
        if kept is None or (run.created_at, run.path.name) > (kept.created_at, kept.path.name):
            best[run.key] = run
    return list(best.values())


def _order(run: Run) -> tuple:
    # Better first: more resolved, then higher pass@k; on a tie, fewer infrastructure failures (a
    # cleaner measurement), fewer steps and tokens (cheaper), then the older run (it got there first).
    nv_rate = run.no_verdict / len(run.episodes) if run.episodes else 0.0
    return (-run.resolved_rate, -run.top_pass, nv_rate, run.mean_steps,
            run.tokens if run.tokens is not None else math.inf, run.created_at, run.name, str(run.path))


def _tie(run: Run) -> tuple:
    return _order(run)[:5]


def rank(runs: Iterable[Run], *, every_run: bool = False) -> dict[str, list[Ranked]]:
    """Task set -> its runs, best first, with ranks (runs equal on every metric share a rank)."""
    chosen = list(runs) if every_run else newest_per_key(runs)
    board: dict[str, list[Ranked]] = {}
    for task_set in sorted({r.task_set for r in chosen}):
        ordered = sorted((r for r in chosen if r.task_set == task_set), key=_order)
        ranked: list[Ranked] = []
        for i, run in enumerate(ordered):
            same = ranked and _tie(ranked[-1].run) == _tie(run)
            ranked.append(Ranked(ranked[-1].rank if same else i + 1, run))
        board[task_set] = ranked
    return board
