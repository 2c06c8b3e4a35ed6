"""``TrainConfig``: every knob of the RLOO trainer, documented once.

The reward options are the environment's :class:`~deepgym_envs.rewards.RewardConfig` and the
advantage options :class:`~deepgym_agents.rloo.advantages.AdvantageConfig`, held whole
(``TrainConfig(advantages=AdvantageConfig(gamma=0.9))``), not copied field by field. On the command
line and in ``--config`` files their fields also go by the flat names in :data:`FLAT_NAMES`
(``--gamma 0.9``, ``{"gamma": 0.9}``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from deepgym_agents.config import CollectConfig
from deepgym_agents.rloo.advantages import AdvantageConfig
from deepgym_envs.errors import DeepgymError
from deepgym_envs.rewards import RewardConfig


class TrainConfigError(DeepgymError):
    """A training configuration that cannot work; the message says which field and why."""


@dataclass
class TrainConfig:
    """One training run: data, advantages, loss, optimiser, schedule, output."""

    # -- what to train ---------------------------------------------------------------------------
    model: str = "tiny"
    """A model directory (``save_pretrained`` layout), or ``tiny``: a random-init model built in code."""
    lora: bool = False
    """Train LoRA adapters (peft) instead of every weight."""
    lora_rank: int = 8
    lora_alpha: int = 16
    # -- rollouts (online) -----------------------------------------------------------------------
    env_id: str = "deepgym/SWE-v0"
    """The environment: ``deepgym/SWE-v0`` (agent loop + LLM backend) or ``deepgym/GridNav-v0`` (direct sampler)."""
    tasks: str = ""
    """Task set for the env (``builtin``, a JSONL file); empty = the env's own default set."""
    task_ids: list[str] = field(default_factory=list)
    """Train on these tasks only (empty = all tasks of the set)."""
    tasks_per_step: int = 8
    """Distinct tasks rolled out per training step."""
    k: int = 8
    """Rollouts per task: the RLOO group size (≥ 2)."""
    sandbox: str = ""
    """SWE-v0's sandbox backend (empty = the env's default, ``namespace``)."""
    toolset: str = ""
    """SWE-v0's tool set: ``default`` or ``bash`` (bash and submit only: a prompt a quarter as long);
    empty = the env's default."""
    max_steps: int = 10
    """Turn budget per episode for envs that take one (SWE-v0). Shorter than an evaluation's
    (``deepgym_envs.defaults.MAX_STEPS``) on purpose: a short episode is a cheap rollout, and a small
    policy learns from short episodes first."""
    max_new_tokens: int = 256
    """Tokens per model turn (GridNav always takes 1: a move is one word, one token)."""
    temperature: float = 1.0
    """Sampling temperature. Behaviour log-probs are those of the raw (T = 1) distribution, as the agent
    loop records them, so only T = 1 is exactly on-policy; other values bias the batch slightly."""
    max_context_tokens: int = 8192
    """Agent loop: prompt plus completions of an episode never exceed this. Smaller than the loop's
    default (``deepgym_agents.config.DEFAULT_CONTEXT_TOKENS``): the trainer back-propagates through
    whole episodes, and its memory grows with their length."""
    concurrency: int = CollectConfig.concurrency
    """Agent loop: episodes in flight at once (the engine batches their turns)."""
    # -- rewards and advantages ------------------------------------------------------------------
    rewards: RewardConfig = field(default_factory=RewardConfig)
    """How the environment scores the rollouts (its mode, penalty, λ, localisation bonus, gate);
    the gate also decides ``advantages.reward="gated"``."""
    advantages: AdvantageConfig = field(default_factory=AdvantageConfig)
    """How per-turn advantages are computed (``deepgym_agents.rloo.advantages``)."""
    # -- loss ------------------------------------------------------------------------------------
    clip_low: float = 0.2
    """Ratios below 1 − clip_low stop pushing a negative-advantage token further down."""
    clip_high: float = 0.28
    """Ratios above 1 + clip_high stop pushing a positive-advantage token up (asymmetric: DAPO's clip-higher)."""
    kl_coef: float = 0.0
    """Weight of the k3 KL estimate to the frozen initial policy (0 = off, no reference kept)."""
    entropy_coef: float = 0.0
    """Entropy bonus weight (0 = off)."""
    sft_coef: float = 0.0
    """Weight of a supervised term mixed into every RL update: the mean negative log-likelihood of the
    generated tokens of the demonstrations in ``sft_data`` (0 = off). Keeps an SFT warm start's
    imitation alive while RL moves the policy."""
    sft_data: str = ""
    """Demonstrations (a trajectory JSONL, resolved episodes only are used) for ``sft_coef``."""
    neg_adv_scale: float = 1.0
    """Multiplies negative advantages in the loss (1 = plain RLOO; 0 = positive-only, "filtered" RLOO
    as in RAFT / ReST: failed episodes teach nothing, good ones are reinforced). Between the two it
    damps the push-down on a memorising policy's failed episodes, which are mostly the same tokens
    as its good ones."""
    # -- optimiser -------------------------------------------------------------------------------
    lr: float = 1e-5
    lr_decay: Literal["none", "linear"] = "none"
    """``linear``: decay the learning rate to 0 at ``steps``, so a policy that has converged stops drifting."""
    weight_decay: float = 0.0
    optimizer_from: str = ""
    """A checkpoint directory (``checkpoints/step-N`` of an SFT or RLOO run) whose AdamW moments seed this
    run's optimiser (the learning rate stays ``lr``). Empty: a fresh AdamW, whose first steps move
    every weight by about ``lr`` whatever the gradient's size."""
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this (0 = off)."""
    epochs: int = 1
    """Passes over each batch of rollouts."""
    minibatches: int = 1
    """Optimiser steps per pass; after the first one the ratios leave 1 and the clip matters."""
    micro_batch: int = 8
    """Sequences per forward/backward; gradients accumulate over a minibatch's micro-batches."""
    bf16: bool = True
    """bf16 autocast on a GPU (ignored on a CPU)."""
    device: str = "auto"
    """``auto`` (cuda when present), ``cpu`` or ``cuda``."""
    # -- schedule and output ---------------------------------------------------------------------
    steps: int = 100
    """Training steps: each one collects a batch (online) or takes one (offline), then updates."""
    seed: int = 0
    out: str = "runs/rloo"
    """Run directory: ``config.json``, ``metrics.jsonl``, ``checkpoints/step-N``."""
    checkpoint_every: int = 50
    """Save every N steps (and at the end). 0 = only at the end."""
    resume: bool = False
    """Continue from the newest checkpoint in ``out``."""
    show_progress: bool = True

    def __post_init__(self) -> None:
        if self.k < 2:
            raise TrainConfigError(f"k={self.k}: RLOO needs at least 2 rollouts per task for a leave-one-out baseline")
        if not (0 <= self.clip_low < 1 and self.clip_high >= 0):
            raise TrainConfigError(f"clip bounds must satisfy 0 <= clip_low < 1 and clip_high >= 0, "
                                   f"not ({self.clip_low}, {self.clip_high})")
        for name in ("tasks_per_step", "epochs", "minibatches", "micro_batch", "steps", "concurrency"):
            if getattr(self, name) < 1:
                raise TrainConfigError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.sft_coef < 0 or (self.sft_coef > 0 and not self.sft_data):
            raise TrainConfigError(f"sft_coef={self.sft_coef}: must be >= 0, and > 0 needs sft_data "
                                   "(a demonstrations file)")
        if not 0.0 <= self.neg_adv_scale <= 1.0:
            raise TrainConfigError(f"neg_adv_scale must be in [0, 1], not {self.neg_adv_scale}")
        if self.temperature <= 0:
            raise TrainConfigError("temperature must be > 0 (greedy decoding has no behaviour log-probabilities)")
        for name, kind in _HELD:
            if not isinstance(getattr(self, name), kind):
                raise TrainConfigError(f"{name} must be a {kind.__name__}, not {type(getattr(self, name)).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "TrainConfig":
        """From :meth:`to_dict`'s nested form, or with the reward and advantage options by their
        flat names (:data:`FLAT_NAMES`), as the command line and older ``config.json`` files give them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(row) - known - set(FLAT_NAMES))
        if unknown:
            raise TrainConfigError(f"unknown TrainConfig field(s): {', '.join(unknown)}")
        top = {k: v for k, v in row.items() if k in known}
        flat = {k: v for k, v in row.items() if k in FLAT_NAMES}
        try:
            for part, kind in _HELD:
                given = top.get(part) or {}
                nested = asdict(given) if isinstance(given, kind) else dict(given)
                nested.update({FLAT_NAMES[k][1]: v for k, v in flat.items() if FLAT_NAMES[k][0] == part})
                top[part] = kind(**nested)
        except (TypeError, ValueError, DeepgymError) as exc:
            raise TrainConfigError(str(exc)) from None
        return cls(**top)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")


_HELD = (("rewards", RewardConfig), ("advantages", AdvantageConfig))
"""The configs a TrainConfig holds whole: (field, type)."""

#: Flat name (command-line flag, ``--config`` key) -> (TrainConfig field, field of the config it holds).
FLAT_NAMES: dict[str, tuple[str, str]] = {
    "advantage": ("advantages", "mode"), "gamma": ("advantages", "gamma"), "reward": ("advantages", "reward"),
    "absent": ("advantages", "absent"), "filter_zero_variance": ("advantages", "filter_zero_variance"),
    "baseline": ("advantages", "baseline"),
    "reward_mode": ("rewards", "mode"), "invalid_action_penalty": ("rewards", "invalid_action_penalty"),
    "p2p_weight": ("rewards", "p2p_weight"), "localisation_bonus": ("rewards", "localisation_bonus"),
    "gate_threshold": ("rewards", "gate_threshold"), "shaping": ("rewards", "shaping"),
}
