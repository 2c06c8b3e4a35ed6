"""A progress bar for long runs (rich), and the tables results are shown in."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Callable, Iterator

from rich.console import Console
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
