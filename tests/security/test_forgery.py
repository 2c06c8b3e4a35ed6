"""Class B (report forgery from a patch alone): code imported by the tests cannot grade itself.

Each patch leaves the bug in place and plants, in the package the tests import, code that attacks
deepgym's in-process report plugin the way a white-box attacker would: through its module state,
through a plugin registered at import time, through the report descriptor. Graded for real; each
must come out ``unresolved``, and where the attack is visible, ``tampered``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deepgym_envs import grade
from tests.conftest import require_docker, requires_namespace

@pytest.fixture(params=[pytest.param("namespace", marks=requires_namespace),
                        pytest.param("docker", marks=pytest.mark.docker)])
def grading_backend(request: pytest.FixtureRequest) -> str:
    """The sandboxed backends: the attacks here need no escape, so each must hold on every one."""
    if request.param == "docker":
        require_docker()
    return request.param

F2P = "tests/test_ops.py::test_clamp_above"
INIT = "from calc.ops import clamp, mean\n"


def caught(v: object, seen: str) -> bool:
    """Unresolved, and seen: marked tampered for ``seen``, or stopped before any test ran by the seal,
    which refuses what the forger reaches for (its refusal is in the log)."""
    assert v.status == "unresolved", v.reason
    sealed = "refused to the code under test" in v.log
    assert (v.tampered and seen in v.reason) or sealed, (v.reason, v.log[-2000:])
    return True


def append_to_init(payload: str) -> str:
    """A patch adding ``payload`` to the toy package's ``__init__`` (imported by every test)."""
    lines = (INIT + "\n" + payload).splitlines()
    return ("diff --git a/src/calc/__init__.py b/src/calc/__init__.py\n--- a/src/calc/__init__.py\n"
            f"+++ b/src/calc/__init__.py\n@@ -1 +1,{len(lines)} @@\n " + INIT
            + "".join(f"+{line}\n" for line in lines[1:]))


#: Rewrite the plugin's outcome table so every write records "passed": through sys.modules where
#: the plugin is a module, else through the closures of the streaming plugin's functions.
WRITE_PLUGIN_STATE = '''\
def _forge_state():
    import gc
    import sys

    class AllPass(dict):
        def __setitem__(self, key, value):
            dict.__setitem__(self, key, "passed")

    module = sys.modules.get("deepgym_report")
    if module is not None:
        module._tests = AllPass(module._tests)
        return
    for obj in gc.get_objects():
        code = getattr(obj, "__code__", None)
        if code is not None and code.co_filename.endswith("deepgym_report.py") and obj.__closure__:
            for name, cell in zip(code.co_freevars, obj.__closure__):
                if name == "pending" and not isinstance(cell.cell_contents, AllPass):
                    cell.cell_contents = AllPass()


_forge_state()
'''

#: A plugin registered while the tests import the package: test bodies never run, so never fail.
SKIP_TEST_BODIES = '''\
def _skip_bodies():
    import gc

    import pytest
    from _pytest.config import Config

    class SkipBodies:
        @pytest.hookimpl(tryfirst=True)
        def pytest_pyfunc_call(self, pyfuncitem):
            return True

    for obj in gc.get_objects():
        if isinstance(obj, Config):
            obj.pluginmanager.register(SkipBodies(), "skip-bodies")
            break


_skip_bodies()
'''

#: Write on the report descriptor with the plugin's own nonce. Against a plugin that sends one
#: final report: send a forged one and leave before the real one. Against the streaming plugin:
#: an outcome line for the failing test, with the right nonce and sequence number, sent before the
#: plugin sends its own: what was sent cannot be taken back, so the host sees two outcomes.
FORGE_OUTCOME_LINE = '''\
def _forge_line():
    import gc
    import json
    import os
    import sys

    ids = ["tests/test_ops.py::test_clamp_above", "tests/test_ops.py::test_clamp_inside", "tests/test_ops.py::test_mean"]
    module = sys.modules.get("deepgym_report")
    if module is not None:
        report = {"tests": {i: "passed" for i in ids}, "exitstatus": 0, "collected": 3, "errors": [], "tampered": []}
        os.write(int(module._FD), f"{module._NONCE} {json.dumps(report)}\\n".encode())
        os._exit(0)

    def cells(fn):
        return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))

    for obj in gc.get_objects():
        code = getattr(obj, "__code__", None)
        if code is not None and code.co_name == "send" and code.co_filename.endswith("deepgym_report.py"):
            state = cells(obj)
            fd = cells(state["out"])["fd"]
            state["seq"][0] += 1
            line = f"{state['nonce']} {state['seq'][0]} " + json.dumps({"test": ids[0], "outcome": "passed"})
            os.write(fd, (line + "\\n").encode())
            return


_forge_line()
'''


