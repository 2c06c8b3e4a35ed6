"""``deepgym/SWE-v0``: the Gymnasium contract, actions, rewards, budgets and resets over a tiny task."""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pytest
from _fixtures import BUGGY_LINE, FIXED_LINE, TASK_ID, needs_namespace, task_row, tool, write_task_file
from gymnasium.utils.env_checker import check_env

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs.env import ResetNeeded, SWEEnv
from deepgym_envs.errors import UnknownTaskError
from deepgym_envs.rewards import RewardConfig
from deepgym_envs.tools import SCHEMAS

pytestmark = needs_namespace

OTHER_IDS = ("wordy__parity-002", "wordy__parity-003", "wordy__parity-004")


@pytest.fixture(scope="module")
def wordy_env_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("wordy_env")
    single = write_task_file(root / "taskset")
    several = write_task_file(root / "taskset", task_row(), *(task_row(instance_id=i) for i in OTHER_IDS),
                              name="several.jsonl")
    return single, several, root / "cache"


@pytest.fixture
def wordy_jsonl(wordy_env_dirs, monkeypatch):
    single, _, cache = wordy_env_dirs
    monkeypatch.setenv("DEEPGYM_CACHE", str(cache))
    return single


@pytest.fixture
def wordy_multi_jsonl(wordy_env_dirs, monkeypatch):
    _, several, cache = wordy_env_dirs
    monkeypatch.setenv("DEEPGYM_CACHE", str(cache))
    return several


@pytest.fixture
def wordy_env(wordy_jsonl):
    # outcome mode: rewards are exactly penalties plus the final verdict (shaping has its own tests)
    env = SWEEnv(wordy_jsonl, reward="outcome")
    yield env
    env.close()


def names(schemas: list[dict]) -> list[str]:
    return [s["function"]["name"] for s in schemas]


# -- Gymnasium contract --------------------------------------------------------------------------

def test_check_env_passes(wordy_jsonl):
    env = gym.make("deepgym/SWE-v0", tasks=str(wordy_jsonl))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env.unwrapped)
        complaints = [str(w.message) for w in caught if "gymnasium" in w.filename.replace("\\", "/")]
        assert not complaints
    finally:
        env.close()


def test_gym_make_runs_an_episode_from_a_jsonl_file(wordy_jsonl):
    env = gym.make("deepgym/SWE-v0", tasks=str(wordy_jsonl), max_steps=10)
    try:
        obs, info = env.reset(seed=0)
        assert "is_even(4) returns False" in obs and "/testbed" in obs
        assert info["task_id"] == TASK_ID and info["max_steps"] == 10
        obs, reward, terminated, truncated, info = env.step(tool("view", path="src/wordy/core.py"))
        assert BUGGY_LINE.strip() in obs
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["tool_call"] == {"name": "view", "arguments": {"path": "src/wordy/core.py"}, "id": None}
    finally:
        env.close()


def test_info_carries_openai_function_schemas(wordy_env):
    _, info = wordy_env.reset(seed=0)
    assert names(info["tools"]) == ["view", "search", "edit", "run_tests", "bash", "submit"]
    for schema in info["tools"]:
        assert schema["type"] == "function"
        fn = schema["function"]
        assert fn["description"] and fn["parameters"]["type"] == "object"
        assert isinstance(fn["parameters"]["properties"], dict)
    json.dumps(info["tools"])  # what an OpenAI-compatible server receives as `tools`


def test_reset_seed_chooses_tasks_deterministically(wordy_multi_jsonl):
    a, b = SWEEnv(wordy_multi_jsonl), SWEEnv(wordy_multi_jsonl)
    try:
        picks_a = [a.reset(seed=s)[1]["task_id"] for s in range(8)]
        picks_b = [b.reset(seed=s)[1]["task_id"] for s in range(8)]
        assert picks_a == picks_b
        assert len(set(picks_a)) > 1  # the seed really chooses
        assert a.reset(seed=5)[0] == b.reset(seed=5)[0]
    finally:
        a.close()
        b.close()


def test_reset_option_task_id_and_constructor_task_id(wordy_multi_jsonl):
    env = SWEEnv(wordy_multi_jsonl)
    try:
        for task_id in OTHER_IDS:
            assert env.reset(seed=0, options={"task_id": task_id})[1]["task_id"] == task_id
    finally:
        env.close()
    pinned = SWEEnv(wordy_multi_jsonl, task_id=OTHER_IDS[1])
    try:
        assert {pinned.reset(seed=s)[1]["task_id"] for s in range(4)} == {OTHER_IDS[1]}
    finally:
        pinned.close()


