"""Tasks with a ``python_env`` on the docker backend (every synthesised task carries one).

The backend used to take neither ``python_prefix`` nor ``pythonpath``: a TypeError outside grading's
no_verdict handling. Offline: the environment is a virtual environment of this interpreter with
this process's own pytest copied in, put where :func:`ensure_env` finds it built.
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

from conftest import GOLD_PATCH, TOY_FILES, require_docker, toy_row
from deepgym_envs.errors import SandboxUnavailable
from deepgym_envs.grading import grade
from deepgym_envs.pyenv import PythonEnv, create_venv, env_prefix, finish_env, sandbox_spec
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.tasks import task_from_row
from deepgym_envs.trees import pristine_tree

pytestmark = [pytest.mark.docker, pytest.mark.slow]



def _runner() -> list[str]:
    """What the test runner needs in the environment: pytest and what it requires, here."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    names, todo = [], ["pytest"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name not in names:
            names.append(name)
            for line in importlib.metadata.requires(name) or ():
                req = Requirement(line)
                if req.marker is None or req.marker.evaluate({"extra": ""}):
                    todo.append(req.name)
    return names


RUNNER = _runner()


@pytest.fixture(autouse=True)
def _engine() -> None:
    require_docker()


def _repo(root: Path) -> Path:
    """The toy library without pytest's own ``pythonpath`` setting: only the task's makes ``calc`` importable."""
    files = {**TOY_FILES, "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1.0"\n'}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _built_env(env: PythonEnv) -> Path:
    """``env`` as :func:`ensure_env` would leave it, made from this process's own packages (no index)."""
    prefix = env_prefix(env)
    create_venv(prefix)
    site = next(prefix.glob("lib/python*/site-packages"))
    for name in RUNNER:
        dist = importlib.metadata.distribution(name)
        for file in dist.files or ():
            src = Path(dist.locate_file(file))
            if src.is_file() and ".." not in file.parts:
                (site / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, site / file)
    finish_env(prefix, env)
    return prefix


def _task(tmp_path: Path, python_env: dict):
    return task_from_row(toy_row(_repo(tmp_path / "calc"), python_env=python_env))


def test_a_task_with_only_import_roots_grades_on_docker(tmp_path):
    task = _task(tmp_path, {"requirements": [], "pythonpath": ["src"]})
    assert grade(task, GOLD_PATCH, backend="docker").status == "resolved"
    empty = grade(task, "", backend="docker")
    assert empty.status == "unresolved" and empty.tests["tests/test_ops.py::test_clamp_above"] == "failed"


def test_a_task_with_its_own_environment_grades_on_docker(tmp_path):
    pins = [f"{name}=={importlib.metadata.version(name)}" for name in RUNNER]
    task = _task(tmp_path, {"requirements": pins, "pythonpath": ["src"]})
    prefix = _built_env(PythonEnv.from_dict(task.python_env)).resolve()
    with make_sandbox(pristine_tree(task), "docker", spec=sandbox_spec(task)) as sb:
        sb.write_file("src/pluggy.py", b"raise SystemExit('planted by the agent')\n")
        seen = sb.exec(["python", "-c", "import sys, calc, pluggy; print(sys.prefix, calc.__file__, pluggy.__file__)"])
        assert seen.exit_code == 0, seen.output
        # The environment's interpreter and packages; the project from the workspace, unable to shadow them.
        assert seen.stdout.split() == [str(prefix), "/testbed/src/calc/__init__.py",
                                       f"{next(prefix.glob('lib/python*/site-packages'))}/pluggy/__init__.py"]
        assert sb.exec(["touch", f"{prefix}/bin/planted"]).exit_code != 0
        assert not (prefix / "bin" / "planted").exists()
        # Where the base interpreter is bound, nothing of its site-packages shows: neither deepgym's
        # installed copy (task files) nor another package (a vendored copy of the project's fix).
        hidden = sb.exec(["python", "-c", "import os, sys; d = os.path.join(sys.base_prefix, 'lib', "
                          "f'python{sys.version_info[0]}.{sys.version_info[1]}', 'site-packages'); "
                          "print(os.listdir(d) if os.path.isdir(d) else [])"])
        assert hidden.exit_code == 0 and hidden.stdout.strip() == "[]", hidden.output
    gold = grade(task, GOLD_PATCH, backend="docker")
    assert gold.status == "resolved", gold.reason
    empty = grade(task, "", backend="docker")
    assert empty.status == "unresolved" and empty.tests["tests/test_ops.py::test_clamp_above"] == "failed"


def test_an_environment_the_image_cannot_run_is_refused_with_the_reason(tmp_path, toy_task):
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("#!/bin/sh\necho 'no such C library' >&2\nexit 3\n")
    (prefix / "bin" / "python").chmod(0o755)
    with pytest.raises(SandboxUnavailable, match="does not run in the docker image.*no such C library"):
        make_sandbox(pristine_tree(toy_task), "docker", python_prefix=str(prefix))
