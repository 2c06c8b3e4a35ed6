"""A progress bar for long runs (rich), and the tables results are shown in."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def console() -> Console:
    return Console(stderr=False)


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
