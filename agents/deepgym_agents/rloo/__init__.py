"""Turn-level RLOO: advantages from per-step rewards, a clipped-ratio loss, online and offline loops.

>>> from deepgym_agents.rloo import TrainConfig, train_online
>>> trainer = train_online(TrainConfig(env_id="deepgym/GridNav-v0", steps=150, lr=1e-3))  # doctest: +SKIP

Importing this package does not import torch (the ``deepgym`` CLI builds its parser from
``TrainConfig``); the trainer and the loops load it when first used.
"""

from typing import Any

from deepgym_agents.rloo.advantages import AdvantageConfig, GroupStats, compute_advantages
from deepgym_agents.rloo.config import TrainConfig, TrainConfigError

_LAZY = {"RLOOTrainer": "deepgym_agents.rloo.trainer", "train_online": "deepgym_agents.rloo.online",
         "train_offline": "deepgym_agents.rloo.online"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'deepgym_agents.rloo' has no attribute {name!r}")


__all__ = ["AdvantageConfig", "GroupStats", "RLOOTrainer", "TrainConfig", "TrainConfigError",
           "compute_advantages", "train_offline", "train_online"]
