"""The environment an imported row gets: the spec table's, unless the row or the user says otherwise.

What wins, most specific first (each key given replaces the same key of what is below it, so an
override of ``requirements`` alone keeps the spec's ``python`` and ``pythonpath``):

1. the row's own ``python_env`` (hand-edited rows: the README's "set python_env in the row");
2. ``--env-overrides FILE``, a JSON object whose keys are an ``instance_id``, ``owner/name@version``
   or ``owner/name`` (tried in that order) and whose values are ``python_env`` objects;
3. the spec table (:mod:`deepgym_envs.swebench_specs`), with ``install_project`` on: the project is
   installed into its environment as the official harness's ``pip install -e .`` does
   (:func:`deepgym_envs.pyenv.ensure_project`), unless a row or override says ``false``.

Rows and override files are untrusted alike: the result is checked as a task's ``python_env`` is
(:meth:`~deepgym_envs.envspec.PythonEnv.from_dict`: pinned requirements, no URLs, paths or options).

>>> overrides = EnvOverrides({"psf/requests": {"requirements": ["pytest==7.4.4"]}}, "o.json")
>>> env, note = choose_python_env({"instance_id": "psf__requests-1", "repo": "psf/requests", "version": "2.0"},
...                               {"requirements": [], "pythonpath": ["."], "python": "3.9"}, overrides, "rows", 1)
>>> env["requirements"], env["python"], env["install_project"], note
(['pytest==7.4.4'], '3.9', True, 'python_env from o.json (psf/requests)')
"""

from __future__ import annotations

import ast
import configparser
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from deepgym_envs.envspec import PythonEnv, check_range
from deepgym_envs.errors import TaskFormatError

#: Bytes of an overrides file read (a whole benchmark's worth of entries fits many times over).
_MAX_BYTES = 16 << 20


