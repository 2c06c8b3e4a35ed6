"""Turn-level RLOO: advantages from per-step rewards, a clipped-ratio loss, online and offline loops.

>>> from agents.rloo import TrainConfig, train_online
>>> trainer = train_online(TrainConfig(env_id="deepgym/GridNav-v0", steps=60, lr=3e-3, out="runs/grid"))  # doctest: +SKIP
"""

from agents.rloo.advantages import AdvantageConfig, GroupStats, compute_advantages
from agents.rloo.config import TrainConfig, TrainConfigError
from agents.rloo.online import train_offline, train_online
from agents.rloo.trainer import RLOOTrainer

__all__ = ["AdvantageConfig", "GroupStats", "RLOOTrainer", "TrainConfig", "TrainConfigError",
           "compute_advantages", "train_offline", "train_online"]
