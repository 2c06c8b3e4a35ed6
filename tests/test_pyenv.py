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
from deepgym_envs.pyenv import PythonEnv, ensure_env, find_python
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
    # That pip is kept unpacked and compiled, once, for the next steps (from its wheel it compiles anew).
    assert len(list((tmp_path / "cache" / "pips").glob("pip-*/pip/__pycache__/__main__.cpython-39.pyc"))) == 1


# -- the project installed as the harness's `pip install -e .` installs it --------------------------

#: An in-tree build backend (no build requirements to fetch): its wheel holds the project's metadata,
#: an entry point in the group ``myproj.plugins`` among it.
BACKEND = '''import os, zipfile

NAME, VERSION = "myproj", "1.2.3"
INFO = "%s-%s.dist-info" % (NAME, VERSION)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    files = {INFO + "/METADATA": "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (NAME, VERSION),
             INFO + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
             INFO + "/entry_points.txt": "[myproj.plugins]\\nhello = myproj.plugins:hello\\n"}
    files[INFO + "/RECORD"] = "".join("%s,,\\n" % f for f in [*files, INFO + "/RECORD"])
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel
'''

PLUGIN_TEST = '''diff --git a/tests/test_plugins.py b/tests/test_plugins.py
new file mode 100644
--- /dev/null
+++ b/tests/test_plugins.py
@@ -0,0 +1,11 @@
+from importlib.metadata import entry_points, version
+
+
+def test_the_plugin_is_found_through_its_entry_point():
+    (plugin,) = entry_points(group="myproj.plugins")
+    assert plugin.name == "hello"
+    assert plugin.load()() == "hello"
+
+
+def test_the_distribution_knows_its_version():
+    assert version("myproj") == "1.2.3"
'''

PLUGIN_GOLD = '''diff --git a/myproj/plugins.py b/myproj/plugins.py
--- a/myproj/plugins.py
+++ b/myproj/plugins.py
@@ -1,2 +1,2 @@
 def hello():
-    return "helo"
+    return "hello"
'''


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false",
                           "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.slow
@requires_namespace
def test_a_project_that_registers_through_its_entry_points_resolves_with_the_gold_fix(tmp_path, capsys):
    """The harness runs ``pip install -e .``: a project whose tests find it through its entry points
    and read its own version needs its metadata installed, and its code still from the working copy."""
    from deepgym_envs.cli import main
    from deepgym_envs.tasks import load_tasks
    from deepgym_envs.validate import validate_task

    repo = tmp_path / "mirrors" / "me__myproj"
    (repo / "myproj").mkdir(parents=True)
    (repo / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n')
    (repo / "backend.py").write_text(BACKEND)
    (repo / "myproj" / "__init__.py").write_text("")
    (repo / "myproj" / "plugins.py").write_text('def hello():\n    return "helo"\n')
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "myproj")
    row = {"repo": "me/myproj", "instance_id": "me__myproj-1", "base_commit": _git(repo, "rev-parse", "HEAD"),
           "patch": PLUGIN_GOLD, "test_patch": PLUGIN_TEST, "problem_statement": "hello() misspells",
           "version": "1.2", "FAIL_TO_PASS": json.dumps(["tests/test_plugins.py::test_the_plugin_is_found_through_"
                                                          "its_entry_point"]),
           "PASS_TO_PASS": json.dumps(["tests/test_plugins.py::test_the_distribution_knows_its_version"]),
           "python_env": {"requirements": ["pytest==7.4.4"], "pythonpath": ["."]}}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    assert main(["tasks", "import", str(tmp_path / "rows.jsonl"), "--out", str(tmp_path / "set"),
                 "--repos", str(tmp_path / "mirrors"), "--json"]) == 0, capsys.readouterr().out
    (task,) = load_tasks(tmp_path / "set")
    result = validate_task(task)
    assert result.valid, (result.problems, result.gold.log[-3000:])
    assert result.gold.status == "resolved" and result.base.status == "unresolved"
    assert result.base.tests["tests/test_plugins.py::test_the_distribution_knows_its_version"] == "passed"


