"""What Ray costs on top of local execution, on a local Ray instance. Prints JSON.

    python bench/bench_ray.py [--task deepgym__semverkit-001] [--candidates 8] [--repeats 30] [--envs 4]

Three comparisons, each in the same run so the ratios hold on a noisy machine:

* ``run_batch``: one group of candidates graded by the thread executor and by the Ray executor
  (2 workers each: this machine has 2 cores), best of two rounds each; throughput ratio, and
  whether the verdicts agree;
* ``step``: a ``view`` step on a local ``gym.make`` environment and on an :class:`EnvPool` proxy;
  the difference is the actor round trip;
* ``step_many``: stepping ``--envs`` environments of one pool in one ``step_many`` call versus one
  ``pool.step`` call after another.

On a real cluster the Ray numbers add network latency; the local instance isolates Ray's own cost.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import gymnasium as gym
import ray

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs import run_batch
from deepgym_envs.ray_pool import EnvPool
from deepgym_envs.tasks import find_task, load_tasks

VIEW = {"name": "view", "arguments": {"path": "README.md"}}
BASH = {"name": "bash", "arguments": {"command": "true"}}


def ms(samples: list[float]) -> float:
    return round(1000 * statistics.median(samples), 3)


def bench_batch(task, candidates: int) -> dict:
    patches = [task.patch if i % 2 == 0 else "" for i in range(candidates)]
    run_batch(task, patches[:2], workers=2, executor="ray")  # start Ray's workers, build the tree
    timings: dict[str, float] = {"thread": float("inf"), "ray": float("inf")}
    verdicts = {}
    # thread, ray, ray, thread: whichever runs while the machine is busier is not always the same one.
    for executor in ("thread", "ray", "ray", "thread"):
        t0 = time.perf_counter()
        verdicts[executor] = run_batch(task, patches, workers=2, executor=executor)
        timings[executor] = min(timings[executor], time.perf_counter() - t0)
    same = [(v.status, v.tests) for v in verdicts["thread"]] == [(v.status, v.tests) for v in verdicts["ray"]]
    return {"candidates": candidates, "thread_s": round(timings["thread"], 3), "ray_s": round(timings["ray"], 3),
            "ray_throughput_vs_thread": round(timings["thread"] / timings["ray"], 3), "same_verdicts": same}


def bench_step(task, repeats: int) -> dict:
    kwargs = {"tasks": [task], "max_steps": 0, "reward": "outcome"}
    local = gym.make("deepgym/SWE-v0", **kwargs)
    with EnvPool(1, env_kwargs=kwargs) as pool:
        try:
            samples = {}
            for name, env in (("local", local), ("pool", pool.env(0))):
                env.reset(options={"task_id": task.instance_id})
                env.step(VIEW)  # warm-up
                samples[name] = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    env.step(VIEW)
                    samples[name].append(time.perf_counter() - t0)
        finally:
            local.close()
    return {"local_ms": ms(samples["local"]), "pool_ms": ms(samples["pool"]),
            "pool_overhead_ms": round(ms(samples["pool"]) - ms(samples["local"]), 3),
            "pool_vs_local": round(statistics.median(samples["pool"]) / statistics.median(samples["local"]), 3)}


def bench_step_many(task, envs: int, repeats: int) -> dict:
    kwargs = {"tasks": [task], "max_steps": 0, "reward": "outcome"}
    with EnvPool(envs, env_kwargs=kwargs) as pool:
        pool.reset_many([(i, None, {"task_id": task.instance_id}) for i in range(envs)])
        pool.step_many([(i, BASH) for i in range(envs)])  # warm-up
        one_by_one, batched = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in range(envs):
                pool.step(i, BASH)
            one_by_one.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            pool.step_many([(i, BASH) for i in range(envs)])
            batched.append(time.perf_counter() - t0)
    return {"envs": envs, "sequential_ms": ms(one_by_one), "step_many_ms": ms(batched),
            "speedup": round(statistics.median(one_by_one) / statistics.median(batched), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="deepgym__semverkit-001")
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--envs", type=int, default=4)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    task = find_task(load_tasks("builtin"), args.task)
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024, log_to_driver=False)
    try:
        result = {"task": task.instance_id, "ray": ray.__version__,
                  "run_batch": bench_batch(task, args.candidates),
                  "step": bench_step(task, args.repeats),
                  "step_many": bench_step_many(task, args.envs, args.repeats)}
    finally:
        ray.shutdown()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
