"""``deepgym/SWE-v0``: one repository task in a sandbox, as a Gymnasium environment.

>>> import gymnasium as gym, deepgym_envs
>>> env = gym.make("deepgym/SWE-v0")
>>> obs, info = env.reset(seed=0)
>>> obs, reward, terminated, truncated, info = env.step(
...     '<tool_call>{"name": "view", "arguments": {"path": "."}}</tool_call>')
>>> env = gym.make("deepgym/SWE-v0", reward="outcome",               # doctest: +SKIP
...                sandbox=SandboxConfig("docker", grading_timeout=600))

Observations and actions are text. ``info`` carries the tool schemas (OpenAI function format),
the reward components, test results when tests ran, the verdict at the end, and (with
``record_timing=True``) timings.
``terminated`` means the agent submitted; ``truncated`` means the step budget ran out; either way
the final state is graded by the hidden tests. With ``reward=RewardConfig(shaping="async")`` the
gradings behind the shaping reward run in the background and are paid on later steps, each naming
its step in ``info["deferred_rewards"]`` (:mod:`deepgym_envs.shaping`).
"""

from __future__ import annotations

import difflib
import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym

from deepgym_envs.actions import parse_action
from deepgym_envs.errors import DeepgymError, InfrastructureError, ToolError, agent_shaped
from deepgym_envs.gate import gate
from deepgym_envs.grading import GRADING_TIMEOUT, VERDICTS, Verdict, grade_sandbox, workspace_patch
from deepgym_envs.pyenv import sandbox_spec
from deepgym_envs.defaults import MAX_STEPS
from deepgym_envs.rewards import SHAPING, RewardConfig, RewardModel, potential
from deepgym_envs.sandbox import BACKENDS, Sandbox, SandboxLimits, make_sandbox
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.shaping import BackgroundGrader
from deepgym_envs.tasks import Task, find_task, load_tasks
from deepgym_envs.tools import TOOLSETS, Tools, schemas_for
from deepgym_envs.trees import pristine_tree

# The spaces live in deepgym_envs.spaces (with their shared-memory layout for AsyncVectorEnv);
# imported here too because callers reach them through this module.
from deepgym_envs.spaces import MAX_TEXT, ActionText, AnyText  # noqa: E402,F401


class ResetNeeded(DeepgymError):
    """step() was called before reset() or after the episode ended."""


PROMPT = """You are working in a Python repository at {workdir}. Resolve the issue below by changing the
repository's source code so that the issue is fixed; hidden tests will check your change.

<issue>
{problem}
</issue>

Use the tools ({tools}) one call per turn. Tests you add are not graded, and changes to test files or
test configuration are discarded before grading. Call submit when you are done."""


@dataclass(frozen=True)
class SandboxConfig:
    """Where SWE-v0's episodes run and how long their grading may take; ``SWEEnv(sandbox="docker")``
    is short for ``SandboxConfig("docker")``. What one task needs of its sandbox (its Python
    environment) is that task's own :class:`~deepgym_envs.sandbox.SandboxSpec`."""

    backend: str | None = None
    """``namespace`` | ``local`` | ``docker``; None = docker for a task taken from an image, else
    :func:`~deepgym_envs.sandbox.default_backend`."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    """Each sandbox's resource limits (CPU time, memory, disk, processes)."""
    grading_timeout: float = GRADING_TIMEOUT
    """Seconds the hidden-test run may take at most. A task whose gold run was timed
    (``Task.gold_seconds``) is cut off sooner, at a deadline derived from that time
    (:func:`~deepgym_envs.grading.grading_deadline`); past it the change is ``unresolved``."""
    warm_tests: bool = True
    """Serve ``run_tests`` from a pre-imported pytest server inside the sandbox, ``bash`` from a
    resident command server (no bubblewrap start per step), and grade in pooled views with their
    own servers (same results as cold runs, without start-up; namespace backend). The views are
    closed by ``SWEEnv.close()``."""

    def __post_init__(self) -> None:
        if self.backend is not None:
            _choice("sandbox", self.backend, BACKENDS)
        if not isinstance(self.limits, SandboxLimits):
            raise DeepgymError(f"limits must be a SandboxLimits, not {type(self.limits).__name__}")
        timeout = self.grading_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise DeepgymError(f"grading_timeout={timeout!r}: give the seconds the hidden tests may run (> 0)")
        if not isinstance(self.warm_tests, bool):
            raise DeepgymError(f"warm_tests={self.warm_tests!r}: True or False")

    @classmethod
    def of(cls, value: "SandboxConfig | str | None") -> "SandboxConfig":
        """A config as given, or a backend name (None: the default) with the other options at theirs."""
        if isinstance(value, SandboxConfig):
            return value
        if value is None or isinstance(value, str):
            return cls(backend=value)
        raise DeepgymError(f"sandbox must be a backend name ({', '.join(BACKENDS)}) or a SandboxConfig, "
                           f"not {type(value).__name__}")


