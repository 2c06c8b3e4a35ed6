"""Class G (the test API is machinery): package code that replaces ``pytest.raises`` or ``approx``.

A hidden test that checks through ``with pytest.raises(...)`` or ``== pytest.approx(...)`` trusts
pytest's code to decide. Package code imported by the test can replace either (a module attribute,
a method of approx's classes) so that only the graded tests, known by name, pass; canaries have
other names and keep their outcome. The report plugin snapshots the test API with the rest of its
machinery before any project code runs, and any replacement is tampering.
"""

from __future__ import annotations

import pytest

from deepgym_envs import grade
from deepgym_envs.tasks import task_from_row
from tests.conftest import requires_namespace, toy_row, write_toy_repo
from tests.security.test_forgery import append_to_init

RAISES = "tests/test_api.py::test_clamp_above_raises"
APPROX = "tests/test_api.py::test_clamp_above_approx"
TEST = '''import pytest

from calc import clamp


def test_clamp_above_raises():
    with pytest.raises(ZeroDivisionError):
        1 / (clamp(50, 0, 10) - 10)


def test_clamp_above_approx():
    assert clamp(50, 0, 10) == pytest.approx(10.0)
'''
TEST_PATCH = ("diff --git a/tests/test_api.py b/tests/test_api.py\nnew file mode 100644\n--- /dev/null\n"
              f"+++ b/tests/test_api.py\n@@ -0,0 +1,{len(TEST.splitlines())} @@\n"
              + "".join(f"+{line}\n" for line in TEST.splitlines()))

#: Whether the running test is a graded one, by the name SWE-bench would publish.
GRADED = '''
def _graded():
    import os
    return "::test_clamp_above" in os.environ.get("PYTEST_CURRENT_TEST", "")
'''
#: ``pytest.raises`` swallows everything (and never says "did not raise") in the graded tests.
SWALLOW_RAISES = GRADED + '''

def _swallow_raises():
    import contextlib
    import pytest

    real = pytest.raises

    @contextlib.contextmanager
    def swallow():
        try:
            yield None
        except BaseException:
            pass

    def raises(*args, **kwargs):
        return swallow() if _graded() else real(*args, **kwargs)

    pytest.raises = raises


_swallow_raises()
'''
#: Every approx comparison is equal in the graded tests.
APPROX_ALWAYS_EQUAL = GRADED + '''

def _approx_equal():
    import sys

    import pytest

    home = sys.modules[pytest.approx.__module__]  # _pytest.python_api, or _pytest.approx from pytest 9.2
    for cls in [value for name, value in vars(home).items() if name.startswith("Approx") and isinstance(value, type)]:
        if "__eq__" in vars(cls):
            real = vars(cls)["__eq__"]
            cls.__eq__ = lambda self, actual, _real=real: True if _graded() else _real(self, actual)


_approx_equal()
'''


def api_task(tmp_path, graded):
    return task_from_row(toy_row(write_toy_repo(tmp_path / "calc"), test_patch=TEST_PATCH, FAIL_TO_PASS=[graded]))


@requires_namespace
@pytest.mark.parametrize("graded, payload, seen", [(RAISES, SWALLOW_RAISES, "pytest.raises replaced"),
                                                   (APPROX, APPROX_ALWAYS_EQUAL, "__eq__ replaced")],
                         ids=["raises", "approx"])
def test_package_code_replacing_the_test_api_is_tampering(tmp_path, graded, payload, seen):
    task = api_task(tmp_path, graded)
    v = grade(task, append_to_init(payload))
    assert v.status == "unresolved" and v.tampered, v.reason
    assert seen in v.reason
    gold = grade(task, task.patch)
    assert gold.status == "resolved", gold.reason


def test_the_test_api_is_in_the_machinery_table():
    """What a hidden test checks through, by the names a tampering reason gives."""
    from pathlib import Path

    import deepgym_envs.testrun

    path = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_report.py"
    namespace = {"__name__": "deepgym_report", "__file__": str(path)}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    table = namespace["_machinery"]()
    approx = pytest.approx.__module__  # where this pytest keeps approx's classes (it moved in 9.2)
    for name in ("pytest.raises", "pytest.approx", "pytest.warns", "pytest.fail", "pytest.skip", "pytest.xfail",
                 "pytest.importorskip", f"{approx}.ApproxScalar.__eq__",
                 f"{approx}.ApproxDecimal.__eq__", "_pytest.recwarn.WarningsChecker.__exit__",
                 "_pytest.outcomes._Fail.__call__", "unittest.case._AssertRaisesContext.__exit__",
                 "unittest.case._AssertWarnsContext.__exit__", "unittest.TestCase.assertEqual"):
        assert name in table, name
