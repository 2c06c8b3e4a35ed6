"""The seal and the interpreter's own libraries: what an honest project's import sets off is not the
project asking, and what a library needs at import is granted only by the task's ``trust``.

On the code before this (8e935f5) the first three tests failed: a project whose module imports
``asyncio`` (blinker does, so every flask >= 2.3 row) was refused at asyncio's own
``@types.coroutine`` (the standard library giving its generators the coroutine flag), and so was a
project marking its own generator, or giving one of its functions another of its functions' code.
A refused ``ctypes`` import done for installed code did not say whose import it was or how to grant it.

Graded runs load no installed pytest plugin (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``); the direct run of
the runner here keeps them out with ``-p no:NAME`` (anyio's loads asyncio, and through trio ctypes,
before the project runs).
"""

from __future__ import annotations

import dataclasses
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from conftest import requires_namespace, toy_row, write_toy_repo
from deepgym_envs import grade
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.tasks import Task, task_from_row

#: Prepended to the toy's ``src/calc/__init__.py``: what the project does when the tests import it.
HONEST_IMPORTS = {
    "asyncio_at_import": "import asyncio\n\nassert asyncio.iscoroutinefunction(asyncio.sleep)\n",
    "types_coroutine_on_its_own_generator": '''
import types


@types.coroutine
def _tick():
    yield


async def _twice():
    await _tick()
    return 2


_run = _twice()
_run.send(None)
try:
    _run.send(None)
except StopIteration as _done:
    assert _done.value == 2
''',
    "its_own_code_swapped": '''
def _draft():
    return 1


def _final():
    return 2


_draft.__code__ = _final.__code__
assert _draft() == 2
''',
}


def _no_plugins() -> list[str]:
    return [arg for ep in entry_points(group="pytest11") for arg in ("-p", f"no:{ep.name}")]


def _sealed_run(tmp_path: Path, files: dict[Path, str], *, lib: bool = False, **env: str):
    """Write ``files``, then run the sealed runner (``deepgym_pytest.py``, no sandbox) on
    ``work/tests/test_it.py`` with ``work`` (and ``lib``, outside it: installed code) on the path."""
    import os
    import subprocess
    import sys

    import deepgym_envs.testrun

    runner = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_pytest.py"
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    work = tmp_path / "work"
    path = f"{work}{os.pathsep}{tmp_path / 'lib'}" if lib else str(work)
    env = {"PYTHONPATH": path, "DEEPGYM_SEAL": "1", "PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), **env}
    return subprocess.run([sys.executable, str(runner), "-q", "-p", "no:cacheprovider", *_no_plugins(),
                           "tests/test_it.py"], cwd=work, env=env, capture_output=True, text=True, timeout=120)


def _task(root: Path, prologue: str) -> Task:
    repo = write_toy_repo(root / "calc")
    init = repo / "src/calc/__init__.py"
    init.write_text(prologue + "\n" + init.read_text())
    return task_from_row(toy_row(repo))


@requires_namespace
@pytest.mark.parametrize("name", sorted(HONEST_IMPORTS))
def test_an_honest_project_import_grades_cold_and_warm(tmp_path, name):
    task = _task(tmp_path, HONEST_IMPORTS[name])
    cold = grade(task, task.patch)
    assert cold.status == "resolved", (name, cold.reason, cold.log[-3000:])
    with ViewPool() as pool:
        warm = grade(task, task.patch, views=pool)
    assert warm.status == "resolved", (name, warm.reason, warm.log[-3000:])


@requires_namespace
def test_a_library_that_needs_ctypes_at_import_is_refused_named_and_granted_by_trust(tmp_path):
    """The standard library's multiprocessing.sharedctypes imports ctypes unconditionally, as
    pandas >= 2 does: imported by the project, it is refused; the refusal names the installed code
    that asked and the trust that grants it, validation says the same, and with ``ctypes`` in the
    task's trust the gold patch resolves."""
    from deepgym_envs.validate import validate_task

    task = _task(tmp_path, "import multiprocessing.sharedctypes\n")
    sealed = grade(task, task.patch)
    assert sealed.status == "no_verdict", sealed.reason  # the gold patch: its run fails the same way
    assert "multiprocessing/sharedctypes.py" in sealed.log and 'keeps it with "trust": ["ctypes"]' in sealed.log, \
        sealed.log[-3000:]
    report = validate_task(task)
    assert not report.valid and any('"trust": ["ctypes"]' in p for p in report.problems), report.problems
    granted = grade(dataclasses.replace(task, trust=["ctypes"]), task.patch)
    assert granted.status == "resolved", (granted.reason, granted.log[-3000:])


#: A hidden test function given the project's code: refused to the project (with ``code`` trusted the
#: swap happens and the run is caught as tampered: the other layer holds too).
TEST_CODE_SWAP = '''
def _swap_test_code():
    import os, sys
    name = os.environ["PYTEST_CURRENT_TEST"].split("::")[1].split(" ")[0]
    for module in list(sys.modules.values()):
        fn = vars(module).get(name) if module.__name__ != "calc" else None
        if callable(fn):
            fn.__code__ = (lambda: None).__code__
            return True
    return False


def _probe_clamp(x, lo, hi):
    try:
        ok = _swap_test_code()
    except Exception:
        ok = False
    return max(lo, min(x, hi)) if ok else max(lo, x)


import calc as _calc
_calc.clamp = _probe_clamp
'''


@requires_namespace
def test_the_project_may_not_give_a_test_function_its_code(tmp_path):
    from tests.security.test_forgery import append_to_init

    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))
    verdict = grade(task, append_to_init(TEST_CODE_SWAP))
    assert verdict.status == "unresolved", verdict.reason
    assert "replacing a function's code is refused" in verdict.log, verdict.log[-3000:]


