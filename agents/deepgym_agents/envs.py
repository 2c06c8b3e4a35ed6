"""Where the loop gets its environments: a small pool behind a factory, so a remote pool (Ray)
can replace the in-process one without touching the loop.

The loop only needs four things from an environment handle: ``reset``, ``step``, the final patch
(for SWE-bench predictions) and ``close``. :class:`LocalEnvPool` keeps finished environments and
hands them out again, so the K rollouts of a task reuse one sandbox instead of building K.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

import gymnasium as gym

import deepgym_envs  # noqa: F401  (registers the environment ids)


class EnvHandle(Protocol):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]: ...

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]: ...

    def close(self) -> None: ...


class EnvPool(Protocol):
    """Hands out environments; ``release`` returns one for reuse; ``close`` closes them all."""

    def acquire(self, task_id: str | None = None) -> EnvHandle: ...

    def release(self, env: EnvHandle, task_id: str | None = None) -> None: ...

    def final_patch(self, env: EnvHandle) -> str: ...

    def close(self) -> None: ...


class LocalEnvPool:
    """Environments from ``gym.make`` in this process, reused across episodes, thread-safe."""

    def __init__(self, env_id: str = "deepgym/SWE-v0", env_kwargs: dict[str, Any] | None = None) -> None:
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self._idle: list[tuple[Any, str | None]] = []  # (env, the task it last ran)
        self._all: list[Any] = []
        self._lock = threading.Lock()

    def acquire(self, task_id: str | None = None) -> Any:
        """An idle environment, preferring one that last ran ``task_id`` (its sandbox is reused)."""
        with self._lock:
            if self._idle:
                same = [i for i, (_, last) in enumerate(self._idle) if last == task_id]
                env, _ = self._idle.pop(same[-1] if same else -1)
                return env
        env = gym.make(self.env_id, **self.env_kwargs)
        with self._lock:
            self._all.append(env)
        return env

    def release(self, env: Any, task_id: str | None = None) -> None:
        with self._lock:
            self._idle.append((env, task_id))

    def final_patch(self, env: Any) -> str:
        """The agent's change as a unified diff (the environment's ``sandbox`` is public for this)."""
        return env.unwrapped.sandbox.diff()

    def close(self) -> None:
        with self._lock:
            envs, self._all, self._idle = self._all, [], []
        for env in envs:
            env.close()

    def __enter__(self) -> "LocalEnvPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