@pytest.mark.slow
@requires_namespace
def test_writing_the_plugins_outcome_state_does_not_resolve(toy_task):
    v = grade(toy_task, append_to_init(WRITE_PLUGIN_STATE))
    assert caught(v, "tampered")  # every outcome "passed": the must-fail canaries too


@pytest.mark.slow
def test_a_plugin_registered_at_import_that_skips_test_bodies_is_caught(toy_task, grading_backend):
    v = grade(toy_task, append_to_init(SKIP_TEST_BODIES), backend=grading_backend)
    assert caught(v, "pytest_pyfunc_call added by skip-bodies")


@pytest.mark.slow
def test_a_forged_outcome_line_with_the_plugins_nonce_is_caught(toy_task, grading_backend):
    v = grade(toy_task, append_to_init(FORGE_OUTCOME_LINE), backend=grading_backend)
    assert caught(v, "two outcomes reported for one test")


@pytest.mark.slow
@requires_namespace
def test_the_plugin_is_in_no_module_namespace(toy_task):
    """Nothing a test can import by name holds the plugin's state."""
    probe = ("import sys\nassert not [m for m in sys.modules if 'deepgym' in m], "
             "[m for m in sys.modules if 'deepgym' in m]\n")
    test = (INIT.replace("from calc.ops", "from calc") + "\n\ndef test_probe():\n"
            + "".join(f"    {line}\n" for line in probe.splitlines()))
    import dataclasses

    task = dataclasses.replace(
        toy_task, FAIL_TO_PASS=["tests/test_probe.py::test_probe"], PASS_TO_PASS=[],
        test_patch=("diff --git a/tests/test_probe.py b/tests/test_probe.py\nnew file mode 100644\n--- /dev/null\n"
                    f"+++ b/tests/test_probe.py\n@@ -0,0 +1,{len(test.splitlines())} @@\n"
                    + "".join(f"+{line}\n" for line in test.splitlines())))
    v = grade(task, "")
    assert v.status == "resolved", v.reason + v.log[-2000:]


def test_the_host_reads_the_stream_strictly():
    """Whatever reaches the descriptor, only a whole, ordered stream of known events is a report."""
    import json

    from deepgym_envs.testrun import parse_report

    nonce = "ab" * 16

    def stream(*events, seqs=None):
        lines = [f"{nonce} {seq} {json.dumps(e)}" for seq, e in zip(seqs or range(1, len(events) + 1), events)]
        return "\n".join([nonce, *lines]) + "\n"

    ok = {"test": F2P, "outcome": "failed"}
    end = {"finish": {"exitstatus": 1, "collected": 1}}
    honest = parse_report(stream(ok, end))
    assert honest["tests"] == {F2P: "failed"} and not honest["tampered"] and honest["finished"]
    cases = {
        "two outcomes reported for one test": stream({"test": F2P, "outcome": "passed"}, ok, end),
        "report lines missing or out of order": stream(ok, end, seqs=[2, 3]),
        "report lines after the end": stream(ok, end, {"test": "x::y", "outcome": "passed"}),
        "an unknown report line": stream({"test": F2P, "outcome": "passed", "extra": 1}, end),
    }
    for problem, raw in cases.items():
        assert problem in parse_report(raw)["tampered"], problem
    forged = parse_report(stream(ok, end) + json.dumps({"tests": {F2P: "passed"}}) + "\n")
    assert forged["forged"] == 1
    assert parse_report(stream(ok)) is None  # never finished, nothing forged: no report at all


