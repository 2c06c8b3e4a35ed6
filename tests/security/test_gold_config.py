"""Class D (a gold-edited configuration file): graded in its gold version, written by the host.

A file the gold patch edits is never put back to pristine, so on a row whose fix touches
``pyproject.toml`` the agent's version of that file used to be the one pytest was handed with
``-c``, and a plugin it names (``addopts = -p ...``) counted as legitimate. The grading view now
holds the gold version of every configuration file the gold patch edits, whatever the change did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym_envs import grade
from deepgym_envs.tasks import Task, task_from_row
from tests.conftest import GOLD_PATCH, TOY_FILES, requires_namespace, toy_row, write_toy_repo
from tests.security.test_config_files import new_file

#: The gold patch also bumps the version in pyproject.toml (the fixed repository says 0.1.1).
GOLD_WITH_PYPROJECT = GOLD_PATCH + """diff --git a/pyproject.toml b/pyproject.toml
--- a/pyproject.toml
+++ b/pyproject.toml
@@ -1,4 +1,4 @@
 [project]
 name = "calc"
-version = "0.1.0"
+version = "0.1.1"
 
"""
#: Only the graded test's body is skipped (the canaries, named otherwise, keep theirs).
FORGE_PLUGIN = ("import pytest\n\n\n@pytest.hookimpl(tryfirst=True)\ndef pytest_pyfunc_call(pyfuncitem):\n"
                "    return True if pyfuncitem.name == 'test_clamp_above' else None\n")
FIXED_PYPROJECT = TOY_FILES["pyproject.toml"].replace('"0.1.0"', '"0.1.1"')
#: The agent's pyproject: the gold's edit, and a forging plugin loaded through ``addopts``.
FORGING_PYPROJECT = """diff --git a/pyproject.toml b/pyproject.toml
--- a/pyproject.toml
+++ b/pyproject.toml
@@ -1,7 +1,8 @@
 [project]
 name = "calc"
-version = "0.1.0"
+version = "0.1.1"
 
 [tool.pytest.ini_options]
 pythonpath = ["src"]
 testpaths = ["tests"]
+addopts = ["-p", "calc.forge"]
"""

#: A conftest the gold patch edits (a fixture it adds), and the agent's version that forges.
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef small():\n    return 1\n"
GOLD_WITH_CONFTEST = GOLD_PATCH + """diff --git a/tests/conftest.py b/tests/conftest.py
--- a/tests/conftest.py
+++ b/tests/conftest.py
@@ -4,3 +4,3 @@ import pytest
 @pytest.fixture
 def small():
-    return 0
+    return 1
"""
FORGING_CONFTEST = """diff --git a/tests/conftest.py b/tests/conftest.py
--- a/tests/conftest.py
+++ b/tests/conftest.py
@@ -4,3 +4,8 @@ import pytest
 @pytest.fixture
 def small():
-    return 0
+    return 1
+
+
+@pytest.hookimpl(tryfirst=True)
+def pytest_pyfunc_call(pyfuncitem):
+    return True if pyfuncitem.name == "test_clamp_above" else None
"""

SETUP_CFG = "[metadata]\nname = calc\nversion = 0.1.1\n\n[flake8]\nmax-line-length = 120\n"
GOLD_WITH_SETUP_CFG = GOLD_PATCH + """diff --git a/setup.cfg b/setup.cfg
--- a/setup.cfg
+++ b/setup.cfg
@@ -1,4 +1,4 @@
 [metadata]
 name = calc
-version = 0.1.0
+version = 0.1.1
 
"""
#: No file names pytest's configuration, so pytest looks for one itself: the agent's section.
FORGING_SETUP_CFG = """diff --git a/setup.cfg b/setup.cfg
--- a/setup.cfg
+++ b/setup.cfg
@@ -1,6 +1,9 @@
 [metadata]
 name = calc
-version = 0.1.0
+version = 0.1.1
 
 [flake8]
 max-line-length = 120
+
+[tool:pytest]
+addopts = -p calc.forge
"""
#: edits -> (the fixed repository's file and its text, the gold patch, the attacking patch).
CASES = {
    "pyproject": ("pyproject.toml", FIXED_PYPROJECT, GOLD_WITH_PYPROJECT,
                  FORGING_PYPROJECT + new_file("src/calc/forge.py", FORGE_PLUGIN)),
    "conftest": ("tests/conftest.py", CONFTEST, GOLD_WITH_CONFTEST, FORGING_CONFTEST),
    "setup.cfg": ("setup.cfg", SETUP_CFG, GOLD_WITH_SETUP_CFG,
                  FORGING_SETUP_CFG + new_file("src/calc/forge.py", FORGE_PLUGIN)),
}


def gold_edit_task(tmp_path: Path, edits: str) -> Task:
    """The toy task whose gold patch also edits a configuration file; the package is importable
    from the environment (as a SWE-bench image installs it), so ``-p`` finds it. In the setup.cfg
    case no pyproject.toml names a configuration."""
    repo = write_toy_repo(tmp_path / "calc")
    path, text, gold, _ = CASES[edits]
    (repo / path).write_text(text)
    if edits == "setup.cfg":
        (repo / "pyproject.toml").unlink()
    return task_from_row(toy_row(repo, patch=gold, python_env={"requirements": [], "pythonpath": ["src"]}))


@requires_namespace
@pytest.mark.parametrize("edits", list(CASES))
def test_a_plugin_named_by_a_gold_edited_config_file_does_not_resolve(tmp_path, edits):
    task = gold_edit_task(tmp_path, edits)
    v = grade(task, CASES[edits][3])
    assert v.status == "unresolved", v.reason
    assert v.tests["tests/test_ops.py::test_clamp_above"] == "failed", v.reason
    gold = grade(task, task.patch)
    assert gold.status == "resolved", gold.reason
