"""The reference agent loop: many environments in flight, generation batched across them.

    trajs = collect(llm, ["toy__calc-001"], CollectConfig(k=4, out="runs/trajs.jsonl"))

The main thread only generates: it takes every episode that is waiting for the model, makes one
batched call, and hands each completion to a worker thread that steps that episode's environment.
So environment steps (tool calls, test runs, grading) overlap with the next generation call, and
the engine idles only when no episode at all is waiting for it. (``sync_batches`` and
``batch_window`` trade that overlap for bigger batches.) This module is that scheduling; the
episode's side is :mod:`deepgym_agents.episode`, the token accounting :mod:`deepgym_agents.tokens`,
the options :class:`deepgym_agents.config.CollectConfig`.

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
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from deepgym_agents import tokens
from deepgym_agents.config import CollectConfig
from deepgym_agents.envs import EnvPool, LocalEnvPool
from deepgym_agents.episode import Episode, EpisodeRunner, Events
from deepgym_agents.llm import Generation, SamplingParams
from deepgym_agents.trajectory import Trajectory, TrajectoryWriter
from deepgym_envs.errors import DeepgymError, InfrastructureError
from deepgym_envs.progress import progress_bar
from deepgym_envs.tasks import Task

__all__ = ["CollectConfig", "collect"]


def collect(llm: Any, tasks: Sequence[str | Task], config: CollectConfig | None = None, *,
            pool: EnvPool | None = None, policy_version: int = 0) -> list[Trajectory]:
    """Run ``config.k`` episodes of every task with ``llm``; return the trajectories in task order.

    Args:
        llm: an :class:`deepgym_agents.llm.LLM` (token ids) or :class:`deepgym_agents.llm.ChatLLM` (messages).
        tasks: task ids, or Task objects (then they are also the environments' task set).
        config: everything else (:class:`~deepgym_agents.config.CollectConfig`); None = its defaults.
        pool: where environments come from (default: a :class:`LocalEnvPool` of ``config.env_id``,
            closed at the end).
        policy_version: recorded in ``Trajectory.policy`` (the trainer's step).
    """
    config = config or CollectConfig()
    kwargs = config.gym_kwargs()
    ids = [t.instance_id if isinstance(t, Task) else t for t in tasks]
    if any(isinstance(t, Task) for t in tasks) and "tasks" not in kwargs:
        kwargs["tasks"] = [t for t in tasks if isinstance(t, Task)]
    model = getattr(llm, "model_name", type(llm).__name__)
    episodes: list[Episode] = []
    for task_id in ids:
        group = f"{task_id}/{uuid.uuid4().hex[:12]}"
        for r in range(config.k):
            traj = Trajectory(task_id, group_id=group, rollout_index=r, env_id=config.env_id,
                              policy={"model": model, "version": policy_version})
            episodes.append(Episode(task_id, traj, len(episodes), config.seed + len(episodes)))
    own_pool = pool is None
    pool = pool or LocalEnvPool(config.env_id, kwargs)
    try:
        with progress_bar(f"collect {model}", len(episodes), enabled=config.show_progress) as advance:
            _Scheduler(llm, pool, config).run(episodes, advance)
    finally:
        if own_pool:
            pool.close()
    return [e.traj for e in episodes]


class _Scheduler:
    """One generating thread (the caller's), ``config.concurrency`` environment threads."""

    def __init__(self, llm: Any, pool: EnvPool, config: CollectConfig) -> None:
        self.llm, self.config, self.params = llm, config, config.params
        self.token_mode = getattr(llm, "tokenizer", None) is not None
        self.events: Events = queue.Queue()
        self.episodes = EpisodeRunner(llm.tokenizer if self.token_mode else None, pool, config, self.events,
                                      TrajectoryWriter(config.out))

    def run(self, episodes: list[Episode], advance: Callable[[str], None]) -> None:
        concurrency = self.config.concurrency
        todo = list(reversed(episodes))
        in_flight, ready_since = 0, 0.0
        ready: list[Episode] = []
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="deepgym-env") as workers:
            self.workers = workers
            while todo or in_flight:
                while todo and in_flight < concurrency:
                    self._submit(self.episodes.start, todo.pop())
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
        return float("inf") if self.config.sync_batches else self.config.batch_window

    def _submit(self, fn: Callable[..., None], ep: Episode, *args: Any) -> None:
        def job() -> None:
            try:
                fn(ep, *args)
            except Exception as exc:  # a bug or a harness failure: end this episode, keep the others
                ep.traj.metadata["traceback"] = traceback.format_exc(limit=8)
                try:
                    self.episodes.end(ep, f"error: {type(exc).__name__}: {exc}", masked=True)
                except Exception:  # never leave the scheduler waiting for an episode that died
                    self.events.put(("done", ep))
        self.workers.submit(job)

    # -- the model's side ------------------------------------------------------------------------
    def _generate(self, ready: list[Episode]) -> None:
        batch, plist = [], []
        for ep in ready:
            room = tokens.completion_room(len(ep.ids) if self.token_mode else None,
                                          self.config.max_context_tokens, self.params)
            if room is None:
                self._submit(self.episodes.grade_as_is, ep, "context_length")
                continue
            batch.append(ep)
            plist.append(tokens.turn_params(self.params, room, ep.seed, len(ep.traj.turns)))
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
            self._submit(self.episodes.step, ep, gen, elapsed)

    def _fail(self, batch: list[Episode], exc: Exception) -> None:
        for ep in batch:
            self._submit(self.episodes.end, ep, f"error: generation failed: {type(exc).__name__}: {exc}", True)

    def _call(self, batch: list[Episode], plist: list[SamplingParams]) -> list[Generation]:
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