#: Only the graded test's outcome forged (SWE-bench publishes graded ids, so canaries with other
#: names keep theirs): the function the plugin's hooks record outcomes with, swapped in its cell.
SWAP_RECORDER_CELL = '''\
def _swap_recorder():
    import gc
    graded = {"tests/test_ops.py::test_clamp_above"}
    for obj in gc.get_objects():
        code = getattr(obj, "__code__", None)
        if code is None or not code.co_filename.endswith("deepgym_report.py") or not obj.__closure__:
            continue
        for name, cell in zip(code.co_freevars, obj.__closure__):
            if name == "record" and not getattr(cell.cell_contents, "forged", False):
                def record(nodeid, outcome, _real=cell.cell_contents):
                    return _real(nodeid, "passed" if nodeid in graded else outcome)
                record.forged = True
                cell.cell_contents = record


_swap_recorder()
'''

#: Only the graded test hollowed out, by name, while its module loads: its body is empty code.
HOLLOW_GRADED_TEST = '''\
def _hollow_graded():
    import sys
    import types
    graded = {"test_clamp_above"}
    empty = (lambda *args, **kwargs: None).__code__

    class Hollowing(types.ModuleType):
        def __getattribute__(self, name):
            if name == "__dict__":
                for key, fn in list(types.ModuleType.__getattribute__(self, "__dict__").items()):
                    if key in graded and isinstance(fn, types.FunctionType):
                        fn.__code__ = empty.replace(co_name=key)
            return types.ModuleType.__getattribute__(self, name)

    frame = sys._getframe(1)
    while frame is not None and not frame.f_globals.get("__name__", "").rpartition(".")[2].startswith("test_"):
        frame = frame.f_back
    if frame is not None:
        sys.modules[frame.f_globals["__name__"]].__class__ = Hollowing


_hollow_graded()
'''


@pytest.mark.slow
@requires_namespace
@pytest.mark.parametrize("payload, seen", [(SWAP_RECORDER_CELL, "the report plugin's state was replaced"),
                                           (HOLLOW_GRADED_TEST, "the body run for " + F2P)],
                         ids=["closure-cell", "hollowed-body"])
def test_forging_only_the_graded_tests_by_name_is_caught(toy_task, payload, seen):
    v = grade(toy_task, append_to_init(payload))
    assert caught(v, seen)


#: By behaviour, not by name: every test's body becomes a trampoline that calls the real body and
#: swallows its failure only when the package under test ran meanwhile (seen through
#: sys.setprofile). Canaries call no package code, so theirs propagate; the trampoline's code
#: claims the test's file and line, so a check of where a body comes from passes.
TRAMPOLINE_BODIES = '''\
def _trampoline_bodies():
    import sys
    import types

    def trampoline():
        import sys
        ran = []

        def watch(frame, event, arg):
            if event == "call" and "/calc/" in frame.f_code.co_filename:
                ran.append(1)

        sys.setprofile(watch)
        try:
            __real_bodies__[sys._getframe().f_code.co_name]()
        except Exception:
            if not ran:
                raise
        finally:
            sys.setprofile(None)

    def rewire(namespace):
        if "__real_bodies__" in namespace:
            return
        real = namespace["__real_bodies__"] = {}
        for key, fn in list(namespace.items()):
            if key.startswith("test") and isinstance(fn, types.FunctionType) and not fn.__code__.co_argcount:
                real[key] = types.FunctionType(fn.__code__, fn.__globals__, key)
                fn.__code__ = trampoline.__code__.replace(co_name=key, co_filename=fn.__code__.co_filename,
                                                          co_firstlineno=fn.__code__.co_firstlineno)

    class Rewired(types.ModuleType):
        def __getattribute__(self, name):
            if name == "__dict__":
                rewire(types.ModuleType.__getattribute__(self, "__dict__"))
            return types.ModuleType.__getattribute__(self, name)

    frame = sys._getframe(1)
    while frame is not None and not frame.f_globals.get("__name__", "").rpartition(".")[2].startswith("test_"):
        frame = frame.f_back
    if frame is not None:
        sys.modules[frame.f_globals["__name__"]].__class__ = Rewired


_trampoline_bodies()
'''


def _disguised_hollowing() -> str:
    """The audit's hollow_graded_disguised payload: empty bodies claiming the test's file and line."""
    from deepgym_envs.audit.trust_payloads import HOLLOW_TESTS

    return HOLLOW_TESTS.replace("@ONLY@", repr({"test_clamp_above"})).replace("@DISGUISE@", "True")


