"""Turn-level and trajectory RLOO advantages: the properties a trainer relies on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deepgym_agents.rloo.advantages import (AdvantageConfig, compute_advantages, group_advantages, returns_to_go,
                                    token_advantages, turn_rewards)
from deepgym_agents.trajectory import Trajectory, Turn
from deepgym_envs.rewards import RewardConfig

rewards_st = st.floats(min_value=-2, max_value=2, allow_nan=False, width=32)


def make_traj(rewards: list[float], *, group: str = "g", resolved: bool | None = None, masked: bool = False,
              components: list[dict[str, float]] | None = None, idx: int = 0) -> Trajectory:
    turns = []
    for t, r in enumerate(rewards):
        turns.append(Turn(prompt_ids=[1, 2] if t == 0 else [], completion_ids=[10 + t, 20 + t],
                          completion_logprobs=[-0.5, -0.7], observation_ids=[30, 31, 32], reward=r,
                          reward_components=(components[t] if components else {})))
    if resolved is None:
        resolved = bool(rewards) and rewards[-1] >= 1
    verdict = {"status": "no_verdict" if masked else ("resolved" if resolved else "unresolved")}
    return Trajectory(task_id="t", turns=turns, group_id=group, rollout_index=idx, verdict=verdict, masked=masked,
                      episode_return=sum(rewards))


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 6).flatmap(lambda k: st.tuples(st.lists(rewards_st, min_size=k, max_size=k),
                                                     st.integers(1, 5))))
def test_turn_level_equals_trajectory_rloo_for_terminal_reward_equal_lengths(data):
    outcomes, length = data
    rewards = [[0.0] * (length - 1) + [o] for o in outcomes]
    turn, _ = group_advantages(rewards, AdvantageConfig(mode="turn", gamma=1.0))
    traj, _ = group_advantages(rewards, AdvantageConfig(mode="trajectory", gamma=1.0))
    k = len(outcomes)
    mean = sum(outcomes) / k
    for i in range(k):
        expected = k / (k - 1) * (outcomes[i] - mean)  # the classic RLOO form
        assert turn[i] == pytest.approx(traj[i], abs=1e-9)
        assert turn[i] == pytest.approx([expected] * length, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(rewards_st, min_size=1, max_size=5), min_size=2, max_size=5),
       st.sampled_from(["exclude", "zero"]), st.sampled_from([1.0, 0.9, 0.5]), st.data())
def test_baseline_never_depends_on_own_rewards(rewards, absent, gamma, data):
    """Changing rollout i's rewards moves A[i,t] exactly by the change in its own return-to-go."""
    config = AdvantageConfig(gamma=gamma, absent=absent)
    i = data.draw(st.integers(0, len(rewards) - 1))
    new_own = data.draw(st.lists(rewards_st, min_size=len(rewards[i]), max_size=len(rewards[i])))
    before, _ = group_advantages(rewards, config)
    changed = [list(r) for r in rewards]
    changed[i] = new_own
    after, _ = group_advantages(changed, config)
    baseline_before = [g - a for g, a in zip(returns_to_go(rewards[i], gamma), before[i])]
    baseline_after = [g - a for g, a in zip(returns_to_go(new_own, gamma), after[i])]
    for t, (b0, b1) in enumerate(zip(baseline_before, baseline_after)):
        if before[i][t] == 0.0 and after[i][t] == 0.0 and absent == "exclude":
            continue  # an unbaselined turn (no other rollout reached it): advantage 0 by definition
        assert b0 == pytest.approx(b1, abs=1e-6)


