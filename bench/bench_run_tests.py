"""A one-test ``run_tests`` step, and one process-reward grading, cold vs warm. Prints JSON.

    python bench/bench_run_tests.py [--task deepgym__tabkit-001] [--repeats 15] [--backends namespace,docker]

cold: a new interpreter imports pytest for every run (``SandboxConfig(warm_tests=False)``); warm: the sandbox's
pre-imported server forks per run. The two alternate, step by step, in the same process, and every
pair's per-test results must be identical (``identical_results``). The grading half compares
``grade(task, patch)`` (a fresh sandbox and interpreter) with ``grade(..., views=pool)`` (a
renewed pooled view and its warm server) on the gold patch; verdicts must match. The seal half grades
sealed and unsealed alternately (cold and warm) and reports the seal's cost as a ratio.

Target (bench/README.md): warm ≥ 5× faster than cold for a one-test selection, with identical results.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from _common import builtin_task, median_ms, ratio, try_backend
from deepgym_envs.env import SandboxConfig, SWEEnv
from deepgym_envs.grading import grade
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.testrun.warm import warm_server


def bench_step(task, backend: str, repeats: int) -> dict:
    test_id = task.PASS_TO_PASS[0]  # one that exists in the agent's view (FAIL_TO_PASS tests are hidden)
    action = {"name": "run_tests", "arguments": {"tests": [test_id]}}
    envs = {mode: SWEEnv([task], sandbox=SandboxConfig(backend, warm_tests=(mode == "warm")), max_steps=0,
                         reward="outcome") for mode in ("cold", "warm")}
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    identical = True
    try:
        for env in envs.values():
            env.reset(options={"task_id": task.instance_id})
            env.step(action)  # first run: builds what is cached, starts the warm server
        for _ in range(repeats):
            results = {}
            for mode, env in envs.items():
                t0 = time.perf_counter()
                _, _, _, _, info = env.step(action)
                times[mode].append(time.perf_counter() - t0)
                results[mode] = (info.get("test_results"), info.get("exit_code"))
            identical &= results["cold"] == results["warm"] and bool(results["cold"][0])
        server = warm_server(envs["warm"].sandbox)
        fallbacks = server.fallbacks if server is not None else "no warm server on this backend"
    finally:
        for env in envs.values():
            env.close()
    cold, warm = median_ms(times["cold"]), median_ms(times["warm"])
    return {"test": action["arguments"]["tests"][0], "cold_ms": cold, "warm_ms": warm,
            "speedup": ratio(cold, warm), "identical_results": identical, "warm_fallbacks": fallbacks}


def bench_grading(task, backend: str, repeats: int) -> dict:
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    identical = True
    with ViewPool() as pool:
        grade(task, task.patch, backend=backend, views=pool)  # the pooled view and its server start
        for _ in range(repeats):
            t0 = time.perf_counter()
            cold = grade(task, task.patch, backend=backend)
            times["cold"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            warm = grade(task, task.patch, backend=backend, views=pool)
            times["warm"].append(time.perf_counter() - t0)
            identical &= (cold.status, cold.tests) == (warm.status, warm.tests) and cold.status == "resolved"
    c, w = median_ms(times["cold"]), median_ms(times["warm"])
    return {"cold_ms": c, "warm_ms": w, "speedup": ratio(c, w), "identical_verdicts": identical}


def bench_seal(task, backend: str, repeats: int) -> dict:
    """What the seal costs a grading: sealed and unsealed (the runner told nothing), alternating,
    cold and on a warm pooled view, verdicts identical. The unsealed side exists only here."""
    import deepgym_envs.grading as grading

    sealed_run = grading.run_pytest

    def unsealed_run(*args, **kwargs):
        kwargs.pop("seal", None)
        kwargs.pop("not_tests", None)
        return sealed_run(*args, **kwargs)

    times: dict[str, list[float]] = {k: [] for k in ("cold_sealed", "cold_open", "warm_sealed", "warm_open")}
    verdicts: dict[str, set] = {k: set() for k in times}
    try:
        with ViewPool() as pool:
            grade(task, task.patch, backend=backend, views=pool)
            order = list(times)
            for i in range(repeats):
                for key in order[i % 4:] + order[:i % 4]:  # each kind first in turn: no order bias
                    grading.run_pytest = sealed_run if key.endswith("sealed") else unsealed_run
                    t0 = time.perf_counter()
                    v = grade(task, task.patch, backend=backend, views=pool if key.startswith("warm") else None)
                    times[key].append(time.perf_counter() - t0)
                    verdicts[key].add((v.status, tuple(sorted(v.tests.items()))))
    finally:
        grading.run_pytest = sealed_run
    ms = {k: median_ms(v) for k, v in times.items()}
    return {**{f"{k}_ms": v for k, v in ms.items()},
            "cold_seal_ratio": ratio(ms["cold_sealed"], ms["cold_open"]),
            "warm_seal_ratio": ratio(ms["warm_sealed"], ms["warm_open"]),
            "identical_verdicts": len(set().union(*verdicts.values())) == 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--backends", default="namespace,docker")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    task = builtin_task(args.task)
    out: dict = {"task": args.task, "repeats": args.repeats, "run_tests_step": {}, "grading": {}, "seal": {}}
    for backend in args.backends.split(","):
        out["seal"][backend] = try_backend(backend, lambda: bench_seal(task, backend, args.repeats))
        out["run_tests_step"][backend] = try_backend(backend, lambda: bench_step(task, backend, args.repeats))
        out["grading"][backend] = try_backend(backend, lambda: bench_grading(task, backend, args.repeats))
    step = out["run_tests_step"].get("namespace")
    if isinstance(step, dict):
        out["targets"] = {"warm_ge_5x_faster": (step["speedup"] or 0) >= 5,
                          "identical_results": step["identical_results"]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