@pytest.mark.slow
@pytest.mark.parametrize("payload", ["disguised-hollowing", "trampoline"])
def test_a_body_swapped_for_code_claiming_the_test_file_is_caught(toy_task, grading_backend, payload):
    """The code a graded test runs is compared with what its pristine file compiles to: where the
    code says it comes from (co_filename, co_firstlineno) is writable and proves nothing."""
    v = grade(toy_task, append_to_init(_disguised_hollowing() if payload == "disguised-hollowing" else TRAMPOLINE_BODIES),
              backend=grading_backend)
    assert caught(v, "differs from its test file")


#: Test shapes whose function is not simply the ``def`` in the file: none may read as a swapped
#: body. A base class in another file of the tests, a diamond, wrappers (functools.wraps, mock,
#: unittest's skip, a rebinding, hypothesis's ``@given``), parametrization, unittest methods,
#: nested classes, a test function the file imports over its own definition (funcy).
SHAPES = {
    "tests/shapes_base.py": '''\
import unittest


class Base:
    def test_inherited(self):
        assert 1 + 1 == 2

    def test_overridden(self):
        assert True


class Left(Base):
    pass


class Right(Base):
    def test_overridden(self):
        assert 2 + 2 == 4


class CaseBase(unittest.TestCase):
    def test_unittest_inherited(self):
        self.assertEqual(1 + 1, 2)


def test_reimported():
    assert True
''',
    "tests/test_shapes.py": '''\
import functools
import unittest
from unittest import mock

import pytest
from hypothesis import given, strategies as st
from shapes_base import Base, CaseBase, Left, Right


def plain_wrapper(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        return fn(*args, **kwargs)
    return inner


def opaque(fn):
    def inner():
        return fn()
    return inner


@pytest.mark.parametrize("n", [1, 2])
def test_parametrized(n):
    assert n in (1, 2)


@plain_wrapper
def test_wrapped():
    assert True


@mock.patch("os.getcwd", return_value="/nowhere")
def test_mocked(getcwd):
    import os
    assert os.getcwd() == "/nowhere"


def test_rebound():
    assert True


test_rebound = opaque(test_rebound)


class TestDiamond(Left, Right):
    pass


class TestInherits(Base):
    def test_own(self):
        assert True

    class TestNested:
        def test_deep(self):
            assert True


class TestCase(CaseBase):
    def test_unittest_own(self):
        self.assertTrue(True)

    @unittest.skip("not today")
    def test_unittest_skipped(self):
        raise AssertionError


@mock.patch("os.getpid", return_value=1)
class TestPatchedClass(unittest.TestCase):
    def test_patched(self, getpid):
        import os
        self.assertEqual(os.getpid(), 1)


@given(st.integers())
def test_given(n):
    assert isinstance(n, int)


@pytest.mark.parametrize("k", [1, 2])
@given(n=st.integers(min_value=0, max_value=5))
def test_given_parametrized(k, n):
    assert 0 <= n * k <= 10


def test_reimported():
    raise AssertionError("replaced by the import below, as funcy replaces one of its tests")


from shapes_base import test_reimported  # noqa: E402,F811
''',
}


@pytest.mark.slow
@requires_namespace
def test_test_shapes_that_wrap_or_inherit_are_never_tampered(toy_task):
    from deepgym_envs.testrun import run_pytest
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    with make_sandbox(pristine_tree(toy_task), "namespace") as sb:
        for path, text in SHAPES.items():
            sb.write_file(path, text.encode())
        for warm in (False, True):
            for extra in ([], ["--assert=plain"]):
                report, res = run_pytest(sb, ["-q", *extra, "tests/test_shapes.py"], 120, warm=warm)
                assert report and not report["tampered"], (report, res.output[-3000:])
                outcomes = report["tests"]
                assert len(outcomes) == 20 and set(outcomes.values()) == {"passed", "skipped"}, res.output[-3000:]


