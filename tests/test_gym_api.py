"""Gymnasium's own machinery around ``deepgym/SWE-v0``: vector envs with default arguments,
``TimeLimit`` truncation that still grades, the spec's step budget, human rendering, and an action
space that contains what ``step`` takes. Real sandboxes, a small built-in task."""

from __future__ import annotations

import copy
import multiprocessing as mp

import gymnasium as gym
import pytest
from _readme import readme_blocks
from conftest import requires_namespace
from gymnasium.vector import AsyncVectorEnv
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

import deepgym_envs
from deepgym_envs.actions import ToolCall
from deepgym_envs.env import ResetNeeded
from deepgym_envs.spaces import ActionText, AnyText

TASK_ID = "deepgym__tmplite-002"
TASK = next(t for t in deepgym_envs.load_tasks("builtin") if t.instance_id == TASK_ID)
OPTIONS = {"task_id": TASK_ID, "reward": "outcome"}  # outcome: no shaping run at reset, so resets stay fast


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}


GOLD = bash(f"git apply <<'DEEPGYM_EOF'\n{TASK.patch}\nDEEPGYM_EOF")


@requires_namespace
@pytest.mark.parametrize("make", ["make_vec", "AsyncVectorEnv"])
def test_async_vector_envs_work_with_default_arguments(make):
    if make == "make_vec":
        envs = gym.make_vec("deepgym/SWE-v0", num_envs=2, vectorization_mode="async", **OPTIONS)
    else:
        envs = AsyncVectorEnv([lambda: gym.make("deepgym/SWE-v0", **OPTIONS)] * 2)  # shared_memory=True
    try:
        obs, info = envs.reset(seed=0)
        assert len(obs) == 2 and all("Resolve the issue" in o and "\n" in o for o in obs)
        obs, reward, terminated, truncated, info = envs.step([bash("echo 'a b'"), bash("printf 'ünï\\ncode ✓'")])
        assert [o.strip() for o in obs] == ["a b", "ünï\ncode ✓"]
        assert list(reward) == [0.0, 0.0] and not terminated.any() and not truncated.any()
        obs, *_ = envs.step([bash("echo second"), bash("echo step")])  # each step's text, not the first one's
        assert [o.strip() for o in obs] == ["second", "step"]
    finally:
        envs.close()


def test_shared_memory_holds_any_text_and_reads_the_latest_write():
    space = AnyText(64, min_length=0)
    shared = create_shared_memory(space, n=2, ctx=mp.get_context())
    view = read_from_shared_memory(space, shared, n=2)
    for texts in (["tab\there", "emoji 🙂 and \ud800 lone surrogate"], ["", "x" * 64]):
        for i, text in enumerate(texts):
            write_to_shared_memory(space, i, text, shared)
        assert list(view) == texts
        snapshot = copy.deepcopy(view)  # what AsyncVectorEnv(copy=True) hands out
        assert snapshot == tuple(texts) and isinstance(snapshot, tuple)
    with pytest.raises(ValueError, match="does not fit"):
        write_to_shared_memory(space, 0, "y" * 65, shared)


@requires_namespace
def test_a_time_limit_shorter_than_the_budget_still_grades():
    env = gym.make("deepgym/SWE-v0", max_episode_steps=2, **OPTIONS)
    try:
        assert env.spec.max_episode_steps == 2 and env.unwrapped.max_steps == 50
        env.reset(seed=0)
        *_, terminated, truncated, info = env.step(GOLD)
        assert not terminated and not truncated and "verdict" not in info
        _, reward, terminated, truncated, info = env.step(bash("true"))
        assert truncated and not terminated
        assert info["verdict"]["status"] == "resolved"  # graded on the TimeLimit's truncation
        assert info["reward_components"]["outcome"] == 1.0 and reward == 1.0
        with pytest.raises(ResetNeeded):  # the graded episode is over, as at the env's own budget
            env.step(bash("true"))
    finally:
        env.close()


