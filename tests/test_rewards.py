"""Process rewards: potential-based shaping on hidden-test progress, and the reward modes."""

from __future__ import annotations

import random

import pytest

from conftest import requires_namespace
from deepgym_envs import grade
from deepgym_envs.env import SWEEnv
from deepgym_envs.grading import VERDICTS, Verdict
from deepgym_envs.rewards import RewardConfig, RewardModel, potential

pytestmark = requires_namespace

FIX = {"name": "edit", "arguments": {"command": "str_replace", "path": "src/calc/ops.py",
                                     "old_str": "return max(lo, x)", "new_str": "return max(lo, min(x, hi))"}}
UNFIX = {"name": "edit", "arguments": {"command": "str_replace", "path": "src/calc/ops.py",
                                       "old_str": "return max(lo, min(x, hi))", "new_str": "return max(lo, x)"}}
BREAK_MEAN = {"name": "bash", "arguments": {"command": "sed -i 's|/ len(values)|/ (len(values) + 1)|' src/calc/ops.py"}}
HEAL_MEAN = {"name": "bash", "arguments": {"command": "sed -i 's|/ (len(values) + 1)|/ len(values)|' src/calc/ops.py"}}
TOUCH = {"name": "bash", "arguments": {"command": "echo note >> NOTES.txt"}}
LOOK = {"name": "view", "arguments": {"path": "src/calc/ops.py"}}
BAD = "no tool call here"
SUBMIT = {"name": "submit", "arguments": {}}


def env_for(task, **kwargs):
    return SWEEnv([task], max_steps=0, **kwargs)


def test_potential_formula():
    v = Verdict("unresolved", fail_to_pass={"passed": 1, "total": 2}, pass_to_pass={"passed": 3, "total": 4})
    assert potential(v) == pytest.approx(0.5 - 0.25)
    assert potential(v, p2p_weight=2.0) == pytest.approx(0.5 - 0.5)
    assert potential(Verdict.no_verdict("boom")) is None


def test_gated_mode_pays_banked_shaping_only_on_success():
    model = RewardModel(RewardConfig(mode="gated"))
    model.reset(0.0)
    parts = model.step(invalid=False, phi=1.0)
    assert parts["shaping"] == 1.0 and model.total(parts) == 0.0  # reported, not paid yet
    resolved = Verdict("resolved", fail_to_pass={"passed": 1, "total": 1}, pass_to_pass={"passed": 1, "total": 1})
    assert model.finish(resolved) == {"outcome": 1.0, "gated_shaping": 1.0}
    model.reset(0.0)
    model.step(invalid=False, phi=0.5)
    assert model.finish(Verdict("unresolved"))["gated_shaping"] == 0.0


def test_fixing_the_bug_pays_shaping_and_breaking_tests_costs(toy_task):
    env = env_for(toy_task)
    env.reset()
    _, r, *_, info = env.step(BREAK_MEAN)
    assert info["reward_components"]["shaping"] == pytest.approx(-0.5)  # 1 of 2 P2P broken
    _, r, *_, info = env.step(FIX)
    assert info["reward_components"]["shaping"] == pytest.approx(1.0)  # F2P fixed, mean still broken
    _, r, *_, info = env.step(LOOK)
    assert "shaping" not in info["reward_components"]  # viewing changes nothing: not re-graded
    _, r, *_, info = env.step(HEAL_MEAN)
    assert info["reward_components"]["shaping"] == pytest.approx(0.5)
    _, r, term, _, info = env.step(SUBMIT)
    assert term and info["reward_components"]["outcome"] == 1.0
    env.close()


def test_unchanged_workspace_is_never_regraded(toy_task):
    env = env_for(toy_task)
    env.reset()
    env.step(TOUCH)
    misses = VERDICTS.misses
    _, _, _, _, info = env.step({"name": "bash", "arguments": {"command": "cat NOTES.txt"}})
    assert "shaping" not in info["reward_components"] and VERDICTS.misses == misses
    env.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shaping_telescopes_over_any_episode(toy_task, seed):
    """Σ shaping = Φ(final) − Φ(initial), whatever the agent did on the way."""
    rng = random.Random(seed)
    env = env_for(toy_task)
    env.reset()
    phi0 = potential(grade(toy_task, ""))
    total_shaping = 0.0
    for _ in range(8):
        _, _, _, _, info = env.step(rng.choice([FIX, UNFIX, BREAK_MEAN, HEAL_MEAN, TOUCH, LOOK, BAD]))
        total_shaping += info["reward_components"].get("shaping", 0.0)
    final = potential(grade(toy_task, env.sandbox.diff()))
    assert total_shaping == pytest.approx(final - phi0)
    env.close()


def test_outcome_mode_has_no_shaping(toy_task):
    env = env_for(toy_task, reward="outcome")
    env.reset()
    _, r, *_, info = env.step(FIX)
    assert r == 0.0 and "shaping" not in info["reward_components"]
    _, r, *_, info = env.step(SUBMIT)
    assert r == 1.0
    env.close()


def test_localisation_bonus_once(toy_task):
    env = env_for(toy_task, reward=RewardConfig(localisation_bonus=0.1))
    env.reset()
    _, r1, *_, info1 = env.step(LOOK)
    _, r2, *_, info2 = env.step({"name": "view", "arguments": {"path": "/testbed/src/calc/ops.py"}})
    assert info1["reward_components"]["localisation"] == 0.1 and r1 == pytest.approx(0.1)
    assert "localisation" not in info2["reward_components"]
    env.close()


def test_invalid_action_penalty_and_noop_return(toy_task):
    env = env_for(toy_task)
    env.reset()
    _, r, *_ = env.step(BAD)
    assert r == pytest.approx(-0.05)
    _, r, term, _, info = env.step(SUBMIT)
    assert term and r == 0.0 and info["reward_components"] == {"invalid_action": 0.0, "outcome": 0.0}
    env.close()
