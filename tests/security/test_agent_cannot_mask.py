"""Class G, from the agent's side: nothing the agent sends or writes turns its 0 into ``no_verdict``.

A masked episode is dropped by the trainer, so a policy that can mask its failures never learns
from them and is paid for finding the trick. Before the fix, a ``bash`` command longer than the
kernel's per-argument limit came back as "the sandbox failed" (``masked=True``), and a change that
makes the hidden tests hang came back ``no_verdict`` ("grading timed out").
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs import grade
from tests.conftest import requires_namespace
from tests.security._attack import patch_appending

pytestmark = requires_namespace


def test_an_overlong_bash_command_is_an_error_observation_not_a_masked_episode():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("deepgym/SWE-v0", reward="outcome")
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step(
            {"name": "bash", "arguments": {"command": "echo " + "x" * 200_000}})
        assert obs.startswith("Error:") and "too long" in obs
        assert not terminated and info["invalid_action"]
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
        assert terminated and info["masked"] is False and info["verdict"]["status"] == "unresolved"
    finally:
        env.close()


@pytest.mark.slow
def test_a_change_that_hangs_the_hidden_tests_is_unresolved_not_masked(toy_task):
    hang = patch_appending(toy_task, "src/calc/ops.py", "import time\ntime.sleep(3600)\n")
    verdict = grade(toy_task, hang, timeout=15)
    assert verdict.status == "unresolved", verdict.reason
    assert not verdict.masked
    assert "longer than" in verdict.reason


def test_odd_input_and_odd_files_are_error_observations():
    """A NUL byte in a command (env.step raised ValueError) and a FIFO where a file should be
    (view and edit blocked the host forever) come back as errors the agent can read."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("deepgym/SWE-v0", reward="outcome")
    try:
        env.reset(seed=0)
        obs, *_ = env.step({"name": "bash", "arguments": {"command": "echo a\x00b"}})
        assert obs.startswith("Error:") and "NUL" in obs
        env.step({"name": "bash", "arguments": {"command": "mkfifo /testbed/pipe"}})
        obs, *_ = env.step({"name": "view", "arguments": {"path": "pipe"}})
        assert obs.startswith("Error:") and "not a regular file" in obs
        obs, *_ = env.step({"name": "edit", "arguments": {"command": "str_replace", "path": "pipe",
                                                          "old_str": "a", "new_str": "b"}})
        assert obs.startswith("Error:")
    finally:
        env.close()
