"""Ray across nodes: throughput at 1, 2 and 4 simulated nodes, and recovery after a node loss. Prints JSON.

    python bench/bench_ray.py [--task deepgym__semverkit-001] [--candidates 8] [--nodes 1 2 4] [--overhead]

* ``scaling``: one group of candidates through ``run_batch(..., executor="ray")`` on a cluster of
  N simulated nodes (``ray.cluster_utils.Cluster``: one raylet per node, 1 CPU each, a head that
  runs nothing), after a warm-up that builds every node's pristine tree; throughput in candidates
  per second and scaling efficiency, throughput(N) / (N x throughput(1)). The simulated nodes
  share this machine's cores, so past ``os.cpu_count()`` nodes the efficiency can only fall: it
  measures Ray's scheduling and shipping overhead, not a cluster's speed-up. On real nodes, each
  with its own cores, the per-node work is unchanged and what is added is the network: the
  repository shipped once per node and one round trip per candidate.
* ``recovery``: an EnvPool of 2 environments on 2 nodes, both reset; one node is removed. Reported:
  seconds until a step on the lost environment comes back masked (Ray noticing the death), and
  until a reset on it succeeds on the replacement worker (the pool starting one on the survivor).
* ``--overhead``: the earlier single-node comparisons on a local instance: run_batch on Ray vs the
  thread executor, a pool step vs a local step, step_many vs one step at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
import warnings

import gymnasium as gym
import ray
from ray.cluster_utils import Cluster

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs import run_batch
from deepgym_envs.ray_pool import EnvPool
from deepgym_envs.tasks import find_task, load_tasks

MiB = 1024 * 1024
VIEW = {"name": "view", "arguments": {"path": "README.md"}}
BASH = {"name": "bash", "arguments": {"command": "true"}}


def ms(samples: list[float]) -> float:
    return round(1000 * statistics.median(samples), 3)


class SimCluster:
    """A head that runs nothing and ``nodes`` worker nodes of 1 CPU, each with its own cache."""

    def __init__(self, nodes: int) -> None:
        self.root = tempfile.mkdtemp(prefix="dg-bench-")
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 * MiB})
        self.nodes = [self.cluster.add_node(num_cpus=1, object_store_memory=80 * MiB,
                                            env_vars={"DEEPGYM_CACHE": os.path.join(self.root, f"cache{n}")})
                      for n in range(nodes)]
        self.cluster.wait_for_nodes()
        ray.init(address=self.cluster.address, log_to_driver=False)

    def close(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


def bench_scaling(task, candidates: int, node_counts: list[int]) -> dict:
    patches = [task.patch if i % 2 == 0 else "" for i in range(candidates)]
    rows = {}
    for n in node_counts:
        sim = SimCluster(n)
        try:
            run_batch(task, patches[:2 * n], executor="ray")  # warm-up: every node builds its tree
            t0 = time.perf_counter()
            verdicts = run_batch(task, patches, executor="ray")
            seconds = time.perf_counter() - t0
        finally:
            sim.close()
        rows[n] = {"seconds": round(seconds, 3), "candidates_per_s": round(candidates / seconds, 3),
                   "all_graded": all(v.status in ("resolved", "unresolved") for v in verdicts)}
    base = rows[node_counts[0]]["candidates_per_s"] / node_counts[0]
    for n, row in rows.items():
        row["scaling_efficiency"] = round(row["candidates_per_s"] / (n * base), 3)
    return {"candidates": candidates, "nodes": {str(n): row for n, row in rows.items()}}


def bench_recovery(task) -> dict:
    sim = SimCluster(2)
    try:
        with EnvPool(2, env_kwargs={"tasks": [task], "max_steps": 0}) as pool:
            pool.reset_many([(i, None, {"task_id": task.instance_id}) for i in range(2)])
            lost = [w.node_id for w in pool.workers if 1 in w.envs][0]
            [node] = [n for n in sim.nodes if n.node_id == lost]
            t0 = time.perf_counter()
            sim.cluster.remove_node(node, allow_graceful=False)
            steps = 0
            while True:  # the worker outlives its raylet briefly: steps succeed until it is gone
                steps += 1
                info = pool.step(1, VIEW)[4]
                if info.get("masked"):
                    break
            detected = time.perf_counter() - t0
            pool.reset(1, options={"task_id": task.instance_id})
            recovered = time.perf_counter() - t0
            survivor_steps = pool.step(0, VIEW)[4].get("masked") is not True
    finally:
        sim.close()
    return {"steps_until_masked": steps, "loss_noticed_s": round(detected, 3),
            "reset_on_replacement_s": round(recovered, 3), "other_env_unaffected": survivor_steps}


def bench_overhead(task, candidates: int, repeats: int, envs: int) -> dict:
    """The single-node comparisons: Ray's own cost next to local execution."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * MiB, log_to_driver=False)
    try:
        return {"run_batch": _batch_vs_threads(task, candidates), "step": _step(task, repeats),
                "step_many": _step_many(task, envs, repeats)}
    finally:
        ray.shutdown()


def _batch_vs_threads(task, candidates: int) -> dict:
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


def _step(task, repeats: int) -> dict:
    kwargs = {"tasks": [task], "max_steps": 0, "reward_mode": "outcome"}
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
            "pool_overhead_ms": round(ms(samples["pool"]) - ms(samples["local"]), 3)}


def _step_many(task, envs: int, repeats: int) -> dict:
    kwargs = {"tasks": [task], "max_steps": 0, "reward_mode": "outcome"}
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
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--overhead", action="store_true", help="also the single-node comparisons")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--envs", type=int, default=4)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    task = find_task(load_tasks("builtin"), args.task)
    # Ray prints the raylet logs of a removed node on stdout: keep stdout for the JSON alone.
    stdout = os.dup(1)
    os.dup2(2, 1)
    result = {"task": task.instance_id, "ray": ray.__version__, "cpu_count": os.cpu_count(),
              "load_average_1min": round(os.getloadavg()[0], 2),
              "note": f"simulated nodes share this machine's {os.cpu_count()} cores: scaling efficiency past "
                      f"{os.cpu_count()} nodes measures overhead, not a real cluster's speed-up",
              "scaling": bench_scaling(task, args.candidates, args.nodes),
              "recovery": bench_recovery(task)}
    if args.overhead:
        result["overhead"] = bench_overhead(task, args.candidates, args.repeats, args.envs)
    os.dup2(stdout, 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
