"""The SWE-bench commands of ``deepgym``: rows in, a report in the official shape out.

    deepgym tasks import SOURCE --out DIR [--repos MIRRORS|URL_TEMPLATE] [--images [--pull]] [--env-overrides FILE]
                         [--workers N] [--json]
    deepgym tasks validate DIR --show-log TASK
    deepgym grade-predictions predictions.jsonl --tasks DIR [--workers N] [--out report.json] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from deepgym_envs.progress import console, print_json, print_table

#: ``--no-validate-first`` (grade-predictions, batch, eval): sets ``$DEEPGYM_VALIDATE_FIRST=0``.
NO_VALIDATE_HELP = ("grade imported tasks even if they do not validate (default: an invalid task is no_verdict "
                    "with the validation's reason; validations are cached under $DEEPGYM_CACHE/validity)")


def _tasks_import(args: argparse.Namespace) -> int:
    from deepgym_envs.swebench_import import TASKS_FILE, import_rows

    if args.repos is None and not (args.images or args.pull):
        console().print("[red]error[/]: pass --repos (mirrors or a URL template), --images, or both")
        return 2
    report = import_rows(args.source, args.out, args.repos, workers=args.workers,
                         images=args.images or args.pull, pull=args.pull, env_overrides=args.env_overrides)
    failed = report.failed
    if args.json:
        print_json({"out": str(report.out / TASKS_FILE), "imported": len(report.rows) - len(failed),
                    "failed": len(failed), "cloned": report.cloned, "rows": [vars(r) for r in report.rows]})
    else:
        table = Table(title=f"import of {escape(str(args.source))} into {escape(str(report.out / TASKS_FILE))}")
        for col in ("instance_id", "status", "spec", "note / reason"):
            table.add_column(col, overflow="fold")
        for r in report.rows:
            status = "[green]imported[/]" if r.status == "imported" else "[red]error[/]"
            note = "; ".join(x for x in (f"image {r.image}" if r.image else "", r.reason) if x)
            table.add_row(escape(r.instance_id), status, escape(r.spec or "-"), escape(note))
        print_table(table)
        if report.cloned:
            n = len(report.cloned)
            where = escape(str(report.out / ".mirrors"))
            console().print(f"cloned {n} repositor{'y' if n == 1 else 'ies'} into {where} "
                            "(a re-run reuses them; the task set does not need them)")
        imported = len(report.rows) - len(failed)
        if imported:
            console().print(f"{imported} imported, {len(failed)} failed; next: "
                            f"deepgym tasks validate {escape(str(args.out))}")
        else:
            console().print(f"[red]nothing imported[/]: {_why_none(args.source, len(failed))}", soft_wrap=True)
    return 1 if failed or not report.rows else 0


def _why_none(source: str, failed: int) -> str:
    if not failed:
        return f"{escape(str(source))} holds no rows"
    return f"every row of {escape(str(source))} ({failed}) failed, each for the reason in its line above"


def print_logs(results: list[Any]) -> None:
    """The base and gold runs' verdicts and test logs of validated tasks (``--show-log``)."""
    for r in results:
        for name, verdict in (("base", r.base), ("gold", r.gold)):
            console().rule(f"{escape(r.task_id)}: {name} ({verdict.status})")
            console().print(escape(verdict.reason or "-"), soft_wrap=True)
            console().print(escape(verdict.log or "(no test output)"), soft_wrap=True, highlight=False)


def _grade_predictions(args: argparse.Namespace) -> int:
    from deepgym_envs.predictions import grade_predictions, read_predictions
    from deepgym_envs.tasks import load_tasks

    report = grade_predictions(read_predictions(args.predictions), load_tasks(args.tasks), workers=args.workers,
                               backend=args.sandbox, show_progress=not args.json)
    out = Path(args.out or f"deepgym.{args.run_id}.json")
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    summary = {k: v for k, v in report.items() if k.endswith("_instances")}
    if args.json:
        print_json({"report": str(out), **summary, "error_ids": report["error_ids"], "errors": report["errors"]})
    else:
        for key, value in summary.items():
            console().print(f"{key.replace('_', ' ')}: {value}")
        for iid, why in report["errors"].items():
            console().print(f"[red]error[/] {escape(iid)}: {escape(why)}", soft_wrap=True)
        console().print(f"report written to {escape(str(out))}")
    return 1 if report["error_ids"] else 0


def add_swebench_parsers(tasks: Any, sub: Any) -> None:
    """Register ``tasks import``, ``tasks validate --show-log`` and ``grade-predictions``."""
    p = tasks.add_parser("import", help="SWE-bench / SWE-Gym rows (JSONL, JSON, Parquet, datasets dir) into a task "
                                        "set, each repository at its base commit from a local mirror or a git URL, "
                                        "or in its SWE-bench instance image (--images)")
    p.add_argument("source", help="a .jsonl file, a directory of them, a .json array (or object) of rows, "
                                   ".parquet/.arrow files or a datasets directory")
    p.add_argument("--out", required=True, help="the task set to write (DIR/tasks.jsonl and DIR/repos/)")
    p.add_argument("--repos", default=None, metavar="MIRRORS|URL_TEMPLATE",
                   help="a directory of clones named owner__name (git clone --mirror https://github.com/owner/name "
                        "DIR/owner__name), or, where the network allows, a git URL template holding {repo} "
                        "(https://github.com/{repo}.git): each repository is cloned once into OUT/.mirrors")
    p.add_argument("--images", action="store_true",
                   help="rows whose SWE-bench instance image (sweb.eval.x86_64.ID, swebench/sweb.eval.x86_64.ID) "
                        "is on the docker engine run in it (no repo_path or python_env: the image's testbed env; "
                        "grade with --sandbox docker); the other rows come from --repos, else are errors")
    p.add_argument("--pull", action="store_true",
                   help="docker pull a row's missing instance image first (implies --images)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--env-overrides", default=None, metavar="FILE",
                   help='JSON {"<instance_id>" | "owner/name@version" | "owner/name": python_env}: wins over '
                        "the spec table (a row's own python_env wins over both)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_tasks_import)
    tasks.choices["validate"].add_argument("--show-log", metavar="TASK", default=None,
                                           help="validate only TASK and print its base and gold test logs")

    p = sub.add_parser("grade-predictions", help="grade a SWE-bench predictions file, each prediction against "
                                                 "its instance_id; writes the official harness's report JSON")
    p.add_argument("predictions", help="JSONL (or a JSON list) of {instance_id, model_patch, model_name_or_path}")
    p.add_argument("--tasks", required=True, help="the task set (e.g. what deepgym tasks import wrote)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--sandbox", default=None, help="sandbox backend (default: namespace)")
    p.add_argument("--run-id", default="run", help="names the report file: deepgym.RUN_ID.json")
    p.add_argument("--out", default=None, help="where to write the report (default: deepgym.RUN_ID.json)")
    p.add_argument("--json", action="store_true", help="print a JSON summary instead of text")
    p.add_argument("--no-validate-first", action="store_true", help=NO_VALIDATE_HELP)
    p.set_defaults(func=_grade_predictions)