def test_per_turn_credit_goes_to_the_turns_that_earned_it():
    # Rollout 0 made progress on turn 1 and then idled; rollout 1 did nothing at all.
    rewards = [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    turn, _ = group_advantages(rewards, AdvantageConfig(mode="turn"))
    episode, _ = group_advantages(rewards, AdvantageConfig(mode="trajectory"))
    assert turn[0] == pytest.approx([1.0, 1.0, 0.0])     # the idle last turn earns nothing
    assert episode[0] == pytest.approx([1.0, 1.0, 1.0])  # trajectory RLOO credits every turn alike
    discounted, _ = group_advantages(rewards, AdvantageConfig(gamma=0.5))
    assert discounted[0] == pytest.approx([0.5, 1.0, 0.0])  # γ < 1: earlier turns get a discounted share


def test_rollouts_that_ended_are_excluded_or_zero():
    rewards = [[1.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]]
    excl, unbased = group_advantages(rewards, AdvantageConfig(absent="exclude"))
    zero, _ = group_advantages(rewards, AdvantageConfig(absent="zero"))
    # turn 2: rollout 0 ended; exclude → compare only with rollout 2; zero → rollout 0 counts as 0
    assert excl[1][2] == pytest.approx(0.5 - 0.0)
    assert zero[1][2] == pytest.approx(0.5 - (0.0 + 0.0) / 2)
    assert unbased == 0
    lone, unbased = group_advantages([[1.0], [0.0, 1.0]], AdvantageConfig(absent="exclude"))
    assert lone[1][1] == 0.0 and unbased == 1  # nobody else reached turn 1: no baseline, no signal


def test_masked_episodes_are_dropped_and_flat_groups_filtered():
    trajs = [make_traj([0.0, 1.0], group="a", idx=0), make_traj([0.0, 0.0], group="a", idx=1),
             make_traj([0.0, 1.0], group="a", idx=2, masked=True),
             make_traj([0.0, 1.0], group="b", idx=0), make_traj([0.0, 1.0], group="b", idx=1),
             make_traj([0.0, 1.0], group="c", idx=0), make_traj([0.0, 0.0], group="c", idx=1, masked=True)]
    adv, stats = compute_advantages(trajs)
    assert stats.masked_episodes == 2
    assert stats.per_group == {"a": "used", "b": "zero_variance", "c": "too_small"}
    assert set(adv) == {trajs[0].episode_id, trajs[1].episode_id}
    assert stats.all_pass_groups == 2 and stats.all_fail_groups == 0
    assert stats.as_metrics()["all_pass_frac"] == pytest.approx(2 / 3)


def test_reward_modes_outcome_and_gated():
    comps = [{"shaping": 0.5, "invalid_action": 0.0}, {"shaping": 0.5, "invalid_action": -0.05, "outcome": 1.0}]
    win = make_traj([0.5, 1.45], components=comps, resolved=True)
    lose = make_traj([0.5, -0.05], components=[comps[0], {"shaping": 0.0, "invalid_action": -0.05, "outcome": 0.0}],
                     resolved=False)
    assert turn_rewards(win, AdvantageConfig(reward="env")) == [0.5, 1.45]
    assert turn_rewards(win, AdvantageConfig(reward="outcome")) == [0.0, 1.0]
    assert turn_rewards(win, AdvantageConfig(reward="gated")) == pytest.approx([0.5, 1.45])
    assert turn_rewards(lose, AdvantageConfig(reward="gated")) == [0.0, 0.0]  # below the gate: outcome only
    # the gate is the run's RewardConfig's, the one the env's gated mode uses: at 0 every episode passes
    assert turn_rewards(lose, AdvantageConfig(reward="gated"), RewardConfig(gate_threshold=0.0)) == \
        pytest.approx([0.5, -0.05])


@settings(max_examples=50, deadline=None)
@given(st.lists(rewards_st, min_size=1, max_size=4), st.lists(rewards_st, min_size=1, max_size=4))
def test_token_advantages_only_on_generated_tokens(r0, r1):
    trajs = [make_traj(r0, idx=0), make_traj(r1, idx=1)]
    adv, _ = compute_advantages(trajs)
    for traj in trajs:
        if traj.episode_id not in adv:
            continue
        flat = traj.flatten()
        tok = token_advantages(traj, adv[traj.episode_id])
        assert len(tok) == len(flat.input_ids)
        for value, mask, turn in zip(tok, flat.loss_mask, flat.turn_index):
            assert value == (adv[traj.episode_id][turn] if mask else 0.0)  # prompt/observation tokens: 0


def test_bad_config_fails_fast():
    with pytest.raises(ValueError, match="mode"):
        AdvantageConfig(mode="episode")
    with pytest.raises(ValueError, match="gamma"):
        AdvantageConfig(gamma=1.5)
    with pytest.raises(ValueError, match="two rollouts"):
        group_advantages([[1.0]], AdvantageConfig())
    with pytest.raises(ValueError, match="baseline"):
        AdvantageConfig(baseline="value")
    with pytest.raises(ValueError, match="needs mode='turn'"):
        AdvantageConfig(mode="trajectory", baseline="potential")


def test_zero_variance_groups_can_be_kept_for_the_regularisers():
    trajs = [make_traj([0.0, 1.0], idx=0), make_traj([0.0, 1.0], idx=1)]
    adv, stats = compute_advantages(trajs, AdvantageConfig(filter_zero_variance=False))
    assert stats.zero_variance_groups == 1 and stats.per_group == {"g": "zero_variance_kept"}
    assert adv == {t.episode_id: [0.0, 0.0] for t in trajs}


def test_the_potential_baseline_does_not_blame_a_turn_for_the_state_it_started_in():
    """SWE-v0's two-turn episodes: an edit (shaping +1 when it fixes the bug), then submit (outcome).
    The group baseline compares a failed episode's submit turn with the winners' submit turns, whose
    return holds the outcome, so every token written after a failed edit is pushed down. With the
    potential baseline the submit turn is judged from the state it started in: it had no say."""
    win = [{"shaping": 1.0, "invalid_action": 0.0}, {"invalid_action": 0.0, "outcome": 1.0}]
    lose = [{"shaping": 0.0, "invalid_action": -0.05}, {"invalid_action": 0.0, "outcome": 0.0}]
    group = [make_traj([1.0, 1.0], components=win, resolved=True, idx=0),
             make_traj([-0.05, 0.0], components=lose, resolved=False, idx=1),
             make_traj([-0.05, 0.0], components=lose, resolved=False, idx=2)]
    for i, t in enumerate(group):
        t.episode_id = f"e{i}"
    plain, _ = compute_advantages(group, AdvantageConfig())
    assert plain["e1"][1] == pytest.approx(-0.5)  # the submit after a failed edit: blamed for the edit
    fair, _ = compute_advantages(group, AdvantageConfig(baseline="potential"))
    assert [fair[e][1] for e in ("e0", "e1", "e2")] == pytest.approx([0.0, 0.0, 0.0])
    # the edit turn, which decided the outcome, keeps its credit: every state started at the same potential
    assert [fair[e][0] for e in ("e0", "e1", "e2")] == pytest.approx([plain[e][0] for e in ("e0", "e1", "e2")])
    assert fair["e0"][0] > 0 > fair["e1"][0]


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 5).flatmap(lambda k: st.lists(st.lists(rewards_st, min_size=1, max_size=4), min_size=k,
                                                    max_size=k)))
def test_the_potential_baseline_is_still_leave_one_out(rows):
    """The potential baseline is the group baseline on shifted returns: rollout i's advantage moves by
    minus its own state's potential plus the mean of the others' at the same turn, nothing else."""
    offsets = [[0.3 * t for t in range(len(r))] for r in rows]
    base, _ = group_advantages(rows, AdvantageConfig(), [[0.0] * len(r) for r in rows])
    shifted, _ = group_advantages(rows, AdvantageConfig(), offsets)
    plain, _ = group_advantages(rows, AdvantageConfig())
    assert base == plain
    for i, row in enumerate(rows):
        for t in range(len(row)):
            others = [j for j, r in enumerate(rows) if j != i and len(r) > t]
            if not others:
                continue
            expected = base[i][t] - offsets[i][t] + sum(offsets[j][t] for j in others) / len(others)
            assert shifted[i][t] == pytest.approx(expected, abs=1e-6)
