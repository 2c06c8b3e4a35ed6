"""Reset and tool-step latency of deepgym/SWE-v0, per sandbox backend. Prints JSON.

    python bench/bench_env.py [--task deepgym__tabkit-001] [--repeats 30] [--files 2000]
                              [--backends namespace,namespace-cold,docker,local]

Each backend runs the same sequence in the same process, so the ratios are comparable even on a
noisy machine. ``--files`` pads the task's repository with that many extra small files, to see
that reset does not grow with the size of the tree (the namespace backend never copies it).
A backend that cannot start here is reported as ``"unavailable: <reason>"``.

``search_all`` searches every file (no ``include``) and is compared with ``grep -rn`` over the same
tree, timed in the same run: on the host's copy of the repository (``grep_rn_ms``; a process start
included, as the tool's step includes none) and as the agent's own command over the workspace the
tool reads (``grep_rn_in_workspace_ms``, per backend: the namespace backend's is an overlay).
``reset_back_to_back_ms``: resets with no step between them.

The ``bash`` step (``true``) is compared across the ways a command can run, in the same run
(``bash_step``): the namespace backend's resident command server (``namespace``), a bubblewrap start
per command (``namespace-cold``: warm helpers off), ``docker exec`` (``docker``), an unsandboxed
subprocess (``local``), and ``subprocess.run(["bash", "-c", "true"])`` alone (``bare_subprocess``).
Each reset is followed by four bash steps: the first is reported apart (``bash_first_ms``: the
command server restarts with the reset, in the background), the other three as ``bash_ms``.

Targets (bench/README.md): namespace reset ≤ 20 ms median and ≥ 25× faster than docker; view / search /
edit ≤ 5 ms median (the whole step: these tools start no process, so the step *is* the overhead);
a ``bash`` step ≤ 5 ms median on the namespace backend.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from _common import builtin_task, median_ms, padded, ratio, try_backend
from deepgym_envs.env import SandboxConfig, SWEEnv
from deepgym_envs.sandbox.execserver import agent_exec

STEPS = {
    "view": {"name": "view", "arguments": {"path": "README.md"}},
    "search": {"name": "search", "arguments": {"pattern": "def ", "include": "*.py"}},
    "search_all": {"name": "search", "arguments": {"pattern": "def "}},  # every file, as grep -rn reads
    "edit": {"name": "edit", "arguments": {"command": "create", "path": "scratch.txt", "file_text": "x\n"}},
    "bash": {"name": "bash", "arguments": {"command": "true"}},
}


TOOLS = ("view", "search", "search_all", "edit")  # the steps with a latency target; bash starts a process
BASH_STEPS = 3  # bash steps timed after each reset's first


def bench_backend(task, backend: str, repeats: int) -> dict:
    # outcome mode: this measures the tools themselves; process shaping adds a (cached) grading.
    # namespace-cold: the same backend without its resident servers (a bubblewrap start per command).
    sandbox = SandboxConfig("namespace", warm_tests=False) if backend == "namespace-cold" else backend
    env = SWEEnv([task], sandbox=sandbox, max_steps=0, record_timing=True, reward="outcome")
    try:
        env.reset(options={"task_id": task.instance_id})  # builds the pristine tree and the sandbox
        resets, steps = [], {name: [] for name in (*STEPS, "bash_first", "grep_rn_in_workspace")}
        for _ in range(repeats):
            t0 = time.perf_counter()
            env.reset(options={"task_id": task.instance_id})
            resets.append(time.perf_counter() - t0)
            for name, action in STEPS.items():
                _, _, _, _, info = env.step(action)
                steps[name].append(info["timing"]["step"])
            # An episode runs many bash steps: the first after a reset is timed apart (a resident
            # command server may still be starting), the rest are what "bash" reports.
            steps["bash_first"].append(steps["bash"].pop())
            for _ in range(BASH_STEPS):
                steps["bash"].append(env.step(STEPS["bash"])[4]["timing"]["step"])
            # grep -rn run as the agent's own command, over the workspace the search tool reads (an
            # overlay, where grep on the host reads a plain directory): the floor for search_all.
            # On a new workspace, as search_all's is (a first walk of an overlay costs more), once
            # the command server is up (as the bash steps above had it).
            env.reset(options={"task_id": task.instance_id})
            agent_exec(env.sandbox, "true")
            t0 = time.perf_counter()
            agent_exec(env.sandbox, "grep -rn --exclude-dir=.git 'def ' . >/dev/null")
            steps["grep_rn_in_workspace"].append(time.perf_counter() - t0)
        # Resets with nothing between them: the next holder has not had the time to start.
        back_to_back = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            env.reset(options={"task_id": task.instance_id})
            back_to_back.append(time.perf_counter() - t0)
        return {"reset_ms": median_ms(resets), "reset_back_to_back_ms": median_ms(back_to_back),
                **{f"{k}_ms": median_ms(v) for k, v in steps.items()}}
    finally:
        env.close()


def grep_ms(repo: str, repeats: int) -> float:
    """``grep -rn`` for the same literal over the same tree: what search_all is compared with."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(["grep", "-rn", "--exclude-dir=.git", "def ", repo], stdout=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t0)
    return median_ms(times)


