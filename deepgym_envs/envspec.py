"""What a task's ``python_env`` field asks for: pinned requirements and the repository's import
roots, checked as the row is read (:mod:`deepgym_envs.pyenv` builds the environment).

>>> PythonEnv.from_dict({"requirements": ["attrs==24.2.0"], "pythonpath": ["src"]}).pythonpath
('src',)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

_PLAIN_PATH = re.compile(r"[\w.+/-]+")
#: Variables a task environment may set (``environ``): each a switch of one project's own
#: behaviour that an official harness sets for its tests. Never one that steers the interpreter,
#: pytest, the loader or deepgym (``PYTEST_ADDOPTS`` could load a plugin before deepgym's): a row is
#: untrusted input, so this is a list of what is known to be harmless, not of what is not.
ENVIRON_ALLOWED = frozenset({
    "SYMPY_USE_CACHE",  # sympy's bin/test -C, as SWE-bench runs it: results differ with the cache on
})
_PLAIN_VALUE = re.compile(r"[\w.,:=+-]*")


@dataclass(frozen=True)
class PythonEnv:
    """What a task's tests need to run: pinned packages and the repository's import roots."""

    requirements: tuple[str, ...] = ()
    """Pinned requirement lines; empty means deepgym's own interpreter."""
    pythonpath: tuple[str, ...] = ()
    """Repository directories (relative to its root) placed on ``PYTHONPATH``."""
    python: str = field(default_factory=lambda: f"{sys.version_info.major}.{sys.version_info.minor}")
    """The Python version (``"3.9"``) the environment is made with (:func:`deepgym_envs.pyenv.find_python`)."""
    environ: tuple[tuple[str, str], ...] = ()
    """Variables set in every interpreter the environment starts (names from :data:`ENVIRON_ALLOWED`)."""
    derived: tuple[str, ...] = ()
    """Requirements as the project declares them at its environment set-up commit (``name<range>``,
    :func:`check_range`), which the pins do not cover: resolved to the newest releases they allow
    when the environment is built, in its fetch step (as the harness's ``pip install -e .`` resolves
    them), and recorded in the built environment's ``.complete``."""
    install_project: bool = False
    """Install the repository itself as the official harness's ``pip install -e .`` does, so its
    entry points and distribution metadata exist (:func:`deepgym_envs.pyenv.ensure_project`); its
    code is still imported from the working copy."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PythonEnv":
        """Read the task field; ValueError naming the key when it is malformed."""
        if not isinstance(data, dict):
            raise ValueError("expected an object with 'requirements' and 'pythonpath'")
        unknown = set(data) - {"requirements", "pythonpath", "python", "environ", "install_project", "derived"}
        if unknown:
            raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}")
        out: dict[str, Any] = {}
        for key in ("requirements", "pythonpath", "derived"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key!r} must be a list of strings")
            out[key] = tuple(value)
        for line in out["requirements"]:
            check_requirement(line)
        for line in out["derived"]:
            check_range(line)
        for path in out["pythonpath"]:
            # Each entry becomes a line of a .pth file, which site runs when it starts with "import ":
            # a plain relative path (no whitespace or control characters) can never be one.
            if not _PLAIN_PATH.fullmatch(path) or path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"pythonpath entry {path!r} must be a plain directory path relative to the "
                                 "repository root (letters, digits, '.', '_', '-', '+', '/')")
        if "python" in data:
            if not isinstance(data["python"], str):
                raise ValueError("'python' must be a string such as '3.11'")
            out["python"] = data["python"]
        environ = data.get("environ") or {}
        if not isinstance(environ, dict):
            raise ValueError("'environ' must be an object of variable names to values")
        for name, value in environ.items():
            if name not in ENVIRON_ALLOWED:
                raise ValueError(f"environ: {name!r} is not a variable a task may set (allowed: "
                                 f"{', '.join(sorted(ENVIRON_ALLOWED))})")
            if not isinstance(value, str) or not _PLAIN_VALUE.fullmatch(value):
                raise ValueError(f"environ: {name}'s value must be plain text (letters, digits, '.,:=+-_')")
        out["environ"] = tuple(sorted(environ.items()))
        if not isinstance(data.get("install_project", False), bool):
            raise ValueError("'install_project' must be true or false")
        out["install_project"] = data.get("install_project", False)
        return cls(**out)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requirements": list(self.requirements), "pythonpath": list(self.pythonpath),
                               "python": self.python}
        if self.environ:
            out["environ"] = dict(self.environ)
        if self.derived:
            out["derived"] = list(self.derived)
        if self.install_project:
            out["install_project"] = True
        return out


def _one_requirement(line: str, form: str) -> Requirement:
    """``line`` parsed as one requirement line of ``form`` (named in the errors): one line, no pip
    option, something ``packaging`` reads; ValueError naming the line otherwise."""
    if not line or line != line.strip() or any(c in line for c in "\n\r\0\\"):
        raise ValueError(f"requirement {line!r}: expected one line of the form {form}")
    if line.startswith("-"):
        raise ValueError(f"requirement {line!r}: pip options are not allowed, only {form}")
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise ValueError(f"requirement {line!r}: not {form} (a path is not allowed, nor a URL): {exc}") from None


def check_range(line: str) -> Requirement:
    """``line`` parsed, when it names a release of the index by a name and a version range
    (``name[extras]<specifier>``, a marker allowed: what a project declares); ValueError otherwise.
    No URL, path or pip option: the range is handed to a fetch step, which resolves it to a pin.

    >>> str(check_range("astroid<=2.14.0-dev0,>=2.12.2"))
    'astroid<=2.14.0-dev0,>=2.12.2'
    """
    req = _one_requirement(line, "name<specifier>")
    if req.url or "/" in line:
        raise ValueError(f"requirement {line!r}: URLs and paths are not allowed")
    return req


def check_requirement(line: str) -> Requirement:
    """``line`` parsed, when it pins one release by name (``name[extras]==version``, an environment
    marker allowed); ValueError naming the line otherwise.

    >>> str(check_requirement("attrs==24.2.0"))
    'attrs==24.2.0'
    """
    req = _one_requirement(line, "name==version")
    if req.url:
        raise ValueError(f"requirement {line!r}: URLs are not allowed, only a release from the index (name==version)")
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
        raise ValueError(f"requirement {line!r}: not pinned to one release (expected name==version)")
    return req
