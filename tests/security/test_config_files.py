"""Class C (configuration files): pytest reads only the pristine tree's configuration.

pytest 9 reads ``pytest.toml`` and ``.pytest.toml`` before any other file. A change that adds one
at the root with ``addopts = -p <module>`` loads a plugin of its own choosing. The names are now
taken from pytest itself, so such files are removed from the grading view; and pytest is given the
pristine configuration explicitly (``-c``), so a file under a name nobody knows yet is not read.
"""

from __future__ import annotations

import pytest

import deepgym_envs.grading as grading
from deepgym_envs import grade
from deepgym_envs.testrun.config import FLOOR, config_file_names
from tests.conftest import requires_namespace
from tests.security.test_forgery import grading_backend  # noqa: F401 (a fixture)

#: Test bodies never run, so they never fail; loaded by ``-p calc.forge`` from a config file.
FORGE_PLUGIN = ("import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_pyfunc_call(pyfuncitem):\n"
                "    return True\n")
TOML = '[pytest]\npythonpath = ["src"]\ntestpaths = ["tests"]\naddopts = ["-p", "calc.forge"]\n'


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def test_the_config_names_come_from_pytest():
    names = config_file_names()
    assert names[:2] == ("pytest.toml", ".pytest.toml")  # pytest 9's search order, first two
    assert set(FLOOR) <= set(names)
    assert {"pytest.toml", ".pytest.toml", "conftest.py"} <= grading.config_names()
    assert grading.is_shadow("pytest.toml") and grading.is_shadow("sub/.pytest.toml")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pytest.toml", ".pytest.toml"])
def test_a_new_root_toml_config_loading_a_plugin_does_not_resolve(toy_task, name, grading_backend):
    patch = new_file(name, TOML) + new_file("src/calc/forge.py", FORGE_PLUGIN)
    v = grade(toy_task, patch, backend=grading_backend)
    assert v.status == "unresolved", v.reason
    assert v.tests[grading.test_files([*toy_task.FAIL_TO_PASS])[0] + "::test_clamp_above"] == "failed"


@requires_namespace
@pytest.mark.slow
def test_the_pristine_config_is_named_even_where_the_name_list_misses_one(toy_task, monkeypatch):
    """With an outdated name list the planted pytest.toml stays in the view, and is still not read."""
    monkeypatch.setattr(grading, "config_names", lambda: grading.CONFIG_NAMES - {"pytest.toml"})
    patch = new_file("pytest.toml", TOML) + new_file("src/calc/forge.py", FORGE_PLUGIN)
    v = grade(toy_task, patch)
    assert v.status == "unresolved", v.reason
    assert "configfile: pyproject.toml" in v.log


@requires_namespace
@pytest.mark.slow
def test_the_gold_patch_keeps_its_node_ids_with_the_explicit_config(toy_task):
    v = grade(toy_task, toy_task.patch + new_file("pytest.toml", TOML))
    assert v.status == "resolved", v.reason
    assert "rootdir: /testbed" in v.log and "configfile: pyproject.toml" in v.log
