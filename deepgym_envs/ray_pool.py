"""A pool of environments on a Ray cluster, for rollouts at scale.

>>> import ray                                                        # doctest: +SKIP
>>> ray.init(address="ray://head:10001")                              # or RAY_ADDRESS, or local
>>> from deepgym_envs.ray_pool import EnvPool
>>> with EnvPool(64, "deepgym/SWE-v0", env_kwargs={"max_steps": 30}) as pool:
...     obs, info = pool.reset(0, seed=0)
...     obs, reward, terminated, truncated, info = pool.step(0, action)
...     results = pool.step_many([(1, a1), (2, a2)])                  # a 5-tuple per item, in order
...     env = pool.env(3)        # a Gymnasium-shaped proxy: env.reset(...), env.step(...)
>>> collect(llm, task_ids, pool=EnvPool(16, max_envs=64))   # acquire / release / final_patch

One long-lived :class:`~deepgym_envs.ray_worker.EnvWorker` actor per node (``actors_per_node`` to
have more) owns many environments and steps them on its own threads. An environment's sandbox
lives as long as the environment, so a step is one actor call, never a Ray task per command, and a
reset reuses the sandbox as it does locally. Workers are pinned to nodes (node affinity), one set
per node, and environments are dealt to them round-robin, so they spread evenly; each task's
pristine tree is built on the node whose worker runs it.

Faults keep the environment's contract. When a worker (or its node) dies, its environments' current
episodes end: ``step`` returns a ``no_verdict`` verdict with ``info["masked"]`` true, as a dead
sandbox does locally, and keeps doing so until the environment is reset. The pool starts a
replacement worker at once (on the same node if it is alive, else on the least-loaded alive node),
so that reset opens a new episode there. A replacement worker first reaps what dead workers left on
its node (``deepgym sandbox reap``).

Elasticity: with ``max_envs``, :meth:`EnvPool.acquire` adds an environment when every one is in use
(on a node that joined the cluster since, if any, else on the worker with the fewest), and
environments beyond ``num_envs`` that stay idle ``idle_timeout`` seconds are closed again. At
``max_envs`` acquire waits for a release: the backpressure an agent loop needs.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import gymnasium as gym

from deepgym_envs._ray import connect, pack_repos, should_ship, worker_nodes
from deepgym_envs.errors import DeepgymError, InfrastructureError
from deepgym_envs.ray_worker import EnvWorker, Step, WorkerInfo, failed_step, raised_step
from deepgym_envs.tasks import load_tasks

__all__ = ["EnvPool", "EnvWorker", "PooledEnv", "WorkerInfo", "WorkerLost"]

#: How long close() waits for a worker to close its environments before killing it anyway.
CLOSE_TIMEOUT = 120.0
#: How long a surplus environment (beyond num_envs) may stay idle before it is closed.
IDLE_TIMEOUT = 60.0


class WorkerLost(InfrastructureError):
    """The worker holding an environment (or its node) died; raised by the pool, never by an
    environment, so that a sandbox failure inside a healthy worker is not mistaken for it."""


@dataclass
class _Slot:
    """One worker actor as the driver tracks it."""

    actor: Any
    info: WorkerInfo
    envs: set[int]


class EnvPool:
    """``num_envs`` environments of ``env_id`` spread over the Ray cluster's nodes.

    Args:
        num_envs: how many environments to start with (indices ``0 .. num_envs - 1``); the pool
            never shrinks below this.
        env_id: a registered Gymnasium id (``deepgym/SWE-v0``, ``deepgym/SWE-Bash-v0``).
        env_kwargs: keyword arguments for ``gym.make`` on the workers. ``tasks`` may be
            ``"builtin"`` (resolved on each node, where the installed package ships it), a task
            file or directory (read here, on the driver), or a list of Tasks.
        actors_per_node: workers per node; more than one only helps when a single process's
            threads cannot keep up with its environments.
        ship_repos: send the tasks' local repositories through Ray's object store to the nodes
            (None: only when the cluster has more than one node).
        actor_options: extra ``ActorClass.options(...)`` (``runtime_env``, ``num_cpus``, ...).
        max_envs: how far :meth:`acquire` may grow the pool when every environment is in use
            (default ``num_envs``: a fixed pool).
        idle_timeout: seconds an environment beyond ``num_envs`` may stay idle before it is closed.
    """

    def __init__(self, num_envs: int, env_id: str = "deepgym/SWE-v0", env_kwargs: dict[str, Any] | None = None,
                 *, actors_per_node: int = 1, ship_repos: bool | None = None,
                 actor_options: dict[str, Any] | None = None, max_envs: int | None = None,
                 idle_timeout: float = IDLE_TIMEOUT) -> None:
        if num_envs < 1 or actors_per_node < 1 or (max_envs is not None and max_envs < num_envs):
            raise DeepgymError("EnvPool needs num_envs >= 1, actors_per_node >= 1 and max_envs >= num_envs")
        self._ray = ray = connect()
        self.num_envs, self.env_id = num_envs, env_id
        self.max_envs, self.idle_timeout = max_envs or num_envs, idle_timeout
        kwargs = dict(env_kwargs or {})
        tasks = kwargs.get("tasks", "builtin")
        if isinstance(tasks, (str, Path)) and str(tasks) != "builtin":
            kwargs["tasks"] = tasks = load_tasks(tasks)  # the file is the driver's, not the nodes'
        bundles = pack_repos(tasks) if isinstance(tasks, list) and should_ship(ray, ship_repos) else {}
        nodes = worker_nodes(ray)
        # Node-major order, so that round-robin dealing fills every node before doubling up.
        placement = [node for _ in range(actors_per_node) for node in nodes][:num_envs]
        self._actor_cls = ray.remote(EnvWorker)
        self._args = (env_id, ray.put(kwargs), ray.put(bundles))  # sent to the object store once
        self._options = {
            # The actor's own thread only waits on sandbox processes, which Ray does not
            # account for anyway: reserving a CPU would only starve run_batch on the same cluster.
            "num_cpus": 0,
            # Enough threads for this worker's share of a full pool; + 4: close/describe never queue.
            "max_concurrency": min(-(-self.max_envs // len(placement)) + 4, 256),
            **(actor_options or {}),
        }
        self._slots: dict[int, _Slot] = {}
        self._owner: dict[int, int] = {}  # environment -> slot
        self._lost: dict[int, str] = {}  # environment -> why its episode ended with its worker
        self._closed = False
        self._lock = threading.RLock()  # slots and owners; replacements happen under it
        starting = [(node, [i for i in range(num_envs) if i % len(placement) == a]) for a, node in enumerate(placement)]
        actors = [self._start(node, envs) for node, envs in starting]
        try:
            infos = ray.get([a.describe.remote() for a in actors])
        except ray.exceptions.RayTaskError as exc:
            self._kill(actors)
            raise exc.cause from None  # gym.make failed on the worker: its own error, as locally
        except ray.exceptions.RayError as exc:
            self._kill(actors)
            raise InfrastructureError(f"the environment workers did not start: {exc}") from None
        for a, (actor, info, (_, envs)) in enumerate(zip(actors, infos, starting)):
            self._slots[a] = _Slot(actor, info, set(envs))
            self._owner.update({i: a for i in envs})
        self._next_slot, self._next_env = len(actors), num_envs
        first = infos[0]
        self.observation_space, self.action_space = first.observation_space, first.action_space
        self.metadata, self.spec = first.metadata, first.spec
        self._proxies = {i: PooledEnv(self, i) for i in range(num_envs)}
        # Hand-out bookkeeping for acquire/release: (index, the task it last ran, idle since).
        self._idle: list[tuple[int, str | None, float]] = [(i, None, time.monotonic()) for i in reversed(range(num_envs))]
        self._handed_out = threading.Condition(self._lock)
        self._waiting = 0  # acquire calls blocked at max_envs

    # -- one environment -----------------------------------------------------------------------
    def reset(self, i: int, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """``env.reset(seed=seed, options=options)`` on environment ``i``. If its worker is lost, the
        reset runs once more on the replacement: a new episode has nothing to lose."""
        try:
            result = self._call(i, "reset", i, seed, options)
        except WorkerLost:
            result = self._call(i, "reset", i, seed, options)
        self._lost.pop(i, None)
        return result

    def step(self, i: int, action: Any) -> Step:
        """``env.step(action)`` on environment ``i``: the Gymnasium 5-tuple."""
        if i in self._lost:
            return _dead_step(self._lost[i])
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
        if i in self._lost:
            raise InfrastructureError(f"environment {i}'s worker was lost with its sandbox: {self._lost[i]}")
        return self._call(i, "final_patch", i)

    # -- handing environments out (the agent loop's pool protocol, agents/envs.py) -------------------
    def acquire(self, task_id: str | None = None) -> "PooledEnv":
        """An idle environment, preferring one whose last episode ran ``task_id`` (its sandbox is
        then reset, not rebuilt). When all are in use, a new one if the pool is below ``max_envs``,
        else wait for a release."""
        with self._handed_out:
            while True:
                self._live()
                self._shrink(keep=1)  # the one this call is about to hand out stays
                if self._idle:
                    break
                if len(self._owner) < self.max_envs:
                    return self._proxies[self._grow()]
                self._waiting += 1
                try:
                    self._handed_out.wait(timeout=1.0)  # wakes on release; the timeout only notices close()
                finally:
                    self._waiting -= 1
            same = [k for k, (_, last, _) in enumerate(self._idle) if last == task_id]
            i, _, _ = self._idle.pop(same[-1] if same else -1)
        return self._proxies[i]

    def release(self, env: "PooledEnv", task_id: str | None = None) -> None:
        """Give back an environment from :meth:`acquire`; ``task_id`` is the task it last ran."""
        with self._handed_out:
            self._idle.append((env.index, task_id, time.monotonic()))
            if not self._waiting:  # demand still exceeds the pool: a waiter takes it, nothing shrinks
                self._shrink()
            self._handed_out.notify()

    # -- many at once ---------------------------------------------------------------------------
    def step_many(self, items: Iterable[tuple[int, Any]]) -> list[Step]:
        """Step several environments at once, one round trip per worker: one Gymnasium 5-tuple per
        item, in input order.

        Every item gets its own answer. Where an environment raised (e.g. a step before reset,
        which :meth:`step` raises), or its worker died, that item's tuple ends its episode masked
        (``terminated``, reward 0, a ``no_verdict`` verdict) and ``info["error"]`` (or
        ``info["infrastructure_error"]``) says why; the other environments' steps, which have
        happened, are returned as usual. Reset such an environment before stepping it again."""
        items = list(items)
        self._check_unique([i for i, _ in items])
        live = [(p, i, action) for p, (i, action) in enumerate(items) if i not in self._lost]
        out: list[Any] = [_dead_step(self._lost[i]) if i in self._lost else None for i, _ in items]
        results = self._fan_out("step_many", [(i, (i, action)) for _, i, action in live],
                                on_dead=lambda reason, n: [_dead_step(reason) for _ in range(n)],
                                on_raised=lambda exc, n: [raised_step(exc) for _ in range(n)])
        for (p, _, _), result in zip(live, results):
            out[p] = result
        return out

    def reset_many(self, items: Iterable[tuple[int, int | None, dict[str, Any] | None]]) -> list[tuple[Any, dict]]:
        """Reset several environments at once: ``(i, seed, options)`` each; results in input order.
        Unlike :meth:`step_many`, an error raised by any reset is raised after all ran: a reset, unlike
        a step, can simply be run again."""
        calls = [(i, (i, seed, options)) for i, seed, options in items]
        try:
            results = self._fan_out("reset_many", calls)
        except WorkerLost:
            results = self._fan_out("reset_many", calls)  # the lost workers' replacements
        for i, _ in calls:
            self._lost.pop(i, None)
        return results

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every environment (sandboxes and their temp dirs) and kill the workers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            actors = [s.actor for s in self._slots.values()]
        self._kill(actors)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def workers(self) -> list[WorkerInfo]:
        """The live workers, each with the environments it holds now."""
        with self._lock:
            return [dataclasses.replace(s.info, envs=sorted(s.envs)) for s in self._slots.values()]

    def __len__(self) -> int:
        return len(self._owner)

    def __enter__(self) -> "EnvPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- workers: start, replace, grow, shrink --------------------------------------------------
    def _start(self, node: str, envs: list[int]) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node, soft=False)
        env_id, kwargs_ref, bundles_ref = self._args
        return self._actor_cls.options(scheduling_strategy=strategy, **self._options).remote(
            env_id, kwargs_ref, envs, bundles_ref)

    def _least_loaded_node(self, prefer: str | None = None, avoid: str | None = None) -> str:
        """``prefer`` if it is alive; else an alive node with no worker of this pool (one that joined
        since), else the alive node whose workers hold the fewest environments; ``avoid`` only if
        no other node is alive."""
        nodes = worker_nodes(self._ray)
        if prefer in nodes:
            return prefer
        nodes = [n for n in nodes if n != avoid] or nodes
        load = {n: 0 for n in nodes}
        for slot in self._slots.values():
            if slot.info.node_id in load:
                load[slot.info.node_id] += len(slot.envs) + 1  # + 1: an empty worker still counts
        return min(nodes, key=lambda n: load[n])

    def _lose(self, a: int, actor: Any, reason: str) -> None:
        """Worker ``a`` (``actor``) failed: end its environments' episodes and start a replacement."""
        with self._lock:
            slot = self._slots.get(a)
            if self._closed or slot is None or slot.actor is not actor:
                return  # already replaced by another thread's call
            self._lost.update({i: reason for i in slot.envs})
            self._kill([actor], close=False)
            old = slot.info
            # Its own node first; if that fails (the node is dead, though Ray may not have noticed
            # yet), the least-loaded other one.
            for node in (old.node_id, None):
                new = None
                try:
                    new = self._start(self._least_loaded_node(prefer=node, avoid=old.node_id), sorted(slot.envs))
                    slot.info, slot.actor = self._get(new.describe.remote()), new
                except (InfrastructureError, self._ray.exceptions.RayError):  # WorkerLost is one
                    self._kill([new] if new is not None else [], close=False)
                    continue  # after both: the next call on these environments tries again
                if slot.info.node_id == old.node_id:  # what the killed worker left on this node
                    new.reap_after.remote(old.pid)
                return

    def _grow(self) -> int:
        """A new environment on the least-loaded node (called with the lock held)."""
        i, self._next_env = self._next_env, self._next_env + 1
        node = self._least_loaded_node()
        here = [a for a, s in self._slots.items() if s.info.node_id == node]
        if here:
            a = min(here, key=lambda a: len(self._slots[a].envs))
            self._get(self._slots[a].actor.add_env.remote(i))
            self._slots[a].envs.add(i)
        else:  # a node with no worker of ours yet: the cluster grew
            actor = self._start(node, [i])
            a, self._next_slot = self._next_slot, self._next_slot + 1
            self._slots[a] = _Slot(actor, self._get(actor.describe.remote()), {i})
        self._owner[i] = a
        self._proxies[i] = PooledEnv(self, i)
        return i

    def _shrink(self, keep: int = 0) -> None:
        """Close environments beyond ``num_envs`` idle longer than ``idle_timeout``, oldest first,
        leaving at least ``keep`` idle, and workers left with none (called with the lock held)."""
        now = time.monotonic()
        stale = sorted((since, k) for k, (_, _, since) in enumerate(self._idle) if now - since >= self.idle_timeout)
        surplus = max(min(len(self._owner) - self.num_envs, len(self._idle) - keep), 0)
        for _, k in stale[:surplus]:
            i = self._idle[k][0]
            a = self._owner.pop(i)
            slot = self._slots[a]
            slot.envs.discard(i)
            self._proxies.pop(i)
            self._lost.pop(i, None)
            try:
                self._get(slot.actor.remove_env.remote(i))
            except WorkerLost:
                pass  # its worker is gone, and its sandbox with it
            if not slot.envs:
                del self._slots[a]
                self._kill([slot.actor])
        removed = {self._idle[k][0] for _, k in stale[:surplus]}
        self._idle = [entry for entry in self._idle if entry[0] not in removed]

    def _kill(self, actors: list[Any], close: bool = True) -> None:
        """Close the actors' environments and let them exit (unless they are known dead), then
        kill whatever is left."""
        ray = self._ray
        for method in ("close", "__ray_terminate__") if close else ():
            # __ray_terminate__ exits the process normally, so its exit handlers remove what it
            # keeps per process (staging dir, helper scripts); ray.kill alone would leave them.
            for ref in [getattr(a, method).remote() for a in actors]:
                try:
                    ray.get(ref, timeout=CLOSE_TIMEOUT)
                except Exception:  # exited (as asked), dead or stuck: ray.kill below ends it anyway
                    pass
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # already gone
                pass

    # -- plumbing -------------------------------------------------------------------------------
    def _index(self, i: int) -> int:
        if i not in self._owner:
            raise DeepgymError(f"no environment {i} in a pool of {len(self)}")
        return i

    def _live(self) -> None:
        if self._closed:
            raise DeepgymError("the EnvPool is closed")

    def _slot_of(self, i: int) -> tuple[int, Any]:
        with self._lock:
            a = self._owner[self._index(i)]
            return a, self._slots[a].actor

    def _call(self, i: int, method: str, *args: Any) -> Any:
        self._live()
        a, actor = self._slot_of(i)
        try:
            return self._get(getattr(actor, method).remote(*args))
        except WorkerLost as exc:
            self._lose(a, actor, str(exc))
            raise

    def _get(self, ref: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError:
            raise  # the environment itself raised (e.g. ResetNeeded): same as a local env would
        except ray.exceptions.RayError as exc:
            raise WorkerLost(f"the environment's Ray worker failed: {type(exc).__name__}: "
                                      f"{str(exc).strip()[:500]}") from None

    def _check_unique(self, indices: list[int]) -> None:
        if len(set(indices)) != len(indices):
            raise DeepgymError("each environment may appear only once per batched call")

    def _fan_out(self, method: str, items: Sequence[tuple[int, tuple]],
                 on_dead: Callable[[str, int], list[Any]] | None = None,
                 on_raised: Callable[[BaseException, int], list[Any]] | None = None) -> list[Any]:
        """Call ``method`` once per worker with its share of ``items``; results in input order.
        ``on_dead`` / ``on_raised`` stand in for a worker's share when the worker died / its call
        raised, so that one worker's failure does not cost the others' results."""
        self._live()
        self._check_unique([i for i, _ in items])
        groups: dict[tuple[int, Any], list[int]] = {}
        for pos, (i, _) in enumerate(items):
            groups.setdefault(self._slot_of(i), []).append(pos)
        refs = {key: getattr(key[1], method).remote([items[p][1] for p in positions])
                for key, positions in groups.items()}
        out: list[Any] = [None] * len(items)
        for (a, actor), positions in groups.items():
            try:
                results = self._get(refs[(a, actor)])
            except WorkerLost as exc:
                self._lose(a, actor, str(exc))
                if on_dead is None:
                    raise
                results = on_dead(str(exc), len(positions))
            except self._ray.exceptions.RayTaskError as exc:
                if on_raised is None:
                    raise
                results = on_raised(exc.cause or exc, len(positions))
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
    return failed_step(f"Error: the sandbox failed: {reason}", reason, infrastructure_error=reason)
