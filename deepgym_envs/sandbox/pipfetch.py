"""Fetching apart from building: index credentials never meet a package's code.

pip runs a package's code whenever it builds one (its build backend prepares metadata and builds
the wheel), and a step that runs it must not hold what the user's pip configuration holds: index
URLs with tokens, ``PIP_*`` variables, a ``pip.conf``. So a build is two kinds of step:

* a **fetch** step (:func:`fetch`, :func:`fetch_sdist`): a networked build sandbox with the user's
  pip configuration, which downloads files and runs no package code: ``pip download
  --only-binary=:all:`` (wheels, their dependencies resolved from wheel metadata), else the one
  file pip would pick per requirement, downloaded by :mod:`._fetch_files` without preparing its
  metadata (an sdist's build requirements are read from its ``pyproject.toml``, never run);
* a **build** step (:func:`install`): an offline build sandbox (no network, no ``PIP_*`` of the
  user's, pip's configuration files hidden) whose pip installs with ``--no-index`` from the
  folders of files fetched so far (:attr:`BuildSandbox.downloads <.build.BuildSandbox.downloads>`). When it
  reports a distribution it did not find there (a dependency only a build revealed), that
  requirement is fetched and the step runs again, a bounded number of rounds.

>>> requirement_names(["--prefer-binary", "attrs==23.2.0", "-r", "req.txt", "./src[test]"])
['attrs==23.2.0']
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from deepgym_envs.errors import InfrastructureError, ToolError
from deepgym_envs.sandbox.base import ExecResult, open_regular
from deepgym_envs.sandbox.build import BuildSandbox, pip_argv

#: Build-and-fetch rounds an install may take (each fetches what the last build missed).
MAX_ROUNDS = 30
_SCRIPT = (Path(__file__).parent / "_fetch_files.py").read_text
#: pip options whose value is the next argument.
_VALUED = ("-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
           "-f", "--find-links", "-t", "--target", "--prefix", "--root", "-d", "--dest", "--python-version",
           "--platform", "--python")
#: Bytes of a requirements file read for its pins.
_LIST_BYTES = 1 << 20
#: pip names the requirement as written, marker included: ``coverage; extra == "testing"``.
_MISSING = re.compile(r"No matching distribution found for ([^\s;]+)")


def fetch(dest: str, requirements: Sequence[str], *, python_version: str | None = None,
          timeout: float = 900) -> str:
    """Download ``requirements`` (``name<spec>`` strings) into ``dest`` in a fetch step: as wheels
    with their dependencies where every one has a wheel, else each one's own file (an sdist's
    build requirements with it). What cannot be found is left for the build step to report; the
    fetch step's own complaint (an index refusing the credentials, say) comes back, or ``""``."""
    reqs = requirement_names(requirements)
    if not reqs:
        return ""
    version = ["--python-version", python_version] if python_version else []
    with BuildSandbox(writable=[dest], network=True) as sb:
        wheels = sb.exec(pip_argv(["download", "--no-input", "-q", "--only-binary=:all:", *version, "-d", dest,
                                   *reqs]), timeout=timeout)
        if wheels.exit_code == 0:
            return ""
        files = sb.exec([sys.executable, "-I", "-c", _SCRIPT(), dest, *version, *reqs], timeout=timeout)
        build = [r for line in files.stdout.splitlines() if line.startswith("REQUIRES ")
                 for r in _json_list(line[len("REQUIRES "):])]
        for req in requirement_names(build):  # one by one: their pins may disagree with each other
            sb.exec(pip_argv(["download", "--no-input", "-q", "--only-binary=:all:", *version, "-d", dest, req]),
                    timeout=timeout)
    return "" if files.exit_code == 0 else files.output.strip()[-600:]


def fetch_sdist(dest: str, requirement: str, *, timeout: float = 300) -> ExecResult:
    """Download the newest source distribution that ``requirement`` allows into ``dest``, in a
    fetch step, preparing nothing (pip's ``download --no-binary`` would run its build backend)."""
    with BuildSandbox(writable=[dest], network=True) as sb:
        return sb.exec([sys.executable, "-I", "-c", _SCRIPT(), dest, "--sdist", requirement], timeout=timeout)


