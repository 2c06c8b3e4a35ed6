"""Turn-level RLOO with process rewards vs trajectory-level RLOO with the outcome only. Prints JSON.

    python bench/bench_rloo.py [--steps 150] [--seeds 0 1] [--png bench_rloo.png]

Both arms train the same random-init tiny transformer on ``deepgym/GridNav-v0`` with the same
recipe and budget (steps × 8 tasks × 8 rollouts, same seeds, same learning rate); they differ only
in how the advantage is formed:

* ``turn_process``: per-turn return-to-go of every reward the env pays (shaping, penalties,
  outcome), against the leave-one-out baseline at the same turn (``advantage=turn, reward=env``);
* ``trajectory_outcome``: one advantage per episode from the final verdict alone, the classic
  K/(K−1) RLOO form (``advantage=trajectory, reward=outcome``);
* ``trajectory_process`` (a control): one advantage per episode from the episode return with the
  process rewards in it, separating "which rewards" from "per-turn credit".

The JSON holds each arm's learning curve (training-batch resolved rate per step, averaged over the
seeds), the final success of each seed's policy on 16 fresh episodes per task, the steps each arm
needed to first reach 50 % and 80 %, and the ratios between the arms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from deepgym_agents.rloo.metrics import read_metrics
from deepgym_agents.rloo.online import train_online
from deepgym_agents.rloo.recipes import gridnav_config, success_rate

ARMS = {
    "turn_process": {"advantage": "turn", "reward": "env"},
    "trajectory_outcome": {"advantage": "trajectory", "reward": "outcome"},
    "trajectory_process": {"advantage": "trajectory", "reward": "env"},
}


def first_step_at(curve: list[float], level: float) -> int | None:
    return next((i + 1 for i, v in enumerate(curve) if v >= level), None)


def run_arm(name: str, steps: int, seeds: list[int], workdir: Path) -> dict[str, Any]:
    curves, finals, seconds = [], [], []
    for seed in seeds:
        config = gridnav_config(seed=seed, steps=steps, out=str(workdir / f"{name}-{seed}"), show_progress=False,
                                **ARMS[name])
        t0 = time.perf_counter()
        trainer = train_online(config)
        seconds.append(time.perf_counter() - t0)
        curves.append([r["resolved_rate"] for r in read_metrics(Path(config.out) / "metrics.jsonl")])
        finals.append(success_rate(trainer.model, trainer.tokenizer))
        print(f"{name} seed {seed}: final success {finals[-1]:.0%} in {seconds[-1]:.0f} s", file=sys.stderr)
    mean_curve = [statistics.fmean(values) for values in zip(*curves)]
    return {"settings": ARMS[name], "curve": [round(v, 4) for v in mean_curve],
            "final_success": finals, "final_success_mean": statistics.fmean(finals),
            "steps_to_50pct": first_step_at(mean_curve, 0.5), "steps_to_80pct": first_step_at(mean_curve, 0.8),
            "area_under_curve": statistics.fmean(mean_curve), "seconds": seconds}


def plot(results: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, arm in results["arms"].items():
        ax.plot(range(1, len(arm["curve"]) + 1), arm["curve"], label=name)
    ax.set_xlabel("training step (64 episodes each)")
    ax.set_ylabel("resolved rate of the batch")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("deepgym/GridNav-v0, tiny transformer from scratch")
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--png", default="bench_rloo.png")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (tiny matrices: 1 is fastest)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench-rloo-") as tmp:
        arms = {name: run_arm(name, args.steps, args.seeds, Path(tmp)) for name in ARMS}
    turn, traj = arms["turn_process"], arms["trajectory_outcome"]
    results = {
        "env": "deepgym/GridNav-v0", "steps": args.steps, "seeds": args.seeds, "episodes_per_step": 64,
        "arms": arms,
        "ratios": {
            "final_success_turn_over_trajectory": turn["final_success_mean"] / max(traj["final_success_mean"], 1e-9),
            "auc_turn_over_trajectory": turn["area_under_curve"] / max(traj["area_under_curve"], 1e-9),
            "final_success_turn_over_trajectory_process":
                turn["final_success_mean"] / max(arms["trajectory_process"]["final_success_mean"], 1e-9),
            "auc_turn_over_trajectory_process":
                turn["area_under_curve"] / max(arms["trajectory_process"]["area_under_curve"], 1e-9),
        },
    }
    plot(results, Path(args.png))
    results["png"] = str(Path(args.png).resolve())
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