@dataclass(frozen=True)
class EnvOverrides:
    """``--env-overrides``: ``python_env`` objects by instance id, ``owner/name@version`` or ``owner/name``."""

    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""
    """The file they came from (named in each row's note)."""

    def lookup(self, row: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(key, python_env) of the most specific entry for ``row``, or None."""
        repo, version = str(row.get("repo") or ""), str(row.get("version") or "")
        for key in (str(row.get("instance_id") or ""), f"{repo}@{version}" if version else "", repo):
            if key and key in self.entries:
                return key, self.entries[key]
        return None


def load_env_overrides(path: str | Path) -> EnvOverrides:
    """Read and check ``--env-overrides FILE``; TaskFormatError naming the file and key when malformed."""
    where = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise TaskFormatError(where, None, None, f"cannot read the overrides file: {exc.strerror or exc}") from None
    if len(raw) > _MAX_BYTES:
        raise TaskFormatError(where, None, None, f"larger than {_MAX_BYTES} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TaskFormatError(where, None, None, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise TaskFormatError(where, None, None, 'expected an object: {"owner/name@version": {"requirements": '
                              '[...]}, "owner/name": {...}, "<instance_id>": {...}}')
    for key, value in data.items():
        try:
            PythonEnv.from_dict(value)
        except ValueError as exc:
            raise TaskFormatError(where, None, key, f"not a python_env: {exc}") from None
    return EnvOverrides(data, where)


def choose_python_env(row: dict[str, Any], spec_env: dict[str, Any], overrides: EnvOverrides | None,
                      file: str, line: int | None,
                      readers: Sequence[Reader] = ()) -> tuple[dict[str, Any], str]:
    """(the ``python_env`` the imported row gets, a note saying where it came from or ``""``).

    ``row`` is the row as published (its own ``python_env`` included), ``spec_env`` the table's.
    ``readers``: of the row's base commit and environment set-up commit, whose declared
    requirements complete the table's (:func:`derive_env`) when neither the row nor an override
    gives the environment (those are taken as they are). TaskFormatError naming the row's field
    when the result is not a valid ``python_env``."""
    spec_env = {**spec_env, "install_project": True}
    own = row.get("python_env")
    found = overrides.lookup(row) if overrides is not None else None
    if own is not None:
        if not isinstance(own, dict):
            raise TaskFormatError(file, line, "python_env", "expected an object such as "
                                  '{"requirements": ["name==version"], "python": "3.9"}')
        chosen, note = own, "python_env from the row"
    elif found is not None:
        chosen, note = found[1], f"python_env from {overrides.source if overrides else ''} ({found[0]})"
    elif readers and spec_env.get("requirements"):
        chosen, note = derive_env(spec_env, readers)
    else:
        chosen, note = {}, ""
    env = {**spec_env, **chosen}
    try:
        return PythonEnv.from_dict(env).to_dict(), note
    except ValueError as exc:
        raise TaskFormatError(file, line, "python_env", str(exc)) from None


# -- what the environment set-up commit declares --------------------------------------------------

#: Bytes of one such file read; a larger one is skipped.
SETUP_FILE_BYTES = 1 << 20
#: ``read(path)``: the text of a file of one commit, or None where it has none.
Reader = Callable[[str], "str | None"]


def declared_requirements(read: Reader) -> list[str]:
    """The run-time requirements a project declares, from its files as ``read(path)`` gives them
    (``None``: not there): ``setup.cfg`` ``[options] install_requires``, ``pyproject.toml``
    ``[project] dependencies``, a literal ``install_requires`` list in ``setup.py`` (read as a syntax
    tree, never run): what the harness's ``pip install -e .`` enforces. Not ``requirements.txt``,
    which pip does not read there and which often lists a project's own tools of its day (requests'
    2014 file asks for ``pexpect-u``, which no longer builds). Only plain ``name[extras]<specifier>`` lines (a marker
    allowed) are kept: no URL, path or option.

    >>> declared_requirements({"setup.cfg": "[options]\\ninstall_requires =\\n  astroid>=2.12.2,<=2.14.0-dev0\\n"}.get)
    ['astroid<=2.14.0-dev0,>=2.12.2']
    """
    lines: list[str] = []
    text = read("setup.cfg")
    if text:
        parser = configparser.RawConfigParser(strict=False)
        try:
            parser.read_string(text)
            lines += parser.get("options", "install_requires", fallback="").splitlines()
        except configparser.Error:
            pass
    text = read("pyproject.toml")
    if text:
        try:
            deps = _toml_loads(text).get("project", {}).get("dependencies", [])
        except ValueError:
            deps = []
        lines += [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
    text = read("setup.py")
    if text:
        lines += _literal_install_requires(text)
    out: dict[str, str] = {}
    for line in lines:
        try:
            req = check_range(line.strip())
        except ValueError:
            continue
        out.setdefault(canonicalize_name(req.name), str(req))
    return list(out.values())


def merge_declared(pins: list[str], declared: list[str], python: str) -> tuple[list[str], list[str], list[str]]:
    """(pins kept, ranges to resolve, pins replaced): the spec table's pins win over what the
    project declares, unless the project's own range excludes the pinned release (pylint 2.15's
    later set-up commits need ``astroid>=2.12.2``; the table pinned 2.11.7): then the range is
    resolved instead. Declared names the table lacks become ranges, resolved when the environment
    is built (:func:`deepgym_envs.pyenv.ensure_env`), as the harness's ``pip install -e .`` resolves
    them. A requirement whose marker is false on ``python`` is left out."""
    marker_env = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
                  "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
                  "platform_python_implementation": "CPython", "platform_machine": "x86_64", "extra": ""}
    pinned = {canonicalize_name(Requirement(p).name): p for p in pins}
    ranges, replaced = [], []
    for line in declared:
        req = Requirement(line)
        try:
            if req.marker is not None and not req.marker.evaluate(marker_env):
                continue
        except Exception:  # an undefined marker variable: the requirement is not for this environment
            continue
        req.marker = None
        name = canonicalize_name(req.name)
        pin = pinned.get(name)
        if pin is None:
            ranges.append(str(req))
        elif not req.specifier.contains(next(iter(Requirement(pin).specifier)).version, prereleases=True):
            replaced.append(pin)
            del pinned[name]
            ranges.append(str(req))
    kept = [p for p in pins if p not in replaced]
    return kept, ranges, replaced


def derive_env(spec_env: dict[str, Any], readers: Sequence[Reader]) -> tuple[dict[str, Any], str]:
    """The keys of ``spec_env`` that the declared requirements change, and a note saying how.

    ``readers``: the base commit's files, then the environment set-up commit's. The harness builds
    the environment from the set-up commit, then runs ``pip install -e .`` at the base commit, which
    makes the base's own ranges hold: so a name both declare takes the base commit's range."""
    declared: dict[str, str] = {}
    for read in readers:
        for line in declared_requirements(read):
            declared.setdefault(canonicalize_name(Requirement(line).name), line)
    pins = list(spec_env.get("requirements", []))
    kept, ranges, replaced = merge_declared(pins, list(declared.values()), str(spec_env.get("python", "")))
    if not ranges:
        return {}, ""
    note = f"declared by the project: {', '.join(ranges)}"
    if replaced:
        note += f" (instead of the table's {', '.join(replaced)})"
    return {"requirements": kept, "derived": ranges}, note


def _literal_install_requires(text: str) -> list[str]:
    """``install_requires=[...]`` of a ``setup(...)`` call, or of the module-level name it names,
    when those are literal lists of strings."""
    if len(text) > SETUP_FILE_BYTES:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    names = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            value = names.get(node.value.id) if isinstance(node.value, ast.Name) else node.value
            if isinstance(value, (ast.List, ast.Tuple)):
                return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _toml_loads(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from None
