"""TRL's ``GRPOTrainer`` on DeepGym environments, two ways.

**rollout_func** (recommended): :class:`DeepGymRollout` runs each batch's episodes through the
reference loop (:func:`deepgym_agents.loop.collect`) with the trainer's own model, so TRL trains on
the token ids the engine produced (never re-tokenised text), with the environment's tokens masked:

    rollout = DeepGymRollout(CollectConfig(env_kwargs={"reward": "process"}, max_steps=8))
    trainer = GRPOTrainer(model, reward_funcs=[episode_return], args=GRPOConfig(...),
                          train_dataset=rollout_dataset(task_ids), processing_class=tokenizer,
                          rollout_func=rollout)
    trainer.train(); rollout.close()

How a :class:`~deepgym_agents.trajectory.Trajectory` maps onto what TRL takes
(``Trajectory.flatten()`` cut after the first prompt):

* ``prompt_ids``: the first prompt (system, tools, task statement), as the loop fed it;
* ``completion_ids``: every later token (completions, tool results, template) in order;
* ``env_mask``: 1 on the tokens the model sampled, 0 on the environment's: TRL's loss and its
  completion-length metrics count only the 1s;
* ``logprobs``: the behaviour logprobs the engine reported (0.0 on environment tokens). TRL reads
  them only for its vLLM importance-sampling correction; otherwise it recomputes them;
* every other key reaches the reward functions, one value per completion: ``episode_return`` (the
  sum of the per-turn rewards: outcome plus shaping plus penalties), ``turn_rewards`` (the list),
  ``verdict`` (``resolved`` / ``unresolved`` / ``no_verdict``), ``masked``, ``task_id``.

What TRL cannot use: per-turn rewards as per-turn credit. GRPO gives one advantage per completion
(the group-normalised sum of the reward functions), so :func:`episode_return` hands TRL the episode's
sum; with the default potential-based shaping that sum telescopes to the outcome plus penalties, so
the shaping changes nothing here (our own RLOO trainer, ``deepgym train``, is the one that assigns
rewards per turn). Masked episodes (``no_verdict``: the harness failed, not the agent) get env_mask
all 0 and reward None: TRL then leaves them out of the group baseline and gives them no advantage.

Each dataset row's prompt is a task id (:func:`rollout_dataset`): ``rollout_func`` receives only the
prompts, and the environment writes the real prompt. TRL repeats each prompt ``num_generations``
times; each repeat is one episode.

**environment_factory**: :class:`SWETools` / :class:`SWEBashTools` are environments whose public
methods are the SWE-v0 tools; TRL's own tool-calling loop drives them and ``get_reward`` grades the
final state with the hidden tests. Rows carry a ``task_id`` (:func:`environment_dataset`). TRL then
tokenises the conversation itself and the reward is the episode return only (no per-turn rewards, no
engine ids); it needs a tokenizer whose chat template TRL can parse tool calls from.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, Callable, Sequence

import gymnasium as gym

import deepgym_envs  # noqa: F401  (registers the environment ids)
from deepgym_agents.config import CollectConfig
from deepgym_agents.envs import LocalEnvPool
from deepgym_agents.llm import LLM, SamplingParams
from deepgym_agents.loop import collect
from deepgym_agents.trajectory import Trajectory
from deepgym_envs.errors import DeepgymError


class DeepGymRollout:
    """A ``rollout_func`` for ``GRPOTrainer``: one reference-loop episode per prompt (a task id)."""

    def __init__(self, config: CollectConfig | None = None, *, llm: Callable[[Any], LLM] | None = None) -> None:
        """
        Args:
            config: how episodes run (environment, step budget, context, concurrency, ``out``).
                ``k`` is ignored (TRL repeats the prompts); temperature and top-p come from the
                trainer, ``params.max_tokens`` is the budget of each turn.
            llm: ``f(trainer) -> LLM`` building the engine for each batch. Default: the trainer's
                own model, unwrapped, sampled by :class:`deepgym_agents.llm.hf.HFBackend` (CPU or one GPU).
        """
        self.config = config or CollectConfig()
        self.make_llm = llm or _trainer_model
        self.pool = LocalEnvPool(self.config.env_id, self.config.gym_kwargs())
        """Environments are reused across batches (a task's sandbox is built once)."""
        self.trajectories: list[Trajectory] = []
        """The last batch's episodes (for logging and tests)."""

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        task_ids = [task_id_of(p) for p in prompts]
        llm = self.make_llm(trainer)
        if getattr(llm, "tokenizer", None) is None:
            raise DeepgymError("DeepGymRollout needs a token-in/token-out LLM (one with a tokenizer): TRL trains "
                               "on the engine's token ids, which a chat backend does not return")
        params = replace(self.config.params, temperature=float(getattr(trainer, "temperature", 1.0)),
                         top_p=float(getattr(trainer, "top_p", 1.0)))
        config = replace(self.config, k=1, params=params, show_progress=False)
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0))
        self.trajectories = collect(llm, task_ids, config, pool=self.pool, policy_version=step)
        return to_trl(self.trajectories, pad_id=_pad_id(llm.tokenizer))

    def close(self) -> None:
        """Close the environments (their sandboxes); the object can be used again afterwards."""
        self.pool.close()


