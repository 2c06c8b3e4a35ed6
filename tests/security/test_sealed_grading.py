"""The test process is sealed: code under test shares the interpreter with the hidden tests and
must get no view of them and no hold on the interpreter (DESIGN.md section 6, layer 4).

Each class is the audit's own strategy (:mod:`deepgym_envs.audit.sealed`) graded for real on the
toy task, with a hidden test in the shape the class needs; none fixes the bug, so none may come
out ``resolved``. The weak verifier (plain pytest, exit code trusted) must fall to every one of
them: that shows each payload works, so a ``resolved``-free verdict from the real grading means
the grading held, not that the payload broke.

On the code before the seal (1a93e45) every grading test here failed: the oracles, the invisible
tracers, the package's ``pytest.xfail()`` and the lenient ``pytest.raises``/``approx`` were graded
``resolved`` with nothing tampered (as patches and as agent actions; the combined patch resolved
29 of the 36 built-in tasks, the source oracle alone 27), and the package read the hidden test file at collection (its sleep
gave the file's content away by the grading's duration).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from conftest import TEST_PATCH, requires_namespace, toy_row, write_toy_repo
from deepgym_envs import grade, load_tasks
from deepgym_envs.audit.catalog import STRATEGIES, select
from deepgym_envs.audit.core import audit_tasks
from deepgym_envs.audit.sealed import CLASSES
from deepgym_envs.audit.sealed.probes import read_probe
from deepgym_envs.audit.weak import exit_code_verifier
from deepgym_envs.grading import Verdict
from deepgym_envs.tasks import Task, task_from_row

#: The three context lines the toy's test patch appends after (the end of tests/test_ops.py).
_TAIL = " \n def test_mean():\n     assert mean([1, 2, 3]) == 2\n"

#: Hidden tests by the shape a class needs. Each fails on the toy's bug (clamp ignores ``hi``).
HIDDEN = {
    # Two statements: the settrace tracer arms itself at the first call and fixes what follows.
    "two_lines": "def test_clamp_above():\n    value = clamp(50, 0, 10)\n    assert value + 0 == 10\n",
    "test_api": ("import pytest\n\n\ndef test_clamp_above():\n    with pytest.raises(ZeroDivisionError):\n"
                 "        1 / (clamp(50, 0, 10) - 10)\n    assert clamp(70, 0, 10) == pytest.approx(10.0)\n"),
    # SWE-bench rows' test files often hold an xfail of their own: such a file may xfail its tests.
    "swebench_xfail": ("import pytest\n\n\ndef test_clamp_above():\n    assert clamp(50, 0, 10) + 0 == 10\n\n\n"
                       "@pytest.mark.xfail(reason=\"reversed bounds are not supported\", strict=True)\n"
                       "def test_clamp_reversed_bounds():\n    assert clamp(5, 10, 0) == 5\n"),
}
F2P = "tests/test_ops.py::test_clamp_above"


def _test_patch(hidden: str) -> str:
    lines = ["", "", *hidden.rstrip("\n").splitlines()]
    return ("diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n"
            f"@@ -7,3 +7,{3 + len(lines)} @@ def test_clamp_inside():\n" + _TAIL
            + "".join(f"+{line}\n" for line in lines))


def _toy(tmp_path: Path, shape: str | None = None, **row: object) -> Task:
    patch = TEST_PATCH if shape is None else _test_patch(HIDDEN[shape])
    return task_from_row(toy_row(write_toy_repo(tmp_path / "calc"), test_patch=patch, **row))


def _held(v: Verdict) -> None:
    """Not resolved, and the graded test's own outcome is not a pass (a refusal errors it)."""
    assert v.status != "resolved", (v.status, v.reason, v.tests)
    assert v.tampered or v.tests.get(F2P) in ("failed", "error", "missing"), (v.reason, v.tests)


def test_every_class_is_registered_in_the_audit():
    assert all(name in STRATEGIES for names in CLASSES.values() for name in names)


# -- A: answer oracles --------------------------------------------------------------------------------
@requires_namespace
@pytest.mark.parametrize("name", CLASSES["A"])
def test_an_answer_oracle_in_the_package_resolves_nothing(tmp_path, name):
    """The package's clamp, called from ``assert clamp(50, 0, 10) + 0 == 10``, answered 10: read from
    the caller's source line (oracle_frame_source), its code object (oracle_code_objects) or the test
    file printed by a child process (oracle_child_process)."""
    task = _toy(tmp_path)
    _held(grade(task, STRATEGIES[name].patch(task)))


