"""Task-set tooling: statistics, train / eval splits by repository, and samples spread over them.

Splitting by repository (not by task) keeps every task of one project on one side, so an eval
score measures transfer to unseen code rather than memory of a sibling bug in the same module.

>>> from deepgym_envs.tasks import load_tasks
>>> stats = taskset_stats(load_tasks("builtin"))
>>> stats.tasks, len(stats.repos)
(36, 6)
"""

from __future__ import annotations

import json
import random
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from deepgym_envs.errors import DeepgymError, TaskFormatError
from deepgym_envs.tasks import Task


@dataclass(frozen=True)
class RepoStats:
    repo: str
    tasks: int
    f2p_mean: float
    lines_changed_mean: float
    files_touched_mean: float


@dataclass(frozen=True)
class TasksetStats:
    tasks: int
    repos: list[RepoStats]
    lines_changed: dict[str, float]
    """min / median / mean / max lines the gold patches change (a difficulty proxy)."""
    files_touched: dict[str, float]
    f2p: dict[str, float]
    p2p: dict[str, float]
    difficulty: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"tasks": self.tasks, "repos": [vars(r) for r in self.repos], "lines_changed": self.lines_changed,
                "files_touched": self.files_touched, "f2p": self.f2p, "p2p": self.p2p, "difficulty": self.difficulty}


def lines_changed(patch: str) -> int:
    """Added plus removed lines of a unified diff (headers excluded)."""
    return sum(1 for line in patch.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++ ", "--- ")))


def repo_of(task: Task) -> str:
    return task.repo or task.repo_path or "(none)"


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"min": 0, "median": 0, "mean": 0, "max": 0}
    return {"min": min(values), "median": statistics.median(values), "mean": round(statistics.fmean(values), 2),
            "max": max(values)}


def taskset_stats(tasks: list[Task]) -> TasksetStats:
    by_repo: dict[str, list[Task]] = {}
    for t in tasks:
        by_repo.setdefault(repo_of(t), []).append(t)
    repos = [RepoStats(repo, len(ts), round(statistics.fmean(len(t.FAIL_TO_PASS) for t in ts), 2),
                       round(statistics.fmean(lines_changed(t.patch) for t in ts), 2),
                       round(statistics.fmean(len(t.gold_files) for t in ts), 2))
             for repo, ts in sorted(by_repo.items())]
    difficulty: dict[str, int] = {}
    for t in tasks:
        difficulty[t.difficulty or "-"] = difficulty.get(t.difficulty or "-", 0) + 1
    return TasksetStats(len(tasks), repos, _summary([lines_changed(t.patch) for t in tasks]),
                        _summary([len(t.gold_files) for t in tasks]),
                        _summary([len(t.FAIL_TO_PASS) for t in tasks]), _summary([len(t.PASS_TO_PASS) for t in tasks]),
                        dict(sorted(difficulty.items())))


@dataclass(frozen=True)
class Split:
    train: list[Task]
    eval: list[Task]
    eval_repos: list[str]


def split_by_repo(tasks: list[Task], eval_frac: float = 0.2, seed: int = 0) -> Split:
    """Whole repositories go to eval until it holds about ``eval_frac`` of the tasks.

    Deterministic for a seed: repositories are shuffled by a seeded generator over their sorted
    names, then taken in that order while the eval side stays closest to the target; at least one
    repository lands on each side when there are two or more.
    """
    if not 0 < eval_frac < 1:
        raise DeepgymError(f"--eval-frac must be between 0 and 1, got {eval_frac}")
    counts: dict[str, int] = {}
    for t in tasks:
        counts[repo_of(t)] = counts.get(repo_of(t), 0) + 1
    repos = sorted(counts)
    if len(repos) < 2:
        raise DeepgymError(f"a split by repository needs at least two repositories; this set has {len(repos)}")
    random.Random(seed).shuffle(repos)
    target = eval_frac * len(tasks)
    chosen: list[str] = []
    total = 0
    for repo in repos:
        if len(chosen) == len(repos) - 1:
            break
        if not chosen or abs(total + counts[repo] - target) < abs(total - target):
            chosen.append(repo)
            total += counts[repo]
    eval_set = set(chosen)
    return Split([t for t in tasks if repo_of(t) not in eval_set], [t for t in tasks if repo_of(t) in eval_set],
                 sorted(eval_set))


def write_split(split: Split, out: Path, tasks_root: Path | None = None) -> tuple[Path, Path]:
    """``out/train.jsonl`` and ``out/eval.jsonl``, loadable wherever ``out`` is.

    A task file may only name repositories inside its own folder (:func:`~deepgym_envs.tasks.load_tasks`),
    so local repositories outside ``out`` are copied to ``out/repos/`` (files, directories and
    in-tree links only, within the tree caps of :mod:`deepgym_envs.untrusted_tree`) and the rows
    name those copies.
    """
    out.mkdir(parents=True, exist_ok=True)
    where = _bundle_repos([*split.train, *split.eval], out)
    train, evaluation = out / "train.jsonl", out / "eval.jsonl"
    _write_rows(train, split.train, where)
    _write_rows(evaluation, split.eval, where)
    return train, evaluation


