"""pytest plugin that runs Django's own test suite (``tests/`` of a Django checkout) under pytest.

SWE-bench runs Django's suite with ``tests/runtests.py`` and parses its log, which the code under
test can print into. deepgym runs the same tests under pytest instead, through its runner and
report plugin, so every verdict comes from the authenticated report channel. This plugin does
what ``runtests.py`` does before its runner starts, and nothing else:

* ``tests/`` first on ``sys.path`` (runtests is a script there) and
  ``DJANGO_SETTINGS_MODULE=test_sqlite`` (SWE-bench's ``--settings=test_sqlite``);
* runtests' own set-up, imported from the checkout (its command line sits under
  ``if __name__ == "__main__"``): ``setup_run_tests`` (Django >= 4.0) or ``setup`` (before),
  called with the test labels of the files on pytest's command line, as SWE-bench passes them
  (``tests/auth_tests/test_forms.py`` -> ``auth_tests.test_forms``): it sets runtests' settings,
  installs the always-installed apps and the apps those labels belong to, and calls
  ``django.setup()``;
* a test patch's files that are no Python source (templates, locale files) left out of the run:
  runtests loads no test from them, pytest would refuse the whole run;
* the tests Django's backend skips when it creates the test databases (``django_test_skips``)
  skipped by a pytest mark, their own code left in place (see :func:`_skips_as_marks`);
* the test environment and the test databases, set up once per session after collection (as
  runtests builds its suite first: a model only a test module defines gets its table) around the
  test loop (``DiscoverRunner.setup_test_environment`` / ``setup_databases``), torn down after it.

Enabled with ``-p deepgym_django`` (a task's ``test_cmd``). Never on ``sys.path``: the runner
(``deepgym_pytest.py``) and the warm server load this file by path when the arguments ask for it,
after the report plugin exists, and its hooks run only once pytest has configured: nothing of the
repository runs before the report plugin watches. This module imports only what pytest already
has; Django and runtests are imported in :func:`pytest_sessionstart`.

Why not pytest-django: it configures a project's settings and databases, not Django's own suite,
whose set-up (the installed apps per label, runtests' settings, ``available_apps``) lives in
``runtests.py``; calling that function is what keeps the run faithful to every Django version.
"""

import contextlib
import inspect
import os
import sys
import types

import pytest

#: The settings module SWE-bench's harness runs Django's tests with.
SETTINGS = "test_sqlite"
_STATE = {}


def find_tests_dir(args, cwd):
    """The directory holding ``runtests.py`` above the first argument that lies in one, else
    ``cwd/tests``."""
    for arg in args:
        here = os.path.dirname(os.path.abspath(os.path.join(cwd, str(arg).split("::", 1)[0])))
        while here != os.path.dirname(here):
            if os.path.isfile(os.path.join(here, "runtests.py")):
                return here
            here = os.path.dirname(here)
    return os.path.join(cwd, "tests")


def runtests_labels(args, cwd, tests):
    """runtests' labels for pytest's arguments (``tests/a/b.py::C::t`` -> ``a.b``), as SWE-bench's
    harness makes them from a test patch's files; arguments outside ``tests`` have none."""
    labels = []
    for arg in args:
        path = os.path.abspath(os.path.join(cwd, str(arg).split("::", 1)[0]))
        rel = os.path.relpath(path, tests)
        if rel.startswith(".."):
            continue
        rel = rel[:-3] if rel.endswith(".py") else rel
        if rel.endswith("__init__"):
            rel = rel[: -len("__init__")]
        label = rel.strip(os.sep).replace(os.sep, ".")
        if label and label not in labels:
            labels.append(label)
    return labels


def _call(function, **available):
    """``function`` with the arguments of these names it takes (runtests' set-up has changed
    signature across Django versions)."""
    names = inspect.signature(function).parameters
    return function(**{k: v for k, v in available.items() if k in names})


def data_files(args, cwd):
    """Arguments that name a file other than Python source (a template, a locale file a test patch
    adds): runtests takes them as labels and loads no test from them; pytest would stop the whole
    run at "found no collectors"."""
    out = []
    for arg in args:
        path = os.path.join(cwd, str(arg).split("::", 1)[0])
        if not str(arg).split("::", 1)[0].endswith(".py") and os.path.isfile(path):
            out.append(arg)
    return out


