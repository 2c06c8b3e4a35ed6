"""The namespace backend's floor for resets, the first command and search, against another commit.
Prints JSON.

    python bench/bench_floor.py [--baseline 9bc9a33] [--rounds 3] [--repeats 10] [--files 2000,20000]

The baseline's package is taken from git (``git archive``, into a temporary directory: no worktree
is made) and each round runs one probe process per tree, alternating, the baseline first, so both
see the same load on this shared machine. Each probe builds its own padded task (``--files`` extra
small files) and measures, on the namespace backend in ``outcome`` mode:

* ``reset_after_gap_ms``: a reset 0.3 s after the last one (an agent's turn between them);
* ``reset_right_after_reset_ms``: the reset that follows it at once (no step between);
* ``reset_loop_ms``: twenty resets in a row, none between (what starts holders can keep up with);
* ``first_bash_ms``: the ``bash`` step (``true``) right after a reset that came 0.3 s after the
  previous episode's last bash step; ``bash_ms``: three steps 0.3 s later (an agent's turn, in
  which the reset's background work, spares and the command server, is done);
* ``search_all_ms``: a ``search`` for ``def `` without ``include`` on a fresh workspace, against
  ``grep_rn_in_workspace_ms``: ``grep -rn`` for the same literal as the agent's own command over
  a fresh workspace of the same tree (both walk a new overlay), each 0.3 s after what came before.

Medians over every round's samples; ratios are this tree over the baseline, and search over grep.

``--measure diff`` measures the per-step diff instead, on the same padded task:

* ``view_diff_ms``: ``diff()`` of a sandbox with the gold patch applied (what the process reward
  and the verdict read), and ``view_changed_files_ms``: its ``changed_files()`` (the names);
* ``process_edit_step_ms``: a whole ``edit`` step of ``SWEEnv`` in ``process`` mode, each step a
  new change (the gold fix of one line with a comment that differs per step, so no verdict is
  cached): the environment's diff, then the grading of it in a warm view.

There, ``files_20000_over_files_2000`` is each tree's cost at the largest size over the smallest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GAP = 0.3  # seconds: an agent's turn


def probe(files: int, repeats: int) -> dict[str, list[float]]:
    """One tree's samples (seconds), in this process: PYTHONPATH names the tree."""
    from _common import builtin_task, padded

    import deepgym_envs
    from deepgym_envs.env import SWEEnv
    from deepgym_envs.sandbox.execserver import agent_exec

    warnings.simplefilter("ignore")
    out: dict[str, list[float]] = {k: [] for k in ("reset_after_gap", "reset_right_after_reset", "reset_loop",
                                                   "first_bash", "bash", "search_all", "grep_rn_in_workspace")}
    bash = {"name": "bash", "arguments": {"command": "true"}}
    search = {"name": "search", "arguments": {"pattern": "def "}}
    with tempfile.TemporaryDirectory() as tmp:
        task = padded(builtin_task("deepgym__tabkit-001"), files, Path(tmp))
        env = SWEEnv([task], sandbox="namespace", max_steps=0, record_timing=True, reward="outcome")
        opts = {"task_id": task.instance_id}
        try:
            env.reset(options=opts)
            env.step(bash)
            env.reset(options=opts)  # the first reset of a sandbox finds no spare started yet
            for _ in range(repeats):
                time.sleep(GAP)
                for key in ("reset_after_gap", "reset_right_after_reset"):
                    t0 = time.perf_counter()
                    env.reset(options=opts)
                    out[key].append(time.perf_counter() - t0)
                env.step(bash)
                time.sleep(GAP)
                env.reset(options=opts)
                out["first_bash"].append(env.step(bash)[4]["timing"]["step"])
                time.sleep(GAP)  # the agent's turn: what a reset left to start in the background has
                out["bash"] += [env.step(bash)[4]["timing"]["step"] for _ in range(3)]
                time.sleep(GAP)
                out["search_all"].append(env.step(search)[4]["timing"]["step"])  # a fresh workspace still
                env.reset(options=opts)
                agent_exec(env.sandbox, "true")
                time.sleep(GAP)
                t0 = time.perf_counter()
                agent_exec(env.sandbox, "grep -rn --exclude-dir=.git 'def ' . >/dev/null")
                out["grep_rn_in_workspace"].append(time.perf_counter() - t0)
            time.sleep(GAP)
            for _ in range(20):
                t0 = time.perf_counter()
                env.reset(options=opts)
                out["reset_loop"].append(time.perf_counter() - t0)
        finally:
            env.close()
    out["package"] = [deepgym_envs.__file__]  # type: ignore[list-item]
    return out


