"""deepgym_envs: Gymnasium-style multi-turn environments for coding agents.

>>> import gymnasium as gym, deepgym_envs
>>> env = gym.make("deepgym/SWE-v0")              # built-in tasks, default sandbox
>>> obs, info = env.reset(seed=0)                 # or options={"task_id": "..."}

Importing this package registers the environments and does nothing else.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

from deepgym_envs.actions import ToolCall, parse_action
from deepgym_envs.batch import run_batch
from deepgym_envs.env import SandboxConfig
from deepgym_envs.errors import (DeepgymError, InfrastructureError, SandboxError, SandboxUnavailable,
                                 TaskFormatError, ToolError, UnknownTaskError)
from deepgym_envs.grading import Verdict, grade
from deepgym_envs.rewards import RewardConfig
from deepgym_envs.sandbox import ExecResult, Sandbox, SandboxLimits, make_sandbox
from deepgym_envs.tasks import Task, load_tasks

__version__ = "0.1.0"

#: Environment ids this package registers, with the keyword arguments each one fixes.
ENV_IDS = {
    "deepgym/SWE-v0": {},
    "deepgym/SWE-Bash-v0": {"toolset": "bash"},  # mini-swe-agent style: one bash tool plus submit
}

for _env_id, _kwargs in ENV_IDS.items():
    if _env_id not in gym.registry:
        # No passive checker: Gymnasium's marks reset as checked before the env's reset returns, so
        # after a first reset that raised (an unknown task id) the next step unpacked None. The same
        # checks run in the tests (gymnasium.utils.env_checker.check_env).
        # The budget is the env's own max_steps (0 = none), not a registered TimeLimit that would cut
        # max_steps=100 or 0 short; GradeOnTruncation reports it as spec.max_episode_steps and grades
        # a step that gym.make(..., max_episode_steps=N)'s shorter TimeLimit ends first.
        gym.register(_env_id, entry_point="deepgym_envs.env:SWEEnv", kwargs=_kwargs,
                     disable_env_checker=True, order_enforce=True,
                     additional_wrappers=(WrapperSpec("GradeOnTruncation", "deepgym_envs.wrappers:GradeOnTruncation",
                                                      {}),))
if "deepgym/Remote-v0" not in gym.registry:  # an env served by `deepgym serve` (needs the serve extra)
    gym.register("deepgym/Remote-v0", entry_point="deepgym_envs.serve.client:RemoteEnv", disable_env_checker=True)
if "deepgym/GridNav-v0" not in gym.registry:  # a small multi-turn env the RLOO trainer learns from scratch
    gym.register("deepgym/GridNav-v0", entry_point="deepgym_envs.gridnav:GridNavEnv")

__all__ = ["DeepgymError", "ENV_IDS", "ExecResult", "InfrastructureError", "RewardConfig", "Sandbox",
           "SandboxConfig", "SandboxError", "SandboxLimits", "SandboxUnavailable", "Task", "TaskFormatError", "ToolCall", "ToolError",
           "UnknownTaskError", "Verdict", "grade", "load_tasks", "make_sandbox", "parse_action", "run_batch"]