def to_trl(trajectories: Sequence[Trajectory], *, pad_id: int) -> dict[str, list[Any]]:
    """TRL's rollout_func output for these episodes (see the module docstring for the mapping)."""
    out: dict[str, list[Any]] = {key: [] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask",
                                                      "episode_return", "turn_rewards", "verdict", "masked",
                                                      "task_id")}
    for traj in trajectories:
        if traj.turns and traj.metadata.get("ids") != "complete":
            raise DeepgymError(f"episode {traj.episode_id} has ids={traj.metadata.get('ids')!r}; TRL needs every "
                               "token id the engine saw (a token-in/token-out backend)")
        flat = traj.flatten()
        cut = len(traj.turns[0].prompt_ids) if traj.turns else 0
        completion, mask, logps = flat.input_ids[cut:], flat.loss_mask[cut:], flat.behavior_logprobs[cut:]
        if not completion:  # the harness failed before the first turn: one inert token, never trained on
            completion, mask, logps = [pad_id], [0], [0.0]
        if traj.masked:
            mask = [0] * len(mask)
        out["prompt_ids"].append(flat.input_ids[:cut] or [pad_id])
        out["completion_ids"].append(completion)
        out["logprobs"].append(logps)
        out["env_mask"].append(mask)
        out["episode_return"].append(traj.episode_return)
        out["turn_rewards"].append(traj.rewards)
        out["verdict"].append((traj.verdict or {}).get("status", "no_verdict"))
        out["masked"].append(traj.masked)
        out["task_id"].append(traj.task_id)
    return out


def episode_return(completions: list[Any], episode_return: list[float], masked: list[bool],
                   **kwargs: Any) -> list[float | None]:
    """A TRL reward function: the episode's summed per-turn rewards; None (left out) when masked."""
    return [None if m else float(r) for r, m in zip(episode_return, masked)]


def outcome(completions: list[Any], verdict: list[str], **kwargs: Any) -> list[float | None]:
    """A TRL reward function: 1 if the hidden tests resolved the task, 0 if not, None if no verdict."""
    return [None if v == "no_verdict" else float(v == "resolved") for v in verdict]


def task_id_of(prompt: Any) -> str:
    """The task id a prompt names: the prompt itself, or the last message's content."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        prompt = prompt[-1].get("content")
    if not isinstance(prompt, str) or not prompt.strip():
        raise DeepgymError(f"a DeepGymRollout prompt must be a task id (rollout_dataset(task_ids)), not {prompt!r}")
    return prompt.strip()


def rollout_dataset(task_ids: Sequence[str]) -> Any:
    """A ``datasets.Dataset`` for :class:`DeepGymRollout`: one row per task, its prompt the task id."""
    import datasets  # type: ignore[import-untyped]

    return datasets.Dataset.from_dict({"prompt": list(task_ids)})


def environment_dataset(task_ids: Sequence[str]) -> Any:
    """A ``datasets.Dataset`` for ``environment_factory``: an empty user turn the environment's
    ``reset`` fills with the task's prompt, and the ``task_id`` column ``reset`` reads."""
    import datasets  # type: ignore[import-untyped]

    return datasets.Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}] for _ in task_ids],
                                       "task_id": list(task_ids)})


def _trainer_model(trainer: Any) -> LLM:
    from deepgym_agents.llm.hf import HFBackend

    model = trainer.accelerator.unwrap_model(trainer.model)
    return HFBackend(model, trainer.processing_class, model_name=getattr(model.config, "_name_or_path", "") or "trl")


def _pad_id(tokenizer: Any) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


