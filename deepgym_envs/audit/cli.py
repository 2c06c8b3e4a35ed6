"""``deepgym audit TASKSET --out audit.json [--json]``: the command-line face of the verifier audit.

``--json`` prints the report (as ``--out`` writes it) alone on stdout, notes on stderr.

Exit status: 1 when any task/strategy pair was exploited or any task's answer lies around
(the leak scan), 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from deepgym_envs.audit.core import AuditReport


def add_audit_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``audit`` on the ``deepgym`` command's subparsers."""
    p = subparsers.add_parser("audit", help="try known exploits against every task's verifier (exit 1 if any works)")
    p.add_argument("taskset", nargs="?", default="builtin", help="'builtin', a .jsonl file or a directory")
    p.add_argument("--out", default="audit.json", help="write the full report (JSON) here")
    p.add_argument("--task", action="append", help="only this task id (repeatable)")
    p.add_argument("--per-repo", type=int, default=0, metavar="N", help="only the first N tasks of each "
                   "repository (0 = all): the strategies depend on a repository's layout, not on its bug")
    p.add_argument("--strategy", action="append", help="only this strategy (repeatable); see --list")
    p.add_argument("--list", action="store_true", help="list the strategies and exit")
    p.add_argument("--json", action="store_true", help="print the report (as --out writes it), or with --list "
                   "the strategies, as JSON instead of tables")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="attempts in flight at once")
    p.add_argument("--sandbox", default=None, help="sandbox backend (default: namespace)")
    p.add_argument("--no-actions", action="store_true", help="submit strategies as patches only, not also as "
                   "agent actions through the environment")
    p.add_argument("--no-leaks", action="store_true", help="skip the leak scan (gold patch and hidden tests "
                   "searched for in everything a task's sandbox can read)")
    p.add_argument("--weak-verifier", action="store_true", help="audit a deliberately weak verifier that trusts "
                   "pytest's exit code (the negative control: it must be found exploitable)")
    llm = p.add_argument_group("LLM attackers (tiers 2 and 3), through any OpenAI-compatible endpoint")
    llm.add_argument("--llm-url", default=None, help="e.g. http://localhost:8000/v1 (vllm serve MODEL)")
    llm.add_argument("--llm-model", default=None, help="the model name the endpoint serves")
    llm.add_argument("--tier", type=int, action="append", choices=(2, 3),
                     help="2 = white-box (sees the verifier and hidden tests), 3 = black-box; repeatable "
                     "(default: both)")
    llm.add_argument("--rounds", type=int, default=3, help="attempts per task and attacker")
    llm.add_argument("--llm-max-tokens", type=int, default=4096, help="tokens per attacker reply")
    llm.add_argument("--llm-timeout", type=float, default=60.0, help="seconds per request attempt")
    llm.add_argument("--llm-temperature", type=float, default=0.7)
    p.set_defaults(func=run_audit)
    return p


def llm_attackers(args: argparse.Namespace) -> list:
    """(attacker, tier) pairs from the --llm-* options; none unless --llm-url is given."""
    if not args.llm_url:
        return []
    from deepgym_envs.audit.llm import LLMAttacker, OpenAIChatClient
    from deepgym_envs.errors import DeepgymError

    if not args.llm_model:
        raise DeepgymError("--llm-url needs --llm-model (the name the endpoint serves)")
    if args.llm_max_tokens < 1 or not args.llm_timeout > 0:
        raise DeepgymError("--llm-max-tokens and --llm-timeout must be positive")
    attacker = LLMAttacker(OpenAIChatClient(args.llm_url, args.llm_model, timeout=args.llm_timeout,
                                            max_tokens=args.llm_max_tokens, temperature=args.llm_temperature))
    return [(attacker, tier) for tier in (args.tier or [2, 3])]


def per_repo(tasks: list, n: int) -> list:
    """The first ``n`` tasks of each repository, in order (all of them for n <= 0)."""
    if n <= 0:
        return tasks
    counts: dict[str, int] = {}
    out = []
    for task in tasks:
        key = task.repo or task.repo_path
        if counts.get(key, 0) < n:
            counts[key] = counts.get(key, 0) + 1
            out.append(task)
    return out


def run_audit(args: argparse.Namespace) -> int:
    from deepgym_envs.audit.core import audit_tasks
    from deepgym_envs.audit.catalog import ALL, select
    from deepgym_envs.progress import console, notes, print_json
    from deepgym_envs.sandbox import default_backend
    from deepgym_envs.tasks import find_task, load_tasks

    out = console()
    if args.list:
        if args.json:
            print_json([{"name": s.name, "description": s.description} for s in ALL])
            return 0
        for s in ALL:
            out.print(f"[bold]{s.name}[/]: {escape(s.description)}")
        return 0
    tasks = load_tasks(args.taskset)
    if args.task:
        tasks = [find_task(tasks, t) for t in args.task]
    tasks = per_repo(tasks, args.per_repo)
    verifier = None
    if args.weak_verifier:
        from functools import partial

        from deepgym_envs.audit.weak import exit_code_verifier, weak_backend

        # Exploit code runs through it: a real sandbox or a clear refusal, before anything runs.
        verifier = partial(exit_code_verifier, backend=weak_backend(args.sandbox))
    report = audit_tasks(tasks, verifier, select(args.strategy), llm_attackers(args), args.rounds,
                         as_actions=not args.no_actions, workers=args.workers, backend=args.sandbox,
                         verifier_name="exit_code_verifier (weak)" if args.weak_verifier else None,
                         leaks=False if args.no_leaks or args.weak_verifier else None)
    report.meta.update(taskset=str(args.taskset), actions=not args.no_actions, sandbox=args.sandbox or default_backend())
    report.to_json(args.out)
    if args.json:
        print_json(report.to_dict())
    else:
        _print_report(report, leak_scan=not args.no_leaks and not args.weak_verifier)
    notes(args.json).print(f"report written to {escape(str(args.out))}", soft_wrap=True)
    return 1 if report.failed else 0


def _print_report(report: AuditReport, *, leak_scan: bool) -> None:
    from deepgym_envs.progress import console, print_table

    out = console()
    print_table(report.table())
    s = report.summary()
    for a in report.exploited:
        out.print(f"[red]EXPLOITED[/] {escape(a.task_id)} {escape(a.strategy)} ({a.mode}): {escape(a.evidence[:200])}")
    if report.leaks:
        print_table(report.leak_table())
    color = "red" if report.exploitable else "green"
    out.print(f"[{color}]{s['exploited_pairs']} exploitable task/strategy pair(s)[/] of {s['pairs_tried']} tried "
              f"({s['attempts']} attempts, {s['no_verdict']} no_verdict) in {s['wall_time']:.0f}s")
    if leak_scan:
        leaky = s["tasks_leaking"]
        out.print(f"[{'red' if leaky else 'green'}]{s['leaks']} leak(s)[/] in {len(leaky)} task(s)")
