"""deepgym/GridNav-v0: the small multi-turn environment the RLOO learning test trains on."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs.env import ResetNeeded
from deepgym_envs.errors import UnknownTaskError
from deepgym_envs.gridnav import MOVES, GridNavEnv, GridTask, gridnav_tasks

TASK = GridTask("grid-00-21", start=(0, 0), goal=(2, 1))


def test_passes_gymnasium_env_checker():
    check_env(GridNavEnv())


def test_shortest_path_resolves_with_shaping_that_telescopes():
    env = gym.make("deepgym/GridNav-v0", tasks=[TASK])
    obs, info = env.reset(options={"task_id": TASK.instance_id})
    assert obs.endswith("at 0 0 goal 2 1") and info["max_steps"] == 3 + 2
    total = 0.0
    for move in ("right", "up", "right"):
        obs, reward, terminated, truncated, info = env.step(move)
        total += reward
        assert info["reward_components"]["shaping"] == pytest.approx(1 / 3)
    assert terminated and not truncated and info["verdict"]["status"] == "resolved" and not info["masked"]
    assert info["reward_components"]["outcome"] == 1.0
    assert total == pytest.approx(1.0 + 1.0)  # Φ_final − Φ_initial = 1, plus the outcome
    with pytest.raises(ResetNeeded):
        env.step("up")


def test_wrong_moves_walls_and_nonsense_are_told_apart():
    env = gym.make("deepgym/GridNav-v0", tasks=[TASK])
    env.reset(options={"task_id": TASK.instance_id})
    obs, reward, *_ , info = env.step("left")  # off the grid: stays, no progress, no penalty
    assert obs.startswith("wall at 0 0") and reward == 0.0 and not info["invalid_action"]
    obs, reward, *_ , info = env.step("jump")
    assert obs.startswith("invalid at 0 0") and reward == pytest.approx(-0.05) and info["invalid_action"]
    obs, reward, *_ , info = env.step("down")  # a wall again
    obs, reward, terminated, truncated, info = env.step("up")
    assert info["reward_components"]["shaping"] == pytest.approx(1 / 3)
    obs, reward, terminated, truncated, info = env.step("up")  # away from the goal: negative shaping
    assert truncated and not terminated and info["verdict"]["status"] == "unresolved"
    assert info["reward_components"]["shaping"] == pytest.approx(-1 / 3) and info["reward_components"]["outcome"] == 0


def test_outcome_mode_pays_only_the_verdict():
    env = gym.make("deepgym/GridNav-v0", tasks=[TASK], reward="outcome")
    env.reset(options={"task_id": TASK.instance_id})
    rewards = [env.step(m)[1] for m in ("right", "up", "right")]
    assert rewards == [0.0, 0.0, 1.0]


def test_task_set_is_seeded_and_unknown_tasks_are_named():
    tasks = gridnav_tasks()
    assert tasks == gridnav_tasks() and len({t.instance_id for t in tasks}) == 8
    assert all(3 <= t.distance <= 4 for t in tasks)
    with pytest.raises(UnknownTaskError, match="grid-"):
        GridNavEnv().reset(options={"task_id": "nope"})
    assert set(MOVES) == {"up", "down", "left", "right"}
