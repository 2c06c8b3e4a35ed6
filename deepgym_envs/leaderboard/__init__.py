"""The leaderboard: ``deepgym eval`` results files -> a ranked table and a static HTML page.

>>> runs, skipped = load_runs("leaderboard/results")          # doctest: +SKIP
>>> board = rank(runs)                          # task set -> ranked entries   # doctest: +SKIP
>>> Path("leaderboard/index.html").write_text(render(board, skipped))          # doctest: +SKIP
"""

from deepgym_envs.leaderboard.page import render
from deepgym_envs.leaderboard.results import (Episode, Ranked, Run, Skipped, TaskCell, load_run, load_runs,
                                              pass_at_k, rank)

__all__ = ["Episode", "Ranked", "Run", "Skipped", "TaskCell", "load_run", "load_runs", "pass_at_k", "rank", "render"]
