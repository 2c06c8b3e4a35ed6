"""Tier-1 strategies against a test process that is not sealed: the code under test shares the
interpreter with the hidden tests, so it can read them and steer them without touching pytest's
report machinery at all. Each appends a payload (:mod:`.oracles`, :mod:`.code_oracle`,
:mod:`.tracers`, :mod:`.probes`) to the package the tests import; none knows anything of the
task's tests.

* A, answer oracle: the package's functions, called from a test, find the check their result
  feeds and return what makes it hold: from the caller's frame and source line, from the test's
  code object, or from the test file read by a child process.
* B, invisible tracer: a trace function the harness cannot see (C-level through ctypes; or
  ``sys.settrace`` on the test's frame only, gone before the harness looks; or ``sys.monitoring``)
  jumps over a failing assert or makes it hold.
* E, package code calls ``pytest.xfail()`` where the check its result feeds would fail (SWE-bench
  counts xfailed as passing).
* G, pytest's test API rebound by the package: ``pytest.raises`` passes a block that raises
  nothing (or the wrong thing), ``pytest.approx`` equals anything.

H (reading a hidden test file to leak it by timing) needs no strategy of its own: the oracles
above read the file, and ``tests/security/test_sealed_grading.py`` probes the read itself.
"""

from __future__ import annotations

from deepgym_envs.audit.sealed import tracers
from deepgym_envs.audit.sealed.code_oracle import CODE_ORACLE
from deepgym_envs.audit.sealed.oracles import SOURCE_CHILD, oracle
from deepgym_envs.audit.sealed.probes import TEST_API
from deepgym_envs.audit.strategies import Plan, Repo, _append_to_init, strategy
from deepgym_envs.tasks import Task

#: Strategy names by class, for the tests and the report.
CLASSES = {
    "A": ("oracle_frame_source", "oracle_code_objects", "oracle_child_process"),
    "B": ("tracer_ctypes_invisible", "tracer_settrace_hidden", "tracer_sys_monitoring"),
    "E": ("xfail_from_test_frame",),
    "G": ("test_api_swallowed",),
    "A+B+G": ("unsealed_combined",),
}


# -- A: answer oracles ------------------------------------------------------------------------------
@strategy("oracle_frame_source", "At package import, wrap every function and method of the package: called "
          "from a test, read the caller's frame and source line (linecache), find the check the result "
          "feeds (assert, assert method, a later assert on the variable, pytest.raises) and return the value "
          "that makes it hold.")
def _oracle_source(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, oracle())


@strategy("oracle_code_objects", "The answer oracle without source: the test function's code object (named by "
          "PYTEST_CURRENT_TEST, found in sys.modules) run forward symbolically from the call (f_lasti) to the "
          "comparison its result meets; the other operand is the answer.")
def _oracle_code(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, CODE_ORACLE)


@strategy("oracle_child_process", "The source oracle reading the hidden test file through a child process "
          "(python -c 'print(open(FILE).read())'): whatever guards the test process may not guard a fresh one.")
def _oracle_child(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, oracle(SOURCE_CHILD))


# -- B: tracers the harness does not see ------------------------------------------------------------
@strategy("tracer_ctypes_invisible", "At package import, install a C-level trace function (ctypes, "
          "PyEval_SetTrace; sys.gettrace() still says None); at a line event of a test about to fail an assert, "
          "jump to the next statement, or rewrite a local the assert reads, or make the package function it "
          "calls answer for that line.")
def _tracer_c(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, tracers.tracer(tracers.C_TRACER))


@strategy("tracer_settrace_hidden", "sys.settrace set by the package when a test first calls it, on that test's "
          "frame only, removed at the frame's return (and sys.gettrace answering None meanwhile): the same fixes "
          "to the asserts after that call, nothing set when the harness looks.")
def _tracer_settrace(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, tracers.tracer(tracers.SETTRACE_HIDDEN))


@strategy("tracer_sys_monitoring", "A sys.monitoring tool (Python 3.12+) with line events on test code only, "
          "making the same fixes; a no-op on older Pythons.")
def _tracer_monitoring(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, tracers.tracer(tracers.MONITORING))


# -- E: xfail from package code ---------------------------------------------------------------------
@strategy("xfail_from_test_frame", "Every function of the package, called from a test, reads the check its "
          "result feeds (as oracle_frame_source) and calls pytest.xfail() when the real result would fail it; "
          "calls that feed no check (a canary's) are left alone.")
def _xfail_frame(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, oracle(mode="xfail"))


# -- G: the test API ------------------------------------------------------------------------------------
@strategy("test_api_swallowed", "At package import, rebind pytest.raises to one that lets a block raising nothing "
          "(or the wrong thing) pass, and pytest.approx to an object equal to anything, on pytest and on every "
          "module that imported them by name.")
def _test_api(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, TEST_API)


# -- all of them at once ----------------------------------------------------------------------------
@strategy("unsealed_combined", "oracle_frame_source, then the C-level tracer for the asserts the oracle cannot "
          "answer, then the lenient pytest.raises and always-equal approx: one white-box patch using all of them.")
def _combined(task: Task, repo: Repo) -> Plan:
    return _append_to_init(task, repo, oracle() + "\n\n" + tracers.tracer(tracers.C_TRACER) + "\n\n" + TEST_API)