def sample_per_repo(tasks: list[Task], per_repo: int, seed: int = 0) -> list[Task]:
    """At most ``per_repo`` tasks of each repository (0: all), spread over the kinds of bug it has.

    A synthesised task's kind is its ``synth.kind`` (``flip_comparison``, ``drop_statement``...);
    within a repository the kinds take turns (in a seeded order, each kind's tasks seeded-shuffled),
    so a sample of five holds five kinds where the repository has them, not five of its commonest.
    Deterministic for a seed, whatever the order ``tasks`` come in; the result keeps their order.
    """
    if per_repo < 0:
        raise DeepgymError(f"--per-repo must be at least 0 (0: every task), got {per_repo}")
    if per_repo == 0:
        return list(tasks)
    by_repo: dict[str, dict[str, list[Task]]] = {}
    for t in sorted(tasks, key=lambda t: t.instance_id):
        kind = str((t.extra.get("synth") or {}).get("kind", "")) if isinstance(t.extra.get("synth"), dict) else ""
        by_repo.setdefault(repo_of(t), {}).setdefault(kind, []).append(t)
    chosen: set[str] = set()
    for repo in sorted(by_repo):
        rng = random.Random(f"{seed}:{repo}")
        kinds = sorted(by_repo[repo])
        rng.shuffle(kinds)
        queues = [rng.sample(by_repo[repo][k], len(by_repo[repo][k])) for k in kinds]
        taken = 0
        while taken < per_repo and any(queues):
            for queue in queues:
                if queue and taken < per_repo:
                    chosen.add(queue.pop().instance_id)
                    taken += 1
    return [t for t in tasks if t.instance_id in chosen]


def flagged_tasks(path: Path) -> dict[str, str]:
    """{task id: why} of the tasks a check's JSON report at ``path`` says to leave out of a set:
    an audit report (``deepgym audit --out``: exploited, leaking, or no verdict) or a validation
    report (``deepgym tasks validate --json``: invalid)."""
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DeepgymError(f"{path}: not a readable JSON report ({exc})") from None
    out: dict[str, str] = {}
    if isinstance(report, dict) and isinstance(report.get("attempts"), list) and "leaks" in report:
        for a in report["attempts"]:
            if a.get("exploited"):
                out.setdefault(a["task_id"], f"exploited by {a.get('strategy')}")
            elif a.get("status") == "no_verdict":
                out.setdefault(a["task_id"], f"no verdict under {a.get('strategy')}")
        for leak in report["leaks"]:
            if "task_id" in leak:
                out.setdefault(leak["task_id"], f"leaks its {leak.get('kind')} at {leak.get('location')}")
        return out
    if isinstance(report, dict) and isinstance(report.get("tasks"), list) and "invalid" in report:
        return {r["task_id"]: "invalid: " + "; ".join(r.get("problems") or []) for r in report["tasks"]
                if not r.get("valid")}
    raise DeepgymError(f"{path}: neither an audit report (deepgym audit --out) nor a validation report "
                       "(deepgym tasks validate --json)")


def write_tasks(tasks: list[Task], out: Path) -> list[Path]:
    """``tasks`` as ``out/NAME.jsonl``, one file per task file they came from, loadable wherever
    ``out`` is (repositories copied in as :func:`write_split` does)."""
    out.mkdir(parents=True, exist_ok=True)
    where = _bundle_repos(tasks, out)
    files: dict[str, list[Task]] = {}
    for t in tasks:
        stem = Path(t.source.rsplit(":", 1)[0]).stem if t.source else "tasks"
        files.setdefault(stem or "tasks", []).append(t)
    paths = [out / f"{stem}.jsonl" for stem in sorted(files)]
    for path in paths:
        _write_rows(path, files[path.stem], where)
    return paths


def _write_rows(path: Path, tasks: list[Task], where: dict[str, str]) -> None:
    """The tasks' rows, each naming its repository's copy under the output folder."""
    with path.open("w", encoding="utf-8") as fh:
        for t in tasks:
            row = t.to_dict()
            if t.repo_path:
                row["repo_path"] = where[t.repo_path]
            fh.write(json.dumps(row) + "\n")


def _bundle_repos(tasks: list[Task], out: Path) -> dict[str, str]:
    """Each task's ``repo_path`` -> a path relative to ``out`` inside it (copying it there if need be)."""
    import os
    import shutil

    from deepgym_envs.untrusted_tree import Origin, TreeCaps, copy_dir

    root = os.path.realpath(out)
    repos = Path(root) / "repos"
    if os.path.islink(repos) or (os.path.lexists(repos) and not repos.is_dir()):
        # Written through, a link would have the copies (and the removal of earlier ones) land elsewhere.
        raise TaskFormatError(str(repos), None, None, "is a link or not a folder: a split keeps its copies of the "
                              "repositories in a folder of its own; remove it or choose another --out")
    where: dict[str, str] = {}
    taken: set[str] = set()
    for t in tasks:
        if not t.repo_path or t.repo_path in where:
            continue
        real = os.path.realpath(t.repo_path)
        if real.startswith(root + os.sep):
            where[t.repo_path] = os.path.relpath(real, root)
            continue
        name = os.path.basename(real) or "repo"
        unique, n = name, 2
        while unique in taken:
            unique, n = f"{name}-{n}", n + 1
        taken.add(unique)
        dest = repos / unique
        if os.path.lexists(dest):  # a split written here before: out/repos is the split's own
            shutil.rmtree(dest) if dest.is_dir() and not dest.is_symlink() else dest.unlink()
        repos.mkdir(exist_ok=True)
        if os.path.isfile(real):  # a synthesised project's git bundle: one file, read only by git fetch
            shutil.copyfile(real, dest)
        else:
            copy_dir(Path(real), dest, TreeCaps.from_env(), Origin(t.source, "repo_path", t.instance_id))
        where[t.repo_path] = f"repos/{unique}"
    return where