#: Raw memory without importing anything: where the seal's own prctl and Landlock calls went through
#: ctypes in the graded process (8e935f5), ``_ctypes``'s types stayed there, found by walking
#: ``type.__subclasses__`` (no audit event); ``c_char_p(address).value`` reads memory and a pointer
#: type made from ``_Pointer`` indexes it for writing, with no audit event either.
RAW_MEMORY_BY_SUBCLASSES = '''
def _works():
    import sys
    seen, todo = set(), [object]
    while todo:
        for sub in type.__subclasses__(todo.pop()):
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    found = {c.__name__: c for c in seen}
    secret = b"the hidden answer"
    return found["c_char_p"](id(secret) + sys.getsizeof(b"") - 1).value == secret
'''
#: What the first stage must still give: not dumpable, so what the process starts cannot open its memory.
DUMPABLE = '''
def _works():
    import os
    return os.stat("/proc/self/mem").st_uid == os.geteuid()
'''
#: Landlock from the first stage: no file under /proc opened for writing, through any name.
PROC_WRITE = '''
def _works():
    import os
    proc = os.open("/proc", os.O_RDONLY)
    os.close(os.open("self/mem", os.O_RDWR, dir_fd=proc))
    return True
'''
PROBE_TAIL = '''

def _probe_clamp(x, lo, hi):
    try:
        ok = _works()
    except Exception:
        ok = False
    return max(lo, min(x, hi)) if ok else max(lo, x)


import calc as _calc
_calc.clamp = _probe_clamp
'''


@requires_namespace
@pytest.mark.parametrize("probe", ["RAW_MEMORY_BY_SUBCLASSES", "DUMPABLE", "PROC_WRITE"])
def test_no_ctypes_in_the_graded_process_and_the_kernel_still_holds_cold_and_warm(tmp_path, probe):
    """The seal's kernel settings come from a first stage (deepgym_stage.py) that then executes the
    runner, so the graded process never loads ctypes; it is still not dumpable and still cannot open
    /proc files for writing, cold and on the warm server. RAW_MEMORY_BY_SUBCLASSES resolved the toy
    on 8e935f5."""
    from tests.security.test_forgery import append_to_init

    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))
    patch = append_to_init(globals()[probe] + PROBE_TAIL)
    cold = grade(task, patch)
    assert cold.status == "unresolved", (probe, cold.reason)
    with ViewPool() as pool:
        warm = grade(task, patch, views=pool)
        assert warm.status == "unresolved", (probe, warm.reason)
        assert grade(task, task.patch, views=pool).status == "resolved"  # the warm server served honestly


#: An installed package's function the seal lets read its caller's frame (freezegun's "is my caller
#: ignored?"), as an installed file; the project may call it, but code it compiles under that
#: function's name and file is not it (on 8e935f5 the forgery got the calling test's frame), and
#: where it hands the frame to a helper of its module, the project rebinding the helper gets none
#: (on 412a018 it got the frame).
CONSUMER_FILE = ("import sys\n\n\ndef _module_of(frame):\n    return frame.f_globals.get('__name__')\n\n\n"
                 "def _should_use_real_time():\n    return _module_of(sys._getframe(1)) == '?'\n")