def test_unknown_task_id_suggests_the_closest(wordy_env, wordy_jsonl):
    with pytest.raises(UnknownTaskError, match=r"'wordy__parity-01'.*Did you mean wordy__parity-001"):
        wordy_env.reset(options={"task_id": "wordy__parity-01"})
    with pytest.raises(UnknownTaskError, match="Did you mean"):
        SWEEnv(wordy_jsonl, task_id="wordy_parity-001")


def test_step_before_reset_and_after_the_end_raises(wordy_env):
    with pytest.raises(ResetNeeded, match="call reset"):
        wordy_env.step(tool("submit"))
    wordy_env.reset(seed=0)
    wordy_env.step(tool("submit"))
    with pytest.raises(ResetNeeded):
        wordy_env.step(tool("view", path="."))


# -- actions and penalties -----------------------------------------------------------------------

@pytest.mark.parametrize("action", [
    "I will now fix the bug.",                                           # no tool call
    '<tool_call>{"name": "view", "arguments": {"path": }</tool_call>',   # bad JSON
    tool("teleport", to="prod"),                                         # unknown tool
    tool("view"),                                                        # missing argument
    tool("view", path="../../etc/passwd"),                               # outside the workspace
    {"name": "bash", "arguments": {"command": 5}},                       # wrong type
    12345,                                                               # not an action at all
])
def test_invalid_action_is_an_error_observation_with_a_penalty(wordy_env, action):
    wordy_env.reset(seed=0)
    obs, reward, terminated, truncated, info = wordy_env.step(action)
    assert obs.startswith("Error: ")
    assert reward == pytest.approx(-0.05)
    assert info["invalid_action"] is True and info["reward_components"]["invalid_action"] == pytest.approx(-0.05)
    assert not terminated and not truncated and "verdict" not in info
    # the episode goes on
    obs, reward, *_ = wordy_env.step(tool("bash", command="echo still here"))
    assert obs == "still here" and reward == 0.0


def test_penalty_is_configurable(wordy_jsonl):
    env = SWEEnv(wordy_jsonl, reward=RewardConfig(mode="outcome", invalid_action_penalty=0.0))
    try:
        env.reset(seed=0)
        obs, reward, *_, info = env.step("no tool call here")
        assert obs.startswith("Error:") and reward == 0.0 and info["invalid_action"] is True
    finally:
        env.close()


def test_openai_tool_call_actions_are_accepted(wordy_env):
    wordy_env.reset(seed=0)
    obs, reward, _, _, info = wordy_env.step({"id": "call_1", "type": "function", "function": {
        "name": "search", "arguments": json.dumps({"pattern": "def is_even"})}})
    assert obs == "src/wordy/core.py:6: def is_even(n):"
    assert info["tool_call"]["id"] == "call_1" and info["invalid_action"] is False and reward == 0.0


def test_run_tests_results_are_in_info(wordy_env):
    wordy_env.reset(seed=0)
    *_, info = wordy_env.step(tool("run_tests"))
    assert info["test_results"] == {"tests/test_core.py::test_shout": "passed",
                                    "tests/test_core.py::test_shout_empty": "passed"}


# -- the end of an episode -----------------------------------------------------------------------

def test_submit_at_base_state_is_graded_unresolved(wordy_env):
    wordy_env.reset(seed=0)
    obs, reward, terminated, truncated, info = wordy_env.step(tool("submit"))
    assert obs == "submitted" and terminated and not truncated
    verdict = info["verdict"]
    assert verdict["status"] == "unresolved"
    assert verdict["tests"]["tests/test_core.py::test_is_even"] == "failed"
    assert verdict["fail_to_pass"] == {"passed": 0, "total": 1}
    assert verdict["pass_to_pass"] == {"passed": 2, "total": 2}
    assert info["reward_components"]["outcome"] == 0.0 and reward == 0.0
    assert info["masked"] is False


