"""Sandboxes: one protocol, several backends chosen by name.

>>> from deepgym_envs.sandbox import make_sandbox
>>> with make_sandbox(tree) as sb:                       # doctest: +SKIP
...     sb.exec(["python", "-c", "print(1)"]).stdout
'1\\n'
"""

from __future__ import annotations

import difflib
from pathlib import Path

from deepgym_envs.errors import DeepgymError
from deepgym_envs.sandbox.base import (WORKDIR, DirEntry, ExecResult, HostViewSandbox, Sandbox,
                                       SandboxLimits)

BACKENDS = ("namespace", "local", "docker")


def default_backend() -> str:
    """``namespace`` wherever it works; otherwise the error that says what to choose instead."""
    return "namespace"


def make_sandbox(pristine: Path, backend: str | None = None, limits: SandboxLimits | None = None,
                 **options: object) -> Sandbox:
    """Open a sandbox over a pristine tree with the named backend.

    Default: ``docker`` for a tree taken from a container image (its task runs in that image),
    else ``namespace``.
    """
    backend = backend or ("docker" if Path(f"{pristine}.image").is_file() else default_backend())
    if backend == "namespace":
        from deepgym_envs.sandbox.namespace import NamespaceSandbox

        return NamespaceSandbox(pristine, limits, **options)  # type: ignore[arg-type]
    if backend == "local":
        from deepgym_envs.sandbox.local import LocalSandbox

        return LocalSandbox(pristine, limits, **options)  # type: ignore[arg-type]
    if backend == "docker":
        from deepgym_envs.sandbox.docker import DockerSandbox

        return DockerSandbox(pristine, limits, **options)  # type: ignore[arg-type]
    close = difflib.get_close_matches(backend, BACKENDS, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise DeepgymError(f"Unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}.{hint}")


__all__ = ["BACKENDS", "WORKDIR", "DirEntry", "ExecResult", "HostViewSandbox", "Sandbox", "SandboxLimits",
           "default_backend", "make_sandbox"]