def pytest_configure(config):
    drop = data_files(config.args, str(config.invocation_params.dir))
    if drop and len(drop) < len(config.args):  # never none left: pytest would collect the whole tree
        config.args[:] = [a for a in config.args if a not in drop]


@contextlib.contextmanager
def _ctypes_stand_in():
    """While Django's test runner is imported: a ``ctypes`` with only ``c_int``, for the parallel
    runner's counter (``multiprocessing.Value`` takes the type code ``"i"`` as well; deepgym runs
    one process). ``django/test/runner.py`` (4.x) imports ctypes at its top, which the seal refuses
    to everyone (raw memory); the stand-in has none, and is gone from ``sys.modules`` afterwards:
    a later import gets the real module, or the refusal."""
    placed = None
    if "ctypes" not in sys.modules:
        placed = sys.modules["ctypes"] = types.ModuleType("ctypes", "deepgym's stand-in while Django's test "
                                                                    "runner is imported")
        placed.c_int = "i"
    try:
        yield
    finally:
        if placed is not None and sys.modules.get("ctypes") is placed:
            del sys.modules["ctypes"]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    config = session.config
    cwd = str(config.invocation_params.dir)
    tests = find_tests_dir(config.args, cwd)
    if tests not in sys.path:
        sys.path.insert(0, tests)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import importlib

    with _ctypes_stand_in():  # runtests imports django.test.runner
        runtests = importlib.import_module("runtests")  # as a module: its command line does not run
    labels = runtests_labels(config.args, cwd, tests)
    setup = getattr(runtests, "setup_run_tests", None) or runtests.setup
    state = _call(setup, verbosity=1, test_labels=labels, parallel=1, start_at=None, start_after=None)
    if getattr(runtests, "setup_run_tests", None) is not None:
        state = state[1]  # (labels, state)
    _STATE["teardown"] = (getattr(runtests, "teardown_run_tests", None) or runtests.teardown, state)


def _test_methods(items):
    """(item, its class, method name, the method's function now) for unittest-style items."""
    out = []
    for item in items:
        cls = getattr(getattr(item, "parent", None), "obj", None)
        name = getattr(item, "originalname", None) or item.name
        if isinstance(cls, type) and isinstance(name, str):
            out.append((item, cls, name, getattr(cls, name, None)))
    return out


def _skips_as_marks(items, methods):
    """Creating the test databases, Django (3.1+, under its own suite) replaces the tests its
    backend cannot run with unittest's skip wrapper on their classes
    (``mark_expected_failures_and_skips``); the report plugin, rightly, reads a test whose code is
    not its file's as tampering. Each such test gets its own function back and a skip mark with
    Django's reason: skipped, as under runtests."""
    for item, cls, name, before in methods:
        now = inner = getattr(cls, name, None)
        for _ in range(8):  # once per test database: each alias's creation marks them again
            if inner is before or not getattr(inner, "__unittest_skip__", False):
                break
            inner = getattr(inner, "__wrapped__", None)
        if now is before or inner is not before:
            continue
        for owner in cls.__mro__:
            if vars(owner).get(name) is now:
                setattr(owner, name, before)
        item.add_marker(pytest.mark.skip(reason=str(getattr(now, "__unittest_skip_why__", ""))))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    # After collection, as runtests builds its suite before its databases: a model that only a
    # test module defines or imports (auth_tests' CustomEmailField in Django 2.2) gets its table.
    from django.test.runner import DiscoverRunner

    runner = DiscoverRunner(verbosity=0, interactive=False)
    runner.setup_test_environment()
    try:
        methods = _test_methods(session.items)
        databases = runner.setup_databases()
        _skips_as_marks(session.items, methods)
        try:
            yield
        finally:
            runner.teardown_databases(databases)
    finally:
        runner.teardown_test_environment()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    teardown = _STATE.pop("teardown", None)
    if teardown is not None:
        teardown[0](teardown[1])