# -- ranges a project declares, resolved to pins when the environment is built ----------------------

@pytest.mark.parametrize("line, said", [("x @ https://evil.example/x.tgz", "URLs and paths are not allowed"),
                                        ("--index-url=https://evil.example", "pip options are not allowed"),
                                        ("./local", "a path is not allowed"), ("x>=1\nimport os", "expected one line")])
def test_a_derived_range_names_a_release_of_the_index_and_nothing_else(line, said):
    ok = PythonEnv.from_dict({"requirements": [], "derived": ["astroid<=2.14.0-dev0,>=2.12.2; python_version<'4'"]})
    assert ok.derived == ("astroid<=2.14.0-dev0,>=2.12.2; python_version<'4'",)
    with pytest.raises(ValueError, match=said):
        PythonEnv.from_dict({"requirements": [], "derived": [line]})


@pytest.mark.slow
@requires_namespace
def test_a_derived_range_is_resolved_to_a_pin_in_the_build_and_recorded(tmp_path, monkeypatch):
    house = tmp_path / "house"
    house.mkdir()
    for version in ("1.0", "2.0", "3.0"):
        write_wheel(str(house), "tinypin", version, {"tinypin/__init__.py": f"VALUE = {version!r}\n"})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    prefix = ensure_env(PythonEnv.from_dict({"requirements": [], "derived": ["tinypin>=1.5,<3"]}))
    assert prefix is not None
    assert json.loads((prefix / ".complete").read_text())["resolved"] == ["tinypin==2.0"]


@pytest.mark.slow
@requires_namespace
def test_a_projects_install_runs_in_the_sandbox_and_only_its_metadata_is_kept(tmp_path, monkeypatch):
    """The project's build backend is the project's code: it runs in a build sandbox (the host path
    it writes stays empty), and of what it installs, no ``.pth``, script or ``RECORD`` reaches the
    environment (a ``.pth`` would run in every interpreter, before the test runner's defences)."""
    from deepgym_envs.pyenv import ensure_project

    house = tmp_path / "house"
    house.mkdir()
    write_wheel(str(house), "tinypin", "1.0", {"tinypin/__init__.py": ""})
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(house))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    marker = tmp_path / "host-marker"
    attack = f"    try:\n        open({str(marker)!r}, 'w').write('ran')\n    except OSError:\n        pass\n"
    evil = BACKEND.replace("    wheel = ", attack + "    wheel = ", 1).replace(
        'INFO + "/entry_points.txt"', '"evil.pth": "import os; os.system(\'touch /tmp/x\')\\n", '
        '"myproj-1.2.3.data/scripts/evil": "#!/bin/sh\\n", INFO + "/entry_points.txt"')
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n')
    (tree / "backend.py").write_text(evil)
    env = PythonEnv.from_dict({"requirements": ["tinypin==1.0"], "install_project": True})
    prefix = ensure_env(env)
    assert prefix is not None
    project = ensure_project(env, prefix, tree)
    assert not marker.exists()
    site = next(project.glob("lib/python*/site-packages"))
    assert sorted(p.name for p in (site / "myproj-1.2.3.dist-info").iterdir()) == [
        "INSTALLER", "METADATA", "WHEEL", "direct_url.json", "entry_points.txt"]
    assert json.loads((site / "myproj-1.2.3.dist-info" / "direct_url.json").read_text())["dir_info"] == {
        "editable": True}
    assert not (site / "evil.pth").exists() and not (project / "bin" / "evil").exists()
    assert (site / "tinypin").is_dir() and (site / "tinypin" / "__init__.py").stat().st_nlink >= 2  # linked
    assert ensure_project(env, prefix, tree) == project  # built once