# -- B: tracers the harness does not see ---------------------------------------------------------------
_TRACERS = [pytest.param(n, marks=pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring: 3.12+"))
            if n == "tracer_sys_monitoring" else n for n in CLASSES["B"]]


@requires_namespace
@pytest.mark.parametrize("name", _TRACERS)
def test_an_invisible_tracer_cannot_make_a_failing_assert_hold(tmp_path, name):
    """A C-level trace function (ctypes' PyEval_SetTrace: sys.gettrace() says None), a settrace on the
    test's frame only that is gone before the harness looks, or a sys.monitoring tool: each wrote the
    local the failing assert reads (or jumped over it) and the test passed."""
    task = _toy(tmp_path, "two_lines")
    _held(grade(task, STRATEGIES[name].patch(task)))


# -- E: xfail from package code -----------------------------------------------------------------------
@requires_namespace
def test_package_code_cannot_xfail_a_test_in_a_file_that_has_xfails_of_its_own(tmp_path):
    """SWE-bench counts xfailed as passing. A test file with an xfail of its own may xfail its tests,
    so the package called ``pytest.xfail()`` from inside the graded test (only where the check its
    result feeds would fail: canaries' calls feed none) and the row was resolved."""
    task = _toy(tmp_path, "swebench_xfail", harness="swebench")
    assert task.swebench_semantics
    v = grade(task, STRATEGIES["xfail_from_test_frame"].patch(task))
    _held(v)
    assert v.tests.get(F2P) != "xfailed", v.tests


# -- G: the test API is machinery ----------------------------------------------------------------------
@requires_namespace
def test_the_package_cannot_rebind_pytest_raises_or_approx(tmp_path):
    """``pytest.raises`` that passes a block raising nothing and ``pytest.approx`` equal to
    anything, rebound on the pytest module at package import: a hidden test checking through them passed."""
    task = _toy(tmp_path, "test_api")
    _held(grade(task, STRATEGIES["test_api_swallowed"].patch(task)))


# -- H: hidden test files are unreadable to the package ------------------------------------------------
@pytest.mark.slow
@requires_namespace
@pytest.mark.parametrize("how", ["open", "child"])
def test_the_package_cannot_time_out_what_a_hidden_test_file_says(tmp_path, how):
    """At collection the package read the hidden test file (in its own process, or through a child
    process) and slept when it held the hidden assert's expected value: the grading's duration told
    the attacker the expected value. Two gradings, one sleeping iff the value was read and one iff it
    was not: the first must not be the slow one."""
    from tests.security.test_forgery import append_to_init

    task = _toy(tmp_path)
    needle = "+ 0 == 10"  # the hidden assert's expected value, in no file the agent can see
    assert needle in task.test_patch and needle not in (tmp_path / "calc/tests/test_ops.py").read_text()
    took = {}
    for when in (True, False):
        start = time.monotonic()
        grade(task, append_to_init(read_probe(needle, when=when, how=how, seconds=4.0)))
        took[when] = time.monotonic() - start
    assert took[True] < took[False] + 2.0, f"read the hidden file: {took}"


# -- the negative control --------------------------------------------------------------------------------
_WEAK = [("oracle_frame_source", None, {}), ("oracle_code_objects", None, {}), ("oracle_child_process", None, {}),
         ("tracer_ctypes_invisible", "two_lines", {}), ("tracer_settrace_hidden", "two_lines", {}),
         ("xfail_from_test_frame", "swebench_xfail", {"harness": "swebench"}),
         ("test_api_swallowed", "test_api", {}), ("unsealed_combined", None, {})]


@pytest.mark.slow
@requires_namespace
@pytest.mark.parametrize("name, shape, row", _WEAK, ids=[w[0] for w in _WEAK])
def test_the_weak_verifier_falls_to_each_class(tmp_path, name, shape, row):
    task = _toy(tmp_path, shape, **row)
    assert exit_code_verifier(task, "").status == "unresolved"
    v = exit_code_verifier(task, STRATEGIES[name].patch(task))
    assert v.status == "resolved", v.log[-2000:]


# -- as agent actions, through the audit ---------------------------------------------------------------
@pytest.mark.slow
@requires_namespace
@pytest.mark.parametrize("cls", ["A", "B"])
def test_the_audit_finds_no_class_exploit_as_patch_or_as_actions(tmp_path, cls):
    """The audit's own run of a class: each strategy as a patch and as edit/bash calls an agent makes
    in an episode, then submitted; nothing may come out exploited."""
    names = [n for n in CLASSES[cls] if n != "tracer_sys_monitoring" or sys.version_info >= (3, 12)]
    report = audit_tasks([_toy(tmp_path, "two_lines")], strategies=select(names), workers=1, progress=False,
                         leaks=False)
    assert {a.mode for a in report.attempts} == {"patch", "actions"}
    hit = [(a.strategy, a.mode, a.evidence[:200]) for a in report.exploited]
    assert hit == [], hit


# -- built-in tasks ----------------------------------------------------------------------------------
#: Built-in tasks the combined attack resolved on 1a93e45, one per repository it got through in.
BUILTIN = ["deepgym__cronparse-001", "deepgym__minimark-001", "deepgym__semverkit-002", "deepgym__tabkit-002",
           "deepgym__tmplite-001", "deepgym__urlroute-002"]


@pytest.mark.slow
@requires_namespace
@pytest.mark.parametrize("task_id", BUILTIN)
def test_the_combined_attack_resolves_no_built_in_task(task_id):
    task = {t.instance_id: t for t in load_tasks("builtin")}[task_id]
    v = grade(task, STRATEGIES["unsealed_combined"].patch(task))
    assert v.status != "resolved", (v.reason, {t: o for t, o in v.tests.items() if t in task.FAIL_TO_PASS})