@requires_namespace
def test_the_envs_own_budget_still_ends_the_episode_with_a_verdict():
    env = gym.make("deepgym/SWE-v0", max_steps=1, **OPTIONS)
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, info = env.step(bash("true"))
        assert truncated and not terminated and info["verdict"]["status"] == "unresolved" and reward == 0.0
    finally:
        env.close()


def test_spec_max_episode_steps_is_the_episode_budget():
    cases = [({}, 50), ({"max_steps": 7}, 7), ({"max_steps": 100}, 100), ({"max_steps": 0}, None),
             ({"max_episode_steps": 3}, 3), ({"max_steps": 5, "max_episode_steps": 9}, 5)]
    for kwargs, budget in cases:
        env = gym.make("deepgym/SWE-v0", **kwargs)
        try:
            assert env.spec.max_episode_steps == budget, kwargs
            again = gym.make(env.spec)  # the spec recreates the same budget
            assert again.spec.max_episode_steps == budget
            again.close()
        finally:
            env.close()


@requires_namespace
def test_render_mode_human_prints_each_observation(capsys):
    env = gym.make("deepgym/SWE-v0", render_mode="human", **OPTIONS)
    try:
        env.reset(seed=0)
        assert "Resolve the issue" in capsys.readouterr().out
        env.step(bash("echo shown to a human"))
        assert "shown to a human" in capsys.readouterr().out
        assert env.render() is None
    finally:
        env.close()


ACCEPTED = [
    '<tool_call>{"name": "view", "arguments": {"path": "."}}</tool_call>',
    "plain text without a tool call (the agent's mistake, answered with an error observation)",
    {"name": "view", "arguments": {"path": "."}},
    {"type": "function", "function": {"name": "view", "arguments": '{"path": "."}'}, "id": "call_1"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"type": "function", "function": {"name": "view", "arguments": '{"path": "."}'}}]},
    ToolCall("view", {"path": "."}),
]


@pytest.mark.parametrize("action", ACCEPTED, ids=range(len(ACCEPTED)))
def test_action_space_contains_every_form_step_accepts(action):
    space = gym.make("deepgym/SWE-v0").action_space
    assert isinstance(space, ActionText) and space.contains(action)


@pytest.mark.parametrize("action", [5, None, ["view"], {"arguments": {}}, {"name": "view", "arguments": "[1]"},
                                    {"tool_calls": []}])
def test_action_space_rejects_what_is_not_an_action(action):
    assert not gym.make("deepgym/SWE-v0").action_space.contains(action)


@requires_namespace
def test_dict_actions_in_the_space_step_as_tool_calls():
    env = gym.make("deepgym/SWE-v0", **OPTIONS)
    try:
        env.reset(seed=0)
        for action in ACCEPTED[2:]:
            assert env.action_space.contains(action)
            obs, _, _, _, info = env.step(action)
            assert info["invalid_action"] is False and "src" in obs, action
    finally:
        env.close()


VECTOR_SNIPPET = [("python", '''import gymnasium as gym
import deepgym_envs

envs = gym.make_vec("deepgym/SWE-v0", num_envs=4, vectorization_mode="async", reward="outcome")
obs, infos = envs.reset(seed=0)
obs, rewards, terminated, truncated, infos = envs.step([{"name": "view", "arguments": {"path": "."}}] * 4)
envs.close()

env = gym.make("deepgym/SWE-v0", max_episode_steps=10, reward="outcome")
print(env.spec.max_episode_steps)  # 10: the TimeLimit's; its truncated step still carries info["verdict"]
env.close()
''')]


@requires_namespace
def test_the_readme_vector_env_snippet_runs(capsys):
    [(lang, code)] = readme_blocks("Gymnasium vector envs", VECTOR_SNIPPET)
    assert lang == "python"
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own code
    assert capsys.readouterr().out.strip() == "10"