def bare_bash_ms(repeats: int) -> float:
    """``bash -c true`` as a plain subprocess: the floor any sandboxed ``bash`` step stands on."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        times.append(time.perf_counter() - t0)
    return median_ms(times)


def bash_step(results: dict, bare: float) -> dict:
    """The bash step per way of running it, and each against the resident server's."""
    ways = {b: r["bash_ms"] for b, r in results.items() if isinstance(r, dict)}
    ways["bare_subprocess"] = bare
    out: dict = {"median_ms": ways,
                 "first_after_reset_ms": {b: r["bash_first_ms"] for b, r in results.items() if isinstance(r, dict)}}
    if "namespace" in ways:
        out["over_namespace_server"] = {b: ratio(ms, ways["namespace"]) for b, ms in ways.items() if b != "namespace"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--backends", default="namespace,namespace-cold,docker,local")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        task = padded(builtin_task(args.task), args.files, Path(tmp))
        files = sum(1 for p in Path(task.repo_path).rglob("*") if p.is_file())
        results = {b: try_backend(b, lambda b=b: bench_backend(task, b, args.repeats))
                   for b in args.backends.split(",")}
        grep = grep_ms(task.repo_path, args.repeats)
    out = {"task": args.task, "files_in_repo": files, "repeats": args.repeats, "backends": results,
           "bash_step": bash_step(results, bare_bash_ms(args.repeats)),
           "grep_rn_ms": grep, "search_all_over_grep_rn": {b: ratio(r["search_all_ms"], grep)
                                                          for b, r in results.items() if isinstance(r, dict)},
           "search_all_over_grep_rn_in_workspace": {b: ratio(r["search_all_ms"], r["grep_rn_in_workspace_ms"])
                                                    for b, r in results.items() if isinstance(r, dict)}}
    ns = results.get("namespace")
    if isinstance(ns, dict):
        for other in ("namespace-cold", "docker", "local"):
            if isinstance(results.get(other), dict):
                out[f"ratios_{other}_over_namespace"] = {k: ratio(results[other][k], ns[k]) for k in ns}
        docker = out.get("ratios_docker_over_namespace", {}).get("reset_ms")
        out["targets"] = {
            "namespace_reset_le_20ms": ns["reset_ms"] <= 20,
            "reset_ge_25x_faster_than_docker": (docker >= 25) if docker else f"not measured: docker {results.get('docker')}",
            "tool_steps_le_5ms": all(ns[f"{k}_ms"] <= 5 for k in TOOLS),
            "bash_step_le_5ms": ns["bash_ms"] <= 5,
        }
        local = results.get("local")
        if isinstance(local, dict):
            # What the sandbox adds to the tool's own work (local runs the same tools unsandboxed).
            out["tool_overhead_vs_local_ms"] = {k: round(ns[f"{k}_ms"] - local[f"{k}_ms"], 3) for k in TOOLS}
            out["targets"]["tool_overhead_le_5ms"] = all(v <= 5 for v in out["tool_overhead_vs_local_ms"].values())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
