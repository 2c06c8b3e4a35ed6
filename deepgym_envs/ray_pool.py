"""A pool of environments on a Ray cluster, for rollouts at scale.

>>> import ray                                                        # doctest: +SKIP
>>> ray.init(address="ray://head:10001")                              # or RAY_ADDRESS, or local
>>> from deepgym_envs.ray_pool import EnvPool
>>> with EnvPool(64, "deepgym/SWE-v0", env_kwargs={"max_steps": 30}) as pool:
...     obs, info = pool.reset(0, seed=0)
...     obs, reward, terminated, truncated, info = pool.step(0, action)
...     results = pool.step_many([(1, a1), (2, a2)])                  # one round trip per worker
...     env = pool.env(3)        # a Gymnasium-shaped proxy: env.reset(...), env.step(...)
>>> collect(llm, task_ids, pool=EnvPool(16))   # the agent loop: acquire / release / final_patch

One long-lived :class:`EnvWorker` actor per node (``actors_per_node`` to have more) owns many
environments and steps them on its own threads. An environment's sandbox lives as long as the
environment, so a step is one actor call, never a Ray task per command, and a reset reuses the
sandbox as it does locally. Workers are pinned to nodes (node affinity), environments are dealt to
workers round-robin, so they spread evenly; each task's pristine tree is built on the node whose
worker runs it.

Infrastructure failures keep the environment's contract: if a worker (or its node) dies, ``step``
on its environments ends the episode with a ``no_verdict`` verdict and ``info["masked"]`` true,
as a dead sandbox does locally; ``reset`` on them raises :class:`InfrastructureError`.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import gymnasium as gym

from deepgym_envs._ray import RepoBundle, connect, localise, pack_repos, should_ship, worker_nodes
from deepgym_envs.errors import DeepgymError, InfrastructureError
from deepgym_envs.grading import Verdict
from deepgym_envs.tasks import load_tasks

Step = tuple[Any, float, bool, bool, dict[str, Any]]
#: How long close() waits for a worker to close its environments before killing it anyway.
CLOSE_TIMEOUT = 120.0


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

        kwargs = dict(env_kwargs)
        if isinstance(kwargs.get("tasks"), list):
            kwargs["tasks"] = localise(kwargs["tasks"], bundles)
        self.envs: dict[int, gym.Env] = {}
        self.locks = {i: threading.Lock() for i in indices}
        self.threads = ThreadPoolExecutor(max_workers=max(1, min(len(indices), 64)),
                                          thread_name_prefix="deepgym-env")
        # A configuration mistake (an unknown task id, a bad keyword) is kept and raised by
        # describe(): the driver then gets the environment's own exception, as gym.make raises it
        # locally, instead of Ray's "actor died in its creation task".
        self.startup_error: Exception | None = None
        try:
            for i in indices:
                self.envs[i] = gym.make(env_id, **kwargs)
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

    def reset(self, i: int, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        with self.locks[i]:
            return self.envs[i].reset(seed=seed, options=options)

    def step(self, i: int, action: Any) -> Step:
        with self.locks[i]:
            return self.envs[i].step(action)

    def step_many(self, items: list[tuple[int, Any]]) -> list[Step]:
        futures = [self.threads.submit(self.step, i, action) for i, action in items]
        return [f.result() for f in futures]  # every step runs; the first error, if any, is raised

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
        for env in self.envs.values():
            try:
                env.close()
            except Exception as exc:  # keep closing the others
                errors.append(exc)
        self.threads.shutdown(wait=False)
        if errors:
            raise errors[0]


class EnvPool:
    """``num_envs`` environments of ``env_id`` spread over the Ray cluster's nodes.

    Args:
        num_envs: how many environments (indices ``0 .. num_envs - 1``).
        env_id: a registered Gymnasium id (``deepgym/SWE-v0``, ``deepgym/SWE-Bash-v0``).
        env_kwargs: keyword arguments for ``gym.make`` on the workers. ``tasks`` may be
            ``"builtin"`` (resolved on each node, where the installed package ships it), a task
            file or directory (read here, on the driver), or a list of Tasks.
        actors_per_node: workers per node; more than one only helps when a single process's
            threads cannot keep up with its environments.
        ship_repos: send the tasks' local repositories through Ray's object store to the nodes
            (None: only when the cluster has more than one node).
        actor_options: extra ``ActorClass.options(...)`` (``runtime_env``, ``num_cpus``, ...).
    """

    def __init__(self, num_envs: int, env_id: str = "deepgym/SWE-v0", env_kwargs: dict[str, Any] | None = None,
                 *, actors_per_node: int = 1, ship_repos: bool | None = None,
                 actor_options: dict[str, Any] | None = None) -> None:
        if num_envs < 1 or actors_per_node < 1:
            raise DeepgymError("EnvPool needs num_envs >= 1 and actors_per_node >= 1")
        self._ray = ray = connect()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.num_envs, self.env_id = num_envs, env_id
        kwargs = dict(env_kwargs or {})
        tasks = kwargs.get("tasks", "builtin")
        if isinstance(tasks, (str, Path)) and str(tasks) != "builtin":
            kwargs["tasks"] = tasks = load_tasks(tasks)  # the file is the driver's, not the nodes'
        bundles = pack_repos(tasks) if isinstance(tasks, list) and should_ship(ray, ship_repos) else {}
        nodes = worker_nodes(ray)
        # Node-major order, so that round-robin dealing fills every node before doubling up.
        slots = [node for _ in range(actors_per_node) for node in nodes][:num_envs]
        self._owner = [i % len(slots) for i in range(num_envs)]
        actor_cls = ray.remote(EnvWorker)
        bundles_ref, kwargs_ref = ray.put(bundles), ray.put(kwargs)
        self._actors: list[Any] = []
        self._closed = False
        for a, node in enumerate(slots):
            indices = [i for i in range(num_envs) if self._owner[i] == a]
            options = {
                # The actor's own thread only waits on sandbox processes, which Ray does not
                # account for anyway: reserving a CPU would only starve run_batch on the same cluster.
                "num_cpus": 0,
                "max_concurrency": min(len(indices) + 4, 256),  # + 4: close/describe never queue
                "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False),
                **(actor_options or {}),
            }
            self._actors.append(actor_cls.options(**options).remote(env_id, kwargs_ref, indices, bundles_ref))
        try:
            self.workers: list[WorkerInfo] = ray.get([a.describe.remote() for a in self._actors])
        except ray.exceptions.RayTaskError as exc:
            self.close()
            raise exc.cause from None  # gym.make failed on the worker: its own error, as locally
        except ray.exceptions.RayError as exc:
            self.close()
            raise InfrastructureError(f"the environment workers did not start: {exc}") from None
        first = self.workers[0]
        self.observation_space, self.action_space = first.observation_space, first.action_space
        self.metadata, self.spec = first.metadata, first.spec
        self._proxies = [PooledEnv(self, i) for i in range(num_envs)]
        # Hand-out bookkeeping for acquire/release: (index, the task it last ran), idle ones only.
        self._idle: list[tuple[int, str | None]] = [(i, None) for i in reversed(range(num_envs))]
        self._handed_out = threading.Condition()

    # -- one environment -----------------------------------------------------------------------
    def reset(self, i: int, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """``env.reset(seed=seed, options=options)`` on environment ``i``."""
        return self._call(i, "reset", i, seed, options)

    def step(self, i: int, action: Any) -> Step:
        """``env.step(action)`` on environment ``i``: the Gymnasium 5-tuple."""
        try:
            return self._call(i, "step", i, action)
        except InfrastructureError as exc:
            return _dead_step(str(exc))

    def render(self, i: int) -> Any:
        return self._call(i, "render", i)

    def close_env(self, i: int) -> None:
        """Close environment ``i``'s sandbox (it stays in the pool; a reset opens a new one)."""
        self._call(i, "close_env", i)

    def env(self, i: int) -> "PooledEnv":
        """A proxy with the Gymnasium ``reset``/``step`` signatures, for code written against
        ``gym.make`` environments."""
        return self._proxies[self._index(i)]

    def final_patch(self, env: "PooledEnv | int") -> str:
        """The agent's change in an environment, as a unified diff (e.g. for SWE-bench predictions)."""
        i = env.index if isinstance(env, PooledEnv) else env
        return self._call(i, "final_patch", i)

    # -- handing environments out (the agent loop's pool protocol, agents/envs.py) -------------------
    def acquire(self, task_id: str | None = None) -> "PooledEnv":
        """An idle environment, preferring one whose last episode ran ``task_id`` (its sandbox is
        then reset, not rebuilt). Blocks until one is released when all are in use."""
        with self._handed_out:
            while not self._idle:
                self._live()
                self._handed_out.wait(timeout=1.0)  # wakes on release; the timeout only notices close()
            self._live()
            same = [k for k, (_, last) in enumerate(self._idle) if last == task_id]
            i, _ = self._idle.pop(same[-1] if same else -1)
        return self._proxies[i]

    def release(self, env: "PooledEnv", task_id: str | None = None) -> None:
        """Give back an environment from :meth:`acquire`; ``task_id`` is the task it last ran."""
        with self._handed_out:
            self._idle.append((env.index, task_id))
            self._handed_out.notify()

    # -- many at once ---------------------------------------------------------------------------
    def step_many(self, items: Iterable[tuple[int, Any]]) -> list[Step]:
        """Step several environments at once, one round trip per worker; results in input order.
        An error raised by any environment (e.g. a step before reset) is raised after all ran."""
        items = list(items)
        return self._fan_out("step_many", [(i, (i, action)) for i, action in items],
                             on_dead=lambda reason, n: [_dead_step(reason)] * n)

    def reset_many(self, items: Iterable[tuple[int, int | None, dict[str, Any] | None]]) -> list[tuple[Any, dict]]:
        """Reset several environments at once: ``(i, seed, options)`` each; results in input order."""
        return self._fan_out("reset_many", [(i, (i, seed, options)) for i, seed, options in items])

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every environment (sandboxes and their temp dirs) and kill the workers. Idempotent."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        closing = [a.close.remote() for a in self._actors]
        for ref in closing:
            try:
                ray.get(ref, timeout=CLOSE_TIMEOUT)
            except Exception:  # a dead or stuck worker: killing it below ends its sandboxes too
                pass
        for actor in self._actors:
            ray.kill(actor)

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return self.num_envs

    def __enter__(self) -> "EnvPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------------------
    def _index(self, i: int) -> int:
        if not 0 <= i < self.num_envs:
            raise DeepgymError(f"no environment {i} in a pool of {self.num_envs}")
        return i

    def _live(self) -> None:
        if self._closed:
            raise DeepgymError("the EnvPool is closed")

    def _call(self, i: int, method: str, *args: Any) -> Any:
        self._live()
        actor = self._actors[self._owner[self._index(i)]]
        return self._get(getattr(actor, method).remote(*args))

    def _get(self, ref: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError:
            raise  # the environment itself raised (e.g. ResetNeeded): same as a local env would
        except ray.exceptions.RayError as exc:
            raise InfrastructureError(f"the environment's Ray worker failed: {type(exc).__name__}: "
                                      f"{str(exc).strip()[:500]}") from None

    def _fan_out(self, method: str, items: Sequence[tuple[int, tuple]],
                 on_dead: Callable[[str, int], list[Any]] | None = None) -> list[Any]:
        self._live()
        indices = [self._index(i) for i, _ in items]
        if len(set(indices)) != len(indices):
            raise DeepgymError("each environment may appear only once per batched call")
        groups: dict[int, list[int]] = {}
        for pos, i in enumerate(indices):
            groups.setdefault(self._owner[i], []).append(pos)
        refs = {a: getattr(self._actors[a], method).remote([items[p][1] for p in positions])
                for a, positions in groups.items()}
        out: list[Any] = [None] * len(items)
        for a, positions in groups.items():
            try:
                results = self._get(refs[a])
            except InfrastructureError as exc:
                if on_dead is None:
                    raise
                results = on_dead(str(exc), len(positions))
            for p, result in zip(positions, results):
                out[p] = result
        return out


class PooledEnv(gym.Env):
    """Environment ``i`` of an :class:`EnvPool`, shaped like the ``gym.make`` environment it proxies."""

    def __init__(self, pool: EnvPool, index: int) -> None:
        self.pool, self.index = pool, index
        self.observation_space, self.action_space = pool.observation_space, pool.action_space
        self.metadata, self.spec = pool.metadata, pool.spec

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return self.pool.reset(self.index, seed, options)

    def step(self, action: Any) -> Step:
        return self.pool.step(self.index, action)

    def render(self) -> Any:
        return self.pool.render(self.index)

    def close(self) -> None:
        if not self.pool.closed:  # closing a proxy after its pool is a no-op
            self.pool.close_env(self.index)

    def __repr__(self) -> str:
        return f"<PooledEnv {self.pool.env_id}[{self.index}]>"


def _dead_step(reason: str) -> Step:
    """What a step returns when the worker holding the environment died: the episode is over
    and masked, exactly as when a local sandbox dies (a ``no_verdict``: see README "Reward")."""
    verdict = Verdict.no_verdict(reason)
    info = {"infrastructure_error": reason, "verdict": verdict.to_dict(), "masked": True, "reward_components": {}}
    return f"Error: the sandbox failed: {reason}", 0.0, True, False, info
