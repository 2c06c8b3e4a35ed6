"""``CollectConfig``: how the agent loop collects episodes, every knob documented once.

    trajs = collect(llm, task_ids, CollectConfig(k=4, concurrency=16, out="runs/trajs.jsonl"))

The environment's own options (step budget, reward, sandbox) stay the environment's: they go in
``env_kwargs`` (``max_steps`` here is a shortcut for the budget), and their defaults live where the
environment reads them (:mod:`deepgym_envs.defaults`, :class:`deepgym_envs.rewards.RewardConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym_agents.llm import SamplingParams
from deepgym_envs.errors import DeepgymError

DEFAULT_CONTEXT_TOKENS = 32768
"""A model's context window when nothing says otherwise: the loop's default budget, ``deepgym eval``'s
fallback when the engine and the model name none, and the tiny test model's position table (so every
prompt the loop allows fits it). The RLOO trainer keeps its own, smaller ``TrainConfig.max_context_tokens``:
it back-propagates through whole episodes, and memory grows with their length."""


@dataclass(frozen=True)
class CollectConfig:
    """What :func:`deepgym_agents.loop.collect` runs, apart from the model and the task ids."""

    env_id: str = "deepgym/SWE-v0"
    """The environment every episode runs in (``gym.make`` id)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed to ``gym.make``: ``tasks``, ``sandbox``, ``reward``, ``max_steps``, ..."""
    k: int = 1
    """Rollouts per task; they share a ``group_id``."""
    concurrency: int = 8
    """Episodes in flight at once (also the number of environment threads)."""
    max_steps: int | None = None
    """Step budget, unless ``env_kwargs`` sets one. None = the environment's own
    (:data:`deepgym_envs.defaults.MAX_STEPS` for SWE-v0)."""
    max_context_tokens: int = DEFAULT_CONTEXT_TOKENS
    """Token mode: prompt plus completion never exceeds it."""
    params: SamplingParams = field(default_factory=SamplingParams)
    """Sampling parameters of every turn (``max_tokens`` is lowered to what the context allows)."""
    out: str | Path | None = None
    """Append each trajectory to this JSONL file as its episode ends."""
    seed: int = 0
    """Reset seed of the first episode (the others count up from it); with ``params.seed`` set, each
    episode and turn also samples with its own derived seed."""
    show_progress: bool = True
    """A progress bar on the terminal, one line per finished episode."""
    verify_template: bool = True
    """Token mode: check at the end of each episode that the incremental ids equal the template
    rendering of the whole conversation (``metadata["template_match"]``)."""
    sync_batches: bool = False
    """Wait until every episode in flight needs the model before each call (the largest batches, but
    the engine idles through every environment step: lockstep). Default: call the engine as soon as
    any episode waits, so steps overlap generation."""
    batch_window: float = 0.0
    """Seconds the first waiting episode waits for others to join its call (bigger batches, less
    overlap; ``bench/bench_loop.py`` compares the three schedules)."""

    def __post_init__(self) -> None:
        if self.k < 1 or self.concurrency < 1:
            raise DeepgymError("k and concurrency must be at least 1")
        if self.max_steps is not None and (isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int)
                                           or self.max_steps < 0):
            raise DeepgymError(f"max_steps={self.max_steps!r}: a whole number of steps (0 = no limit), or None "
                               "for the environment's own budget")
        if self.max_context_tokens < 1:
            raise DeepgymError(f"max_context_tokens={self.max_context_tokens}: must be at least 1")
        if self.batch_window < 0:
            raise DeepgymError(f"batch_window={self.batch_window}: seconds, at least 0")

    def gym_kwargs(self) -> dict[str, Any]:
        """``gym.make`` keywords: ``env_kwargs``, with ``max_steps`` unless they set their own."""
        kwargs = dict(self.env_kwargs)
        if self.max_steps is not None:
            kwargs.setdefault("max_steps", self.max_steps)
        return kwargs
