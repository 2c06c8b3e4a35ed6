"""What a sandbox is asked to be, beyond its tree and limits: one typed, validated value.

>>> SandboxSpec(pythonpath=["src"]).pythonpath
('src',)
>>> SandboxSpec.from_options(python_path=["src"])
Traceback (most recent call last):
...
deepgym_envs.errors.DeepgymError: unknown sandbox option 'python_path' (did you mean 'pythonpath'?); valid options: image, warm_tests, python_prefix, python_home, pythonpath, network, writable, readonly
>>> SandboxSpec(network=True).require("docker")
Traceback (most recent call last):
...
deepgym_envs.errors.SandboxUnavailable: the 'docker' backend cannot take network=True: build steps get network (a user-mode stack) only on the namespace backend (deepgym_envs.sandbox.build)

Every backend takes every field or refuses it, here, with the reason (:meth:`SandboxSpec.require`).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from typing import Any, Sequence

from deepgym_envs.errors import DeepgymError, SandboxUnavailable

_BUILD_ONLY = "build steps {what} only on the namespace backend (deepgym_envs.sandbox.build)"
#: backend -> field -> why that backend cannot honour a non-default value of it.
_REFUSED: dict[str, dict[str, str]] = {
    "namespace": {"image": "it runs the host's own system, not an image; choose sandbox='docker'"},
    "local": {"image": "it runs the host's own system, not an image; choose sandbox='docker'",
              "network": _BUILD_ONLY.format(what="get network (a user-mode stack)"),
              "writable": _BUILD_ONLY.format(what="bind host directories read-write"),
              "readonly": _BUILD_ONLY.format(what="bind extra host directories")},
    "docker": {"network": _BUILD_ONLY.format(what="get network (a user-mode stack)"),
               "writable": _BUILD_ONLY.format(what="bind host directories read-write"),
               "readonly": _BUILD_ONLY.format(what="bind extra host directories")},
}


@dataclass(frozen=True)
class SandboxSpec:
    """Options for :func:`deepgym_envs.sandbox.make_sandbox`. Hashable: grading views are pooled by it."""

    image: str | None = None
    """docker: the image to run in (default: the tree's own image, else the built-in one)."""
    warm_tests: bool = True
    """Serve pytest runs from a pre-imported server, and the agent's ``bash`` steps from a resident
    command server, where the backend has them (namespace)."""
    python_prefix: str | None = None
    """A task's Python environment (:mod:`deepgym_envs.pyenv`): bound read-only, first on ``PATH``."""
    python_home: str | None = None
    """The installation of the interpreter ``python_prefix`` was made from, when it is not deepgym's
    own (a pyenv or uv Python): bound read-only at its path, as the environment's ``python`` links
    there. The host names it (:func:`deepgym_envs.pyenv.find_python`), never the environment, which
    a build sandbox wrote."""
    pythonpath: tuple[str, ...] = ()
    """Workspace directories, relative to its root, the project is imported from."""
    network: bool = False
    """Fetch steps only: outbound network through a user-mode stack, never the host's services
    (:mod:`deepgym_envs.sandbox.netstack`)."""
    writable: tuple[tuple[str, str], ...] = ()
    """Build steps only: (host directory, path inside) pairs bound read-write."""
    readonly: tuple[str | tuple[str, str], ...] = ()
    """Build steps only: more host directories bound read-only, at the same path or as (host, inside)."""

    def __post_init__(self) -> None:
        def fix(name: str, value: object) -> None:  # frozen: normalised once, here
            object.__setattr__(self, name, value)

        if self.image is not None and (not isinstance(self.image, str) or not self.image.strip()):
            raise DeepgymError(f"sandbox option image={self.image!r}: expected an image name")
        if not isinstance(self.warm_tests, bool) or not isinstance(self.network, bool):
            raise DeepgymError("sandbox options warm_tests and network are True or False")
        for name in ("python_prefix", "python_home"):
            path = getattr(self, name)
            if path is None:
                continue
            if isinstance(path, os.PathLike):
                path = os.fspath(path)
            if not isinstance(path, str) or not os.path.isabs(path):
                raise DeepgymError(f"sandbox option {name}={getattr(self, name)!r}: expected an absolute path")
            fix(name, path)
        fix("pythonpath", _strings("pythonpath", self.pythonpath))
        fix("writable", tuple(_pair("writable", w) for w in _sequence("writable", self.writable)))
        fix("readonly", tuple(r if isinstance(r, str) else _pair("readonly", r)
                              for r in _sequence("readonly", self.readonly)))

    @classmethod
    def from_options(cls, base: "SandboxSpec | None" = None, **options: Any) -> "SandboxSpec":
        """``base`` with ``options`` (field names) replaced; an unknown name says which ones exist."""
        names = [f.name for f in dataclasses.fields(cls)]
        for name in options:
            if name not in names:
                close = difflib.get_close_matches(name, names, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise DeepgymError(f"unknown sandbox option {name!r}{hint}; valid options: {', '.join(names)}")
        return dataclasses.replace(base or cls(), **options)

    def options(self) -> dict[str, Any]:
        """The fields that differ from their defaults, by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != f.default}

    def require(self, backend: str) -> None:
        """SandboxUnavailable naming the first field ``backend`` cannot honour, and why."""
        refused = _REFUSED.get(backend, {})
        for name, value in self.options().items():
            if name in refused:
                raise SandboxUnavailable(f"the {backend!r} backend cannot take {name}={value!r}: {refused[name]}")


def _sequence(name: str, value: object) -> tuple:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise DeepgymError(f"sandbox option {name}={value!r}: expected a list")
    return tuple(value)


def _strings(name: str, value: object) -> tuple[str, ...]:
    items = _sequence(name, value)
    if not all(isinstance(v, str) for v in items):
        raise DeepgymError(f"sandbox option {name}={value!r}: expected a list of strings")
    return items


def _pair(name: str, value: object) -> tuple[str, str]:
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 2:
        raise DeepgymError(f"sandbox option {name}: {value!r} is not a (host path, path inside) pair")
    host, inside = value
    if not isinstance(host, (str, os.PathLike)) or not isinstance(inside, (str, os.PathLike)):
        raise DeepgymError(f"sandbox option {name}: {value!r} is not a pair of paths")
    return os.fspath(host), os.fspath(inside)