def test_fixing_the_bug_then_submitting_earns_the_outcome_reward(wordy_env):
    wordy_env.reset(seed=0)
    obs, reward, *_ = wordy_env.step(tool("edit", command="str_replace", path="src/wordy/core.py",
                                          old_str="n % 2 == 1", new_str="n % 2 == 0"))
    assert "n % 2 == 0" in obs and reward == 0.0
    obs, reward, terminated, truncated, info = wordy_env.step(tool("submit"))
    assert terminated and not truncated
    assert info["verdict"]["status"] == "resolved"
    assert info["verdict"]["tests"] == {"tests/test_core.py::test_is_even": "passed",
                                        "tests/test_core.py::test_shout": "passed",
                                        "tests/test_core.py::test_shout_empty": "passed"}
    assert info["reward_components"]["outcome"] == 1.0 and reward == 1.0
    assert wordy_env.verdict is not None and wordy_env.verdict.resolved


def test_default_env_pays_the_outcome_for_a_fix(wordy_jsonl):
    env = gym.make("deepgym/SWE-v0", tasks=str(wordy_jsonl))
    try:
        env.reset(seed=0)
        env.step(tool("edit", command="str_replace", path="src/wordy/core.py", old_str="== 1", new_str="== 0"))
        _, reward, terminated, _, info = env.step(tool("submit"))
        assert terminated and info["verdict"]["status"] == "resolved"
        components = info["reward_components"]
        assert components["outcome"] == 1.0
        assert reward == pytest.approx(sum(components.values()))
    finally:
        env.close()


def test_step_budget_truncates_and_still_grades(wordy_jsonl):
    env = SWEEnv(wordy_jsonl, max_steps=2, reward="outcome")
    try:
        env.reset(seed=0)
        _, _, terminated, truncated, info = env.step(tool("edit", command="str_replace", path="src/wordy/core.py",
                                                         old_str="== 1", new_str="== 0"))
        assert not terminated and not truncated and "verdict" not in info
        obs, reward, terminated, truncated, info = env.step(tool("view", path="README.md"))
        assert truncated and not terminated
        assert "[step budget of 2 reached" in obs
        assert info["verdict"]["status"] == "resolved"  # the final state is graded, not thrown away
        assert info["reward_components"]["outcome"] == 1.0 and reward == 1.0
        with pytest.raises(ResetNeeded):
            env.step(tool("submit"))
    finally:
        env.close()


def test_reset_restores_the_pristine_tree(wordy_env):
    wordy_env.reset(seed=0, options={"task_id": TASK_ID})
    wordy_env.step(tool("edit", command="str_replace", path="src/wordy/core.py", old_str="== 1", new_str="== 0"))
    wordy_env.step(tool("bash", command="rm README.md && echo junk > new.txt"))
    assert wordy_env.sandbox.diff()
    wordy_env.reset(seed=1, options={"task_id": TASK_ID})
    assert wordy_env.sandbox.diff() == ""
    obs, *_ = wordy_env.step(tool("view", path="src/wordy/core.py", view_range=[8, 8]))
    assert obs.splitlines()[1] == "     8\t" + BUGGY_LINE.rstrip("\n")
    obs, *_ = wordy_env.step(tool("bash", command="ls"))
    assert "README.md" in obs.split() and "new.txt" not in obs.split()
    # and a fresh episode is graded on its own state: the fix from the last episode is gone
    *_, info = wordy_env.step(tool("submit"))
    assert info["verdict"]["status"] == "unresolved"
    assert FIXED_LINE not in wordy_env.sandbox.read_file("src/wordy/core.py").decode()


def test_render_ansi_shows_the_last_observation(wordy_jsonl):
    env = SWEEnv(wordy_jsonl, render_mode="ansi")
    try:
        obs, _ = env.reset(seed=0)
        assert env.render() == obs
        obs, *_ = env.step(tool("bash", command="echo rendered"))
        assert env.render() == "rendered"
    finally:
        env.close()
        env.close()  # idempotent


def test_swe_bash_v0_only_has_bash_and_submit(wordy_jsonl):
    env = gym.make("deepgym/SWE-Bash-v0", tasks=str(wordy_jsonl))
    try:
        obs, info = env.reset(seed=0)
        assert names(info["tools"]) == ["bash", "submit"]
        assert info["tools"] == [SCHEMAS["bash"], SCHEMAS["submit"]]
        assert "(bash, submit)" in obs
        obs, reward, terminated, _, info = env.step(tool("view", path="src/wordy/core.py"))
        assert obs == "Error: unknown tool 'view'; available: bash, submit"
        assert reward == pytest.approx(-0.05) and info["invalid_action"] and not terminated
        obs, *_ = env.step(tool("bash", command="grep -n 'n % 2' src/wordy/core.py"))
        assert obs == "8:" + BUGGY_LINE.rstrip("\n")
    finally:
        env.close()
