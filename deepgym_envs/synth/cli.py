"""``deepgym tasks synth | stats | split | sample``: registered by :func:`add_taskset_parsers`.

    deepgym tasks synth --from pypi:NAME==VERSION [--from git:PATH_OR_URL[@REV] ...] --out DIR
    deepgym tasks synth --from-list packages.txt --out DIR [--jobs N] [--json]   # resumable
    deepgym tasks stats TASKSET [--json]
    deepgym tasks split TASKSET --by repo --eval-frac 0.2 [--seed 0] --out DIR
    deepgym tasks sample TASKSET --per-repo N [--seed 0] [--drop REPORT] --out DIR
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from rich.console import Console
from typing import TYPE_CHECKING

from deepgym_envs.progress import console as _console

if TYPE_CHECKING:
    from deepgym_envs.synth.pipeline import PackageReport, SynthConfig
    from deepgym_envs.synth.scale import Outcome


def console(width: int | None = None) -> Console:
    return Console(width=width) if width else _console()


def _synth(args: argparse.Namespace) -> int:
    from deepgym_envs.errors import DeepgymError
    from deepgym_envs.synth.fetch import SourceSpec
    from deepgym_envs.synth.pipeline import SynthConfig
    from deepgym_envs.synth.scale import Outcome, read_source_list, synthesize_sources

    # All of them checked before any work starts.
    specs = [s for path in args.lists for s in read_source_list(Path(path))]
    specs += [SourceSpec.parse(s) for s in args.sources]
    if not specs:
        raise DeepgymError("tasks synth: name at least one source (--from SOURCE or --from-list FILE)")
    config = SynthConfig(max_candidates=args.max_candidates, max_combined=args.max_combined,
                         run_timeout=args.run_timeout, workers=args.workers, seed=args.seed, backend=args.sandbox,
                         use_host_python=args.host_python, validate=not args.no_validate,
                         llm_url=args.llm_url or "", llm_model=args.llm_model or "",
                         repo_format=args.repo_format, show_progress=not args.json, budget=args.source_budget)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda text: None) if args.json else (lambda text: console().print(text, soft_wrap=True))

    def done(o: Outcome) -> None:
        r = o.report
        state = f"[green]{r.written} tasks[/]" if r.ok else f"[red]failed[/]: {escape(r.reason)}"
        say(f"{escape(r.source)}: {state} " + ("(done by an earlier run; skipped)" if o.resumed else f"({r.seconds:.0f}s)"))

    start = time.monotonic()
    outcomes = synthesize_sources(specs, out, config, jobs=args.jobs, resume=not args.restart, on_done=done)
    seconds = time.monotonic() - start
    reports = [o.report for o in outcomes]
    # Throughput counts the work this run did; sources finished earlier took no time now.
    fresh = [o.report for o in outcomes if not o.resumed]
    total = sum(r.written for r in reports)
    per_hour = sum(r.written for r in fresh) / seconds * 3600 if seconds > 0 and fresh else 0.0
    failed = [r for r in reports if not r.ok]
    summary = {"sources": [{**r.to_dict(), "resumed": o.resumed, "yield": _yield(r)} for o, r in zip(outcomes, reports)],
               "tasks": total, "validated": config.validate, "seconds": round(seconds, 1),
               "tasks_per_hour": round(per_hour, 1), "skipped_as_done": len(reports) - len(fresh)}
    (out / "synth-summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        _print_summary(out, outcomes, config, total, failed, seconds, per_hour)
    # Non-zero when any source gave nothing: a batch job must not read "2 of 4 failed" as success.
    return 1 if failed or not total else 0


def _yield(r: PackageReport) -> float:
    """Tasks written per candidate bug tried."""
    return round(r.written / r.tried, 3) if r.tried else 0.0


def _print_summary(out: Path, outcomes: list[Outcome], config: SynthConfig, total: int, failed: list[PackageReport],
                   seconds: float, per_hour: float) -> None:
    table = Table(title=f"synthesis into {out}")
    for col in ("source", "reliable tests", "tried", "kept", "written", "yield", "rejected (why)", "s", "result"):
        table.add_column(col, overflow="fold")
    for o in outcomes:
        r = o.report
        why = ", ".join(f"{k}: {v}" for k, v in r.rejected.most_common()) or "-"
        result = "[green]ok[/]" if r.ok else "[red]failed[/]"
        table.add_row(escape(r.source), str(r.reliable_tests), str(r.tried), str(r.kept), str(r.written),
                      f"{_yield(r):.0%}", escape(why), f"{r.seconds:.0f}", result + (" (earlier)" if o.resumed else ""))
    console(width=max(120, console().width)).print(table)
    for o in outcomes:
        r = o.report
        if r.reason:
            console().print(f"{escape(r.source)}: {escape(r.reason)}", soft_wrap=True)
        elif r.rejects_file:
            console().print(f"{escape(r.source)}: rejected candidates and why: {escape(str(out / r.rejects_file))}",
                            soft_wrap=True)
    what = "validated tasks" if config.validate else "tasks (not validated: --no-validate)"
    console().print(f"{total} {what} from {len(outcomes) - len(failed)}/{len(outcomes)} sources in {seconds:.0f}s "
                    f"({per_hour:.0f} tasks/hour)")


def _stats(args: argparse.Namespace) -> int:
    from deepgym_envs.tasks import load_tasks
    from deepgym_envs.taskset import taskset_stats

    stats = taskset_stats(load_tasks(args.taskset))
    if args.json:
        print(json.dumps(stats.to_dict(), indent=1))
        return 0
    table = Table(title=f"{stats.tasks} tasks in {args.taskset}")
    for col in ("repo", "tasks", "F2P (mean)", "lines changed (mean)", "files touched (mean)"):
        table.add_column(col)
    for r in stats.repos:
        table.add_row(escape(r.repo), str(r.tasks), f"{r.f2p_mean:g}", f"{r.lines_changed_mean:g}",
                      f"{r.files_touched_mean:g}")
    console().print(table)
    for name, values in (("lines changed", stats.lines_changed), ("files touched", stats.files_touched),
                         ("FAIL_TO_PASS", stats.f2p), ("PASS_TO_PASS", stats.p2p)):
        console().print(f"{name}: " + ", ".join(f"{k} {v:g}" for k, v in values.items()))
    console().print("difficulty: " + ", ".join(f"{k} {v}" for k, v in stats.difficulty.items()))
    return 0


def _split(args: argparse.Namespace) -> int:
    from deepgym_envs.tasks import load_tasks
    from deepgym_envs.taskset import split_by_repo, write_split

    split = split_by_repo(load_tasks(args.taskset), eval_frac=args.eval_frac, seed=args.seed)
    train, evaluation = write_split(split, Path(args.out))
    console().print(f"train: {len(split.train)} tasks -> {train}\neval: {len(split.eval)} tasks -> {evaluation} "
                    f"(repos: {', '.join(split.eval_repos)})")
    return 0


def _sample(args: argparse.Namespace) -> int:
    from deepgym_envs.tasks import load_tasks
    from deepgym_envs.taskset import flagged_tasks, repo_of, sample_per_repo, write_tasks

    tasks = load_tasks(args.taskset)
    dropped: dict[str, str] = {}
    for report in args.drop:
        dropped.update({k: v for k, v in flagged_tasks(Path(report)).items() if k not in dropped})
    kept = [t for t in tasks if t.instance_id not in dropped]
    chosen = sample_per_repo(kept, args.per_repo, seed=args.seed)
    files = write_tasks(chosen, Path(args.out))
    repos = len({repo_of(t) for t in chosen})
    each = f"at most {args.per_repo} each" if args.per_repo else "all of each"
    gone = len(tasks) - len(kept)
    console().print(f"{len(chosen)} of {len(tasks)} tasks ({repos} repositories, {each}"
                    f"{f'; {gone} left out as the reports flag them' if gone else ''}) "
                    f"-> {len(files)} files in {escape(args.out)}", soft_wrap=True)
    present = {t.instance_id for t in tasks}
    for task_id, why in sorted(dropped.items()):
        if task_id in present:
            console().print(f"  left out {escape(task_id)}: {escape(why)}", soft_wrap=True)
    return 0


def add_taskset_parsers(tasks: argparse._SubParsersAction) -> None:
    """Register ``synth``, ``stats`` and ``split`` under ``deepgym tasks``."""
    p = tasks.add_parser("synth", help="make tasks from real projects: inject bugs their own tests catch")
    p.add_argument("--from", dest="sources", action="append", default=[], metavar="SOURCE",
                   help="pypi:NAME==VERSION or git:PATH_OR_URL[@REV] (repeatable)")
    p.add_argument("--from-list", dest="lists", action="append", default=[], metavar="FILE",
                   help="a file of sources, one a line (pypi:..., git:..., or a local repository's path; "
                   "# comments); repeatable, and combines with --from")
    p.add_argument("--jobs", type=int, default=1, help="sources synthesised at once (each with --workers sandboxes)")
    p.add_argument("--restart", action="store_true",
                   help="redo every source, even those an earlier run into --out finished (done/*.json)")
    p.add_argument("--repo-format", choices=["bundle", "bare"], default="bundle",
                   help="each project's repository as one git bundle file, or as a bare repository")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (also in OUT/synth-summary.json)")
    p.add_argument("--out", required=True, help="directory for the task files, repositories and requirements")
    p.add_argument("--max-candidates", type=int, default=60, help="bugs tried per project")
    p.add_argument("--max-combined", type=int, default=5, help="two-bug combinations tried per project (0 = off)")
    p.add_argument("--run-timeout", type=float, default=0.0, help="seconds per test run (0 = 3x the clean run + 30)")
    p.add_argument("--workers", type=int, default=2, help="test runs in parallel, per source")
    p.add_argument("--source-budget", type=float, default=0.0, metavar="SECONDS",
                   help="seconds of candidate runs per source (0 = no limit); the candidates left are "
                   "reported as not tried, so one slow suite cannot hold a long run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sandbox", default=None, help="sandbox backend (default: namespace)")
    p.add_argument("--host-python", action="store_true",
                   help="run tests with deepgym's interpreter instead of building an environment")
    p.add_argument("--no-validate", action="store_true", help="skip the final `tasks validate` pass")
    p.add_argument("--llm-url", default=None, help="reword statements with an OpenAI-compatible endpoint, "
                   "e.g. http://localhost:8000/v1 (key from OPENAI_API_KEY)")
    p.add_argument("--llm-model", default=None, help="the model name that endpoint serves")
    p.set_defaults(func=_synth)

    p = tasks.add_parser("stats", help="per-repository counts, lines changed, files touched, F2P counts")
    p.add_argument("taskset", nargs="?", default="builtin")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=_stats)

    p = tasks.add_parser("split", help="train / eval split by repository (seeded, deterministic)")
    p.add_argument("taskset")
    p.add_argument("--by", choices=["repo"], default="repo")
    p.add_argument("--eval-frac", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.set_defaults(func=_split)

    p = tasks.add_parser("sample", help="at most N tasks of each repository, spread over its kinds of bug")
    p.add_argument("taskset")
    p.add_argument("--per-repo", type=int, required=True, metavar="N", help="0: every task")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--drop", action="append", default=[], metavar="REPORT",
                   help="leave out the tasks this report flags: an audit's (deepgym audit --out: exploited, "
                        "leaking, no verdict) or a validation's (deepgym tasks validate --json: invalid); "
                        "repeatable")
    p.add_argument("--out", required=True, help="a folder: the rows, one file per source file, and the "
                   "repositories they name")
    p.set_defaults(func=_sample)
