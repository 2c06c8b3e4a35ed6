"""What the red-team review of the first fixes found in how a grading view is laid out.

* A change that turns a directory of hidden tests into a symlink kept the hidden test patch out,
  and that came back ``no_verdict`` (masked): now it is the change's doing when the test patch
  applies to the pristine tree, a fact the host checks.
* A change that turns a protected file into a directory crashed the harness (the whole batch lost).
* A gold fix in library code under a ``testing/`` directory was reverted before grading.
* A caught forgery still reported its forged counts, and so earned shaping reward.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import tests.conftest as toy
from deepgym_envs import grade, run_batch
from deepgym_envs.rewards import potential
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.tasks import task_from_row
from deepgym_envs.trees import pristine_tree
from tests.conftest import requires_namespace

pytestmark = [requires_namespace, pytest.mark.slow]


def _task(root: Path, files: dict[str, str], **row: object):
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return task_from_row({**toy.toy_row(root), **row})


def _patch(task, commands: str) -> str:
    """The diff a shell script leaves in a fresh sandbox of the task."""
    with make_sandbox(pristine_tree(task), "namespace") as sb:
        res = sb.exec(commands)
        assert res.exit_code == 0, res.output
        return sb.diff()


def test_a_directory_of_hidden_tests_turned_into_a_link_is_unresolved_not_masked(tmp_path):
    files = dict(toy.TOY_FILES)
    files["src/calc/tests/__init__.py"] = ""
    files["src/calc/tests/test_ops.py"] = files.pop("tests/test_ops.py")
    files["pyproject.toml"] = files["pyproject.toml"].replace('testpaths = ["tests"]', 'testpaths = ["src"]')
    moved = lambda ids: [i.replace("tests/test_ops.py", "src/calc/tests/test_ops.py") for i in ids]  # noqa: E731
    row = toy.toy_row(tmp_path)
    task = _task(tmp_path / "calc", files, test_patch=toy.TEST_PATCH.replace("tests/test_ops.py", "src/calc/tests/test_ops.py"),
                 FAIL_TO_PASS=moved(row["FAIL_TO_PASS"]), PASS_TO_PASS=moved(row["PASS_TO_PASS"]))
    assert grade(task, task.patch).status == "resolved"
    # The change as git writes it for a moved package and a link in its place.
    work = tmp_path / "work"
    shutil.copytree(tmp_path / "calc", work)
    git = ["git", "-C", str(work), "-c", "user.name=x", "-c", "user.email=x@x"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    (work / "src/calc").rename(work / "src/calc_real")
    (work / "src/calc").symlink_to("calc_real")
    subprocess.run([*git, "add", "-A"], check=True)
    link = subprocess.run([*git, "diff", "--cached", "--binary", "HEAD"], capture_output=True, text=True,
                          check=True).stdout
    verdict = grade(task, link)
    assert verdict.status == "unresolved" and not verdict.masked, verdict.reason


def test_a_protected_file_turned_into_a_directory_is_graded_like_any_other_change(toy_task):
    odd = _patch(toy_task, "rm tests/test_ops.py && mkdir tests/test_ops.py && echo x > tests/test_ops.py/x")
    verdicts = run_batch(toy_task, [toy_task.patch, odd, ""], workers=1)
    assert [v.status for v in verdicts] == ["resolved", "unresolved", "unresolved"], [v.reason for v in verdicts]


def test_a_gold_fix_under_a_testing_directory_is_not_reverted(tmp_path):
    files = dict(toy.TOY_FILES)
    files["src/calc/testing/__init__.py"] = ""
    files["src/calc/testing/util.py"] = files.pop("src/calc/ops.py")
    files["src/calc/__init__.py"] = "from calc.testing.util import clamp, mean\n"
    task = _task(tmp_path / "calc", files, patch=toy.GOLD_PATCH.replace("src/calc/ops.py", "src/calc/testing/util.py"))
    assert grade(task, task.patch).status == "resolved"
    assert grade(task, "").status == "unresolved"


def test_a_caught_forgery_earns_no_progress(toy_task):
    forge = _patch(toy_task, "cat >> src/calc/__init__.py <<'EOF'\n"
                             "import pytest\n"
                             "class _Force:\n"
                             "    @pytest.hookimpl(tryfirst=True)\n"
                             "    def pytest_pyfunc_call(self, pyfuncitem):\n"
                             "        return True\n"
                             "import _pytest.config\n"
                             "_pytest.config._deepgym_force = _Force()\n"
                             "pytest.register_assert_rewrite\n"
                             "def pytest_configure(config):\n"
                             "    pass\n"
                             "import gc\n"
                             "for o in gc.get_objects():\n"
                             "    if type(o).__name__ == 'PytestPluginManager':\n"
                             "        o.register(_Force())\n"
                             "        break\n"
                             "EOF")
    verdict = grade(toy_task, forge)
    # Caught by the plugin (tampered), or before any test ran by the seal, which refuses the gc walk.
    assert verdict.status == "unresolved", verdict.reason
    assert verdict.tampered or "refused to the code under test" in verdict.log, verdict.reason
    assert verdict.fail_to_pass["passed"] == 0 and verdict.pass_to_pass["passed"] == 0
    assert potential(verdict) < potential(grade(toy_task, ""))
