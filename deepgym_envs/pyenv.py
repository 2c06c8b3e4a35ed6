"""Per-task Python environments: the interpreter and packages a task's tests run with.

Built-in tasks run with deepgym's own interpreter. Tasks made from real projects need that
project's dependencies (and its test dependencies), which must not be installed into deepgym's
interpreter, nor once per sandbox. A task names its environment in the ``python_env`` field:

    "python_env": {"requirements": ["pytest==8.3.3", "attrs==24.2.0"], "pythonpath": ["src"]}

* ``requirements`` — pinned packages (``pip freeze`` form). They are installed once per machine
  into a virtual environment under ``$DEEPGYM_CACHE/envs/<hash>`` (built at first use, under a
  file lock, like pristine trees), which every sandbox binds **read-only** and puts first on
  ``PATH``, so ``python`` inside the sandbox, the test runner included, is that environment's.
  An empty list means deepgym's own interpreter (which then must have what the tests need).
* ``pythonpath`` — directories of the repository, relative to its root, put on ``PYTHONPATH``
  inside the sandbox: the project is imported from the agent's (or the grader's) working copy,
  never from an installed copy, so a fix takes effect without reinstalling anything.

>>> env = PythonEnv.from_dict({"requirements": [], "pythonpath": ["src"]})
>>> sandbox_options_for(env)
{'pythonpath': ('src',)}
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym_envs.errors import InfrastructureError

#: Seconds one environment build may take (pip resolving and downloading included).
BUILD_TIMEOUT = 900


@dataclass(frozen=True)
class PythonEnv:
    """What a task's tests need to run: pinned packages and the repository's import roots."""

    requirements: tuple[str, ...] = ()
    """Pinned requirement lines; empty means deepgym's own interpreter."""
    pythonpath: tuple[str, ...] = ()
    """Repository directories (relative to its root) placed on ``PYTHONPATH``."""
    python: str = field(default_factory=lambda: f"{sys.version_info.major}.{sys.version_info.minor}")
    """The Python version the requirements were resolved for (informational; the host's is used)."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PythonEnv":
        """Read the task field; ValueError naming the key when it is malformed."""
        if not isinstance(data, dict):
            raise ValueError("expected an object with 'requirements' and 'pythonpath'")
        unknown = set(data) - {"requirements", "pythonpath", "python"}
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for key in ("requirements", "pythonpath"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key!r} must be a list of strings")
            out[key] = tuple(value)
        for path in out["pythonpath"]:
            if path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"pythonpath entry {path!r} must be relative to the repository root")
        if "python" in data:
            if not isinstance(data["python"], str):
                raise ValueError("'python' must be a string such as '3.11'")
            out["python"] = data["python"]
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        return {"requirements": list(self.requirements), "pythonpath": list(self.pythonpath), "python": self.python}

    @property
    def key(self) -> str:
        """Names the built environment: the same requirements on the same interpreter share one."""
        spec = json.dumps([sorted(self.requirements), list(self.pythonpath), sys.version_info[:2],
                           os.path.realpath(sys.executable)])
        return hashlib.sha256(spec.encode()).hexdigest()[:16]


def env_root() -> Path:
    from deepgym_envs.trees import cache_root

    return cache_root() / "envs"


def ensure_env(env: PythonEnv) -> Path | None:
    """The environment's prefix (a virtual environment), building it on first use.

    ``None`` when the environment is deepgym's own interpreter (no requirements). Concurrent
    callers, in this process or others, wait on a file lock and build it once.
    """
    if not env.requirements:
        return None
    dest = env_root() / env.key
    if (dest / ".complete").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            return dest
        shutil.rmtree(dest, ignore_errors=True)  # a build that died half-way
        try:
            create_venv(dest)
            pip_install(dest, ["-r", _write_requirements(dest, env.requirements)])
        except InfrastructureError:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        finish_env(dest, env)
    return dest


def finish_env(prefix: Path, env: PythonEnv) -> None:
    """Point the environment at the workspace, and mark it complete.

    The repository's import roots go into a ``.pth`` file, which ``site`` appends *after*
    site-packages: the project is imported from ``/testbed``, but a module the agent plants there
    (an ``iniconfig.py``, say) can never shadow one the test runner imports. ``PYTHONPATH`` would
    put ``/testbed`` first and let it.
    """
    from deepgym_envs.sandbox.base import WORKDIR

    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    lines = [os.path.normpath(os.path.join(WORKDIR, p)) for p in env.pythonpath]
    (site / "deepgym-workspace.pth").write_text("".join(f"{line}\n" for line in lines))
    (prefix / ".complete").write_text(json.dumps(env.to_dict(), indent=1) + "\n")


def create_venv(dest: Path) -> None:
    """An empty virtual environment of this interpreter (no pip inside: the host's pip drives it)."""
    _run([_base_python(), "-m", "venv", "--without-pip", str(dest)], what=f"creating a virtual environment at {dest}")


def pip_install(prefix: Path, args: list[str], *, timeout: float = BUILD_TIMEOUT) -> str:
    """``pip install ARGS`` into the environment at ``prefix``, with the host's pip."""
    return _run([sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "install",
                 "--no-input", "--disable-pip-version-check", "-q", *args], what="pip install", timeout=timeout)


def pip_freeze(prefix: Path) -> list[str]:
    """The environment's packages, pinned; local builds (``name @ file://``) are left out."""
    out = _run([sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "freeze",
                "--disable-pip-version-check", "--all"], what="pip freeze")
    return [line.strip() for line in out.splitlines()
            if line.strip() and not line.startswith(("#", "-e ")) and " @ " not in line
            and line.split("==")[0].lower() not in ("pip", "setuptools", "wheel")]


def sandbox_options_for(env: PythonEnv | None) -> dict[str, Any]:
    """Keyword arguments for :func:`deepgym_envs.sandbox.make_sandbox` that run in this environment."""
    if env is None:
        return {}
    options: dict[str, Any] = {}
    prefix = ensure_env(env)
    if prefix is not None:
        options["python_prefix"] = str(prefix)
    if env.pythonpath:
        options["pythonpath"] = env.pythonpath
    return options


def sandbox_options(task: Any) -> dict[str, Any]:
    """The sandbox options a task's ``python_env`` asks for (``{}`` for tasks that name none)."""
    raw = getattr(task, "python_env", None)
    return sandbox_options_for(PythonEnv.from_dict(raw)) if raw else {}


def _write_requirements(dest: Path, requirements: tuple[str, ...]) -> str:
    path = dest / "requirements.txt"
    path.write_text("\n".join(requirements) + "\n")
    return str(path)


def _base_python() -> str:
    """The interpreter behind this one: a venv made from a venv's python chains to it anyway."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = os.path.join(sys.base_prefix, "bin", name)
    return candidate if os.path.exists(candidate) else sys.executable


def _run(argv: list[str], *, what: str, timeout: float = BUILD_TIMEOUT) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"{what} took longer than {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise InfrastructureError(f"{what} failed: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    return proc.stdout