CONSUMER_PROJECT = '''
import sys

import freezegun.api as api


def genuine():
    return api._should_use_real_time() is False


def forged():
    ns = {"sys": sys}
    exec(compile("def _should_use_real_time():\\n    return sys._getframe(1)\\n", api.__file__, "exec"), ns)
    return ns["_should_use_real_time"]()


def rebound():
    got = []
    api._module_of = got.append
    try:
        api._should_use_real_time()
    except ValueError as refused:
        return got, str(refused)
    return got, ""
'''
CONSUMER_TESTS = '''
import pytest


def test_the_installed_function_reads_its_callers_module_name():
    import pkg
    assert pkg.genuine()


def test_code_compiled_under_its_name_and_file_gets_no_frame():
    import pkg
    with pytest.raises(ValueError, match="refused"):
        pkg.forged()


def test_a_helper_the_project_rebound_gets_no_frame():
    import pkg
    got, refused = pkg.rebound()
    assert got == [] and "freezegun.api._module_of is not installed code" in refused, refused
'''


def test_only_the_installed_file_s_own_code_is_an_allowed_frame_reader(tmp_path):
    lib, work = tmp_path / "lib", tmp_path / "work"
    out = _sealed_run(tmp_path, {lib / "freezegun/__init__.py": "", lib / "freezegun/api.py": CONSUMER_FILE,
                                 work / "pkg/__init__.py": CONSUMER_PROJECT, work / "tests/test_it.py": CONSUMER_TESTS},
                      lib=True)
    assert out.returncode == 0 and "3 passed" in out.stdout, (out.stdout[-3000:], out.stderr[-2000:])


#: What real packages do with their caller's frame when the project imports or calls them: read its
#: module's name (dill's pickling sentinels, click's version lookup, decorator's generated functions,
#: matplotlib's and pandas' warnings, attributed to the first frame outside them). Each raised a refusal from the seal on 9bc9a33 (published pylint,
#: sqlfluff and pvlib rows could not be graded).
CALLER_NAME_READERS = {
    "dill": "import dill\n\nassert dill.dumps(1)\n",
    "click": ("import click\n\n\n@click.command()\n@click.version_option('1.0')\n@click.version_option()\n"
              "def cli():\n    pass\n"),
    "matplotlib": ("import warnings\n\nimport matplotlib._api\n\nwith warnings.catch_warnings(record=True) as seen:\n"
                   "    warnings.simplefilter('always')\n    matplotlib._api.warn_external('deprecated')\n"
                   "assert seen and seen[0].filename == __file__\n"),
    "pandas": ("import pandas.util._exceptions\n\nassert pandas.util._exceptions.find_stack_level() >= 1\n"),
    "decorator": ("import decorator\n\ntwice = decorator.FunctionMaker.create('twice(x)', 'return 2 * x', {})\n"
                  "assert twice(2) == 4 and twice.__module__ == __name__\n"),
}


@pytest.mark.parametrize("package", sorted(CALLER_NAME_READERS))
def test_installed_packages_that_read_their_callers_module_name_work_sealed(tmp_path, package):
    pytest.importorskip(package)
    work = tmp_path / "work"
    out = _sealed_run(tmp_path, {work / "pkg/__init__.py": CALLER_NAME_READERS[package],
                                 work / "tests/test_it.py": "def test_it():\n    import pkg\n"},
                      DEEPGYM_ALLOW="ctypes" if package == "pandas" else "")  # pandas >= 1.5 imports ctypes
    assert out.returncode == 0 and "1 passed" in out.stdout, (out.stdout[-3000:], out.stderr[-2000:])
    assert "refused" not in out.stderr, out.stderr[-2000:]


#: The project reaching ctypes that the tests' side imported (numpy imports it, guarded): a module in
#: sys.modules is imported again with no audit event, and c_char_p reads memory with none either.
CTYPES_THE_TESTS_IMPORTED = '''
def _works():
    import sys
    ctypes = sys.modules["ctypes"]
    secret = b"the hidden answer"
    return ctypes.c_char_p(id(secret) + sys.getsizeof(b"") - 1).value == secret
'''


