"""pytest plugin that runs *inside* the sandbox and reports per-test outcomes to the host.

Copied into the sandbox's support directory (never imported by deepgym on the host), and loaded
by the runner before pytest starts, so before any code of the repository under test. It then:

* takes the report pipe's descriptor from the environment and deletes the variable;
* writes a fresh random nonce as the pipe's first line, at once: the host accepts only a final
  report that carries it, so a forged report written into the pipe later is detected;
* records whether each test *function* raised (a wrapper on ``pytest_pyfunc_call``), so code
  that rewrites reports after the fact (patched ``TestReport``, an injected plugin) cannot turn a
  failure into a pass unseen;
* remembers pytest's report machinery and, at the end, lists whatever was swapped out.

Code under test runs in this same process, so none of this is a wall against an adaptive
attacker; it closes the generic tricks, and the host cross-checks the rest.

The final line is ``NONCE {"tests": {nodeid: outcome}, "exitstatus": int, "collected": int,
"errors": [...], "tampered": [...]}``.
"""

import json
import os

import _pytest.reports
import _pytest.runner
import pytest

_FD = os.environ.pop("DEEPGYM_REPORT_FD", None)
_PATH = os.environ.pop("DEEPGYM_REPORT_PATH", None)
_NONCE = os.urandom(16).hex()
_tests = {}
_raised = set()
_errors = []
_collected = [0]
_RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}
_MACHINERY = {
    "TestReport.from_item_and_call": (_pytest.reports.TestReport, "from_item_and_call"),
    "runner.call_and_report": (_pytest.runner, "call_and_report"),
    "runner.pytest_runtest_makereport": (_pytest.runner, "pytest_runtest_makereport"),
    "runner.CallInfo.from_call": (_pytest.runner.CallInfo, "from_call"),
}
# unittest-style suites decide pass/fail inside unittest itself: its runner and assert methods are
# machinery too (code under test that stubs TestCase.assertEqual at import passes every test).
import unittest  # noqa: E402

try:
    from _pytest.unittest import TestCaseFunction as _TestCaseFunction
except ImportError:  # a pytest that reorganised its internals: check unittest's side only
    _TestCaseFunction = None

for _attr in sorted(vars(unittest.TestCase)):
    if _attr.startswith(("assert", "fail")) or _attr in ("run", "__call__", "debug", "_callTestMethod"):
        _MACHINERY[f"unittest.TestCase.{_attr}"] = (unittest.TestCase, _attr)
for _attr in ("runtest", "addFailure", "addError", "addSuccess", "addSkip", "addExpectedFailure",
              "addUnexpectedSuccess"):
    if _TestCaseFunction is not None and _attr in vars(_TestCaseFunction):
        _MACHINERY[f"TestCaseFunction.{_attr}"] = (_TestCaseFunction, _attr)
_ORIGINAL = {name: vars(owner).get(attr) for name, (owner, attr) in _MACHINERY.items()}


def _write(data):
    if _FD is not None:
        view = memoryview(data)
        while view:
            view = view[os.write(int(_FD), view):]
    elif _PATH:
        with open(_PATH, "ab") as fh:
            fh.write(data)


_write(_NONCE.encode() + b"\n")


def _set(nodeid, outcome):
    old = _tests.get(nodeid)
    if old is None or _RANK[outcome] > _RANK[old]:
        _tests[nodeid] = outcome


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    outcome = yield
    if outcome.excinfo is not None:
        _raised.add(pyfuncitem.nodeid)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item):
    outcome = yield
    # A unittest TestCase's failure does not propagate out of runtest(): pytest keeps it on the
    # item (``_excinfo``) and turns it into the report later, where a planted plugin could flip it.
    if outcome.excinfo is not None or getattr(item, "_excinfo", None):
        _raised.add(item.nodeid)


def pytest_collection_modifyitems(session, config, items):
    _collected[0] = len(items)


def pytest_collectreport(report):
    if report.failed:
        _errors.append({"nodeid": report.nodeid, "longrepr": str(report.longrepr)[-2000:]})


def pytest_runtest_logreport(report):
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            _set(report.nodeid, "xfailed" if report.skipped else "failed")
        elif report.passed and report.nodeid in _raised:
            _set(report.nodeid, "failed")  # the function raised, yet the report says it passed
        else:
            _set(report.nodeid, report.outcome)
    elif report.failed:  # setup or teardown
        _set(report.nodeid, "error")
    elif report.skipped and report.when == "setup":
        _set(report.nodeid, "skipped")


def pytest_sessionfinish(session, exitstatus):
    tampered = [name for name, (owner, attr) in _MACHINERY.items() if vars(owner).get(attr) is not _ORIGINAL[name]]
    data = json.dumps({"tests": _tests, "exitstatus": int(exitstatus), "collected": _collected[0],
                       "errors": _errors, "tampered": tampered})
    _write(f"{_NONCE} {data}\n".encode())
    if _FD is not None:
        os.close(int(_FD))
