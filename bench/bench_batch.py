"""``run_batch`` throughput against running the same test commands directly, at 1 and 2 workers.

    python bench/bench_batch.py [--task deepgym__tabkit-001] [--patches 8] [--workers 1,2]

direct: the candidates' trees are checked out and patched (gold patch or none, plus the hidden
tests) *before* the clock starts, then ``python -m pytest`` runs in each, ``workers`` at a time,
with no sandbox: the floor a hand-written harness could reach. run_batch: the same candidates
graded from their diffs, with everything grading adds (a fresh or renewed isolated view, the patch
applied, protected files restored, the report cross-checked), warm (pooled views, the default) and
cold (``warm=False``). Prints JSON with candidates per second and the ratio to direct.

Target (bench/README.md): run_batch within 15 % of direct (ratio of times ≤ 1.15).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import builtin_task, ratio
from deepgym_envs.batch import run_batch
from deepgym_envs.gitrepo import run_git
from deepgym_envs.grading import test_files
from deepgym_envs.trees import pristine_tree


def checkouts(task, patches: list[str], root: Path) -> list[Path]:
    """One patched copy of the pristine tree per candidate, hidden tests applied."""
    tree = pristine_tree(task)
    out = []
    for i, patch in enumerate(patches):
        work = root / f"c{i}"
        shutil.copytree(tree, work, symlinks=True)
        for diff in (patch, task.test_patch):
            if diff.strip():
                run_git(["apply", "--whitespace=nowarn", "-"], cwd=work, input=diff)
        out.append(work)
    return out


def run_direct(task, dirs: list[Path], workers: int) -> tuple[float, list[int]]:
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *task.test_cmd, "-rA", *test_files(ids)]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}

    def one(work: Path) -> int:
        return subprocess.run(argv, cwd=work, env=env, capture_output=True).returncode

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        codes = list(pool.map(one, dirs))
    return time.perf_counter() - t0, codes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--patches", type=int, default=4)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--rounds", type=int, default=2, help="each alternative runs this many times, interleaved")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    task = builtin_task(args.task)
    patches = [task.patch if i % 2 == 0 else "" for i in range(args.patches)]  # resolved, unresolved, ...
    run_batch(task, patches[:1], 1)  # builds the pristine tree outside the clock
    out: dict = {"task": args.task, "candidates": len(patches), "rounds": args.rounds, "by_workers": {}}
    with tempfile.TemporaryDirectory(prefix="deepgym-bench-") as tmp:
        dirs = checkouts(task, patches, Path(tmp))
        for workers in (int(w) for w in args.workers.split(",")):
            times: dict[str, list[float]] = {"direct": [], "run_batch_warm": [], "run_batch_cold": []}
            agree = {"warm": True, "cold": True}
            # Interleaved rounds, best of each: on a shared machine the load moves under a long run.
            for _ in range(args.rounds):
                direct_s, codes = run_direct(task, dirs, workers)
                times["direct"].append(direct_s)
                for mode, warm in (("warm", True), ("cold", False)):
                    t0 = time.perf_counter()
                    verdicts = run_batch(task, patches, workers, warm=warm)
                    times[f"run_batch_{mode}"].append(time.perf_counter() - t0)
                    # The verdicts must agree with what pytest said directly: exit 0 = all passed.
                    agree[mode] &= [v.status == "resolved" for v in verdicts] == [c == 0 for c in codes]
            best = {k: min(v) for k, v in times.items()}
            out["by_workers"][workers] = {
                "best_s": {k: round(v, 3) for k, v in best.items()},
                "candidates_per_s": {k: round(len(patches) / v, 2) for k, v in best.items()},
                "warm_over_direct": ratio(best["run_batch_warm"], best["direct"]),
                "cold_over_direct": ratio(best["run_batch_cold"], best["direct"]),
                "agrees_with_direct": agree,
            }
    rows = out["by_workers"].values()
    out["targets"] = {"within_15pct_of_direct": all((r["warm_over_direct"] or 9) <= 1.15 for r in rows)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
