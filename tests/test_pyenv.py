"""Task environments (deepgym_envs/pyenv.py): built with a pip that supports their Python."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import deepgym_envs
from deepgym_envs.errors import InfrastructureError
from deepgym_envs.pyenv import find_python
from deepgym_envs.sandbox.build import bundled_pip, pip_argv, pip_refusal
from tests.conftest import requires_namespace
from tests.security.test_untrusted_builds import write_wheel

REPO_ROOT = Path(deepgym_envs.__file__).resolve().parents[1]


def _python39() -> str:
    try:
        return find_python("3.9")
    except InfrastructureError as exc:
        pytest.skip(str(exc))


def test_an_environments_pip_is_the_one_its_own_python_ships():
    python = _python39()
    wheel = bundled_pip(python)
    if wheel is None:
        pytest.skip(f"{python}'s installation ships no pip wheel for ensurepip")
    argv = pip_argv(["freeze"], python="/env/bin/python", interpreter=python)
    assert argv == ["/env/bin/python", "-I", os.path.join(wheel, "pip"), "freeze"]
    assert "--python" not in argv and sys.executable not in argv


def test_a_pip_that_refuses_the_python_is_one_line_naming_the_fix():
    said = pip_refusal("ERROR: This version of pip does not support python 3.9 (requires >=3.10).", "Python 3.9")
    assert "\n" not in said and "pip<26" in said and "ensurepip" in said
    assert pip_refusal("ERROR: No matching distribution found for x", "Python 3.9") == ""


@pytest.fixture(scope="module")
def host_with_newest_pip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment of this Python whose pip is 26 or newer (which refuses ``--python``
    targets below 3.10), seeing this Python's packages: deepgym run from there drives that pip."""
    venv = tmp_path_factory.mktemp("host") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    got = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "pip>=26"],
                         capture_output=True, text=True, timeout=300)
    if got.returncode != 0:
        pytest.skip(f"cannot install pip>=26 from the index here: {got.stderr.strip()[-300:]}")
    site = next(venv.glob("lib/python*/site-packages"))
    # The packages of the Python running these tests (it may be a venv itself), after the venv's own.
    (site / "host.pth").write_text("".join(f"{p}\n" for p in sys.path if p.endswith("-packages")))
    return python


@pytest.mark.slow
@requires_namespace
def test_a_39_environment_builds_while_the_hosts_pip_refuses_39(host_with_newest_pip, tmp_path):
    """pip >= 26 on the host (what ``pip install -U pip`` gives) drives no Python below 3.10; the
    environment's own Python's pip builds it, and is not left in it."""
    _python39()
    house = tmp_path / "house"
    house.mkdir()
    write_wheel(str(house), "tinypin", "1.0", {"tinypin/__init__.py": "VALUE = 1\n"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PYTHONPATH=str(REPO_ROOT), DEEPGYM_CACHE=str(tmp_path / "cache"), PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(house), PIP_CONFIG_FILE=os.devnull)
    script = ("import json, os, pip; from deepgym_envs.pyenv import PythonEnv, ensure_env\n"
              "p = ensure_env(PythonEnv.from_dict({'requirements': ['tinypin==1.0'], 'python': '3.9'}))\n"
              "print(json.dumps([pip.__version__, sorted(os.listdir(p / 'lib/python3.9/site-packages'))]))\n")
    proc = subprocess.run([str(host_with_newest_pip), "-c", script], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pip_version, installed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert int(pip_version.split(".")[0]) >= 26
    assert "tinypin" in installed
    assert not any(name.startswith("pip") for name in installed)
