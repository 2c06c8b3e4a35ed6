"""The actor behind :class:`deepgym_envs.ray_pool.EnvPool`: many environments on one node.

Kept apart from the pool so that what runs on a node (this) and what runs on the driver (the pool's
bookkeeping, placement and replacement) can each be read on their own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from deepgym_envs._ray import RepoBundle, localise, reap_after, reap_node_once
from deepgym_envs.grading import Verdict

Step = tuple[Any, float, bool, bool, dict[str, Any]]


def failed_step(observation: str, reason: str, **info: Any) -> Step:
    """A step in place of one whose result cannot be had (the environment raised, or its worker
    died): the episode ends masked, a ``no_verdict`` as when a local sandbox dies (README "Reward"),
    so a batch still answers for every item and a trainer drops this one sample, not the batch."""
    verdict = Verdict.no_verdict(reason)
    info.update(verdict=verdict.to_dict(), masked=True, reward_components={})
    return observation, 0.0, True, False, info


def raised_step(exc: BaseException) -> Step:
    """:func:`failed_step` for an environment whose ``step`` raised ``exc``; ``info["error"]`` names it
    (cut short: the message may echo what the agent wrote)."""
    error = f"{type(exc).__name__}: {str(exc)[:1000]}"
    return failed_step(f"Error: the environment raised {error}", f"the environment raised {error}", error=error)


@dataclass(frozen=True)
class WorkerInfo:
    """One worker actor, as it describes itself once started."""

    pid: int
    node_id: str
    envs: list[int]
    """The pool indices of the environments it holds."""
    observation_space: gym.Space
    action_space: gym.Space
    metadata: dict[str, Any]
    spec: Any


class EnvWorker:
    """The actor: many environments on one node. Ray runs its methods on several threads at once
    (``max_concurrency``), so different environments step in parallel; each environment has a lock
    so that one environment is never stepped by two calls at once."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], indices: list[int],
                 bundles: dict[str, RepoBundle]) -> None:
        import deepgym_envs  # noqa: F401  (registers the environment ids in this process)

        # A worker this one replaces, on this node, may have been killed with sandboxes open.
        reap_node_once()
        kwargs = dict(env_kwargs)
        if isinstance(kwargs.get("tasks"), list):
            kwargs["tasks"] = localise(kwargs["tasks"], bundles)
        self.env_id, self.kwargs = env_id, kwargs
        self.envs: dict[int, gym.Env] = {}
        self.locks: dict[int, threading.Lock] = {}
        # Threads start lazily: the cap only matters for a worker the pool grows to many envs.
        self.threads = ThreadPoolExecutor(max_workers=64, thread_name_prefix="deepgym-env")
        # A configuration mistake (an unknown task id, a bad keyword) is kept and raised by
        # describe(): the driver then gets the environment's own exception, as gym.make raises it
        # locally, instead of Ray's "actor died in its creation task".
        self.startup_error: Exception | None = None
        try:
            for i in indices:
                self.add_env(i)
        except Exception as exc:
            self.startup_error = exc
            self.close()

    def describe(self) -> WorkerInfo:
        """Where this worker runs and what its environments look like (for the driver's proxies)."""
        import ray

        if self.startup_error is not None:
            raise self.startup_error
        first = next(iter(self.envs.values()))
        return WorkerInfo(os.getpid(), ray.get_runtime_context().get_node_id(), sorted(self.envs),
                          first.observation_space, first.action_space, first.metadata, first.spec)

    def reap_after(self, pid: int) -> list[str]:
        """Reap this node once the worker ``pid`` (the one this replaces, killed) has exited."""
        return reap_after(pid)

    def add_env(self, i: int) -> None:
        """One more environment (the pool grew); its sandbox opens at its first reset."""
        self.locks.setdefault(i, threading.Lock())
        self.envs[i] = gym.make(self.env_id, **self.kwargs)

    def remove_env(self, i: int) -> None:
        """Close environment ``i`` and forget it (the pool shrank)."""
        with self.locks[i]:
            env = self.envs.pop(i, None)
            if env is not None:
                env.close()

    def reset(self, i: int, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        with self.locks[i]:
            return self.envs[i].reset(seed=seed, options=options)

    def step(self, i: int, action: Any) -> Step:
        with self.locks[i]:
            return self.envs[i].step(action)

    def step_many(self, items: list[tuple[int, Any]]) -> list[Step]:
        """Every item's step, in order. A step that raises answers with :func:`raised_step` in its
        place: raising instead would throw away the other steps, which have happened (and a step
        cannot be re-run)."""
        futures = [self.threads.submit(self.step, i, action) for i, action in items]
        out = []
        for future in futures:
            try:
                out.append(future.result())
            except Exception as exc:
                out.append(raised_step(exc))
        return out

    def reset_many(self, items: list[tuple[int, int | None, dict[str, Any] | None]]) -> list[tuple[Any, dict]]:
        futures = [self.threads.submit(self.reset, i, seed, options) for i, seed, options in items]
        return [f.result() for f in futures]

    def render(self, i: int) -> Any:
        with self.locks[i]:
            return self.envs[i].render()

    def final_patch(self, i: int) -> str:
        """The agent's change in environment ``i`` as a unified diff."""
        with self.locks[i]:
            return self.envs[i].unwrapped.sandbox.diff()

    def close_env(self, i: int) -> None:
        """Close one environment's sandbox; a later reset opens a new one."""
        with self.locks[i]:
            self.envs[i].close()

    def close(self) -> None:
        """Close every environment (sandboxes, temp dirs) before the actor is killed."""
        errors = []
        for env in list(self.envs.values()):
            try:
                env.close()
            except Exception as exc:  # keep closing the others
                errors.append(exc)
        self.threads.shutdown(wait=False)
        if errors:
            raise errors[0]
