"""Grading views kept between grading runs, so process-reward grading can use a warm test server.

Every grading run needs a fresh view of the pristine tree. Opening a new sandbox for
each gives that, but also a new sandbox holder and a cold interpreter for every test run. A
:class:`ViewPool` keeps the sandboxes it lends, and before lending one again *renews* it: a fresh
copy-on-write layer over the same holder, ``/tmp`` emptied, nothing left running (the warm server
kills whatever a run leaves). The renewal starts the sandbox's warm server again over the new
layer (its Landlock rules name the mount it started on), so it imports pytest while the next
grading applies its patch.

Views are never an agent's sandbox: the agent's commands cannot reach a pooled view or its server.
Backends that cannot renew in place (docker, local) get a new sandbox each time, as before.

>>> with ViewPool() as pool:                                  # doctest: +SKIP
...     v = grade(task, patch, views=pool)
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Iterator, Protocol

from deepgym_envs.errors import InfrastructureError
from deepgym_envs.sandbox import Renewable, Sandbox, SandboxLimits, SandboxSpec, default_backend, make_sandbox

Key = tuple[str, str, "SandboxLimits | None", SandboxSpec]


class _View(Sandbox, Renewable, Protocol):
    """What the pool keeps: only views it can renew."""


class ViewPool:
    """Renewable grading sandboxes by (tree, backend, limits, spec); at most ``max_idle`` kept idle."""

    def __init__(self, max_idle: int = 2) -> None:
        self.max_idle = max_idle
        self._idle: OrderedDict[int, tuple[Key, _View]] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False
        self.lent = self.created = 0

    @contextlib.contextmanager
    def view(self, tree: Path, backend: str | None = None, limits: SandboxLimits | None = None,
             spec: SandboxSpec | None = None) -> Iterator[Sandbox]:
        """A sandbox showing the pristine tree, for one grading run; kept afterwards if it is healthy.

        ``spec`` goes to :func:`make_sandbox` (a task's Python environment, say) and is part of
        the key: a view is only reused for the same tree seen the same way.
        """
        spec = spec or SandboxSpec()
        key: Key = (str(tree), backend or default_backend(), limits, spec)
        taken = self._take(key)
        sb: Sandbox | None = taken
        if taken is not None:
            try:
                taken.renew()
            except InfrastructureError:  # a view that cannot be renewed is replaced, not a verdict lost
                taken.close()
                sb = None
        if sb is None:
            sb = make_sandbox(tree, backend, limits, spec=spec)
            with self._lock:
                self.created += 1
        with self._lock:
            self.lent += 1
        healthy = False
        try:
            yield sb
            healthy = True
        finally:
            if healthy and isinstance(sb, Renewable):
                self._give(key, sb)
            else:
                sb.close()

    def _take(self, key: Key) -> _View | None:
        with self._lock:
            for ident, (k, sb) in self._idle.items():
                if k == key:
                    del self._idle[ident]
                    return sb
        return None

    def _give(self, key: Key, sb: _View) -> None:
        evicted: list[Sandbox] = []
        with self._lock:
            if self._closed:
                evicted.append(sb)
            else:
                self._idle[id(sb)] = (key, sb)
                while len(self._idle) > self.max_idle:
                    evicted.append(self._idle.popitem(last=False)[1][1])  # least recently used
        for old in evicted:
            old.close()

    @property
    def idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        """Close every idle view; views lent out are closed when they come back. Idempotent."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle.values()), OrderedDict()
        for _, sb in idle:
            sb.close()

    def __enter__(self) -> "ViewPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