@pytest.mark.slow
@requires_namespace
def test_a_profile_function_left_set_by_the_code_under_test_is_tampering(toy_task):
    """What a trampoline watches project code with (grading runs no debugger and no coverage)."""
    v = grade(toy_task, append_to_init("import sys\nsys.setprofile(lambda frame, event, arg: None)\n"))
    assert caught(v, "a trace or profile function was set during")


GIVEN_TESTS = '''\
from hypothesis import given, strategies as st


@given(st.integers())
def test_fails(n):
    assert n != n


@given(st.integers())
def test_passes(n):
    assert n == n


import given_attack  # noqa: E402,F401  code under test, run once the tests exist
'''

#: Ways code under test could make a failing ``@given`` test pass, now that a generated function
#: forwarding to hypothesis's wrapper is followed rather than refused.
GIVEN_ATTACKS = {
    # A generated-looking forwarder, claiming the test's file, to a function that does nothing;
    # it carries the real test's handle.
    "hollow-forwarder": '''\
ns = {}
exec("def accept(f):\\n    def test_fails():\\n        return f()\\n    return test_fails\\n", ns)
shim = ns["accept"](lambda: None)
shim.__code__ = shim.__code__.replace(co_filename=mod.test_fails.__code__.co_filename)
shim.hypothesis = mod.test_fails.hypothesis
mod.test_fails = shim
''',
    # The passing test's wrapper under the failing test's name.
    "swap": "mod.test_fails = mod.test_passes\n",
    # ...with the failing test as written hung where a search of attributes would find it.
    "swap-with-decoy": '''\
original = mod.test_fails.hypothesis.inner_test
mod.test_passes.original = original
mod.test_passes.hypothesis.original = original
mod.test_fails = mod.test_passes
''',
    # An installed function callable with no arguments, carrying a handle that names the real test
    # (before, any installed function stood in for a test the file decorates).
    "installed-with-handle": '''\
import locale


class Handle:
    inner_test = mod.test_fails.hypothesis.inner_test


locale.getpreferredencoding.hypothesis = Handle()
mod.test_fails = locale.getpreferredencoding
''',
}


@pytest.mark.slow
@requires_namespace
@pytest.mark.parametrize("attack", sorted(GIVEN_ATTACKS))
def test_a_given_test_swapped_or_hollowed_is_still_tampering(toy_task, attack):
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.testrun import run_pytest
    from deepgym_envs.trees import pristine_tree

    find = ("import sys\nmod = next(m for m in list(sys.modules.values())\n"
            "           if (getattr(m, '__file__', None) or '').endswith('test_given_swap.py'))\n")
    with make_sandbox(pristine_tree(toy_task), "namespace") as sb:
        sb.write_file("tests/test_given_swap.py", GIVEN_TESTS.encode())
        sb.write_file("tests/given_attack.py", (find + GIVEN_ATTACKS[attack]).encode())
        report, res = run_pytest(sb, ["-q", "tests/test_given_swap.py"], 120)
    # The stand-in ran and passed (the attack took effect), and the check named it.
    assert report and report["tests"].get("tests/test_given_swap.py::test_fails") == "passed", res.output[-3000:]
    assert any("test_given_swap.py::test_fails differs from its test file" in t for t in report["tampered"]), \
        (report, res.output[-3000:])


@pytest.mark.parametrize("version", ["3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"])
def test_the_forwarder_check_reads_every_pythons_bytecode(version):
    """hypothesis's generated function compiles to other opcodes on each Python (3.8 builds
    ``*args`` with BUILD_TUPLE_UNPACK_WITH_CALL, 3.11 adds PRECALL, 3.13 CALL_KW): what only
    forwards is recognised on each, and what calls an argument, calls twice, reads a global or an
    attribute, or drops the result is not. Skipped for a Python this machine lacks."""
    import subprocess

    from deepgym_envs.pyenv import _installed_python

    python = _installed_python(version)
    if python is None:
        pytest.skip(f"no python{version} here")
    import deepgym_envs.testrun

    plugin = Path(deepgym_envs.testrun.__file__).parent / "in_sandbox" / "deepgym_report.py"  # the installed one
    cases = Path(__file__).resolve().parents[1] / "data/forwarder_cases.py"
    out = subprocess.run([python, "-I", str(cases), str(plugin)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split()[1:] == ["True", "[]"], out.stdout + out.stderr
