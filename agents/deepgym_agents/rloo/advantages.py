"""RLOO advantages for multi-turn episodes: per turn (the default) or per episode.

For the K rollouts of one task (one ``group_id``), rollout i's reward at turn t is ``r[i,t]``.

* ``turn`` mode. Return-to-go ``G[i,t] = Σ_{t'≥t} γ^{t'−t} r[i,t']``; the baseline is the
  leave-one-out mean of the *other* rollouts' return-to-go at the same turn index,
  ``b[i,t] = mean_{j≠i} G[j,t]``; ``A[i,t] = G[i,t] − b[i,t]`` is applied to every token the
  policy generated on turn t. A mistake on turn 3 therefore costs turn 3 (and earlier turns only
  through the discounted future), instead of being smeared over the whole episode.

  Rollouts that ended before turn t (``absent``): with ``"exclude"`` (default) they leave the mean
  and the count shrinks to the rollouts still acting at t, so the baseline estimates "the value of
  still being in the episode at turn t". If no other rollout reached turn t there is nothing to
  compare with, and that turn's advantage is 0 (counted in ``GroupStats.unbaselined_turns``).
  With ``"zero"`` they count with return-to-go 0 (the value of the absorbing state after the end).

  With ``baseline="potential"`` each return-to-go is first reduced by the potential the rollout's
  state had reached when turn t began, ``Φ[i,t] − Φ[i,0]`` (the shaping paid on its earlier
  turns: the environment's own measure of how much of the fix that state already holds), and the
  leave-one-out mean is taken over these residuals. The potential is a function of the state the
  turn acts in, not of its action, so the gradient stays unbiased; what it removes is the blame
  (or credit) a turn gets for the state it started in. Without it, a last turn after a failed edit
  is compared with the last turns of rollouts whose edit worked, whose return-to-go holds the
  outcome, and every token it wrote is pushed down for a result an earlier turn decided.

* ``trajectory`` mode: classic RLOO on the episode return ``R_i = Σ_t γ^t r[i,t]``,
  ``A_i = R_i − mean_{j≠i} R_j = K/(K−1) · (R_i − mean_j R_j)``, the same for every turn.

Which rewards (``reward``): ``env`` uses each turn's reward as the environment paid it; ``outcome``
keeps only the final verdict (1 resolved, 0 not) on the last turn; ``gated`` keeps the process
components only in episodes whose outcome reaches the run's gate (``RewardConfig.gate_threshold``,
the one the environment's ``gated`` mode uses; Gated Reward Accumulation) and the outcome alone
otherwise.

Episodes flagged ``masked`` (``no_verdict``: the harness failed) are dropped before grouping;
groups left with fewer than two rollouts, and groups whose advantages are all zero (every rollout
scored the same: no learning signal) are filtered and counted.

>>> adv, stats = compute_advantages(trajectories, AdvantageConfig(gamma=1.0))   # doctest: +SKIP
>>> adv[episode_id]          # one advantage per turn
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal, Sequence

from deepgym_agents.trajectory import Trajectory
from deepgym_envs.rewards import OUTCOME, SHAPING, RewardConfig, passes_gate, process_reward

EPS = 1e-9


@dataclass(frozen=True)
class AdvantageConfig:
    """How per-turn advantages are computed."""

    mode: Literal["turn", "trajectory"] = "turn"
    """``turn``: return-to-go against a per-turn leave-one-out baseline; ``trajectory``: classic RLOO."""
    gamma: float = 1.0
    """Discount of later turns' rewards in the return-to-go (and in the episode return)."""
    reward: Literal["env", "outcome", "gated"] = "env"
    """Which rewards count: as paid by the env, the final outcome only, or gated process rewards
    (gated by the run's :class:`~deepgym_envs.rewards.RewardConfig`)."""
    absent: Literal["exclude", "zero"] = "exclude"
    """How rollouts that already ended count in the baseline at a later turn (module docstring)."""
    filter_zero_variance: bool = True
    """Drop groups whose advantages are all 0. Off: they stay (with advantage 0), so the KL and
    entropy terms still act on them."""
    baseline: Literal["group", "potential"] = "group"
    """``turn`` mode only. ``group``: the other rollouts' mean return-to-go at the same turn index;
    ``potential``: the same, on returns-to-go less the potential each state had reached (module
    docstring)."""

    def __post_init__(self) -> None:
        if self.mode not in ("turn", "trajectory"):
            raise ValueError(f"advantage mode must be 'turn' or 'trajectory', not {self.mode!r}")
        if self.reward not in ("env", "outcome", "gated"):
            raise ValueError(f"reward must be 'env', 'outcome' or 'gated', not {self.reward!r}")
        if self.absent not in ("exclude", "zero"):
            raise ValueError(f"absent must be 'exclude' or 'zero', not {self.absent!r}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], not {self.gamma}")
        if self.baseline not in ("group", "potential"):
            raise ValueError(f"baseline must be 'group' or 'potential', not {self.baseline!r}")
        if self.baseline == "potential" and self.mode != "turn":
            raise ValueError("baseline='potential' needs mode='turn': an episode-level advantage has only the "
                             "start state, whose potential every rollout of the group shares")


