"""A verl agent loop that runs DeepGym episodes: ``agent_name: deepgym_swe``.

verl (0.9) trains multi-turn agents through agent loops: an ``AgentLoopBase`` subclass whose
``async run(sampling_params, **row)`` talks to verl's LLM servers in token ids and returns an
``AgentLoopOutput``. :class:`DeepGymAgentLoop` is one: each dataset row names a task; the loop
resets a DeepGym environment on it, lets the model act, steps the environment with each completion
(in a worker thread: the sandbox blocks), and returns

* ``prompt_ids`` / ``response_ids``: verl's own Continuous Token stream (its tokenisation of the
  conversation, the engine's sampled ids kept as sampled);
* ``response_mask``: 1 on sampled tokens, 0 on the environment's (all 0 for a masked episode);
* ``response_logprobs``: the engine's, where it reported them;
* ``reward_score``: the episode return (outcome plus shaping plus penalties), which verl places
  on the last token (``rm_scores``), so no reward function is needed;
* ``extra_fields``: ``turn_scores`` (the per-turn rewards, verl's name for them), ``verdict``,
  ``masked``, ``task_id``, ``stop_reason``.

An episode whose response budget (``rollout.response_length``) runs out before the agent submits is
submitted on its behalf and graded as it stands, like the reference loop's ``context_length``.
A masked episode (``no_verdict``: the harness failed) keeps reward 0 and no token in the loss.

Use it by pointing ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` at a file like::

    - name: deepgym_swe
      _target_: deepgym_agents.integrations.verl.DeepGymAgentLoop
      env_id: deepgym/SWE-Bash-v0          # optional; and env_kwargs: {reward: process, ...}

and giving each dataset row ``agent_name: deepgym_swe`` and ``extra_info: {task_id: ...}``
(:func:`dataset_rows`). Importing this module also registers the name in verl's registry.

verl pins its own transformers (``transformers<5.11`` for 0.9.1): install it in an environment of
its own (``pip install verl==0.9.1 cachetools``: 0.9.1 imports cachetools without declaring it;
then this package). Its wheel also installs a top-level ``tests`` package.
"""

from __future__ import annotations

import time
from typing import Any
from uuid import uuid4

import gymnasium as gym

import deepgym_envs  # noqa: F401  (registers the environment ids)
from deepgym_agents.base import tool_call

try:
    from verl.experimental.agent_loop.agent_loop import (  # type: ignore[import-not-found, unused-ignore]
        AgentLoopBase, AgentLoopOutput, register)
except ImportError as exc:  # pragma: no cover - depends on the optional install
    raise ImportError(f"the verl agent loop needs verl ({exc}); install verl==0.9.1 in its own environment "
                      "(it pins transformers<5.11)") from None

AGENT_NAME = "deepgym_swe"


@register(AGENT_NAME)
class DeepGymAgentLoop(AgentLoopBase):
    """One DeepGym episode per dataset row (see the module docstring)."""

    def __init__(self, *args: Any, env_id: str = "deepgym/SWE-v0", env_kwargs: dict[str, Any] | None = None,
                 tools: Any = None, **kwargs: Any) -> None:
        # verl hands every agent loop its configured tool list; the environment brings its own tools.
        super().__init__(*args, **kwargs)
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **row: Any) -> AgentLoopOutput:
        task_id = task_id_of(row)
        env = await self._in_thread(gym.make, self.env_id, **self.env_kwargs)
        try:
            return await self._episode(env, task_id, sampling_params)
        finally:
            await self._in_thread(env.close)

    async def _episode(self, env: Any, task_id: str, sampling_params: dict[str, Any]) -> AgentLoopOutput:
        obs, info = await self._in_thread(env.reset, options={"task_id": task_id})
        tools = info.get("tools") or None
        messages: list[dict[str, Any]] = [{"role": "user", "content": obs}]
        ids = await self.ct_build_initial_tokens(messages, tools=tools)
        prompt_len = len(ids)
        mask: list[int] = []
        logprobs: list[float] = []
        rewards: list[float] = []
        metrics = {"generate_sequences": 0.0, "tool_calls": 0.0}
        request_id = uuid4().hex
        done, stop, final = False, "response_length", info
        while not done and len(mask) < self.response_length:
            started = time.perf_counter()
            out = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                     sampling_params=sampling_params)
            metrics["generate_sequences"] += time.perf_counter() - started
            merged, mask, aligned = await self.ct_merge_assistant_token(
                ids, out.token_ids, mask, logprobs if (logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None)
            ids, logprobs = merged.token_ids, aligned or []
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            started = time.perf_counter()
            obs, reward, terminated, truncated, final = await self._in_thread(env.step, text)
            metrics["tool_calls"] += time.perf_counter() - started
            rewards.append(float(reward))
            done = terminated or truncated
            if done:
                stop = "submitted" if terminated else "max_steps"
                break
            history = messages + [{"role": "assistant", "content": text}]
            messages = history + [{"role": "tool" if "<tool_call>" in text else "user", "content": obs}]
            merged, mask, aligned = await self.ct_merge_context_msg(history, messages, ids, mask,
                                                                    logprobs or None, tools=tools)
            ids, logprobs = merged.token_ids, aligned or []
        if not done:  # out of response budget: grade the state the agent left
            _, reward, _, _, final = await self._in_thread(env.step, tool_call("submit"))
            if rewards:
                rewards[-1] += float(reward)
            else:
                rewards.append(float(reward))
        verdict = final.get("verdict") or {"status": "no_verdict", "reason": "no verdict reported"}
        masked = bool(final.get("masked")) or verdict.get("status") == "no_verdict"
        response = ids[prompt_len:]
        if masked:
            mask = [0] * len(mask)
        cut = self.response_length
        return AgentLoopOutput(
            prompt_ids=ids[:prompt_len], response_ids=response[:cut], response_mask=mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs else None,
            reward_score=0.0 if masked else sum(rewards), num_turns=2 * len(rewards) + 1, metrics=metrics,
            extra_fields={"turn_scores": rewards, "verdict": verdict.get("status"), "masked": masked,
                          "task_id": task_id, "stop_reason": stop})

    async def _in_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await self.loop.run_in_executor(None, lambda: fn(*args, **kwargs))


def task_id_of(row: dict[str, Any]) -> str:
    """The task a verl dataset row names: ``extra_info["task_id"]``, else a ``task_id`` field."""
    task_id = (row.get("extra_info") or {}).get("task_id") or row.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise ValueError(f"a {AGENT_NAME} row needs extra_info.task_id (dataset_rows(task_ids) writes it); "
                         f"this row has {sorted(row)}")
    return task_id


def dataset_rows(task_ids: list[str], *, data_source: str = "deepgym") -> list[dict[str, Any]]:
    """verl dataset rows (write them to parquet) that send each task to :class:`DeepGymAgentLoop`.
    The prompt is a placeholder: the environment writes the real one."""
    return [{"data_source": data_source, "prompt": [{"role": "user", "content": task_id}], "agent_name": AGENT_NAME,
             "extra_info": {"task_id": task_id}, "reward_model": {"style": "rule", "ground_truth": ""}}
            for task_id in task_ids]
