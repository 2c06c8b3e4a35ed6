"""Trajectories as Parquet: one row per episode, the flattened token view as list columns.

    python -m deepgym_agents.export runs/trajs.jsonl runs/trajs.parquet

A trainer reads ``input_ids``, ``loss_mask``, ``behavior_logprobs`` and ``turn_index`` straight
into tensors; the turns, verdict and metadata ride along as JSON strings so nothing is lost.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterable

from deepgym_agents.llm import require
from deepgym_agents.trajectory import Trajectory, read_trajectories


def to_parquet(trajectories: Iterable[Trajectory], path: str | Path) -> int:
    """Write the trajectories to ``path``; returns how many rows were written."""
    pa = require("pyarrow", "Parquet export")
    pq = require("pyarrow.parquet", "Parquet export")
    rows: dict[str, list] = {name: [] for name in (
        "episode_id", "task_id", "group_id", "rollout_index", "env_id", "policy_model", "policy_version",
        "episode_return", "resolved", "masked", "stop_reason", "num_turns", "input_ids", "loss_mask",
        "behavior_logprobs", "turn_index", "turn_rewards", "turns_json", "verdict_json", "metadata_json")}
    for traj in trajectories:
        flat = traj.flatten()
        values = (traj.episode_id, traj.task_id, traj.group_id, traj.rollout_index, traj.env_id,
                  str(traj.policy.get("model", "")), int(traj.policy.get("version", 0)), traj.episode_return,
                  traj.resolved, traj.masked, traj.stop_reason, len(traj.turns), flat.input_ids, flat.loss_mask,
                  flat.behavior_logprobs, flat.turn_index, flat.turn_rewards,
                  json.dumps([t for t in traj.to_dict()["turns"]]), json.dumps(traj.verdict),
                  json.dumps(traj.metadata))
        for name, value in zip(rows, values):
            rows[name].append(value)
    table = pa.table({
        **{k: rows[k] for k in rows},
        "input_ids": pa.array(rows["input_ids"], type=pa.list_(pa.int32())),
        "loss_mask": pa.array(rows["loss_mask"], type=pa.list_(pa.int8())),
        "behavior_logprobs": pa.array(rows["behavior_logprobs"], type=pa.list_(pa.float32())),
        "turn_index": pa.array(rows["turn_index"], type=pa.list_(pa.int32())),
        "turn_rewards": pa.array(rows["turn_rewards"], type=pa.list_(pa.float64())),
    })
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return table.num_rows


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m deepgym_agents.export TRAJECTORIES.jsonl OUT.parquet", file=sys.stderr)
        return 2
    n = to_parquet(read_trajectories(args[0]), args[1])
    print(f"{n} trajectories written to {args[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
