"""How much of an agent run is the environment's, with generation batched and steps overlapped.

    python bench/bench_loop.py [--episodes 32] [--concurrency 32] [--latency 1.0 2.0] [--turns 12]

A scripted backend stands in for the engine: each batched call sleeps 1-2 s, as a served LLM does
for a batch of completions, whatever the batch size. Episodes run real environments (builtin tasks,
default sandbox, process rewards): views, searches, bash, test runs, one edit (so the shaping
grades a changed workspace) and a submit (final hidden-test grading).

The engine is the expensive part, so overhead is counted from its side: the share of wall time it
sat idle because every episode was busy in its environment (or in the loop itself),
``env_overhead = 1 - engine_busy / wall``; ``env_overhead_steady`` leaves out the start (before the
first episode is ready) and the drain (after the last call), which no schedule can overlap.
``env_share_of_episode`` is the per-episode view: the episode's own step time over its wall time
(an episode cannot overlap its own steps, whatever the schedule). Three schedules, same process,
same tasks:

* ``eager`` (the loop's default): call the engine as soon as any episode waits (most overlap,
  smallest batches);
* ``windowed`` (``batch_window=0.3``): an episode that needs the model waits 0.3 s for others, so
  quick steps join the next call and slow ones overlap it;
* ``lockstep`` (``sync_batches=True``): every call waits for every episode in flight, the naive
  batched loop, whose engine idles through the slowest step of every turn.

Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

from deepgym_agents.base import tool_call
from deepgym_agents.llm import SamplingParams
from deepgym_agents.llm.scripted import ScriptedLLM
from deepgym_agents.loop import CollectConfig, collect
from deepgym_agents.tiny_model import build_tokenizer
from deepgym_envs.tasks import load_tasks

ACTIONS = [
    tool_call("view", path="."),
    tool_call("search", pattern="def "),
    tool_call("bash", command="ls -la"),
    tool_call("view", path="."),
    tool_call("run_tests"),
    tool_call("search", pattern="import"),
    tool_call("edit", command="create", path="NOTES.md", file_text="investigating\n"),
    tool_call("view", path="NOTES.md"),
    tool_call("bash", command="git status --short || true"),
    tool_call("search", pattern="return"),
    tool_call("run_tests"),
]


class Timeline:
    """Wraps the scripted engine to record when each batched call started and ended."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm, self.tokenizer, self.model_name = llm, llm.tokenizer, llm.model_name
        self.calls: list[tuple[float, float, int]] = []

    def generate(self, prompts, params):
        t0 = time.perf_counter()
        out = self.llm.generate(prompts, params)
        self.calls.append((t0, time.perf_counter(), len(prompts)))
        return out

    def update_weights(self, state_dict) -> None:
        pass


def script(turns: int):
    body = (ACTIONS * (turns // len(ACTIONS) + 1))[: max(0, turns - 1)]
    return body + [tool_call("submit")]


SCHEDULES = {"eager": {}, "windowed": {"batch_window": 0.3}, "lockstep": {"sync_batches": True}}


def run(schedule: str, task_ids: list[str], k: int, concurrency: int, latency: tuple[float, float], turns: int) -> dict:
    llm = Timeline(ScriptedLLM(script(turns), build_tokenizer(), latency=latency, seed=1))
    started = time.perf_counter()
    trajs = collect(llm, task_ids, CollectConfig(k=k, concurrency=concurrency, max_steps=turns + 5,
                                                 params=SamplingParams(max_tokens=4096), show_progress=False,
                                                 **SCHEDULES[schedule]))
    wall = time.perf_counter() - started
    busy = sum(end - start for start, end, _ in llm.calls)
    first, last = llm.calls[0][0], llm.calls[-1][1]
    env_step = [t.timing["env"] for tr in trajs for t in tr.turns]
    episode_wall = [tr.metadata["wall_time"] for tr in trajs]
    return {
        "episodes": len(trajs), "turns": sum(len(t.turns) for t in trajs),
        "stop_reasons": {r: sum(t.stop_reason == r for t in trajs) for r in {t.stop_reason for t in trajs}},
        "wall_s": round(wall, 2), "engine_busy_s": round(busy, 2), "engine_calls": len(llm.calls),
        "mean_batch": round(statistics.mean(n for _, _, n in llm.calls), 1),
        "env_overhead": round(1 - busy / wall, 4),
        "env_overhead_steady": round(1 - busy / (last - first), 4),
        "start_s": round(first - started, 2), "drain_s": round(started + wall - last, 2),
        "env_step_median_ms": round(1000 * statistics.median(env_step), 1),
        "env_step_p90_ms": round(1000 * sorted(env_step)[int(0.9 * len(env_step))], 1),
        "episode_wall_mean_s": round(statistics.mean(episode_wall), 2),
        "template_ms_per_turn": round(1000 * statistics.mean(t.timing.get("template", 0.0) for tr in trajs
                                                              for t in tr.turns), 2),
        "env_share_of_episode": round(statistics.mean(
            sum(t.timing["env"] for t in tr.turns) / tr.metadata["wall_time"] for tr in trajs), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--k", type=int, default=4, help="rollouts per task (they share sandboxes' pristine trees)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, nargs=2, default=(1.0, 2.0), help="seconds per batched call")
    parser.add_argument("--turns", type=int, default=12)
    args = parser.parse_args()
    tasks = [t.instance_id for t in load_tasks("builtin")][: max(1, args.episodes // args.k)]
    warnings.simplefilter("ignore")
    run("eager", tasks, 1, len(tasks), (0.0, 0.0), 1)  # warm the pristine-tree cache outside the timings
    results = {s: run(s, tasks, args.k, args.concurrency, tuple(args.latency), args.turns) for s in SCHEDULES}
    e, w, l = results["eager"], results["windowed"], results["lockstep"]
    print(json.dumps({
        "config": {"episodes": len(tasks) * args.k, "concurrency": args.concurrency, "k": args.k,
                   "latency_s": list(args.latency), "turns_per_episode": args.turns},
        **results,
        "ratios": {"wall_lockstep_over_eager": round(l["wall_s"] / e["wall_s"], 3),
                   "wall_windowed_over_eager": round(w["wall_s"] / e["wall_s"], 3),
                   "overhead_lockstep_over_eager": round(l["env_overhead"] / max(e["env_overhead"], 1e-9), 2),
                   "overhead_windowed_over_eager": round(w["env_overhead"] / max(e["env_overhead"], 1e-9), 2)},
        "target": {"env_overhead_steady_le_5pct": e["env_overhead_steady"] <= 0.05},
    }, indent=2))


if __name__ == "__main__":
    main()
