"""The environment an imported row gets: the spec table's, unless the row or the user says otherwise.

What wins, most specific first (each key given replaces the same key of what is below it, so an
override of ``requirements`` alone keeps the spec's ``python`` and ``pythonpath``):

1. the row's own ``python_env`` (hand-edited rows: the README's "set python_env in the row");
2. ``--env-overrides FILE``, a JSON object whose keys are an ``instance_id``, ``owner/name@version``
   or ``owner/name`` (tried in that order) and whose values are ``python_env`` objects;
3. the spec table (:mod:`deepgym_envs.swebench_specs`).

Rows and override files are untrusted alike: the result is checked as a task's ``python_env`` is
(:meth:`~deepgym_envs.envspec.PythonEnv.from_dict`: pinned requirements, no URLs, paths or options).

>>> overrides = EnvOverrides({"psf/requests": {"requirements": ["pytest==7.4.4"]}}, "o.json")
>>> env, note = choose_python_env({"instance_id": "psf__requests-1", "repo": "psf/requests", "version": "2.0"},
...                               {"requirements": [], "pythonpath": ["."], "python": "3.9"}, overrides, "rows", 1)
>>> env["requirements"], env["python"], note
(['pytest==7.4.4'], '3.9', 'python_env from o.json (psf/requests)')
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym_envs.envspec import PythonEnv
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
                      file: str, line: int | None) -> tuple[dict[str, Any], str]:
    """(the ``python_env`` the imported row gets, a note saying where it came from or ``""``).

    ``row`` is the row as published (its own ``python_env`` included), ``spec_env`` the table's.
    TaskFormatError naming the row's field when the result is not a valid ``python_env``."""
    own = row.get("python_env")
    found = overrides.lookup(row) if overrides is not None else None
    if own is not None:
        if not isinstance(own, dict):
            raise TaskFormatError(file, line, "python_env", "expected an object such as "
                                  '{"requirements": ["name==version"], "python": "3.9"}')
        chosen, note = own, "python_env from the row"
    elif found is not None:
        chosen, note = found[1], f"python_env from {overrides.source if overrides else ''} ({found[0]})"
    else:
        return spec_env, ""
    env = {**spec_env, **chosen}
    try:
        return PythonEnv.from_dict(env).to_dict(), note
    except ValueError as exc:
        raise TaskFormatError(file, line, "python_env", str(exc)) from None
