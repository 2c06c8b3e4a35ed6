"""``deepgym leaderboard``: rank the results under ``leaderboard/results`` and write the page.

Malformed results files are skipped with a warning that names the file and the field (or, with
``--strict``, stop the command with exit status 2), so one bad file never hides the others.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from rich import box
from rich.markup import escape
from rich.table import Table

from deepgym_envs.errors import DeepgymError
from deepgym_envs.progress import console

if TYPE_CHECKING:
    from deepgym_envs.leaderboard.results import Ranked


def add_leaderboard_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``leaderboard`` on the ``deepgym`` command's subparsers."""
    p = subparsers.add_parser("leaderboard", help="rank evaluation results and write the static HTML page")
    p.add_argument("--results", default="leaderboard/results", help="directory of `deepgym eval --out` JSON files")
    p.add_argument("--out", default="leaderboard/index.html", help="where to write the page")
    p.add_argument("--no-html", action="store_true", help="print the table only")
    p.add_argument("--all", dest="every_run", action="store_true",
                   help="one row per results file, not only the newest per (agent, model, task set)")
    p.add_argument("--strict", action="store_true", help="a malformed results file is an error, not a warning")
    p.set_defaults(func=run_leaderboard)
    return p


def run_leaderboard(args: argparse.Namespace) -> int:
    from deepgym_envs.leaderboard.page import render, same_page
    from deepgym_envs.leaderboard.results import load_runs, rank

    out = console()
    runs, skipped = load_runs(args.results, strict=args.strict)
    for s in skipped:
        out.print(f"[yellow]warning:[/] skipped {escape(s.reason)}", soft_wrap=True)
    board = rank(runs, every_run=args.every_run)
    if not board:
        out.print(f"no results in {escape(args.results)}; write some with "
                  "`deepgym eval --agent oracle --out leaderboard/results/oracle-builtin.json`")
    for task_set, entries in board.items():
        out.print(_table(task_set, entries, every_run=args.every_run))
    if not args.no_html:
        path = Path(args.out)
        page = render(board, skipped, source=args.results)
        if same_page(_old_page(path), page):
            out.print(f"page unchanged: {escape(str(path))}")
            return 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise DeepgymError(f"cannot write the page to {path}: {exc.strerror or exc}") from None
        out.print(f"page written to {escape(str(path))}")
    return 0


def _old_page(path: Path) -> str:
    """The page as it stands ("" when there is none, or it cannot be read: then it is rewritten)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _table(task_set: str, entries: Sequence[Ranked], *, every_run: bool) -> Table:
    """The terminal view: the page's table, narrowed to fit 80 columns (dates only with --all)."""
    from deepgym_envs.leaderboard.page import format_tokens

    ks = sorted({e.run.k for e in entries})
    mixed_k = len(ks) > 1  # then each row says its own k
    table = Table(title=f"{task_set}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}",
                  box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False,
                  caption="nv = episodes without a verdict (infrastructure failures)", caption_justify="left")
    table.add_column("#", justify="right")
    table.add_column("agent", style="bold", overflow="fold", min_width=6)
    table.add_column("model", overflow="fold", min_width=5)
    for label in ("resolved", "pass@k" if mixed_k else f"pass@{ks[0]}", "nv", "steps", "return", "tokens"):
        table.add_column(label, justify="right", no_wrap=True)
    if every_run:
        table.add_column("date", no_wrap=True)
    for entry in entries:
        run = entry.run
        row = [str(entry.rank), escape(run.agent), escape(run.model or "-"),
               "%d/%d" % run.counts + f" {100 * run.resolved_rate:.0f}%",
               f"{run.top_pass:.3f}" + (f"@{run.k}" if mixed_k else ""),
               str(run.no_verdict), f"{run.mean_steps:.1f}", f"{run.mean_return:.2f}", format_tokens(run.tokens, "-")]
        if every_run:
            row.append(run.created_at.strftime("%m-%d %H:%M"))
        table.add_row(*row)
    return table