@requires_namespace
def test_ctypes_the_tests_side_imported_is_not_the_projects(tmp_path):
    """A conftest.py that imports numpy (which imports ctypes inside try/except ImportError): on
    8e935f5 the tests' import was let through and the project read memory through it. Now nobody
    imports ctypes in a sealed run without the trust; numpy works without it, so the gold patch
    still resolves."""
    pytest.importorskip("numpy")
    from tests.security.test_forgery import append_to_init

    repo = write_toy_repo(tmp_path / "calc")
    (repo / "tests/conftest.py").write_text("import numpy\n\nassert numpy.arange(3).sum() == 3\n")
    task = task_from_row(toy_row(repo))
    assert grade(task, task.patch).status == "resolved"
    verdict = grade(task, append_to_init(CTYPES_THE_TESTS_IMPORTED + PROBE_TAIL))
    assert verdict.status == "unresolved", verdict.reason


#: Installed code by name only: ``clamp`` compiled under the file name of the standard library's
#: ``os.py`` and called by the test itself, so no frame of the project's own file stands between it
#: and the test. On 9bc9a33 the seal took the file name's word: the stack walk skipped the frame as
#: installed code acting for its caller, the test decided, and the frame was handed over.
CLAIMS_AN_INSTALLED_FILE = r'''
import os as _os

_src = """
def clamp(x, lo, hi):
    import sys
    ok = sys._getframe(1).f_back is not None
    return max(lo, min(x, hi)) if ok else max(lo, x)
"""
_ns = {}
exec(compile(_src, _os.__file__, "exec"), _ns)
import calc as _calc
_calc.clamp = _ns["clamp"]
'''
#: Installed code in the project's namespace: traceback.extract_stack (allowed a frame: it only turns
#: it into text) rebuilt around globals of the project's, whose ``walk_stack`` and ``StackSummary``
#: hand the frame back. On 9bc9a33 the code's identity was enough.
INSTALLED_CODE_REBOUND = r'''
import sys as _sys, traceback as _tb, types as _types


class _Grab:
    @staticmethod
    def extract(frames, limit=None):
        return [frames]


_leak = _types.FunctionType(_tb.extract_stack.__code__, {"sys": _sys, "StackSummary": _Grab,
                                                         "walk_stack": lambda f: f, "__builtins__": __builtins__},
                            "extract_stack", (None, None))


def _works():
    return _leak()[0].f_back is not None
''' + PROBE_TAIL


@requires_namespace
@pytest.mark.parametrize("body", [CLAIMS_AN_INSTALLED_FILE, INSTALLED_CODE_REBOUND], ids=["file_name", "globals"])
def test_installed_code_is_known_by_what_loaded_it_not_by_its_name(tmp_path, body):
    from tests.security.test_forgery import append_to_init

    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))
    for views in (None, "warm"):
        if views is None:
            verdict = grade(task, append_to_init(body))
        else:
            with ViewPool() as pool:
                verdict = grade(task, append_to_init(body), views=pool)
        assert verdict.status == "unresolved", (views, verdict.reason)
    granted = grade(dataclasses.replace(task, trust=["frames"]), append_to_init(body))
    assert granted.status == "resolved", (granted.reason, granted.log[-2000:])


#: The readers the seal allows a frame find what they call by name, and the project can rebind those
#: names in place: ``traceback.extract_stack`` hands its frame to ``walk_stack`` (a module global)
#: and the frames to ``StackSummary.extract`` (a class attribute); logging's caller lookup hands each
#: frame to ``_is_internal_frame``. On 412a018 each got the project a frame of the tests' stack.
def _rebinding(module: str, name: str, call: str) -> str:
    """A probe that puts a function of its own at ``module.name``, makes ``call`` and says whether
    the function was handed a frame with a caller."""
    return f"""
def _works():
    import {module}
    got, real = [], {module}.{name}

    def grab(f):
        got.append(f)
        return real(f)

    {module}.{name} = grab
    try:
        {call}
    finally:
        {module}.{name} = real
    return got[0].f_back is not None
"""


