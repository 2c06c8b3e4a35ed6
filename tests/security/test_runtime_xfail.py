"""Class E (an XFAIL from package code): only a test marked xfail may come out xfailed.

SWE-bench's harness counts ``xfailed`` as passing. Which tests could rightly xfail used to be read
per file (the file mentions ``xfail``), so where one hidden test of a file is marked xfail, package
code calling ``pytest.xfail()`` while any test of that file is about to fail turned the failure
into a pass. The report plugin now records whether the item itself carries an xfail mark.
"""

from __future__ import annotations

from deepgym_envs import grade
from deepgym_envs.tasks import task_from_row
from tests.conftest import TEST_PATCH, requires_namespace, toy_row, write_toy_repo
from tests.security._attack import patch_appending
from tests.security.test_redteam_grading import XFAIL_WHEN_WRONG

MARKED = "tests/test_ops.py::test_mean_of_nothing"
#: The hidden tests, with a legitimately xfail-marked one beside the graded test: the file says xfail.
XFAIL_TEST_PATCH = TEST_PATCH.replace("@@ -7,3 +7,7 @@", "@@ -7,3 +7,13 @@") + (
    "+\n+\n+@pytest.mark.xfail(reason='no mean of nothing', raises=ZeroDivisionError, strict=True)\n"
    "+def test_mean_of_nothing():\n+    mean([])\n")


def swebench_task(tmp_path):
    repo = write_toy_repo(tmp_path / "calc")
    test = repo / "tests" / "test_ops.py"
    test.write_text("import pytest\n" + test.read_text())
    patch = XFAIL_TEST_PATCH.replace("@@ -7,3 ", "@@ -8,3 ").replace(" +7,13 @@", " +8,13 @@")
    task = task_from_row(toy_row(repo, harness="swebench", test_patch=patch,
                                 PASS_TO_PASS=[*toy_row(repo)["PASS_TO_PASS"], MARKED]))
    assert task.swebench_semantics
    return task


@requires_namespace
def test_package_code_cannot_xfail_a_graded_test_beside_a_marked_one(tmp_path):
    task = swebench_task(tmp_path)
    verdict = grade(task, patch_appending(task, "src/calc/__init__.py", XFAIL_WHEN_WRONG))
    assert verdict.status == "unresolved", verdict.tests
    assert verdict.tests["tests/test_ops.py::test_clamp_above"] == "failed"


@requires_namespace
def test_a_test_marked_xfail_still_counts_as_swebench_counts_it(tmp_path):
    task = swebench_task(tmp_path)
    gold = grade(task, task.patch)
    assert gold.status == "resolved", gold.reason
    assert gold.tests[MARKED] == "xfailed"
