"""The seal: what the code under test may not see or hold while it is graded, one capability each.

Every probe is package code that makes the toy task's failing test pass *only if* it can use the
capability it tries (``clamp`` then returns the right answer), so a probe graded ``resolved`` is a
capability the code under test still has. Each must come out unresolved; the same probe with the
capability granted by the task's ``trust`` must resolve, which shows the probe is real. On the code
before the seal every probe here resolved.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import requires_namespace, toy_row, write_toy_repo
from deepgym_envs import grade
from deepgym_envs.tasks import Task, task_from_row
from tests.security.test_forgery import append_to_init, grading_backend  # noqa: F401 (a fixture)

#: Replaces clamp: right when ``_works()`` is true, wrong (the base's bug) otherwise.
WRAP = '''
def _probe_clamp(x, lo, hi):
    try:
        ok = _works()
    except Exception:
        ok = False
    return max(lo, min(x, hi)) if ok else max(lo, x)


import calc as _calc
_calc.clamp = _probe_clamp
'''
#: The hidden test the probes look for, as its file has it.
NEEDLE = "clamp(50, 0, 10)"

PROBES = {
    "frames": ("frames", '''
def _works():
    import sys
    return "test_" in sys._getframe(2).f_code.co_name
'''),
    "inspect_frames": ("frames", '''
def _works():
    import inspect
    return inspect.currentframe().f_back.f_back is not None
'''),
    "traceback_frames": ("frames", '''
def _works():
    try:
        raise KeyError
    except KeyError as exc:
        return exc.__traceback__.tb_frame.f_back is not None
'''),
    "code_objects": ("code", '''
def _works():
    import os, sys
    name = os.environ["PYTEST_CURRENT_TEST"].split("::")[1].split(" ")[0]
    for module in list(sys.modules.values()):
        fn = getattr(module, name, None)
        if callable(fn):
            return 10 in fn.__code__.co_consts
    return False
'''),
    "forged_file_name": ("code", '''
def _works():
    import sys
    ns = {"sys": sys}  # code that claims to be the harness's runner, which may read frames
    exec(compile("def f():\\n    return sys._getframe(3)\\n", sys.argv[0], "exec"), ns)
    return ns["f"]() is not None
'''),
    "forged_installed_consumer": ("frames", '''
def _works():
    import os, sys  # code claiming to be freezegun's frame-reading helper, in the installation's site-packages
    site = [p for p in sys.path if p.endswith("site-packages")][0]
    ns = {"sys": sys}
    src = "def _should_use_real_time():\\n    return sys._getframe(2)\\n"
    exec(compile(src, os.path.join(site, "freezegun", "api.py"), "exec"), ns)
    return ns["_should_use_real_time"]() is not None
'''),
    "marshal_code": ("code", '''
def _works():
    import marshal, sys
    fake = "X" * len(sys.argv[0])  # then renamed, in the bytes, to the harness's runner
    data = marshal.dumps(compile("import sys\\nframe = sys._getframe(4)\\n", fake, "exec"))
    ns = {}
    exec(marshal.loads(data.replace(fake.encode(), sys.argv[0].encode())), ns)
    return ns["frame"] is not None
'''),
    "test_helper_written_at_run_time": ("frames", '''
def _works():
    import importlib, os, sys
    with open("tests/test_made_now.py", "w") as fh:  # a test file's name and place, not the host's
        fh.write("import sys\\n\\ndef grab():\\n    return sys._getframe(3)\\n")
    sys.path.insert(0, os.path.abspath("tests"))
    return importlib.import_module("test_made_now").grab() is not None
'''),
    # A function's code swapped: only the project's own function, or nothing but the coroutine flag.
    "library_code_replaced": ("code", '''
def _works():
    import colorsys
    colorsys.rgb_to_yiq.__code__ = (lambda r, g, b: (r, g, b)).__code__
    return colorsys.rgb_to_yiq(1, 2, 3) == (1, 2, 3)
'''),
    "coroutine_twin_with_other_constants": ("code", '''
def _works():
    import colorsys
    co = colorsys.rgb_to_yiq.__code__
    colorsys.rgb_to_yiq.__code__ = co.replace(co_flags=co.co_flags | 0x100,
                                              co_consts=tuple(c * 2 if type(c) is float else c for c in co.co_consts))
    return True
'''),
    "coroutine_twin_claiming_another_file": ("code", '''
def _works():
    import colorsys, os
    co = colorsys.rgb_to_yiq.__code__
    other = os.path.abspath("src/calc/ops.py")
    colorsys.rgb_to_yiq.__code__ = co.replace(co_flags=co.co_flags | 0x100, co_filename=other)
    return True
'''),
    "coroutine_twin_with_nested_code_from_elsewhere": ("code", '''
def _works():
    import textwrap
    co = textwrap.indent.__code__
    consts = tuple(c.replace(co_filename="/elsewhere.py") if hasattr(c, "co_code") else c for c in co.co_consts)
    textwrap.indent.__code__ = co.replace(co_flags=co.co_flags | 0x100, co_consts=consts)
    return True
'''),
    "gc_walk": ("gc", '''
def _works():
    import gc
    return len(gc.get_objects()) > 0
'''),
    "settrace": ("trace", '''
def _works():
    import sys
    sys.settrace(lambda *a: None)
    sys.settrace(None)
    return True
'''),
    "audit_hook": ("trace", '''
def _works():
    import sys
    seen = []
    sys.addaudithook(lambda event, args: seen.append(event))
    compile("1", "<x>", "eval")
    return bool(seen)
'''),
    "ctypes": ("ctypes", '''
def _works():
    import ctypes
    return ctypes.pythonapi.PyEval_SetTrace is not None
'''),
    "ctypes_from_sys_modules": ("ctypes", '''
def _works():
    import sys
    found = [m for name, m in list(sys.modules.items()) if name == "ctypes"]  # what the harness imported
    ctypes = found[0] if found else __import__("ctypes")
    return ctypes.string_at(id(1), 8) is not None
'''),
}
#: Reading the hidden test's source: no capability gives it back.
SOURCE_PROBES = {
    "open_test_file": '''
def _works():
    import os
    path = os.environ["PYTEST_CURRENT_TEST"].split("::")[0]
    return NEEDLE in open(path).read()
''',
    "linecache": '''
def _works():
    import linecache, os
    path = os.path.abspath(os.environ["PYTEST_CURRENT_TEST"].split("::")[0])
    return any(NEEDLE in line for line in linecache.getlines(path))
''',
    "child_process": '''
def _works():
    import os, subprocess, sys
    path = os.environ["PYTEST_CURRENT_TEST"].split("::")[0]
    out = subprocess.run(["cat", path], capture_output=True, text=True).stdout
    return NEEDLE in out
''',
    "proc_self_mem": '''
def _works():
    with open("/proc/self/mem", "rb"):
        return True
''',
    "proc_mem_through_a_link": '''
def _works():
    import os
    os.symlink("/proc/self/mem", "view")
    with open("view", "rb"):
        return True
''',
    "proc_mem_write_through_a_directory": '''
def _works():
    import os
    proc = os.open("/proc", os.O_RDONLY)
    os.close(os.open("self/mem", os.O_RDWR, dir_fd=proc))
    return True
''',
}


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Task:
    return task_from_row(toy_row(write_toy_repo(tmp_path_factory.mktemp("seal") / "calc")))


def _patch(body: str) -> str:
    return append_to_init(f"NEEDLE = {NEEDLE!r}\n" + body + WRAP)


@requires_namespace
@pytest.mark.parametrize("name", sorted(PROBES))
def test_capability_is_refused_and_trust_grants_it(toy: Task, name: str):
    capability, body = PROBES[name]
    sealed = grade(toy, _patch(body))
    assert sealed.status == "unresolved", (name, sealed.reason)
    granted = grade(dataclasses.replace(toy, trust=[capability]), _patch(body))
    assert granted.status == "resolved", (name, granted.reason, granted.log[-2000:])


@requires_namespace
@pytest.mark.parametrize("name", sorted(SOURCE_PROBES))
def test_hidden_source_is_out_of_reach(toy: Task, name: str):
    verdict = grade(toy, _patch(SOURCE_PROBES[name]))
    assert verdict.status == "unresolved", (name, verdict.reason)


#: One probe of each kind, on every sandboxed backend: the seal is the runner's, not the sandbox's.
ON_EVERY_BACKEND = ("frames", "ctypes", "code_objects", "proc_mem_write_through_a_directory", "child_process")


@pytest.mark.parametrize("name", ON_EVERY_BACKEND)
def test_the_seal_holds_on_every_backend(toy: Task, name: str, grading_backend: str):
    body = PROBES[name][1] if name in PROBES else SOURCE_PROBES[name]
    verdict = grade(toy, _patch(body), backend=grading_backend)
    assert verdict.status == "unresolved", (name, grading_backend, verdict.reason)


#: What honest packages do with frames and tracebacks: log (with the caller's line), warn, format
#: the exception they caught, make named tuples, enums and typed classes. The fix is real.
HONEST = '''
import collections, dataclasses, enum, logging, traceback, typing, warnings

_log = logging.getLogger("calc")


def _honest_clamp(x, lo, hi):
    _log.warning("clamping %s", x)
    try:
        {}[x]
    except KeyError:
        _log.exception("looked up %s", x)
        assert "KeyError" in traceback.format_exc()
    warnings.warn("calc: clamp", UserWarning, stacklevel=2)
    Pair = collections.namedtuple("Pair", "lo hi")
    Kind = enum.Enum("Kind", "LOW HIGH")
    T = typing.TypeVar("T")

    @dataclasses.dataclass
    class Box:
        value: int

    bounds = Pair(lo, hi)
    assert Kind.LOW and T and Box(1).value == 1
    return max(bounds.lo, min(x, bounds.hi))


import calc as _calc
_calc.clamp = _honest_clamp
'''


@requires_namespace
def test_honest_package_code_keeps_working(toy: Task):
    verdict = grade(toy, append_to_init(HONEST))
    assert verdict.status == "resolved", (verdict.reason, verdict.log[-3000:])


@requires_namespace
def test_the_tests_own_helpers_keep_their_capabilities(tmp_path):
    """A conftest and a test helper of the pristine tree are the tests' own code: reading frames
    there (directly, or through a library that does) is not refused."""
    repo = write_toy_repo(tmp_path / "calc")
    (repo / "tests/conftest.py").write_text(
        "import inspect\nimport sys\n\nsys.path.insert(0, __file__.rsplit('/', 1)[0])\n"
        "LOADED_IN = inspect.currentframe().f_code.co_name\nimport helpers  # noqa: E402\n")
    (repo / "tests/helpers.py").write_text("import inspect\n\nCALLER = inspect.stack()[1].function\n")
    task = task_from_row(toy_row(repo))
    verdict = grade(task, task.patch)
    assert verdict.status == "resolved", (verdict.reason, verdict.log[-3000:])


@requires_namespace
def test_validate_names_the_capability_a_task_needs(tmp_path):
    """A project whose own code reads frames (honestly) fails under the seal; validation says which
    capability its tests need, and with it granted in ``trust`` the task is valid."""
    from deepgym_envs.validate import validate_task

    repo = write_toy_repo(tmp_path / "calc")
    init = repo / "src/calc/__init__.py"
    init.write_text(init.read_text() + "import inspect\n\nLOADED_BY = inspect.stack()[1].filename\n")
    task = task_from_row(toy_row(repo))
    report = validate_task(task)
    assert not report.valid
    assert any('"trust": ["frames"]' in p for p in report.problems), report.problems
    assert validate_task(dataclasses.replace(task, trust=["frames"])).valid


def test_a_project_that_is_pytest_is_refused_not_run_on_its_own_pytest(tmp_path):
    """Class F: where pytest is not the interpreter's own but the repository's (a row whose project
    is pytest), the runner used to load the report plugin and pytest's machinery from the
    workspace, so a hook added there was "pytest's own". Now it refuses, and says why."""
    import subprocess
    import sys
    import venv

    import deepgym_envs.testrun

    runner = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_pytest.py"
    venv.EnvBuilder(with_pip=False).create(tmp_path / "env")  # a Python without pytest
    work = tmp_path / "work"
    (work / "_pytest").mkdir(parents=True)
    (work / "pytest.py").write_text("import sys\nsys.stdout.write('THE WORKSPACE PYTEST RAN\\n')\n"
                                    "def main(*a, **k):\n    return 0\n")
    for name in ("__init__", "python", "reports", "runner"):
        (work / "_pytest" / f"{name}.py").write_text("")
    python = tmp_path / "env" / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    out = subprocess.run([str(python), str(runner), "tests"], cwd=work, capture_output=True, text=True,
                         env={"PYTHONPATH": str(work), "DEEPGYM_SEAL": "1", "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 4, (out.returncode, out.stdout, out.stderr)
    assert "only in the repository under test" in out.stderr
    assert "THE WORKSPACE PYTEST RAN" not in out.stdout + out.stderr