def install(sb: BuildSandbox, python: str, args: list[str], *, timeout: float = 900,
            interpreter: str | None = None, prefetch: Sequence[str] = ()) -> ExecResult:
    """``pip install ARGS`` into ``python``'s environment, in ``sb`` (an offline build sandbox),
    from what fetch steps download: the plain requirements among ``args`` first, then each
    distribution a round's build reports missing. The pip is the one ``interpreter`` (the
    installation the environment was made from) ships (:func:`~.build.pip_argv`). ``prefetch``:
    requirements the build will ask for (a project's build requirements), fetched in the first
    round without being installed, which saves a round."""
    version = _python_version(sb, python)
    fetched: set[str] = set()
    todo = list(dict.fromkeys(requirement_names(args) + listed_requirements(args) + requirement_names(prefetch)))
    complaints: list[str] = []
    result: ExecResult | None = None
    for _ in range(MAX_ROUNDS):
        if todo:
            # A folder per fetch: a fetch step starts from (copies in) its folder, which stays small.
            batch = os.path.join(sb.downloads, str(len(os.listdir(sb.downloads))))
            os.mkdir(batch)
            os.chmod(batch, 0o755)
            complaints.append(fetch(batch, todo, python_version=version))
            fetched.update(todo)
        links = [f"--find-links={os.path.join(sb.downloads, d)}" for d in sorted(os.listdir(sb.downloads))]
        result = sb.exec(pip_argv(["install", "--no-input", "-q", *links, *args], python=python,
                                    interpreter=interpreter), timeout=timeout)
        if result.exit_code == 0 or result.timed_out:
            return result
        todo = [m for m in missing_requirements(result.output) if m not in fetched]
        if not requirement_names(todo):
            break
    assert result is not None
    said = [c for c in complaints if c]
    # The build's error names what it missed; why the fetch step did not get it is the useful part.
    return dataclasses.replace(result, stderr=result.stderr + f"\n(fetch step: {said[-1]})") if said else result


#: What pip builds a project with when its ``pyproject.toml`` names nothing (or it has none).
_LEGACY_BUILD = ["setuptools>=40.8.0", "wheel"]


def build_requires(tree: Path) -> list[str]:
    """``[build-system] requires`` of the project in ``tree`` (its ``pyproject.toml`` read on the
    host, never run), to fetch before pip asks for it."""
    try:
        with open_regular(str(tree / "pyproject.toml"), os.O_RDONLY, "pyproject.toml") as fh:
            text = fh.read(_LIST_BYTES).decode("utf-8", errors="replace")
    except (OSError, ToolError):
        return _LEGACY_BUILD
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib
    try:
        table = tomllib.loads(text).get("build-system")
    except (tomllib.TOMLDecodeError, AttributeError):
        return _LEGACY_BUILD
    requires = table.get("requires", _LEGACY_BUILD) if isinstance(table, dict) else _LEGACY_BUILD
    return [r for r in requires if isinstance(r, str)] if isinstance(requires, list) else _LEGACY_BUILD


def missing_requirements(output: str) -> list[str]:
    """The requirements a failed ``pip install`` says it found no distribution for, without their
    markers (pip has evaluated them already; markdown 3.6's ``[testing]`` extra came back as
    ``coverage; extra == "testing"``, which no fetch step takes).

    >>> missing_requirements('ERROR: No matching distribution found for coverage; extra == "testing"')
    ['coverage']
    """
    return list(dict.fromkeys(_MISSING.findall(output)))


def listed_requirements(args: Sequence[str]) -> list[str]:
    """The plain requirements of the files ``-r FILE`` names (not those they name in turn), for the
    first fetch step: a build reports one missing distribution per round, and wcwidth 0.2.13's
    92-line ``requirements-tests39.txt`` ran past :data:`MAX_ROUNDS`. A path through any link is
    not read (the project is untrusted: ``requirements -> /root`` would turn host files into
    requests to the index)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        path = (args[i + 1] if arg in ("-r", "--requirement") and i + 1 < len(args) else
                arg.split("=", 1)[1] if arg.startswith("--requirement=") else
                arg[2:] if arg.startswith("-r") and not arg.startswith("--") and len(arg) > 2 else None)
        if not path or os.path.realpath(path) != os.path.abspath(path):
            continue
        try:
            with open_regular(path, os.O_RDONLY, path) as fh:
                text = fh.read(_LIST_BYTES).decode("utf-8", errors="replace")
        except (OSError, ToolError):
            continue
        lines = (re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip().rstrip("\\").strip() for line in text.splitlines())
        out += requirement_names([line for line in lines if line and not line.startswith("-")])
    return out


def requirement_names(args: Sequence[str]) -> list[str]:
    """The plain requirements among pip arguments: ``name[extras]<spec>``, no option, no option's
    value, no path or URL (what a fetch step may be asked to download)."""
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement

    out: list[str] = []
    skip = False
    for arg in args:
        if skip or arg.startswith("-"):
            skip = arg in _VALUED
            continue
        if "/" in arg or "\\" in arg or arg.startswith("."):
            continue
        try:
            req = Requirement(arg)
        except InvalidRequirement:
            continue
        if not req.url:
            out.append(arg)
    return out


def _json_list(text: str) -> list[str]:
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _python_version(sb: BuildSandbox, python: str) -> str | None:
    """``X.Y`` of the environment's interpreter when it is not this one's (wheel tags, markers)."""
    result = sb.exec([python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=60)
    version = result.stdout.strip()
    if result.exit_code != 0 or not re.fullmatch(r"\d+\.\d+", version):
        raise InfrastructureError(f"cannot run the environment's interpreter {python}: {result.output[-300:]}")
    return None if version == f"{sys.version_info.major}.{sys.version_info.minor}" else version
