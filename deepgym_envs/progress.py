"""A progress bar for long runs (rich), and the tables results are shown in."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def console() -> Console:
    return Console(stderr=False)


def notes(json_out: bool) -> Console:
    """Where a command's notes go: stdout, or stderr when stdout carries its ``--json`` document."""
    return Console(stderr=True) if json_out else console()


def print_table(table: Table) -> None:
    """Print a table without cutting a cell: piped or redirected (80 columns by default), it is as
    wide as its cells need, so ids stay whole and greppable; on a terminal, cells fold instead."""
    out = console()
    if not out.is_terminal:
        need = out.measure(table, options=out.options.update_width(1 << 16)).maximum
        out = Console(width=max(out.width, need))
    out.print(table)


def print_json(data: Any) -> None:
    """``--json``: the document alone on stdout (notes and progress go to stderr)."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def print_no_verdicts(episodes: Any) -> None:
    """Why each episode without a verdict got none (long reasons cut; all of it is in the results)."""
    for e in episodes:
        if e.status == "no_verdict":
            reason = e.reason if len(e.reason) <= 2000 else e.reason[:2000] + " [...] (all of it in --out / --json)"
            console().print(f"[yellow]no_verdict[/] {escape(e.task_id)}: {escape(reason or 'no reason given')}",
                            soft_wrap=True)


def fail_without_verdicts(episodes: Any, note: Console) -> int:
    """The exit status of an evaluation: 1 when no episode got a verdict (the run says nothing)."""
    episodes = list(episodes)
    if episodes and all(e.status == "no_verdict" for e in episodes):
        note.print("[red]error:[/] no episode got a verdict: the harness failed, or the task does not validate, "
                   "on every task (each episode's reason is given); the run says nothing about the agent",
                   soft_wrap=True)
        return 1
    return 0


@contextlib.contextmanager
def progress_bar(label: str, total: int, *, enabled: bool = True) -> Iterator[Callable[[str], None]]:
    """Yields ``advance(note)``; draws a bar on a terminal, one line per item elsewhere (CI logs)."""
    if not enabled:
        yield lambda note: None
        return
    if not sys.stderr.isatty():
        done = [0]

        def log(note: str) -> None:
            done[0] += 1
            print(f"[{done[0]}/{total}] {label}: {note}", file=sys.stderr, flush=True)

        yield log
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[note]}"), console=Console(stderr=True)) as bar:
        task = bar.add_task(label, total=total, note="")
        yield lambda note: bar.update(task, advance=1, note=note)