@dataclass
class GroupStats:
    """What happened to a batch's groups: the denominators behind the training metrics."""

    groups: int = 0
    used_groups: int = 0
    masked_episodes: int = 0
    """Episodes dropped because their verdict was ``no_verdict``."""
    too_small_groups: int = 0
    """Groups with fewer than two unmasked rollouts: no leave-one-out baseline exists."""
    zero_variance_groups: int = 0
    """Groups in which every advantage was zero (all rollouts scored alike)."""
    all_pass_groups: int = 0
    all_fail_groups: int = 0
    unbaselined_turns: int = 0
    """Turns no other rollout of the group reached (``absent="exclude"``): advantage 0."""
    per_group: dict[str, str] = field(default_factory=dict)
    """group_id → ``used`` | ``too_small`` | ``zero_variance`` | ``zero_variance_kept``."""

    def as_metrics(self) -> dict[str, float]:
        n = max(self.groups, 1)
        return {"groups": self.groups, "used_groups": self.used_groups, "masked_episodes": self.masked_episodes,
                "zero_variance_groups": self.zero_variance_groups, "too_small_groups": self.too_small_groups,
                "all_pass_frac": self.all_pass_groups / n, "all_fail_frac": self.all_fail_groups / n,
                "unbaselined_turns": self.unbaselined_turns}


def outcome_of(traj: Trajectory) -> float:
    """The episode's verdict as a number: the ``outcome`` component if paid, else resolved → 1."""
    for turn in reversed(traj.turns):
        if OUTCOME in turn.reward_components:
            return float(turn.reward_components[OUTCOME])
    return 1.0 if traj.resolved else 0.0


def turn_rewards(traj: Trajectory, config: AdvantageConfig, rewards: RewardConfig = RewardConfig()) -> list[float]:
    """The rewards this configuration counts, one per turn; ``rewards.gate_threshold`` is the gate."""
    n = len(traj.turns)
    if n == 0:
        return []
    if config.reward == "env":
        return [float(t.reward) for t in traj.turns]
    outcome = outcome_of(traj)
    only_outcome = [0.0] * (n - 1) + [outcome]
    if config.reward == "outcome" or not passes_gate(outcome, rewards.gate_threshold):
        return only_outcome
    # gated and passed: the process components of every turn, plus the outcome once at the end
    # (an env that does not itemise its rewards: everything but the end is process)
    process = [process_reward(t.reward_components) if t.reward_components else float(t.reward) for t in traj.turns]
    process[-1] += outcome
    return process