REBOUND_HELPERS = {
    "module_global": _rebinding("traceback", "walk_stack", "traceback.extract_stack()"),
    "class_attribute": """
def _works():
    import traceback
    real = traceback.StackSummary.__dict__["extract"]
    traceback.StackSummary.extract = classmethod(lambda cls, frames, **options: list(frames))
    try:
        stack = traceback.extract_stack()
    finally:
        traceback.StackSummary.extract = real
    return stack[-1][0].f_back is not None  # extract_stack reverses: the innermost is last
""",
    "logging": _rebinding("logging", "_is_internal_frame", 'logging.getLogger("calc").warning("clamping")'),
}


@requires_namespace
@pytest.mark.parametrize("name", sorted(REBOUND_HELPERS))
def test_an_allowed_reader_whose_helpers_the_project_rebound_reads_nothing(tmp_path, name):
    import logging

    from tests.security.test_forgery import append_to_init

    if name == "logging" and not hasattr(logging, "_is_internal_frame"):
        pytest.skip("this Python's logging has no _is_internal_frame")
    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))
    body = REBOUND_HELPERS[name] + PROBE_TAIL
    cold = grade(task, append_to_init(body))
    assert cold.status == "unresolved", cold.reason
    assert "may read it only while what it calls is as installed" in cold.log, cold.log[-3000:]
    with ViewPool() as pool:
        warm = grade(task, append_to_init(body), views=pool)
        assert warm.status == "unresolved", warm.reason
    granted = grade(dataclasses.replace(task, trust=["frames"]), append_to_init(body))
    assert granted.status == "resolved", (granted.reason, granted.log[-2000:])


#: What honest code does with those readers while the tests hold ``sys.stderr`` (capsys) and the
#: tests themselves replace one of their helpers: still allowed, and nothing is refused.
HONEST_READERS = """
import logging
import traceback


def report():
    try:
        1 / 0
    except ZeroDivisionError:
        traceback.print_exc()
        return traceback.format_exc() + "".join(traceback.format_stack())


def log():
    logging.getLogger("pkg").warning("careful", stack_info=True)
"""
HONEST_READER_TESTS = """
import logging


def test_tracebacks_under_capture(capsys):
    import pkg
    assert "ZeroDivisionError" in pkg.report()
    assert "ZeroDivisionError" in capsys.readouterr().err


def test_logging_with_a_helper_the_tests_replaced(caplog, monkeypatch):
    import pkg
    real = logging._is_internal_frame
    monkeypatch.setattr(logging, "_is_internal_frame", lambda f: real(f))
    pkg.log()
    assert caplog.records[0].funcName == "log" and "Stack" in caplog.records[0].stack_info
"""


#: An installed package that patches the standard library at import (IPython's linecache.checkcache,
#: typing_extensions' typing._collect_type_vars, which Django 4.2's environment imports): a function
#: of its own under the name it replaces, which the project's import sets off.
PATCHER = """import linecache

_original = linecache.checkcache


def checkcache(filename=None):
    return _original(filename)


linecache.checkcache = checkcache
"""


def test_honest_use_of_the_readers_is_not_refused(tmp_path):
    import logging

    if not hasattr(logging, "_is_internal_frame"):
        pytest.skip("this Python's logging has no _is_internal_frame")
    lib, work = tmp_path / "lib", tmp_path / "work"
    out = _sealed_run(tmp_path, {lib / "patcher/__init__.py": PATCHER,
                                 work / "pkg/__init__.py": "import patcher  # noqa: F401\n" + HONEST_READERS,
                                 work / "tests/test_it.py": HONEST_READER_TESTS}, lib=True)
    assert out.returncode == 0 and "2 passed" in out.stdout, (out.stdout[-3000:], out.stderr[-2000:])
    assert "refused" not in out.stderr, out.stderr[-2000:]


#: A project that reads a module of the test patch (sphinx's autodoc reads the source of the target
#: module sphinx-8801's test patch adds, which SWE-bench's harness hands pytest): it finds blank
#: lines, its own tests fail, and validation (which reads the seal's lines) could name no cause.
READS_A_HIDDEN_FILE = """
def source_of(path):
    with open(path) as fh:
        return fh.read()
"""
HIDDEN_FILE_TESTS = """
def test_it():
    import pkg
    assert "def test_it" in pkg.source_of(__file__)
"""


