"""The ``deepgym`` command line.

    deepgym tasks list [TASKSET] [--json]
    deepgym tasks validate [TASKSET] [--task ID|GLOB] [--workers N] [--runs N --record-flaky] [--record-maps]
                           [--record-gold-seconds] [--json]
    deepgym tasks synth --from pypi:NAME==VERSION | git:PATH_OR_URL --out DIR
    deepgym tasks import SOURCE --out DIR --repos MIRRORS      (SWE-bench / SWE-Gym rows; deepgym_envs.swebench_cli)
    deepgym grade-predictions predictions.jsonl --tasks DIR [--out report.json]
    deepgym tasks stats TASKSET | split TASKSET --by repo --eval-frac 0.2 --out DIR
    deepgym batch TASK_ID --patches candidates.jsonl [--executor ray] [--out verdicts.jsonl]
    deepgym eval --agent oracle|noop [--tasks TASKSET] [--task-ids ID|GLOB,...] [--out results.json] [--json]
    deepgym eval --agent openai|vllm|hf --model M [--base-url U] [--k N] [--task-ids ID|GLOB,...] [--json]
    deepgym audit [TASKSET] --out audit.json [--weak-verifier] [--json]
    deepgym leaderboard [--results leaderboard/results] [--out leaderboard/index.html]
    deepgym sandbox check | reap
    deepgym serve [--host H --port P] [--max-sessions N] [--idle-timeout S] [--tasks T] [--sandbox B]  (token: $DEEPGYM_SERVE_TOKEN)
    deepgym images build [--offline]
    deepgym train --online | --from trajectories.jsonl      (deepgym_agents.rloo)
    deepgym plot-run RUN_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from deepgym_envs.defaults import MAX_STEPS
from deepgym_envs.errors import DeepgymError
from deepgym_envs.progress import console, fail_without_verdicts, notes, print_json, print_table
from deepgym_envs.tasks import ALLOW_OUTSIDE_ENV


def _note(args: argparse.Namespace) -> Console:
    return notes(getattr(args, "json", False))


def _tasks_list(args: argparse.Namespace) -> int:
    from deepgym_envs.tasks import load_tasks

    tasks = load_tasks(args.taskset)
    if args.json:
        print_json([{"instance_id": t.instance_id, "repo": t.repo, "difficulty": t.difficulty,
                     "FAIL_TO_PASS": t.FAIL_TO_PASS, "PASS_TO_PASS": t.PASS_TO_PASS,
                     "problem_statement": t.problem_statement, "source": t.source} for t in tasks])
        return 0
    table = Table(title=f"{len(tasks)} tasks in {escape(str(args.taskset))}")
    for col in ("instance_id", "repo", "difficulty", "F2P", "P2P", "problem"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        first = next((line for line in t.problem_statement.splitlines() if line.strip()), "")
        table.add_row(escape(t.instance_id), escape(t.repo), escape(t.difficulty or "-"), str(len(t.FAIL_TO_PASS)),
                      str(len(t.PASS_TO_PASS)), escape(first[:70]))
    print_table(table)
    return 0


def _tasks_validate(args: argparse.Namespace) -> int:
    from deepgym_envs.evaluation import select_tasks
    from deepgym_envs.tasks import load_tasks
    from deepgym_envs.validate import validate_tasks

    if args.show_log:
        args.task = [args.show_log]
    tasks = select_tasks(load_tasks(args.taskset), args.task or (), source=args.taskset)
    results = validate_tasks(tasks, backend=args.sandbox, workers=args.workers, runs=args.runs,
                             record_maps=args.record_maps, retime=args.record_gold_seconds)
    from deepgym_envs.gate import store

    for r, t in zip(results, tasks):  # what the grading paths' gate reads: a validated set is not validated again
        store(t, r, backend=args.sandbox)
    bad = sum(not r.valid for r in results)
    flaky = sum(bool(r.flaky) for r in results)
    if args.json:
        print_json({"taskset": str(args.taskset), "runs": args.runs, "valid": len(results) - bad, "invalid": bad,
                    "with_flaky_tests": flaky, "tasks": [_validation_row(r, t) for r, t in zip(results, tasks)]})
    else:
        title = f"validation of {escape(str(args.taskset))}" + (f" ({args.runs} runs)" if args.runs > 1 else "")
        table = Table(title=title)
        for col in ("task", "F2P fail at base", "P2P pass at base", "gold", "gold tests", "flaky", "result"):
            table.add_column(col, overflow="fold")
        for r, t in zip(results, tasks):
            row = _validation_row(r, t)
            at_base = ("base: no verdict",) * 2 if r.base.status == "no_verdict" else (
                row["F2P_fail_at_base"], row["P2P_pass_at_base"])  # the reason is in the result column
            table.add_row(escape(r.task_id), *at_base, r.gold.status,
                          f"{r.gold_seconds:.2f}s" if r.gold_seconds else "-", escape(", ".join(r.flaky)) or "-",
                          "[green]valid[/]" if r.valid else "[red]INVALID[/]: " + escape("; ".join(r.problems)))
        print_table(table)
        console().print(f"{len(results) - bad} valid, {bad} invalid, {flaky} with flaky tests")
        relaxed = [f"{t.instance_id} ({', '.join(t.trust)})" for t in tasks if t.trust]
        if relaxed:  # never silent: what the code under test keeps while these tasks are graded
            console().print(f"graded with a relaxed seal (trust): {escape(', '.join(relaxed))}")
        if args.show_log:
            from deepgym_envs.swebench_cli import print_logs

            print_logs(results)
    if args.record_flaky:
        from deepgym_envs.validate import record_flaky

        for path in record_flaky(results, tasks):
            _note(args).print(f"recorded flaky tests in {escape(str(path))}")
    if args.record_maps:
        from deepgym_envs.validate import save_test_maps

        for path in save_test_maps(results, tasks):
            _note(args).print(f"recorded test maps in {escape(str(path))}")
    if args.record_gold_seconds:
        from deepgym_envs.validate import record_gold_seconds

        for path in record_gold_seconds(results, tasks):
            _note(args).print(f"recorded the gold runs' times (gold_seconds) in {escape(str(path))}")
    if args.record_flaky or args.record_gold_seconds:  # the rows changed as validated: kept under their new keys
        fresh = {t.source: t for t in load_tasks(args.taskset)}
        for r, t in zip(results, tasks):
            if t.source in fresh:
                store(fresh[t.source], r, backend=args.sandbox)
    return 1 if bad else 0


def _validation_row(r: Any, t: Any) -> dict[str, Any]:
    from deepgym_envs.grading import counts_as_passing

    f2p_failing = sum(not counts_as_passing(r.base.tests.get(x, ""), True, t.swebench_semantics)
                      for x in t.FAIL_TO_PASS)
    p2p_passing = sum(counts_as_passing(r.base.tests.get(x, ""), False, t.swebench_semantics)
                      for x in t.PASS_TO_PASS)
    counted = r.base.status != "no_verdict"  # a run with no verdict failed no test: say why instead
    unknown = f"base: no verdict: {r.base.reason}"
    return {"task_id": r.task_id, "valid": r.valid, "problems": r.problems,
            "F2P_fail_at_base": f"{f2p_failing}/{len(t.FAIL_TO_PASS)}" if counted else unknown,
            "P2P_pass_at_base": f"{p2p_passing}/{len(t.PASS_TO_PASS)}" if counted else unknown,
            "base": r.base.status, "gold": r.gold.status, "gold_seconds": r.gold_seconds, "flaky": r.flaky,
            "trust": list(t.trust)}


def _batch(args: argparse.Namespace) -> int:
    from deepgym_envs.batch import read_patches, run_batch
    from deepgym_envs.tasks import find_task, load_tasks

    task = find_task(load_tasks(args.tasks), args.task_id)
    patches = read_patches(args.patches)
    verdicts = run_batch(task, patches, workers=args.workers, backend=args.sandbox, executor=args.executor)
    table = Table(title=f"{len(patches)} candidates for {escape(task.instance_id)}")
    for col in ("#", "verdict", "F2P", "P2P", "reason"):
        table.add_column(col, overflow="fold")
    for i, v in enumerate(verdicts):
        table.add_row(str(i), v.status, f"{v.fail_to_pass['passed']}/{v.fail_to_pass['total']}",
                      f"{v.pass_to_pass['passed']}/{v.pass_to_pass['total']}", escape(v.reason[:80]))
    print_table(table)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            for v in verdicts:
                fh.write(json.dumps(v.to_dict()) + "\n")
        console().print(f"verdicts written to {args.out}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from deepgym_envs.plugins import agent_providers

    providers = agent_providers()
    for provider in providers:
        if args.agent in provider.names:
            return provider.run(args)
    names = [n for p in providers for n in p.names]
    raise DeepgymError(f"unknown agent {args.agent!r}; choose one of {', '.join(names)}" if names else
                       "no agents are installed: install deepgym-envs itself (it ships the reference agents)")


def _sandbox_check(args: argparse.Namespace) -> int:
    from deepgym_envs.sandbox.namespace import available

    ok, why = available()
    console().print("namespace backend: " + ("[green]available[/]" if ok else f"[red]unavailable[/]: {why}"))
    from deepgym_envs.errors import InfrastructureError
    from deepgym_envs.sandbox import netstack

    try:
        netstack.require()
        console().print("package downloads (fetch steps' own network): [green]available[/]")
    except InfrastructureError as exc:
        console().print(f"package downloads (fetch steps' own network): [yellow]unavailable[/]: {escape(str(exc))}")
    from deepgym_envs.docker_engine import docker_status

    docker_ok, docker_why = docker_status()
    console().print("docker backend: " + ("[green]available[/]" if docker_ok else f"[yellow]unavailable[/]: "
                                          f"{escape(docker_why)}"))
    return 0 if ok else 1


def _sandbox_reap(args: argparse.Namespace) -> int:
    from deepgym_envs.sandbox.reap import reap

    removed = reap()
    for path in removed:
        console().print(f"removed {escape(path)}")
    console().print(f"{len(removed)} leftover(s) of crashed runs removed")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deepgym", description="Multi-turn coding environments: tasks, "
                                     "sandboxes, hidden-test grading.")
    from deepgym_envs import __version__

    parser.add_argument("--version", action="version", version=f"deepgym-envs {__version__}")
    parser.add_argument("--allow-repo-path-outside", action="store_true",
                        help="load rows whose repo_path lies outside their task file's folder (only for task "
                             "files you trust: the folder named becomes the agent's repository)")
    sub = parser.add_subparsers(dest="command", required=True)

    tasks = sub.add_parser("tasks", help="list and validate task sets").add_subparsers(dest="tasks_cmd", required=True)
    p = tasks.add_parser("list", help="show the tasks of a task set")
    p.add_argument("taskset", nargs="?", default="builtin", help="'builtin', a .jsonl file or a directory")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_tasks_list)
    p = tasks.add_parser("validate", help="prove F2P fail at base and pass with the gold patch; P2P pass in both")
    p.add_argument("taskset", nargs="?", default="builtin")
    p.add_argument("--task", action="append", help="only this task id or glob (repeatable, or comma-separated)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sandbox", default=None, help="sandbox backend (default: namespace)")
    p.add_argument("--runs", type=int, default=1, help="grade each state N times and flag tests that flip")
    p.add_argument("--record-flaky", action="store_true", help="write flagged tests into the task files")
    p.add_argument("--record-maps", action="store_true",
                   help="trace each hidden test and write the test maps that select tests for the shaping reward "
                        "beside the task files (NAME.testmap.json)")
    p.add_argument("--record-gold-seconds", action="store_true",
                   help="write each valid task's gold test run time into its task file (gold_seconds): grading "
                        "derives the task's deadline from it")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_tasks_validate)
    from deepgym_envs.synth.cli import add_taskset_parsers

    add_taskset_parsers(tasks)
    from deepgym_envs.swebench_cli import NO_VALIDATE_HELP, add_swebench_parsers

    add_swebench_parsers(tasks, sub)

    p = sub.add_parser("batch", help="grade N candidate patches for one task (run_batch)")
    p.add_argument("task_id")
    p.add_argument("--patches", required=True, help="JSONL: a JSON string or {'patch': ...} per line")
    p.add_argument("--tasks", default="builtin", help="'builtin', a .jsonl file or a directory")
    p.add_argument("--workers", type=int, default=None, help="parallel gradings (default: CPUs)")
    p.add_argument("--sandbox", default=None)
    p.add_argument("--executor", choices=("thread", "ray"), default="thread",
                   help="'ray': grade on the Ray cluster in $RAY_ADDRESS (else a local Ray instance)")
    p.add_argument("--out", default=None, help="write one verdict per line (JSONL) here")
    p.add_argument("--no-validate-first", action="store_true", help=NO_VALIDATE_HELP)
    p.set_defaults(func=_batch)

    p = sub.add_parser("eval", help="run an agent over a task set and report verdicts")
    p.add_argument("--agent", required=True, help="oracle, noop, or an LLM: openai, vllm, hf")
    p.add_argument("--tasks", default="builtin", help="'builtin', a .jsonl file or a directory")
    p.add_argument("--out", default=None, help="write results JSON here")
    p.add_argument("--sandbox", default=None, help="sandbox backend (default: namespace)")
    p.add_argument("--max-steps", type=int, default=MAX_STEPS, help="step budget per episode (0 = no limit)")
    p.add_argument("--concurrency", type=int, default=os.cpu_count() or 1, help="episodes in flight at once")
    p.add_argument("--task-ids", action="append", metavar="ID|GLOB",
                   help="only tasks whose id matches, e.g. 'deepgym__cronparse-*' (repeatable, or comma-separated)")
    p.add_argument("--limit", type=int, default=0, help="only the first N tasks (0 = all)")
    p.add_argument("--json", action="store_true", help="print the results JSON (as --out writes it) instead of a table")
    p.add_argument("--no-validate-first", action="store_true", help=NO_VALIDATE_HELP)
    from deepgym_envs.plugins import agent_providers, command_adders

    for provider in agent_providers():
        provider.add_arguments(p)
    p.set_defaults(func=_eval)

    from deepgym_envs.audit.cli import add_audit_parser

    add_audit_parser(sub)
    from deepgym_envs.leaderboard.cli import add_leaderboard_parser

    add_leaderboard_parser(sub)

    from deepgym_envs.images import add_images_parser

    add_images_parser(sub)
    from deepgym_envs.serve.cli import add_serve_parser

    add_serve_parser(sub)

    for add_commands in command_adders():  # other packages' subcommands (the reference agents: train, plot-run)
        add_commands(sub)

    sb = sub.add_parser("sandbox", help="sandbox utilities").add_subparsers(dest="sandbox_cmd", required=True)
    p = sb.add_parser("check", help="can this machine run the default (namespace) backend?")
    p.set_defaults(func=_sandbox_check)
    p = sb.add_parser("reap", help="remove temp dirs and cgroups left by crashed runs (dead owners only)")
    p.set_defaults(func=_sandbox_reap)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.allow_repo_path_outside:  # read by every loader, Ray's driver-side one included
        os.environ[ALLOW_OUTSIDE_ENV] = "1"
    if getattr(args, "no_validate_first", False):  # read by every grading path, Ray's workers' too
        from deepgym_envs.gate import GATE_ENV

        os.environ[GATE_ENV] = "0"
    try:
        return args.func(args)
    except DeepgymError as exc:
        console().print(f"[red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
