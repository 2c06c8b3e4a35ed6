"""Defaults that more than one module offers, each set here once.

Options that belong to one component live in that component's config dataclass instead
(:class:`deepgym_envs.rewards.RewardConfig`, :class:`deepgym_envs.env.SandboxConfig`,
:class:`deepgym_envs.sandbox.SandboxLimits`); the default backend is
:func:`deepgym_envs.sandbox.default_backend`. Plain values, no imports: the command line reads
them before it loads anything heavy.
"""

from __future__ import annotations

MAX_STEPS = 50
"""An episode's step budget: ``SWEEnv``, ``deepgym eval --max-steps``, ``evaluation.evaluate`` and the
agent loop (which leaves the budget to the environment unless told). The RLOO trainer's own,
shorter budget is ``TrainConfig.max_steps``: training episodes are kept short on purpose."""
