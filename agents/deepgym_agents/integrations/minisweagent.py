"""mini-swe-agent on DeepGym: its agents run their bash commands in our sandbox, and what they
submit is graded by the task's hidden tests.

    from minisweagent.agents.default import DefaultAgent
    from deepgym_agents.integrations.minisweagent import DeepGymEnvironment

    with DeepGymEnvironment(task_id="deepgym__tabkit-001") as env:
        agent = DefaultAgent(model, env, **agent_config)        # any mini-swe-agent model
        result = agent.run(env.task.problem_statement)
    result["verdict"]["status"]                                 # "resolved" | "unresolved" | "no_verdict"

The class implements mini-swe-agent's ``Environment`` protocol (``execute``, ``get_template_vars``,
``serialize``) over ``deepgym/SWE-Bash-v0``: every command is one ``bash`` step of that environment
(so step budget, process rewards and limits are the environment's), and a command whose output
starts with mini-swe-agent's ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` line submits. Submitting
grades the *sandbox's* state, not the text the agent printed after the marker (a patch file it
wrote is just a file): ``submission`` in the exit message is the workspace's diff, and ``verdict``
is the hidden tests' verdict. When the environment's step budget runs out, the agent stops with
``LimitsExceeded`` and the final state is graded all the same.

mini-swe-agent's config files can name it (``environment_class:
deepgym_agents.integrations.minisweagent.DeepGymEnvironment``, the keyword arguments beside it).
Close it (or use ``with``): it owns a sandbox.
"""

from __future__ import annotations

import platform
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import gymnasium as gym

import deepgym_envs  # noqa: F401  (registers the environment ids)
from deepgym_envs.env import SWEEnv
from deepgym_envs.errors import DeepgymError

try:
    from minisweagent.exceptions import LimitsExceeded, Submitted
except ImportError as exc:  # pragma: no cover - depends on the optional install
    raise ImportError(f"the mini-swe-agent adapter needs mini-swe-agent ({exc}); "
                      "install it: pip install 'deepgym-envs[integrations]'") from None

#: The line mini-swe-agent's prompts tell the model to print first when it is done.
SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


@dataclass
class DeepGymEnvironmentConfig:
    task_id: str
    """The task to run (``deepgym tasks list`` shows them)."""
    tasks: str = "builtin"
    """The task set: ``builtin`` or a SWE-bench-style JSONL file or folder."""
    env_id: str = "deepgym/SWE-Bash-v0"
    """The environment the commands run in; its ``bash`` and ``submit`` tools are used."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """More ``gym.make`` arguments (``sandbox``, ``reward``, ``max_steps``, ...)."""
    timeout: int = 60
    """Seconds one command may run (mini-swe-agent's ``timeout``; the sandbox caps it at 600)."""
    seed: int | None = None
    """The environment's reset seed."""


class DeepGymEnvironment:
    """A mini-swe-agent ``Environment`` backed by one DeepGym episode (see the module docstring)."""

    def __init__(self, *, config_class: type = DeepGymEnvironmentConfig, **kwargs: Any) -> None:
        self.config = config_class(**kwargs)
        self.env = gym.make(self.config.env_id, tasks=self.config.tasks, **self.config.env_kwargs)
        try:
            _, info = self.env.reset(seed=self.config.seed, options={"task_id": self.config.task_id})
        except BaseException:
            self.env.close()
            raise
        self.swe = cast(SWEEnv, self.env.unwrapped)
        assert self.swe.task is not None  # reset chose it
        self.task = self.swe.task
        self.workdir: str = info["workdir"]
        self.rewards: list[float] = []
        """The environment's reward for each command (and for the submit)."""
        self.verdict: dict[str, Any] | None = None
        """The hidden tests' verdict once the episode ended (``Verdict.to_dict()``)."""

    # -- mini-swe-agent's Environment protocol ------------------------------------------------------
    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        """Run ``action["command"]`` in the sandbox; raises ``Submitted`` / ``LimitsExceeded`` at the end."""
        if self.verdict is not None:
            raise DeepgymError("the episode is over: this environment was already graded")
        command = action.get("command", "")
        if cwd:
            command = f"cd {shlex.quote(cwd)} && {command}"
        obs, reward, terminated, truncated, info = self.env.step(
            {"name": "bash", "arguments": {"command": command, "timeout": timeout or self.config.timeout}})
        self.rewards.append(float(reward))
        returncode = info.get("exit_code", -1)
        output = {"output": obs, "returncode": returncode,
                  "exception_info": "Error: the sandbox failed" if "infrastructure_error" in info else ""}
        if terminated or truncated:  # a sandbox failure or the step budget: graded already
            self._end(info, "LimitsExceeded" if truncated else "InfrastructureError", LimitsExceeded)
        lines = obs.lstrip().splitlines()
        if lines and lines[0].strip() == SUBMIT_MARKER and returncode == 0:
            _, reward, _, _, info = self.env.step({"name": "submit", "arguments": {}})
            self.rewards.append(float(reward))
            self._end(info, "Submitted", Submitted)
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        """What mini-swe-agent's prompt templates may name: the config, the task, the platform."""
        return {**asdict(self.config), **platform.uname()._asdict(), "cwd": self.workdir,
                "task": self.task.problem_statement, "problem_statement": self.task.problem_statement, **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {
            "config": {"environment": asdict(self.config),
                       "environment_type": f"{type(self).__module__}.{type(self).__name__}"},
            "deepgym": {"task_id": self.task.instance_id, "rewards": self.rewards, "verdict": self.verdict},
        }}

    # -- lifetime ----------------------------------------------------------------------------------
    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> "DeepGymEnvironment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _end(self, info: dict[str, Any], status: str, exit_with: type[Exception]) -> None:
        self.verdict = info.get("verdict")
        try:
            patch = self.swe.sandbox.diff()
        except DeepgymError:  # the sandbox died; the verdict already says no_verdict
            patch = ""
        raise exit_with({"role": "exit", "content": patch,
                         "extra": {"exit_status": status, "submission": patch, "verdict": self.verdict,
                                   "episode_return": sum(self.rewards)}})