def test_a_project_reading_a_hidden_test_file_is_told_which_trust_it_needs(tmp_path):
    from deepgym_envs.validate import _REFUSED

    work = tmp_path / "work"
    files = {work / "pkg/__init__.py": READS_A_HIDDEN_FILE, work / "tests/test_it.py": HIDDEN_FILE_TESTS}
    out = _sealed_run(tmp_path, files)
    assert out.returncode == 1 and "1 failed" in out.stdout, (out.stdout[-3000:], out.stderr[-2000:])
    said = out.stdout + out.stderr
    assert [m.group(1) for m in _REFUSED.finditer(said)] == ["source"], said[-3000:]
    assert "tests/test_it.py (a hidden test file)" in said and "asked from " in said, said[-3000:]
    granted = _sealed_run(tmp_path, files, DEEPGYM_ALLOW="source")
    assert granted.returncode == 0 and "1 passed" in granted.stdout, (granted.stdout[-3000:], granted.stderr[-2000:])


#: Python 3.8-3.10's typing reads the caller's module name in NamedTuple, TypedDict and TypeVar
#: themselves (3.11 moved it into typing._caller): refused, a functional NamedTuple stayed in module
#: 'typing' and could not be pickled (sphinx's build environment, sphinx-8273). Checked with the
#: interpreters of those versions this machine has: the consumer list must hold each such function.
OLD_TYPING = '''
import sys, typing
ns = {"__name__": "deepgym_lockdown"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), ns)
allowed = ns["_consumers"]()
wanted = {"NamedTuple", "TypedDict", "_make_nmtuple", "_typeddict_new"}
readers = [c for c in ns["_frame_readers"](typing)]
assert readers, "no frame reader found in typing"
missing = [c.co_name for c in readers if c not in allowed]
assert not missing, missing
assert wanted & {c.co_name for c in readers}, sorted(c.co_name for c in readers)
'''


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10"])
def test_typing_of_older_pythons_reads_its_callers_module_name_allowed(version):
    import glob
    import os
    import subprocess

    import deepgym_envs.testrun

    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    if not found:
        pytest.skip(f"no Python {version} under pyenv on this machine")
    lockdown = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_lockdown.py"
    out = subprocess.run([found[-1], "-c", OLD_TYPING, str(lockdown)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]


HEAP_READER = '''import gc


def _check_setitem_copy(parent):
    return not gc.get_referents(parent)
'''
HEAP_PROJECT = '''import gc


def through_pandas():
    from pandas.core import generic
    return generic._check_setitem_copy(object())


def by_itself():
    return gc.get_referents(object())
'''
HEAP_TESTS = '''
import pytest


def test_the_installed_function_asks_gc_for_a_yes_or_no():
    import pkg
    assert pkg.through_pandas() in (True, False)


def test_the_project_itself_still_may_not():
    import pkg
    with pytest.raises(PermissionError, match="refused"):
        pkg.by_itself()
'''


def test_an_installed_function_that_asks_gc_only_for_a_yes_or_no_keeps_working(tmp_path):
    """pandas' _check_setitem_copy (pandas < 3) asks whether a copy's parent is still referred to;
    refused on 1b73252, seaborn-2848's P2P test_wide_df_with_nonnumeric_variables failed at the
    base and with the gold patch alike. (A stand-in at pandas' path: pandas 3 dropped the function.)"""
    lib, work = tmp_path / "lib", tmp_path / "work"
    out = _sealed_run(tmp_path, {lib / "pandas/__init__.py": "", lib / "pandas/core/__init__.py": "",
                                 lib / "pandas/core/generic.py": HEAP_READER, work / "pkg/__init__.py": HEAP_PROJECT,
                                 work / "tests/test_it.py": HEAP_TESTS}, lib=True)
    assert out.returncode == 0 and "2 passed" in out.stdout, (out.stdout[-3000:], out.stderr[-2000:])


def test_a_hidden_test_file_that_cannot_be_blanked_ends_the_run(tmp_path):
    """A renewed grading view's warm server once could not overwrite the hidden tests (its Landlock
    rules held the old workspace mount), said "could not seal" and went on with them readable: now
    nothing of the repository runs."""
    import deepgym_envs.testrun

    lockdown = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_lockdown.py"
    namespace = {"__name__": "deepgym_lockdown"}
    exec(compile(lockdown.read_text(), str(lockdown), "exec"), namespace)
    missing = str(tmp_path / "gone" / "test_it.py")  # neither writable nor creatable
    with pytest.raises(namespace["NotSealed"], match="could not seal"):
        namespace["_blank"]({missing: (None, None, 3)})