def returns_to_go(rewards: Sequence[float], gamma: float) -> list[float]:
    """``G[t] = r[t] + γ G[t+1]``, computed backwards."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        out[t] = running
    return out


def potentials_reached(traj: Trajectory) -> list[float]:
    """``Φ(s_t) − Φ(s_0)`` for each turn t: the shaping the episode was paid before that turn."""
    out, reached = [], 0.0
    for turn in traj.turns:
        out.append(reached)
        reached += float(turn.reward_components.get(SHAPING, 0.0))
    return out


def group_advantages(rewards: Sequence[Sequence[float]], config: AdvantageConfig,
                     offsets: Sequence[Sequence[float]] | None = None) -> tuple[list[list[float]], int]:
    """Advantages of one group, given each rollout's per-turn rewards; also the unbaselined turns.

    ``rollout i``'s baseline reads only the other rollouts' rewards (leave-one-out). ``offsets``
    (turn mode): per rollout and turn, subtracted from the return-to-go first (the state's potential).
    """
    k = len(rewards)
    if k < 2:
        raise ValueError("a leave-one-out baseline needs at least two rollouts")
    if config.mode == "trajectory":
        totals = [returns_to_go(r, config.gamma)[0] if len(r) else 0.0 for r in rewards]
        whole = sum(totals)
        return [[totals[i] - (whole - totals[i]) / (k - 1)] * len(rewards[i]) for i in range(k)], 0

    rtg = [returns_to_go(r, config.gamma) for r in rewards]
    if offsets is not None:
        rtg = [[g - o for g, o in zip(row, off)] for row, off in zip(rtg, offsets)]
    horizon = max(len(g) for g in rtg)
    # Column sums and counts per turn index, so each leave-one-out mean is O(1): subtract oneself.
    col_sum = [0.0] * horizon
    col_n = [0] * horizon
    for g in rtg:
        for t, value in enumerate(g):
            col_sum[t] += value
            col_n[t] += 1
    advantages: list[list[float]] = []
    unbaselined = 0
    for g in rtg:
        row = []
        for t, value in enumerate(g):
            others_sum = col_sum[t] - value
            if config.absent == "zero":
                row.append(value - others_sum / (k - 1))
            elif col_n[t] > 1:
                row.append(value - others_sum / (col_n[t] - 1))
            else:
                row.append(0.0)
                unbaselined += 1
        advantages.append(row)
    return advantages, unbaselined


def compute_advantages(trajectories: Sequence[Trajectory], config: AdvantageConfig = AdvantageConfig(),
                       rewards: RewardConfig = RewardConfig()) -> tuple[dict[str, list[float]], GroupStats]:
    """Per-turn advantages for every usable episode, keyed by ``episode_id``, and the group stats.
    ``rewards``: the run's reward config (its gate decides ``reward="gated"``).

    Episodes missing from the result (masked, or in a filtered group) must not be trained on.
    """
    stats = GroupStats()
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for traj in trajectories:
        if traj.masked:
            stats.masked_episodes += 1
            continue
        groups[traj.group_id or traj.task_id].append(traj)
    out: dict[str, list[float]] = {}
    for gid, members in groups.items():
        stats.groups += 1
        resolved = [t.resolved for t in members]
        stats.all_pass_groups += all(resolved)
        stats.all_fail_groups += not any(resolved)
        if len(members) < 2:
            stats.too_small_groups += 1
            stats.per_group[gid] = "too_small"
            continue
        offsets = [potentials_reached(t) for t in members] if config.baseline == "potential" else None
        advantages, unbaselined = group_advantages([turn_rewards(t, config, rewards) for t in members], config,
                                                   offsets)
        if all(abs(a) <= EPS for row in advantages for a in row):
            stats.zero_variance_groups += 1
            stats.per_group[gid] = "zero_variance"
            if config.filter_zero_variance:
                continue
            stats.per_group[gid] = "zero_variance_kept"
        stats.used_groups += 1
        stats.unbaselined_turns += unbaselined
        stats.per_group.setdefault(gid, "used")
        for traj, row in zip(members, advantages):
            out[traj.episode_id] = row
    return out, stats


def token_advantages(traj: Trajectory, per_turn: Sequence[float]) -> list[float]:
    """Spread per-turn advantages over the flattened tokens: the turn's value on generated tokens, 0 elsewhere."""
    flat = traj.flatten()
    return [per_turn[t] if m else 0.0 for t, m in zip(flat.turn_index, flat.loss_mask)]
