"""Reward definitions (DESIGN §5).

Every step's reward is the sum of named components, each reported separately in
``info["reward_components"]``. In this version the components are:

* ``invalid_action``: ``-invalid_action_penalty`` when the action could not be parsed or the tool
  refused it (unknown tool, bad arguments, missing file, ...);
* ``outcome``: at the end of the episode, 1.0 if the hidden tests resolve the task, else 0.0.
  A ``no_verdict`` ends with outcome 0.0 *and* ``info["masked"] = True``, so trainers drop the
  episode instead of learning from a fake 0.

Per-step process shaping (potential-based, on hidden-test progress) plugs in as another component
through :meth:`RewardModel.shaping`; it is 0 in this version.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepgym_envs.grading import Verdict

REWARD_MODES = ("outcome", "process", "gated")


@dataclass(frozen=True)
class RewardConfig:
    """How an environment scores an episode."""

    mode: str = "outcome"
    """``outcome``: invalid-action penalties plus the final verdict. ``process`` and ``gated`` add
    per-step shaping (see the process-reward issue); until then they score like ``outcome``."""
    invalid_action_penalty: float = 0.05
    """Subtracted for each action that could not be parsed or that a tool refused. 0 = off."""

    def __post_init__(self) -> None:
        if self.mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {', '.join(REWARD_MODES)}, not {self.mode!r}")


class RewardModel:
    """Computes each step's reward components."""

    def __init__(self, config: RewardConfig) -> None:
        self.config = config

    def step_components(self, *, invalid: bool, changed_workspace: bool) -> dict[str, float]:
        parts = {"invalid_action": -self.config.invalid_action_penalty if invalid else 0.0}
        if changed_workspace:
            parts["shaping"] = self.shaping()
        return parts

    def shaping(self) -> float:
        """Φ(s_{t+1}) − Φ(s_t) on hidden-test progress; the process-reward issue fills this in."""
        return 0.0

    @staticmethod
    def outcome(verdict: Verdict) -> dict[str, float]:
        return {"outcome": 1.0 if verdict.resolved else 0.0}
