"""Reset and tool-step latency of deepgym/SWE-v0, per sandbox backend. Prints JSON.

    python bench/bench_env.py [--task deepgym__tabkit-001] [--repeats 50] [--files 2000]

Each backend runs the same sequence in the same process, so the ratios are comparable even on a
noisy machine. ``--files`` pads the task's repository with that many extra small files, to see
that reset does not grow with the size of the tree (the namespace backend never copies it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

from deepgym_envs.env import SWEEnv
from deepgym_envs.tasks import find_task, load_tasks

STEPS = {
    "view": {"name": "view", "arguments": {"path": "README.md"}},
    "search": {"name": "search", "arguments": {"pattern": "def ", "include": "*.py"}},
    "edit": {"name": "edit", "arguments": {"command": "create", "path": "scratch.txt", "file_text": "x\n"}},
    "bash": {"name": "bash", "arguments": {"command": "true"}},
}


def padded(task, files: int, tmp: Path):
    if not files:
        return task
    repo = tmp / "repo"
    shutil.copytree(task.repo_path, repo)
    for i in range(files):
        d = repo / "data" / f"d{i // 100:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_text(f"file {i}\n")
    return replace(task, repo_path=str(repo), instance_id=f"{task.instance_id}-pad{files}")


def median_ms(samples: list[float]) -> float:
    return round(1000 * statistics.median(samples), 3)


def bench_backend(task, backend: str, repeats: int) -> dict:
    # outcome mode: this measures the tools themselves; process shaping adds a (cached) grading.
    env = SWEEnv([task], sandbox=backend, max_steps=0, record_timing=True, reward_mode="outcome")
    try:
        env.reset(options={"task_id": task.instance_id})  # builds the pristine tree and the sandbox
        resets, steps = [], {name: [] for name in STEPS}
        for _ in range(repeats):
            t0 = time.perf_counter()
            env.reset(options={"task_id": task.instance_id})
            resets.append(time.perf_counter() - t0)
            for name, action in STEPS.items():
                _, _, _, _, info = env.step(action)
                steps[name].append(info["timing"]["step"])
        return {"reset_ms": median_ms(resets), **{f"{k}_ms": median_ms(v) for k, v in steps.items()}}
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--backends", default="namespace,local")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        task = padded(find_task(load_tasks("builtin"), args.task), args.files, Path(tmp))
        files = sum(1 for p in Path(task.repo_path).rglob("*") if p.is_file())
        results = {b: bench_backend(task, b, args.repeats) for b in args.backends.split(",")}
    out = {"task": args.task, "files_in_repo": files, "repeats": args.repeats, "backends": results}
    if "namespace" in results and "local" in results:
        out["ratios_local_over_namespace"] = {
            k: round(results["local"][k] / results["namespace"][k], 2) for k in results["namespace"]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
