"""pytest plugin that runs *inside* the sandbox and reports per-test outcomes to the host.

Copied into the sandbox's support directory (never imported by deepgym on the host). It reads
where to write from the environment and removes that from ``os.environ`` as soon as it loads,
before any code of the repository under test is imported. The report is one JSON object:
``{"tests": {nodeid: outcome}, "exitstatus": int, "collected": int, "errors": [...]}``.
"""

import json
import os

_FD = os.environ.pop("DEEPGYM_REPORT_FD", None)
_PATH = os.environ.pop("DEEPGYM_REPORT_PATH", None)
_tests = {}
_errors = []
_collected = [0]
_RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}


def _set(nodeid, outcome):
    old = _tests.get(nodeid)
    if old is None or _RANK[outcome] > _RANK[old]:
        _tests[nodeid] = outcome


def pytest_collection_modifyitems(session, config, items):
    _collected[0] = len(items)


def pytest_collectreport(report):
    if report.failed:
        _errors.append({"nodeid": report.nodeid, "longrepr": str(report.longrepr)[-2000:]})


def pytest_runtest_logreport(report):
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            _set(report.nodeid, "xfailed" if report.skipped else "failed")
        else:
            _set(report.nodeid, report.outcome)
    elif report.failed:  # setup or teardown
        _set(report.nodeid, "error")
    elif report.skipped and report.when == "setup":
        _set(report.nodeid, "skipped")


def pytest_sessionfinish(session, exitstatus):
    data = json.dumps({"tests": _tests, "exitstatus": int(exitstatus), "collected": _collected[0],
                       "errors": _errors}).encode()
    if _FD is not None:
        fd = int(_FD)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
    elif _PATH:
        with open(_PATH, "wb") as fh:
            fh.write(data)