# -- environment_factory ---------------------------------------------------------------------------
class SWEBashTools:
    """``environment_factory`` environment over ``deepgym/SWE-Bash-v0``: tools ``bash`` and ``submit``.

    TRL makes one per rollout and reuses them; :meth:`close_all` closes every one made so far.
    """

    env_id = "deepgym/SWE-Bash-v0"
    _made: list["SWEBashTools"] = []
    _made_lock = threading.Lock()

    def __init__(self, **env_kwargs: Any) -> None:
        self._env = gym.make(self.env_id, **env_kwargs)
        self._done = True
        self._return = 0.0
        self._turn_rewards: list[float] = []
        self._verdict: dict[str, Any] | None = None
        with self._made_lock:
            SWEBashTools._made.append(self)

    @classmethod
    def factory(cls, **env_kwargs: Any) -> Callable[[], "SWEBashTools"]:
        """``environment_factory=SWETools.factory(sandbox=..., reward=...)``."""
        return lambda: cls(**env_kwargs)

    @classmethod
    def close_all(cls) -> None:
        with cls._made_lock:
            made, SWEBashTools._made = SWEBashTools._made, []
        for env in made:
            env._env.close()

    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """TRL calls this with the dataset row; the observation becomes the user turn."""
        obs, _ = self._env.reset(options={"task_id": task_id} if task_id else None)
        self._done, self._return, self._turn_rewards, self._verdict = False, 0.0, [], None
        return obs

    def get_reward(self) -> float | None:
        """The episode return; an episode the model never submitted is submitted now and graded.
        None when the harness failed (no verdict): TRL leaves the rollout out."""
        if not self._done:
            self._step("submit", {})
        if self._verdict is None or self._verdict.get("status") == "no_verdict":
            return None
        return self._return

    def bash(self, command: str) -> str:
        """Run a bash command in the repository (sandboxed, no network).

        Args:
            command: The command line to run.

        Returns:
            The command's output.
        """
        return self._step("bash", {"command": command})

    def submit(self) -> str:
        """Submit the current state of the repository as your solution and end the episode.

        Returns:
            A confirmation.
        """
        return self._step("submit", {})

    def _step(self, name: str, arguments: dict[str, Any]) -> str:
        if self._done:
            return "Error: the episode is over (the solution was submitted)."
        obs, reward, terminated, truncated, info = self._env.step({"name": name, "arguments": arguments})
        self._return += float(reward)
        self._turn_rewards.append(float(reward))
        if terminated or truncated:
            self._done, self._verdict = True, info.get("verdict")
        return obs


class SWETools(SWEBashTools):
    """``environment_factory`` environment over ``deepgym/SWE-v0``: view, search, edit, run_tests,
    bash, submit."""

    env_id = "deepgym/SWE-v0"

    def view(self, path: str, view_range: list[int] | None = None) -> str:
        """Show a file with line numbers, or list a directory (two levels deep).

        Args:
            path: Path relative to the repository root.
            view_range: Optional [start, end] line numbers (1-based, inclusive; end -1 = to the end).

        Returns:
            The file's lines or the directory listing.
        """
        return self._step("view", {"path": path, **({"view_range": view_range} if view_range else {})})

    def search(self, pattern: str, path: str = ".", regex: bool = False) -> str:
        """Search file contents (like grep -rn). Returns up to 100 matching lines.

        Args:
            pattern: Text to find (a Python regular expression if regex is true).
            path: Directory or file to search.
            regex: Treat pattern as a regular expression.

        Returns:
            The matching lines.
        """
        return self._step("search", {"pattern": pattern, "path": path, "regex": regex})

    def edit(self, command: str, path: str, old_str: str = "", new_str: str = "", insert_line: int = 0,
             file_text: str = "") -> str:
        """Edit files: 'str_replace' replaces one unique occurrence of old_str with new_str; 'insert' adds
        new_str after line insert_line (0 = top); 'create' writes file_text to a new file.

        Args:
            command: One of str_replace, insert, create.
            path: The file to edit.
            old_str: str_replace: the exact text to replace.
            new_str: str_replace and insert: the new text.
            insert_line: insert: the line after which to insert.
            file_text: create: the whole file.

        Returns:
            What changed, or why nothing did.
        """
        arguments: dict[str, Any] = {"command": command, "path": path}
        if command == "str_replace":
            arguments.update(old_str=old_str, new_str=new_str)
        elif command == "insert":
            arguments.update(new_str=new_str, insert_line=insert_line)
        elif command == "create":
            arguments.update(file_text=file_text)
        return self._step("edit", arguments)

    def run_tests(self, tests: list[str] | None = None) -> str:
        """Run the repository's tests with pytest: all of them, or a selection.

        Args:
            tests: Optional test files or ids, e.g. ['tests/test_core.py::test_add'].

        Returns:
            pytest's summary.
        """
        return self._step("run_tests", {"tests": tests} if tests else {})
