"""Training metrics: what a batch of rollouts says, one JSON line per step, and the curves as a PNG.

``metrics.jsonl`` has one object per training step; the keys are documented in :data:`KEYS`.
``deepgym plot-run RUN_DIR`` draws them (reward and resolved rate, group fractions, KL / entropy /
clip fraction, time split) into ``RUN_DIR/curves.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence, TextIO

from deepgym_agents.trajectory import Trajectory

#: What each metric means (the README's table is generated from the same words).
KEYS = {
    "step": "training step (1-based)",
    "reward_mean": "mean episode return over the batch (the env's rewards, all components)",
    "resolved_rate": "fraction of episodes whose verdict is resolved",
    "all_pass_frac": "fraction of groups in which every rollout resolved the task",
    "all_fail_frac": "fraction of groups in which no rollout resolved the task",
    "zero_variance_groups": "groups dropped because all their advantages were 0",
    "masked_episodes": "episodes dropped because the harness gave no verdict",
    "kl": "mean k3 KL to the reference policy per generated token (0 when kl_coef = 0)",
    "entropy": "mean policy entropy per generated token (nats)",
    "clip_frac": "fraction of generated tokens whose ratio was clipped",
    "gen_tokens_per_s": "generated tokens per second of rollout wall time",
    "train_tokens_per_s": "generated tokens trained on per second of training time",
    "rollout_time": "wall seconds collecting the batch (generation + environment)",
    "env_time": "seconds inside env.step, summed over episodes",
    "gen_time": "seconds generating, summed over episodes (shares of batched calls)",
    "train_time": "wall seconds of the update (advantages, forward, backward, optimiser)",
    "sync_time": "seconds pushing the new weights into the generator",
}


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Batch statistics that need no model: reward, resolved rate, lengths, time split."""
    n = max(len(trajectories), 1)
    turns = [t for traj in trajectories for t in traj.turns]
    return {
        "episodes": len(trajectories),
        "reward_mean": sum(t.episode_return for t in trajectories) / n,
        "resolved_rate": sum(t.resolved for t in trajectories) / n,
        "turns_mean": len(turns) / n,
        "gen_tokens": sum(len(t.completion_ids) for t in turns),
        "env_time": sum(t.timing.get("env", 0.0) for t in turns),
        "gen_time": sum(t.timing.get("generate", 0.0) for t in turns),
    }


class MetricsLog:
    """Appends one JSON object per step to ``metrics.jsonl``; a context manager that closes the file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: TextIO = open(self.path, "a", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        self._fh.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._fh.flush()  # a crashed run keeps every finished step

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> "MetricsLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


PANELS = (
    ("reward", ("reward_mean", "resolved_rate")),
    ("groups", ("all_pass_frac", "all_fail_frac")),
    ("policy", ("kl", "entropy", "clip_frac")),
    ("seconds per step", ("rollout_time", "train_time", "sync_time")),
)


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw a run's ``metrics.jsonl`` as a 2×2 grid of curves; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and in CI
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        raise ValueError(f"{run_dir / 'metrics.jsonl'} has no steps to plot")
    out = Path(out) if out else run_dir / "curves.png"
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    steps = [r["step"] for r in rows]
    for ax, (title, keys) in zip(axes.flat, PANELS):
        for key in keys:
            ys = [r.get(key) for r in rows]
            if any(y is not None for y in ys):
                ax.plot(steps, [float("nan") if y is None else y for y in ys], label=key)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(str(run_dir))
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out
