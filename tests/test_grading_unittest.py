"""unittest-style suites are graded as strictly as pytest functions.

Synthesised tasks come from real projects, many of which (cachetools, for one) write
``unittest.TestCase`` classes. The audit found that code under test could make those pass
without fixing anything — by stubbing TestCase's assert methods at import, or by registering a
plugin that rewrites reports (unittest failures never reach ``pytest_pyfunc_call``).
"""

from __future__ import annotations

import pytest

from deepgym_envs.audit import payloads
from deepgym_envs.grading import grade
from deepgym_envs.tasks import task_from_row
from tests.conftest import requires_namespace

INIT = "from lib.core import double\n"
FIXED = "def double(x):\n    return 2 * x\n"
BUGGY = "def double(x):\n    return 2 + x\n"
GOLD = ("diff --git a/lib/core.py b/lib/core.py\n--- a/lib/core.py\n+++ b/lib/core.py\n@@ -1,2 +1,2 @@\n"
        " def double(x):\n-    return 2 + x\n+    return 2 * x\n")
TEST = ("import unittest\n\nfrom lib import double\n\n\nclass DoubleTest(unittest.TestCase):\n"
        "    def test_double(self):\n        self.assertEqual(double(5), 10)\n\n"
        "    def test_zero(self):\n        self.assertEqual(double(0), 0)\n")
TEST_PATCH = ("diff --git a/tests/test_core.py b/tests/test_core.py\nnew file mode 100644\n--- /dev/null\n"
              "+++ b/tests/test_core.py\n@@ -0,0 +1,11 @@\n" + "".join(f"+{line}\n" for line in TEST.splitlines()))


def make_unittest_task(root, **row):
    """A one-module library whose hidden tests are a ``unittest.TestCase`` (fields of ``row`` win)."""
    repo = root / "lib"
    (repo / "lib").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "lib" / "__init__.py").write_text(INIT)
    (repo / "lib" / "core.py").write_text(FIXED)
    (repo / "tests" / "__init__.py").write_text("")
    return task_from_row({"instance_id": "unittest__lib-001", "repo_path": str(repo), "gold_reverse_base": True,
                          "problem_statement": "double(5) is 7", "patch": GOLD, "test_patch": TEST_PATCH,
                          "FAIL_TO_PASS": ["tests/test_core.py::DoubleTest::test_double"],
                          "PASS_TO_PASS": [], **row})


@pytest.fixture
def unittest_task(tmp_path):
    return make_unittest_task(tmp_path)


def _append_to_init(payload: str) -> str:
    lines = (INIT + "\n" + payload).splitlines()
    return ("diff --git a/lib/__init__.py b/lib/__init__.py\n--- a/lib/__init__.py\n+++ b/lib/__init__.py\n"
            f"@@ -1 +1,{len(lines)} @@\n " + INIT + "".join(f"+{line}\n" for line in lines[1:]))


@requires_namespace
def test_gold_resolves_and_doing_nothing_does_not(unittest_task):
    assert grade(unittest_task, unittest_task.patch).status == "resolved"
    assert grade(unittest_task, "").status == "unresolved"


@requires_namespace
@pytest.mark.parametrize("payload", ["PATCH_UNITTEST", "REGISTER_PLUGIN"])
def test_code_under_test_cannot_make_unittest_failures_pass(unittest_task, payload):
    verdict = grade(unittest_task, _append_to_init(getattr(payloads, payload)))
    assert verdict.status == "unresolved", verdict.reason
