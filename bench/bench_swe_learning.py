"""A policy that learns on SWE-v0 itself: SFT warm start, then three RLOO arms. Prints JSON.

    python bench/bench_swe_learning.py [--train ID ...] [--held-out ID ...] [--decoy noop|""] [--sft-steps 300]
        [--rl-steps 12] [--k 8] [--rl-lr 1e-4] [--kl-coef 0] [--neg-adv-scale 0] [--baseline potential|group]
        [--sft-coef 0 --demos DEMOS.jsonl] [--reuse-sft-optimizer] [--eval-k 16] [--sft-from CHECKPOINT]
        [--arms turn_process ...] [--seed 0] [--device cpu|cuda] [--out DIR]

The whole chain, on real sandboxes and the real tools of ``deepgym/SWE-v0`` (``toolset="bash"``):

1. **demonstrations**: the ``oracle-patch`` agent (the gold patch applied in one bash call, then
   submit) on the training tasks, recorded through the agent loop's own episode runner in the
   policy's tokenizer (:mod:`deepgym_agents.demos`); with ``--decoy noop`` (the default) also the
   ``noop`` agent's episode of each (submit at once: unresolved), as in a weak agent's unfiltered data;
2. **SFT**: a tiny byte-level Qwen2 built from scratch (:mod:`deepgym_agents.tiny_model`) is
   fine-tuned on all of them (:mod:`deepgym_agents.rloo.sft`): it opens with the oracle's patch or
   the no-op submit about equally often, and copies the patch only as well as a tiny model can;
3. **RLOO**, three arms from that same checkpoint with the same budget (``rl_steps`` × training
   tasks × ``k`` rollouts through :func:`deepgym_agents.loop.collect`):
   ``turn_process`` (per-turn advantages on the env's process rewards), ``trajectory_outcome``
   (one advantage per episode, final verdict only), ``trajectory_process`` (one per episode, process
   rewards in the return);
4. **evaluation** of the SFT start and of every arm's final policy: ``eval_k`` sampled
   (temperature 1, seeded) episodes per training and held-out task.

The JSON holds the SFT loss curve, the start and final resolve rates, each arm's per-step training
resolve rate (its curve) and share of rollouts that open with ``submit`` (the decoy's move), and wall
times; each run directory gets ``curves.png``
(``deepgym plot-run``). ``--device cuda`` trains on a GPU (generation then runs there too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from deepgym_agents.config import CollectConfig
from deepgym_agents.demos import record_demonstrations
from deepgym_agents.llm import SamplingParams
from deepgym_agents.rloo.config import TrainConfig
from deepgym_agents.rloo.metrics import plot_run, read_metrics
from deepgym_agents.rloo.online import load_policy, train_online
from deepgym_agents.rloo.recipes import swe_resolve_rates
from deepgym_agents.rloo.sft import train_sft
from deepgym_agents.tiny_model import build_tokenizer
from deepgym_agents.trajectory import read_trajectories
from deepgym_envs.tasks import load_tasks

TRAIN = ["deepgym__tabkit-004", "deepgym__tmplite-002"]
"""The two easy built-in tasks with the shortest gold patches (the demonstrations' actions are
about 500 bytes, one token each)."""
HELD_OUT = ["deepgym__tabkit-005", "deepgym__tmplite-001"]
"""Easy tasks of the same repositories, never trained on."""
ARMS = {
    "turn_process": {"advantage": "turn", "reward": "env"},
    "trajectory_outcome": {"advantage": "trajectory", "reward": "outcome"},
    "trajectory_process": {"advantage": "trajectory", "reward": "env"},
}
TOOLSET = "bash"
MAX_STEPS = 2
"""The demonstration takes two turns. A third only adds tokens written after a failed apply, whose
negative advantages push down the memorised patterns they are made of (measured: with 3 the
training resolve rate fell from 50 % to 12 % in 12 steps at lr 3e-4)."""
MAX_NEW_TOKENS = 640


def record(agent: str, path: Path, train: list[str], sandbox: str) -> Path:
    """``agent``'s episode of each training task, in the policy's ids (once: an existing file stands)."""
    if not path.exists():
        tasks = [t for t in load_tasks("builtin") if t.instance_id in train]
        env_kwargs: dict[str, Any] = {"toolset": TOOLSET, **({"sandbox": sandbox} if sandbox else {})}
        record_demonstrations(agent, tasks, build_tokenizer(), CollectConfig(
            env_kwargs=env_kwargs, max_steps=MAX_STEPS, params=SamplingParams(max_tokens=MAX_NEW_TOKENS),
            out=path, show_progress=False))
    return path


def sft_checkpoint(out: Path, train: list[str], *, steps: int, lr: float, seed: int, device: str,
                   sandbox: str, decoy: str = "") -> tuple[Path, list[float]]:
    """Record the demonstrations, fine-tune the tiny model on them; the checkpoint and the loss curve.

    ``decoy`` (an agent, e.g. ``noop``): its episodes of the same tasks join the SFT data, failed as they
    are, as in a weak agent's unfiltered episodes. The SFT policy then imitates both: it opens with the
    oracle's action or the decoy's about equally often, and only the reward says which one resolves."""
    demos = record("oracle-patch", out / "demos.jsonl", train, sandbox)
    data, n = demos, len(train)
    if decoy:
        decoys = record(decoy, out / f"decoys-{decoy}.jsonl", train, sandbox)
        data, n = out / "sft-data.jsonl", 2 * len(train)
        data.write_text(demos.read_text() + decoys.read_text())
    config = TrainConfig(model="tiny", steps=steps, tasks_per_step=n, micro_batch=n, lr=lr,
                         seed=seed, device=device, checkpoint_every=0, show_progress=False, out=str(out / "sft"))
    train_sft(config, data, resolved_only=not decoy)
    losses = [r["sft_loss"] for r in read_metrics(out / "sft" / "metrics.jsonl")]
    return out / "sft" / "checkpoints" / f"step-{steps}", losses


def arm_config(name: str, checkpoint: Path, out: Path, train: list[str], *, steps: int, k: int, lr: float,
               seed: int, device: str, sandbox: str, kl_coef: float = 0.0, neg_adv_scale: float = 1.0,
               sft_coef: float = 0.0, demos: str = "", reuse_optimizer: bool = False,
               baseline: str = "group") -> TrainConfig:
    turn = ARMS[name]["advantage"] == "turn"
    return TrainConfig.from_dict(dict(
        model=str(checkpoint), env_id="deepgym/SWE-v0", tasks="builtin", task_ids=train, toolset=TOOLSET,
        sandbox=sandbox, tasks_per_step=len(train), k=k, max_steps=MAX_STEPS, max_new_tokens=MAX_NEW_TOKENS,
        reward_mode="process", lr=lr, kl_coef=kl_coef, neg_adv_scale=neg_adv_scale, sft_coef=sft_coef,
        sft_data=demos if sft_coef else "", optimizer_from=str(checkpoint) if reuse_optimizer else "", steps=steps,
        micro_batch=k, seed=seed, device=device, checkpoint_every=0,
        show_progress=False, out=str(out / name), baseline=baseline if turn else "group", **ARMS[name]))


def evaluate(model: Any, tokenizer: Any, tasks: list[str], *, k: int, sandbox: str) -> dict[str, float]:
    env_kwargs: dict[str, Any] = {"toolset": TOOLSET, **({"sandbox": sandbox} if sandbox else {})}
    return swe_resolve_rates(model, tokenizer, tasks, k=k, max_steps=MAX_STEPS, max_new_tokens=MAX_NEW_TOKENS,
                             env_kwargs=env_kwargs)


def opening_share(run_dir: Path, tool: str) -> list[float]:
    """Per training step, the share of rollouts whose first action calls ``tool`` (the decoy's ``submit``)."""
    counts: dict[int, list[int]] = {}
    for traj in read_trajectories(run_dir / "trajectories.jsonl"):
        call = traj.turns[0].tool_call if traj.turns else None
        hit = isinstance(call, dict) and call.get("name") == tool
        counts.setdefault(int(traj.policy.get("version", 0)), []).append(int(hit))
    return [sum(v) / len(v) for _, v in sorted(counts.items())]


def mean(rates: dict[str, float], tasks: list[str]) -> float:
    return sum(rates[t] for t in tasks) / len(tasks)


def run(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    every = args.train + args.held_out
    t0 = time.perf_counter()
    if args.sft_from:  # an earlier run's SFT checkpoint: the arms only
        checkpoint, losses = Path(args.sft_from), [float("nan")]
    else:
        checkpoint, losses = sft_checkpoint(out, args.train, steps=args.sft_steps, lr=args.sft_lr, seed=args.seed,
                                            device=args.device, sandbox=args.sandbox, decoy=args.decoy)
    sft_seconds = time.perf_counter() - t0
    probe = arm_config("turn_process", checkpoint, out, args.train, steps=1, k=args.k, lr=args.rl_lr,
                       seed=args.seed, device=args.device, sandbox=args.sandbox)
    model, tokenizer = load_policy(probe)
    start = evaluate(model.to(args.device), tokenizer, every, k=args.eval_k, sandbox=args.sandbox)
    print(f"SFT start: train {mean(start, args.train):.0%}, held-out {mean(start, args.held_out):.0%} "
          f"({sft_seconds:.0f} s)", file=sys.stderr)
    result: dict[str, Any] = {
        "train_tasks": args.train, "held_out_tasks": args.held_out, "seed": args.seed, "k": args.k,
        "eval_k": args.eval_k, "rl_steps": args.rl_steps, "episodes_per_arm": args.rl_steps * args.k * len(args.train),
        "decoy": args.decoy, "baseline": args.baseline, "rl_lr": args.rl_lr,
        "neg_adv_scale": args.neg_adv_scale, "kl_coef": args.kl_coef,
        "sft": {"steps": args.sft_steps, "loss_first": losses[0], "loss_last": losses[-1], "seconds": sft_seconds,
                "train_resolve": mean(start, args.train), "held_out_resolve": mean(start, args.held_out),
                "per_task": start},
        "arms": {},
    }
    for name in args.arms:
        config = arm_config(name, checkpoint, out, args.train, steps=args.rl_steps, k=args.k, lr=args.rl_lr,
                            seed=args.seed, device=args.device, sandbox=args.sandbox, kl_coef=args.kl_coef,
                            neg_adv_scale=args.neg_adv_scale, sft_coef=args.sft_coef,
                            demos=args.demos or str(out / "demos.jsonl"), reuse_optimizer=args.reuse_sft_optimizer,
                            baseline=args.baseline)
        t1 = time.perf_counter()
        trainer = train_online(config)
        seconds = time.perf_counter() - t1
        final = evaluate(trainer.model, trainer.tokenizer, every, k=args.eval_k, sandbox=args.sandbox)
        rows = read_metrics(Path(config.out) / "metrics.jsonl")
        plot_run(config.out)
        result["arms"][name] = {
            "curve": [r["resolved_rate"] for r in rows], "reward_curve": [r["reward_mean"] for r in rows],
            "opens_with_submit": opening_share(Path(config.out), "submit"),
            "train_resolve": mean(final, args.train), "held_out_resolve": mean(final, args.held_out),
            "rise_over_sft": mean(final, args.train) - mean(start, args.train), "per_task": final,
            "seconds": seconds, "png": str(Path(config.out) / "curves.png")}
        print(f"{name}: train {mean(final, args.train):.0%}, held-out {mean(final, args.held_out):.0%} "
              f"({seconds:.0f} s)", file=sys.stderr)
    result["wall_seconds"] = time.perf_counter() - t0
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", nargs="+", default=TRAIN)
    p.add_argument("--held-out", nargs="+", default=HELD_OUT)
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--sft-steps", type=int, default=300)
    p.add_argument("--sft-lr", type=float, default=5e-3)
    p.add_argument("--decoy", default="noop", choices=["", "noop"],
                   help="also imitate this agent's (failed) episodes of the training tasks in SFT")
    p.add_argument("--sft-from", default="", help="start the arms from this SFT checkpoint instead of training one")
    p.add_argument("--rl-steps", type=int, default=12)
    p.add_argument("--rl-lr", type=float, default=1e-4)
    p.add_argument("--kl-coef", type=float, default=0.0, help="k3 KL to the SFT policy (keeps what it memorised)")
    p.add_argument("--neg-adv-scale", type=float, default=0.0,
                   help="multiply negative advantages by this (0: positive-only, filtered RLOO)")
    p.add_argument("--sft-coef", type=float, default=0.0,
                   help="mix the demonstrations' NLL into every RL update with this weight")
    p.add_argument("--demos", default="", help="demonstrations for --sft-coef (default: OUT/demos.jsonl)")
    p.add_argument("--baseline", default="potential", choices=["group", "potential"],
                   help="the turn-level arms' baseline (deepgym_agents.rloo.advantages)")
    p.add_argument("--reuse-sft-optimizer", action="store_true", help="start RL from the SFT run's AdamW moments")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--eval-k", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--sandbox", default="", help="sandbox backend (empty: the env's default)")
    p.add_argument("--out", default="runs/swe_learning")
    return p


def main(argv: list[str] | None = None) -> int:
    print(json.dumps(run(parser().parse_args(argv)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