def probe_diff(files: int, repeats: int) -> dict[str, list[float]]:
    """The per-step diff's samples (seconds), in this process: PYTHONPATH names the tree."""
    import re

    from _common import builtin_task, padded
    from bench_selection import _fix_line

    import deepgym_envs
    from deepgym_envs.env import SWEEnv
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    warnings.simplefilter("ignore")
    out: dict[str, list[float]] = {k: [] for k in ("view_diff", "view_changed_files", "process_edit_step")}
    with tempfile.TemporaryDirectory() as tmp:
        task = padded(builtin_task("deepgym__tabkit-001"), files, Path(tmp))
        with make_sandbox(pristine_tree(task), "namespace") as sb:
            sb.apply_patch(task.patch)
            sb.diff()
            for _ in range(repeats):
                for key, call in (("view_diff", sb.diff), ("view_changed_files", sb.changed_files)):
                    t0 = time.perf_counter()
                    call()
                    out[key].append(time.perf_counter() - t0)
        buggy, fixed = _fix_line(task)
        path = re.search(r"^\+\+\+ b/(.+)$", task.patch, re.M).group(1)
        env = SWEEnv([task], sandbox="namespace", max_steps=0, reward="process")
        try:
            env.reset(options={"task_id": task.instance_id})
            current = buggy
            for k in range(repeats + 1):
                new = f"{fixed}  # step {k}"  # a change no verdict is cached for
                action = {"name": "edit", "arguments": {"command": "str_replace", "path": path,
                                                        "old_str": current, "new_str": new}}
                t0 = time.perf_counter()
                env.step(action)
                if k:  # the first step starts the grading view's server
                    out["process_edit_step"].append(time.perf_counter() - t0)
                current = new
        finally:
            env.close()
    out["package"] = [deepgym_envs.__file__]  # type: ignore[list-item]
    return out


def run_probe(tree: Path, files: int, repeats: int, measure: str = "floor") -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'agents'}"}
    proc = subprocess.run([sys.executable, str(HERE / "bench_floor.py"), "--probe", str(files), "--repeats", str(repeats),
                           "--measure", measure], capture_output=True, text=True, env=env, cwd=str(HERE), check=True)
    data = json.loads(proc.stdout)
    assert data["package"][0].startswith(str(tree)), (data["package"], tree)
    return data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="9bc9a33", help="the commit to compare with (git ref)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--files", default="2000,20000")
    ap.add_argument("--measure", choices=("floor", "diff"), default="floor",
                    help="floor: resets, the first command, search; diff: the per-step diff")
    ap.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe is not None:
        print(json.dumps((probe_diff if args.measure == "diff" else probe)(args.probe, args.repeats)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        result: dict = {"baseline": args.baseline, "head": _head(), "measure": args.measure, "rounds": args.rounds,
                        "repeats": args.repeats, "load_average_before": os.getloadavg()}
        sizes = [int(f) for f in args.files.split(",")]
        for files in sizes:
            samples: dict[str, dict[str, list[float]]] = {"baseline": {}, "head": {}}
            for _ in range(args.rounds):
                for side, tree in (("baseline", base), ("head", ROOT)):
                    for key, values in run_probe(tree, files, args.repeats, args.measure).items():
                        if key != "package":
                            samples[side].setdefault(key, []).extend(values)
            medians = {side: {k: round(1000 * statistics.median(v), 2) for k, v in s.items()}
                       for side, s in samples.items()}
            result[f"files_{files}"] = {
                "median_ms": medians,
                "head_over_baseline": {k: _ratio(medians["head"][k], medians["baseline"][k]) for k in medians["head"]},
            }
            if args.measure == "floor":
                result[f"files_{files}"].update({
                    "search_all_over_grep_rn_in_workspace": {
                        side: _ratio(m["search_all"], m["grep_rn_in_workspace"]) for side, m in medians.items()},
                    "first_bash_over_bash": {side: _ratio(m["first_bash"], m["bash"]) for side, m in medians.items()},
                })
        if args.measure == "diff" and len(sizes) > 1:
            small, large = result[f"files_{min(sizes)}"]["median_ms"], result[f"files_{max(sizes)}"]["median_ms"]
            result[f"files_{max(sizes)}_over_files_{min(sizes)}"] = {
                side: {k: _ratio(large[side][k], small[side][k]) for k in small[side]} for side in small}
        result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def _head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
