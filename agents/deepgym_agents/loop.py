"""The reference agent loop: many environments in flight, generation batched across them.

    trajs = collect(llm, ["toy__calc-001"], k=4, out="runs/trajs.jsonl")

The main thread only generates: it takes every episode that is waiting for the model, makes one
batched call, and hands each completion to a worker thread that steps that episode's environment.
So environment steps (tool calls, test runs, grading) overlap with the next generation call, and
the engine idles only when no episode at all is waiting for it. (``sync_batches`` and
``batch_window`` trade that overlap for bigger batches.)

Two kinds of backend (:mod:`deepgym_agents.llm`):

* token-in/token-out (``vllm``, ``hf``, scripted with a tokenizer): prompts are token ids built
  incrementally (:mod:`deepgym_agents.chat`): the engine's own ids, then the template's delta. Trajectories
  carry every id and the behaviour logprobs (``metadata["ids"] == "complete"``).
* chat (``openai``, scripted without a tokenizer): the loop sends messages; trajectories carry the
  messages and whatever ids the server returned (``metadata["ids"]`` is ``"completion_only"`` or
  ``"absent"``: a trainer must not use the latter).

An episode stops when the agent submits (``submitted``), the step budget runs out (``max_steps``),
the next prompt would not fit (``context_length``: the final state is still graded, by a submit the
loop sends), or the backend or the harness fails (``error: ...``, masked: no verdict).

What the loop adds to :class:`deepgym_agents.trajectory.Trajectory` (all in ``metadata``, nothing in the
schema itself): ``ids`` (see above), ``template_prefix_stable``, ``template_match``,
``observation_special_ids`` (special-token ids that text from the environment became despite the
neutralising in :mod:`deepgym_agents.chat`; above 0, ``template_match`` is false), ``patch`` (the
final diff, for SWE-bench predictions), ``wall_time``, ``completion_tokens`` (chat mode, as the
server counted), ``graded_by: "loop_submit"`` and ``observation_cut`` (context_length endings),
``traceback`` (error endings); per turn, ``timing["template"]`` beside ``generate`` and ``env``.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from deepgym_agents.base import tool_call
from deepgym_agents.chat import ChatFormatter, assistant_message
from deepgym_agents.envs import EnvPool, LocalEnvPool
from deepgym_agents.llm import Generation, SamplingParams, with_max_tokens
from deepgym_agents.trajectory import Trajectory, Turn, append_trajectories
from deepgym_envs.errors import DeepgymError, InfrastructureError
from deepgym_envs.progress import progress_bar
from deepgym_envs.tasks import Task

MIN_COMPLETION_TOKENS = 16
"""An episode whose context has room for fewer new tokens than this ends with ``context_length``."""


@dataclass
class _Episode:
    task_id: str
    traj: Trajectory
    index: int
    seed: int
    env: Any = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    formatter: ChatFormatter | None = None
    ids: list[int] = field(default_factory=list)
    """Token mode: everything fed to or sampled by the engine so far."""
    info: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)


def collect(llm: Any, tasks: Sequence[str | Task], *, env_id: str = "deepgym/SWE-v0",
            env_kwargs: dict[str, Any] | None = None, k: int = 1, concurrency: int = 8, max_steps: int = 30,
            max_context_tokens: int = 32768, params: SamplingParams | None = None, out: str | Path | None = None,
            policy_version: int = 0, show_progress: bool = True, seed: int = 0,
            pool: EnvPool | None = None, verify_template: bool = True,
            sync_batches: bool = False, batch_window: float = 0.0) -> list[Trajectory]:
    """Run ``k`` episodes of every task with ``llm``; return the trajectories in task order.

    Args:
        llm: an :class:`deepgym_agents.llm.LLM` (token ids) or :class:`deepgym_agents.llm.ChatLLM` (messages).
        tasks: task ids, or Task objects (then they are also the environments' task set).
        env_kwargs: passed to ``gym.make``; ``max_steps`` is the step budget unless set there.
        k: rollouts per task; they share a ``group_id``.
        concurrency: episodes in flight at once (also the number of environment threads).
        max_context_tokens: token mode: prompt plus completion never exceeds it.
        out: append each trajectory to this JSONL file as its episode ends.
        policy_version: recorded in ``Trajectory.policy`` (the trainer's step).
        seed: reset seed of the first episode (the others count up from it); with
            ``params.seed`` set, each episode and turn also samples with its own derived seed.
        pool: where environments come from (default: :class:`LocalEnvPool`).
        verify_template: token mode: check at the end of each episode that the incremental ids
            equal the template rendering of the whole conversation (``metadata["template_match"]``).
        sync_batches: wait until every episode in flight needs the model before each call (the
            largest batches, but the engine idles through every environment step: lockstep).
            Default: call the engine as soon as any episode waits, so steps overlap generation.
        batch_window: seconds the first waiting episode waits for others to join its call
            (bigger batches, less overlap; ``bench/bench_loop.py`` compares the three schedules).
    """
    if k < 1 or concurrency < 1:
        raise DeepgymError("k and concurrency must be at least 1")
    params = params or SamplingParams()
    kwargs = dict(env_kwargs or {})
    kwargs.setdefault("max_steps", max_steps)
    ids = [t.instance_id if isinstance(t, Task) else t for t in tasks]
    if any(isinstance(t, Task) for t in tasks) and "tasks" not in kwargs:
        kwargs["tasks"] = [t for t in tasks if isinstance(t, Task)]
    runner = _Runner(llm, params, max_context_tokens, out, verify_template, sync_batches, batch_window)
    model = getattr(llm, "model_name", type(llm).__name__)
    episodes: list[_Episode] = []
    for task_id in ids:
        group = f"{task_id}/{uuid.uuid4().hex[:12]}"
        for r in range(k):
            traj = Trajectory(task_id, group_id=group, rollout_index=r, env_id=env_id,
                              policy={"model": model, "version": policy_version})
            episodes.append(_Episode(task_id, traj, len(episodes), seed + len(episodes)))
    own_pool = pool is None
    pool = pool or LocalEnvPool(env_id, kwargs)
    try:
        with progress_bar(f"collect {model}", len(episodes), enabled=show_progress) as advance:
            runner.run(episodes, pool, concurrency, advance)
    finally:
        if own_pool:
            pool.close()
    return [e.traj for e in episodes]


class _Runner:
    """The scheduling: one generating thread (the caller's), ``concurrency`` environment threads."""

    def __init__(self, llm: Any, params: SamplingParams, max_context: int, out: str | Path | None,
                 verify_template: bool, sync_batches: bool = False, batch_window: float = 0.0) -> None:
        self.llm, self.params, self.max_context = llm, params, max_context
        self.sync_batches, self.batch_window = sync_batches, batch_window
        self.token_mode = getattr(llm, "tokenizer", None) is not None
        self.out, self.verify_template = out, verify_template
        self.events: queue.Queue[tuple[str, _Episode]] = queue.Queue()
        self.write_lock = threading.Lock()

    def run(self, episodes: list[_Episode], pool: EnvPool, concurrency: int, advance: Callable[[str], None]) -> None:
        self.pool = pool
        todo = list(reversed(episodes))
        in_flight, ready, ready_since = 0, [], 0.0
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="deepgym-env") as workers:
            self.workers = workers
            while todo or in_flight:
                while todo and in_flight < concurrency:
                    self._submit(self._start, todo.pop())
                    in_flight += 1
                # Block until an episode needs the model or ends; with some already waiting, only
                # until their batch window closes. Then take every event already there.
                window = self._window()
                timeout = None if not ready or window == float("inf") \
                    else max(0.0, ready_since + window - time.perf_counter())
                events = []
                try:
                    events.append(self.events.get(timeout=timeout))
                except queue.Empty:
                    pass
                while True:
                    try:
                        events.append(self.events.get_nowait())
                    except queue.Empty:
                        break
                for kind, ep in events:
                    if kind == "ready":
                        if not ready:
                            ready_since = time.perf_counter()
                        ready.append(ep)
                        continue
                    in_flight -= 1
                    advance(f"{ep.task_id}#{ep.traj.rollout_index}: {ep.traj.stop_reason} "
                            f"{(ep.traj.verdict or {}).get('status', '')}")
                if ready and (len(ready) == in_flight or time.perf_counter() >= ready_since + self._window()):
                    batch, ready = ready, []
                    self._generate(batch)

    def _window(self) -> float:
        """How long waiting episodes wait for others to join their call (seconds)."""
        return float("inf") if self.sync_batches else self.batch_window

    def _submit(self, fn: Callable[..., None], ep: _Episode, *args: Any) -> None:
        def job() -> None:
            try:
                fn(ep, *args)
            except Exception as exc:  # a bug or a harness failure: end this episode, keep the others
                ep.traj.metadata["traceback"] = traceback.format_exc(limit=8)
                try:
                    self._end(ep, f"error: {type(exc).__name__}: {exc}", masked=True)
                except Exception:  # never leave the scheduler waiting for an episode that died
                    self.events.put(("done", ep))
        self.workers.submit(job)

    # -- the model's side ------------------------------------------------------------------------
    def _generate(self, ready: list[_Episode]) -> None:
        batch, plist = [], []
        for ep in ready:
            room = self.max_context - len(ep.ids) if self.token_mode else self.params.max_tokens
            if room < min(MIN_COMPLETION_TOKENS, self.params.max_tokens):
                self._submit(self._grade_as_is, ep, "context_length")
                continue
            p = with_max_tokens(self.params, min(self.params.max_tokens, room))
            if p.seed is not None:  # distinct but reproducible samples per episode and turn
                p = SamplingParams(p.max_tokens, p.temperature, p.top_p, p.stop,
                                   p.seed + 1_000_003 * ep.seed + len(ep.traj.turns))
            batch.append(ep)
            plist.append(p)
        if not batch:
            return
        started = time.perf_counter()
        try:
            gens = self._call(batch, plist)
        except DeepgymError as exc:
            if not isinstance(exc, InfrastructureError):
                raise  # a configuration mistake (wrong model name, ...): fail fast, not per episode
            self._fail(batch, exc)
            return
        except Exception as exc:  # the engine failed: these episodes say nothing about the agent
            self._fail(batch, exc)
            return
        elapsed = time.perf_counter() - started
        for ep, gen in zip(batch, gens):
            self._submit(self._step, ep, gen, elapsed)

    def _fail(self, batch: list[_Episode], exc: Exception) -> None:
        for ep in batch:
            self._submit(self._end, ep, f"error: generation failed: {type(exc).__name__}: {exc}", True)

    def _call(self, batch: list[_Episode], plist: list[SamplingParams]) -> list[Generation]:
        if self.token_mode:
            return self.llm.generate([ep.ids for ep in batch], plist)
        # Chat backends take one tool list per call; episodes of one env id share it.
        out: dict[int, Generation] = {}
        groups: dict[str, list[int]] = {}
        for i, ep in enumerate(batch):
            groups.setdefault(repr(ep.tools), []).append(i)
        for members in groups.values():
            gens = self.llm.chat([batch[i].messages for i in members], batch[members[0]].tools or None,
                                 [plist[i] for i in members])
            out.update(zip(members, gens))
        return [out[i] for i in range(len(batch))]

    # -- the environment's side (worker threads) -------------------------------------------------
    def _start(self, ep: _Episode) -> None:
        ep.env = self.pool.acquire(ep.task_id)
        obs, info = ep.env.reset(seed=ep.seed, options={"task_id": ep.task_id})
        ep.tools = info.get("tools", [])
        ep.messages = [{"role": "user", "content": obs}]
        ep.started = time.perf_counter()
        if self.token_mode:
            ep.formatter = ChatFormatter(self.llm.tokenizer, ep.tools)
            prompt = ep.formatter.prompt(ep.messages)
            ep.ids = prompt.ids
            ep.traj.metadata.update(ids="complete", template_prefix_stable=True,
                                    observation_special_ids=prompt.env_special_ids)
        self.events.put(("ready", ep))

    def _step(self, ep: _Episode, gen: Generation, gen_time: float) -> None:
        if gen.finish_reason == "error":
            self._end(ep, f"error: generation failed: {gen.text}", masked=True)
            return
        if gen.finish_reason == "context_length":  # a chat server refused the prompt
            self._grade_as_is(ep, "context_length")
            return
        assistant = assistant_message(gen.text, gen.message)
        action: Any = gen.message if gen.message and gen.message.get("tool_calls") else gen.text
        started = time.perf_counter()
        obs, reward, terminated, truncated, info = ep.env.step(action)
        env_time = time.perf_counter() - started
        ep.info = info
        done = terminated or truncated
        new = self._observation_messages(assistant, obs)
        turn = Turn(prompt_ids=[], completion_ids=list(gen.completion_ids), completion_logprobs=list(gen.logprobs),
                    messages=[assistant] + new, tool_call=info.get("tool_call"), reward=float(reward),
                    reward_components=dict(info.get("reward_components", {})), terminated=terminated,
                    truncated=truncated, timing={"generate": gen_time, "env": env_time})
        overflow = False
        if self.token_mode:
            if not ep.traj.turns:
                turn.prompt_ids = list(ep.ids)
            t0 = time.perf_counter()
            delta = ep.formatter.delta_after(ep.messages, turn.completion_ids, assistant, new,
                                             generation_prompt=not done)
            turn.timing["template"] = time.perf_counter() - t0
            ep.ids += turn.completion_ids
            room = self.max_context - len(ep.ids) - len(delta.ids)
            overflow = not done and room < min(MIN_COMPLETION_TOKENS, self.params.max_tokens)
            # The next prompt will not fit: the episode ends here, and its record stays within the
            # context (the cut observation is never fed to the model).
            turn.observation_ids = delta.ids[:max(0, self.max_context - len(ep.ids))] if overflow else delta.ids
            ep.ids += turn.observation_ids
            if overflow:
                ep.traj.metadata["observation_cut"] = len(delta.ids) - len(turn.observation_ids)
            if not delta.prefix_stable:
                ep.traj.metadata["template_prefix_stable"] = False
            ep.traj.metadata["observation_special_ids"] += delta.env_special_ids
        else:
            self._chat_ids(ep, turn, gen)
            counted = gen.num_tokens if gen.num_tokens is not None else len(gen.completion_ids)
            ep.traj.metadata["completion_tokens"] = ep.traj.metadata.get("completion_tokens", 0) + counted
        ep.messages += [assistant] + new
        ep.traj.turns.append(turn)
        ep.traj.episode_return += float(reward)
        if done:
            self._finish(ep, "submitted" if terminated else "max_steps", info)
        elif overflow:
            self._grade_as_is(ep, "context_length")
        else:
            self.events.put(("ready", ep))

    @staticmethod
    def _observation_messages(assistant: dict[str, Any], obs: str) -> list[dict[str, Any]]:
        calls = assistant.get("tool_calls") or []
        if not calls:
            return [{"role": "tool", "content": obs}] if "<tool_call>" in (assistant.get("content") or "") \
                else [{"role": "user", "content": obs}]
        # The environment runs the first call; an API server wants an answer to every call id.
        msgs = [{"role": "tool", "tool_call_id": calls[0].get("id", ""), "content": obs}]
        msgs += [{"role": "tool", "tool_call_id": c.get("id", ""),
                  "content": "Error: only one tool call per turn is run; this one was not."} for c in calls[1:]]
        return msgs

    @staticmethod
    def _chat_ids(ep: _Episode, turn: Turn, gen: Generation) -> None:
        """Chat mode: keep the server's ids where it gave them, and say how complete they are."""
        meta = ep.traj.metadata
        if gen.prompt_ids is not None and turn.completion_ids:
            known = ep.traj.flatten().input_ids
            contiguous = gen.prompt_ids[:len(known)] == known
            turn.prompt_ids = gen.prompt_ids[len(known):] if contiguous else list(gen.prompt_ids)
            level = "complete" if contiguous and meta.get("ids", "complete") == "complete" else "completion_only"
        else:
            level = "completion_only" if turn.completion_ids else "absent"
        order = ["absent", "completion_only", "complete"]
        meta["ids"] = min(level, meta.get("ids", "complete"), key=order.index)

    def _grade_as_is(self, ep: _Episode, reason: str) -> None:
        """End an episode early but still grade its final state: submit on the agent's behalf."""
        _, reward, _, _, info = ep.env.step(tool_call("submit"))
        if ep.traj.turns:  # the outcome belongs to the last action the model took
            last = ep.traj.turns[-1]
            last.reward += float(reward)
            for name, value in info.get("reward_components", {}).items():
                last.reward_components[name] = last.reward_components.get(name, 0.0) + value
        ep.traj.episode_return += float(reward)
        ep.traj.metadata["graded_by"] = "loop_submit"
        self._finish(ep, reason, info)

    def _finish(self, ep: _Episode, reason: str, info: dict[str, Any]) -> None:
        verdict = info.get("verdict")
        ep.traj.verdict = verdict
        ep.traj.masked = bool(info.get("masked")) or (verdict or {}).get("status") == "no_verdict"
        try:
            ep.traj.metadata["patch"] = self.pool.final_patch(ep.env)
        except DeepgymError as exc:
            ep.traj.metadata["patch_error"] = str(exc)
        if self.token_mode and self.verify_template and ep.formatter is not None \
                and ep.traj.turns and "observation_cut" not in ep.traj.metadata:
            last = ep.traj.turns[-1]
            # Not a reason to drop the episode: the agent can print special-token strings at will.
            ep.traj.metadata["template_match"] = ep.traj.metadata["observation_special_ids"] == 0 and \
                ep.formatter.matches_template(ep.traj.flatten().input_ids, ep.messages,
                                              generation_prompt=not (last.terminated or last.truncated))
        self._end(ep, reason, masked=ep.traj.masked)

    def _end(self, ep: _Episode, reason: str, masked: bool) -> None:
        ep.traj.stop_reason = reason
        ep.traj.masked = masked
        if masked and ep.traj.verdict is None:
            ep.traj.verdict = {"status": "no_verdict", "reason": reason}
        ep.traj.metadata["wall_time"] = time.perf_counter() - ep.started
        if ep.env is not None:
            self.pool.release(ep.env, ep.task_id)
            ep.env = None
        if self.out is not None:
            with self.write_lock:
                append_trajectories(self.out, [ep.traj])
        self.events.put(("done", ep))
