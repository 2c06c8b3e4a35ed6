"""What a hostile workspace costs the host, and what the bounds cost an ordinary step. Prints JSON.

    python bench/bench_host.py [--task deepgym__tabkit-001] [--repeats 30] [--shapes big,sparse,wide,deep]

Part 1, hostile: each shape is written at the sandbox's disk cap (1 GiB by default) by one bash
step of a real episode, then one more step and submit run over it. Each shape runs in a fresh
child process, which reports the host's peak memory: its own (VmHWM, reset before the shape's
steps) and that of the programs it ran and waited for (git; the peak RSS of its waited-for children).

Part 2, ordinary: on a workspace holding the gold patch, the diff with the change bounds (sizes
measured, git's output streamed within a deadline) against the same diff without them,
alternated in one run; the ratio is what the bounds add to an ordinary step's diff.

Target (issue "The host holds"): host memory per episode stays within a stated bound under every
shape (at the default bounds, under 200 MiB of host memory, git included); the bounds cost an
ordinary diff at most 5 %.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings

from _common import builtin_task, median_ms, ratio

#: What one bash step writes, at the disk cap (GiB, less what the sandbox's tree already holds).
SHAPES = {
    "baseline": "echo '# a comment' >> README.md",
    "big": "head -c 1000000000 /dev/urandom > /testbed/big.bin",
    "sparse": "truncate -s 1000000000 /testbed/sparse.bin",
    "wide": "mkdir /testbed/wide && cd /testbed/wide && seq 200000 | xargs touch",
    "deep": "cd /testbed && mkdir deep && cd deep && for i in $(seq 1100); do mkdir a && cd a; done",
}


def _peak_self_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def shape_child(task_id: str, shape: str) -> dict:
    """One episode over one shape, in this (fresh) process."""
    import gymnasium as gym

    import deepgym_envs  # noqa: F401

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("deepgym/SWE-v0", tasks="builtin", task_id=task_id, reward="process")
    try:
        env.reset(seed=0)
        obs, *_ = env.step({"name": "bash", "arguments": {"command": SHAPES[shape], "timeout": 300}})
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak RSS starts again from here: the host's processing of the shape
        before = _peak_self_mib()
        started = time.perf_counter()
        _, _, _, _, info = env.step({"name": "view", "arguments": {"path": "."}})
        step_s = time.perf_counter() - started
        started = time.perf_counter()
        _, _, terminated, _, info = env.step({"name": "submit", "arguments": {}})
        submit_s = time.perf_counter() - started
        return {"host_peak_mib": round(_peak_self_mib(), 1), "host_before_mib": round(before, 1),
                "children_peak_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
                "step_s": round(step_s, 2), "submit_s": round(submit_s, 2),
                "status": info["verdict"]["status"], "masked": info["masked"],
                "reason": (info["verdict"].get("reason") or "")[:160]}
    finally:
        env.close()


def hostile(task_id: str, shapes: list[str]) -> dict:
    out = {}
    for shape in shapes:
        proc = subprocess.run([sys.executable, __file__, "--child", shape, "--task", task_id],
                              capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        out[shape] = json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.stderr[-800:]}
    return out


def ordinary(task_id: str, repeats: int) -> dict:
    """Diffs of a gold-patched workspace, with the bounds and without, alternated."""
    from deepgym_envs.sandbox import SandboxLimits, make_sandbox
    from deepgym_envs.sandbox.base import workspace_diff
    from deepgym_envs.trees import pristine_tree

    task = builtin_task(task_id)
    with make_sandbox(pristine_tree(task), "namespace", SandboxLimits()) as sb:
        sb.apply_patch(task.patch)

        def unbounded() -> str:
            wrap, root = sb._git_view()
            return workspace_diff(sb._pristine_git_dir(), root, sb._changed_paths(), wrap, scratch=sb._scratch_dir())

        bounded_s, unbounded_s = [], []
        assert sb.diff() == unbounded()
        for _ in range(repeats):
            for fn, samples in ((sb.diff, bounded_s), (unbounded, unbounded_s)):
                started = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - started)
    bounded_ms, unbounded_ms = median_ms(bounded_s), median_ms(unbounded_s)
    return {"diff_bounded_ms": bounded_ms, "diff_unbounded_ms": unbounded_ms,
            "bounds_cost_ratio": ratio(bounded_ms, unbounded_ms), "repeats": repeats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(shape_child(args.task, args.child)))
        return
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = sorted(set(shapes) - set(SHAPES))
    if unknown:
        ap.error(f"unknown shapes: {', '.join(unknown)} (known: {', '.join(SHAPES)})")
    print(json.dumps({"task": args.task, "ordinary": ordinary(args.task, args.repeats),
                      "hostile": hostile(args.task, shapes)}, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