class SWEEnv(gym.Env[str, str]):
    """A multi-turn coding task: view, search, edit, run tests, bash, submit."""

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(self, tasks: str | Path | list[Task] = "builtin", *, task_id: str | None = None,
                 toolset: str = "default", max_steps: int = MAX_STEPS, reward: RewardConfig | str = RewardConfig(),
                 sandbox: SandboxConfig | str | None = None, record_timing: bool = False,
                 render_mode: str | None = None, validate_first: bool | None = None) -> None:
        """
        Args:
            tasks: ``"builtin"``, a SWE-bench-style ``.jsonl`` file or directory, or Task objects.
            task_id: always use this task (otherwise ``reset`` picks one with its seed).
            toolset: ``"default"`` (view/search/edit/run_tests/bash/submit) or ``"bash"``.
            max_steps: step budget; the final state is graded when it runs out. 0 = no limit.
            reward: a :class:`~deepgym_envs.rewards.RewardConfig` (mode, penalty, λ, localisation
                bonus, gate), or just its mode: ``outcome`` | ``process`` | ``gated``.
            sandbox: a :class:`SandboxConfig` (backend, limits, grading timeout, warm tests), or just
                its backend name; None = the default backend.
            record_timing: add wall-clock timings to ``info["timing"]``. Off by default because
                Gymnasium's checker requires ``info`` to be the same for the same seed and actions.
            validate_first: an imported task that does not validate ends with ``no_verdict`` (masked,
                the validation's reason), never a graded 0 (:mod:`deepgym_envs.gate`). None: on unless
                ``$DEEPGYM_VALIDATE_FIRST=0``; False: grade it anyway.
        """
        _check_arguments(toolset=toolset, max_steps=max_steps, render_mode=render_mode)
        reward, sandbox = RewardConfig.of(reward), SandboxConfig.of(sandbox)
        self.tasks = list(tasks) if isinstance(tasks, list) else load_tasks(tasks)
        if not self.tasks:
            where = "" if isinstance(tasks, list) else f" {tasks}"
            raise DeepgymError(f"the task set{where} holds no tasks; give a task file with at least one row, "
                               "or 'builtin'")
        if task_id is not None:
            find_task(self.tasks, task_id)
        self.default_task_id = task_id
        self.sandbox_config = sandbox
        self.backend, self.limits = sandbox.backend, sandbox.limits
        self.toolset = toolset
        self.max_steps = max_steps
        self.rewards = RewardModel(reward)
        self.render_mode = render_mode
        self.record_timing = record_timing
        self.validate_first = validate_first
        self._views = ViewPool() if sandbox.warm_tests else None
        self._grader = BackgroundGrader()
        """async shaping: this env's gradings in flight (a worker thread only once one is submitted)."""
        self.tool_schemas = schemas_for(toolset)
        self.observation_space = AnyText(MAX_TEXT, min_length=0)
        self.action_space = ActionText(MAX_TEXT, min_length=0)
        self.task: Task | None = None
        self._sandbox: Sandbox | None = None
        self._sandbox_task: str | None = None
        self._tools: Tools | None = None
        self._steps = 0
        self._done = True
        self._last_obs = ""
        self._graded_patch = ""
        self.verdict: Verdict | None = None

    # -- Gymnasium API -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        started = time.perf_counter()
        options = options or {}
        task_id = options.get("task_id", self.default_task_id)
        if task_id is not None:
            task = find_task(self.tasks, task_id)
        else:
            task = self.tasks[int(self.np_random.integers(len(self.tasks)))]
        self.task = task
        if self._sandbox is not None and self._sandbox_task == task.instance_id:
            self._sandbox.reset()
        else:
            self._close_sandbox()
            self._sandbox = make_sandbox(pristine_tree(task), self.backend, self.limits, spec=sandbox_spec(task, self.backend))
            self._sandbox_task = task.instance_id
        self._tools = Tools(self._sandbox, self.toolset, test_args=task.pytest_args,
                            warm_tests=self.sandbox_config.warm_tests)
        self._steps, self._done, self.verdict = 0, False, None
        self._graded_patch = ""
        self._grader.discard()  # an abandoned episode's gradings: never paid into this one
        if self._async:
            self.rewards.reset(None)  # Φ(initial) arrives as the grading of "step 0"
            self._grader.submit(0, functools.partial(self._grade_progress, task, ""))
        else:
            self.rewards.reset(self._potential(task, "") if self.rewards.config.shaped else None)
        names = ", ".join(s["function"]["name"] for s in self.tool_schemas)
        obs = PROMPT.format(workdir=self._sandbox.workdir, problem=task.problem_statement.strip(), tools=names)
        self._last_obs = obs
        if self.render_mode == "human":
            self.render()
        info = {"task_id": task.instance_id, "tools": self.tool_schemas, "workdir": self._sandbox.workdir,
                "max_steps": self.max_steps}
        if self.record_timing:
            info["timing"] = {"reset": time.perf_counter() - started}
        return obs, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._done or self._tools is None:
            raise ResetNeeded("the episode is over (or never started): call reset() first")
        started = time.perf_counter()
        self._steps += 1
        info: dict[str, Any] = {"step": self._steps}
        invalid, submitted, changed, viewed_gold = False, False, False, False
        try:
            with agent_shaped("the action"):  # the agent's action and workspace: a crash over them is the agent's
                call = parse_action(action)
                _check_unicode(call.arguments)
                info["tool_call"] = call.to_dict()
                result = self._tools(call)
            obs, submitted, changed = result.output, result.submitted, result.changed_workspace
            info.update(result.info)
            viewed_gold = call.name == "view" and _normpath(call.arguments.get("path")) in self.task.gold_files
        except ToolError as exc:
            obs, invalid = f"Error: {exc}", True
        except InfrastructureError as exc:  # the sandbox failed, not the agent
            obs = f"Error: the sandbox failed: {exc}"
            info["infrastructure_error"] = str(exc)
        info["invalid_action"] = invalid
        tool_time = time.perf_counter() - started
        phi = self._progress(info) if changed and self.rewards.config.shaped else None
        components = self.rewards.step(invalid=invalid, phi=phi, viewed_gold_file=viewed_gold)
        terminated = submitted or "infrastructure_error" in info
        truncated = not terminated and bool(self.max_steps) and self._steps >= self.max_steps
        if self._async:  # the last step waits for every grading: the return is sync mode's
            self._deliver(info, components, wait=terminated or truncated)
        if terminated or truncated:
            verdict = self._finish(info.get("infrastructure_error"))
            final = self.rewards.finish(verdict, potential(verdict, self.rewards.config.p2p_weight))
            for name, value in final.items():  # shaping may gain the final correction
                components[name] = components.get(name, 0.0) + value
            info["verdict"] = verdict.to_dict()
            info["masked"] = verdict.masked
            if truncated:
                obs += f"\n[step budget of {self.max_steps} reached; the episode is over]"
        info["reward_components"] = components
        if self.record_timing:
            info["timing"] = {"tool": tool_time, "step": time.perf_counter() - started}
        self._last_obs = obs
        if self.render_mode == "human":
            self.render()
        return obs, self.rewards.total(components), terminated, truncated, info

    def end_episode(self) -> tuple[float, dict[str, Any]]:
        """Grade the episode now: a budget outside this env ran out (a ``TimeLimit`` shorter than
        ``max_steps``; :class:`deepgym_envs.wrappers.GradeOnTruncation` calls this). The final state
        is graded as at the env's own budget. Returns the reward to add to the last step's and the
        keys its ``info`` gains (``verdict``, ``masked``, the final ``reward_components``)."""
        if self._done or self.task is None:
            return 0.0, {}
        extra: dict[str, Any] = {}
        components: dict[str, float] = {}
        if self._async:  # pending shaping is paid first, as on the env's own last step
            self._deliver(extra, components, wait=True)
        verdict = self._finish(None)
        for name, value in self.rewards.finish(verdict, potential(verdict, self.rewards.config.p2p_weight)).items():
            components[name] = components.get(name, 0.0) + value
        return self.rewards.total(components), {**extra, "verdict": verdict.to_dict(), "masked": verdict.masked,
                                                 "reward_components": components}

    @property
    def _async(self) -> bool:
        return self.rewards.config.shaped and self.rewards.config.shaping == "async"

    def _grade_progress(self, task: Task, patch: str) -> Verdict:
        """The verdict Φ is read from. Touches no env state: async mode runs it on the grader's thread.
        A test selection where the task set has a current test map: the shaping potential needs
        only the tests the change can affect (deepgym_envs.selection); the final verdict never."""
        return VERDICTS.grade(task, patch, backend=self.backend, limits=self.limits,
                              timeout=self.sandbox_config.grading_timeout, views=self._views, select=True)

    def _potential(self, task: Task, patch: str) -> float | None:
        return potential(self._grade_progress(task, patch), self.rewards.config.p2p_weight)

    def _deliver(self, info: dict[str, Any], components: dict[str, float], *, wait: bool) -> None:
        """async mode: pay the shaping of the gradings finished since the last step (all of them, when
        ``wait``) into this step's ``components``, and say in ``info`` which step each belongs to."""
        rewards, parts_of, progress_of = [], [], []
        for graded in self._grader.ready(wait=wait):
            phi = potential(graded.verdict, self.rewards.config.p2p_weight)
            if graded.step == 0:
                self.rewards.phi = phi  # Φ(initial), delivered before any later state's: nothing paid yet
                continue
            progress_of.append((graded.step, _progress_info(graded.verdict, phi)))
            parts = self.rewards.shape(phi)
            if parts:
                components[SHAPING] = components.get(SHAPING, 0.0) + parts[SHAPING]
                rewards.append((graded.step, self.rewards.total(parts)))
                parts_of.append((graded.step, parts))
        info["deferred_rewards"], info["deferred_components"] = rewards, parts_of
        info["deferred_progress"], info["shaping_pending"] = progress_of, self._grader.pending

    def _progress(self, info: dict[str, Any]) -> float | None:
        """Φ of the workspace after a step that may have changed it; None if nothing changed (or, in
        async mode, not known yet: the diff, snapshotted now, is graded in the background)."""
        assert self.task is not None and self._sandbox is not None
        patch = workspace_patch(self.task, self._sandbox)
        if isinstance(patch, Verdict):  # not graded: unreadable (masked), or past the host's bounds (the agent's)
            if patch.masked:
                info["progress_no_verdict"] = patch.reason
                return None
            phi = potential(patch, self.rewards.config.p2p_weight)
            info["progress"] = _progress_info(patch, phi)
            self._graded_patch = None
            return phi
        if patch == self._graded_patch:
            return None
        self._graded_patch = patch
        if self._async:
            self._grader.submit(self._steps, functools.partial(self._grade_progress, self.task, patch))
            return None
        verdict = self._grade_progress(self.task, patch)
        phi = potential(verdict, self.rewards.config.p2p_weight)
        info["progress"] = _progress_info(verdict, phi)
        if phi is None:
            info["progress_no_verdict"] = verdict.reason
        return phi

    def _finish(self, infra_error: str | None) -> Verdict:
        self._done = True
        assert self.task is not None and self._sandbox is not None
        if infra_error:
            self.verdict = Verdict.no_verdict(infra_error)
        else:
            self.verdict = gate(self.task, backend=self.backend, validate_first=self.validate_first) or grade_sandbox(
                self.task, self._sandbox, cache=VERDICTS, backend=self.backend, limits=self.limits,
                timeout=self.sandbox_config.grading_timeout, views=self._views)
        return self.verdict

    def render(self) -> str | None:
        if self.render_mode == "human":  # Gymnasium's convention: shown as it happens, render() returns None
            print(self._last_obs, flush=True)
            return None
        if self.render_mode == "ansi":
            return self._last_obs
        return None

    def close(self) -> None:
        self._grader.close()  # before the views: a running grading gives its view back first
        self._close_sandbox()
        if self._views is not None:
            self._views.close()
        super().close()

    # -- helpers -------------------------------------------------------------------------------
    @property
    def sandbox(self) -> Sandbox:
        """The current episode's sandbox (for inspection and tests)."""
        if self._sandbox is None:
            raise ResetNeeded("no sandbox: call reset() first")
        return self._sandbox

    def _close_sandbox(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
        self._sandbox, self._sandbox_task, self._tools = None, None, None


def _progress_info(verdict: Verdict, phi: float | None) -> dict[str, Any]:
    """``info["progress"]`` of a graded state: Φ and the hidden tests' counts (no ids, no names)."""
    out: dict[str, Any] = {"phi": phi, "fail_to_pass": verdict.fail_to_pass, "pass_to_pass": verdict.pass_to_pass}
    if phi is None:
        out["no_verdict"] = verdict.reason
    return out


def _check_unicode(arguments: dict[str, Any]) -> None:
    """A lone surrogate (JSON's "\\ud800") cannot become a file, an argv or a pattern: the agent's
    mistake, said as one, instead of an encoding error deep inside a tool. Iterative: the
    arguments may nest as deep as the JSON parser allows."""
    stack: list[Any] = [arguments]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ToolError(f"the tool call's text is not valid Unicode: a lone surrogate "
                                f"({value[exc.start]!r}) at position {exc.start} of an argument") from None
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        close = difflib.get_close_matches(str(value), allowed, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise DeepgymError(f"{name}={value!r} is not one of {', '.join(map(str, allowed))}.{hint}")


def _check_arguments(*, toolset: Any, max_steps: Any, render_mode: Any) -> None:
    """Configuration mistakes fail at construction, not at the first ``reset`` minutes later."""
    _choice("toolset", toolset, tuple(TOOLSETS))
    if render_mode is not None:
        _choice("render_mode", render_mode, SWEEnv.metadata["render_modes"])
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
        raise DeepgymError(f"max_steps={max_steps!r}: give a whole number of steps, 0 for no limit")


def _normpath(path: Any) -> str:
    """A tool's path argument as a repository-relative path (for matching against patch paths)."""
    if not isinstance(path, str):
        return ""
    path = path.strip()
    if path.startswith("/testbed/"):
        path = path[len("/testbed/"):]
    return os.path.normpath(path) if path else ""
