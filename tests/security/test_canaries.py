"""Canary tests: forgers that every in-process check misses are caught by tests only the host knows.

The forgers here touch nothing the report plugin watches (no hook, no report machinery): they wrap
test functions as pytest fetches them, or unittest's internal failure recorder, so every failure
reads as a pass. The must-fail canaries then pass too, and the run is marked tampered. A forger
that drops tests it does not recognise drops the canaries, and is caught the same way.
"""

from __future__ import annotations

import ast
import random
import subprocess

import pytest

from deepgym_envs import grade
from deepgym_envs.canaries import Pool, check, plant
from deepgym_envs.grading import canary_pool as proven_pool
from deepgym_envs.grading import prepare_grading_view
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.testrun import run_pytest
from deepgym_envs.trees import pristine_tree
from tests.conftest import requires_namespace
from tests.security.test_forgery import append_to_init, grading_backend  # noqa: F401 (a fixture)
from tests.test_grading_unittest import _append_to_init as append_to_unittest_init
from tests.test_grading_unittest import make_unittest_task

#: Every test function pytest fetches comes back wrapped: an AssertionError is swallowed.
SWALLOW_FAILURES = '''\
def _swallow():
    import functools

    import _pytest.python

    fetch = _pytest.python.Function._getobj

    def _getobj(self):
        fn = fetch(self)

        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except AssertionError:
                return None

        return run

    _pytest.python.Function._getobj = _getobj


_swallow()
'''

#: Collect only the tests the forger knows of (the visible ones, and the hidden one it guessed).
ONLY_KNOWN_TESTS = '''\
def _only_known():
    import _pytest.python

    known = {"test_clamp_inside", "test_mean", "test_clamp_above"}
    collect = _pytest.python.PyCollector.collect

    def only_known(self):
        return [i for i in collect(self) if not isinstance(i, _pytest.python.Function) or i.name in known]

    _pytest.python.PyCollector.collect = only_known


_only_known()
'''

#: unittest records a test's failure in _Outcome.testPartExecutor: this one records none.
UNITTEST_SWALLOW = '''\
def _swallow():
    import contextlib
    import unittest.case

    @contextlib.contextmanager
    def test_part_executor(self, *args, **kwargs):
        try:
            yield
        except AssertionError:
            pass

    unittest.case._Outcome.testPartExecutor = test_part_executor


_swallow()
'''


@pytest.mark.slow
def test_a_blanket_forger_is_caught_by_the_must_fail_canaries(toy_task, grading_backend):
    v = grade(toy_task, append_to_init(SWALLOW_FAILURES), backend=grading_backend)
    assert v.status == "unresolved" and v.tampered, v.reason
    assert "a canary test that must have failed passed" in v.reason
    assert set(v.tests) == {*toy_task.FAIL_TO_PASS, *toy_task.PASS_TO_PASS}  # canaries never listed


@requires_namespace
@pytest.mark.slow
def test_a_forger_that_drops_unknown_tests_is_caught_by_missing_canaries(toy_task):
    v = grade(toy_task, append_to_init(ONLY_KNOWN_TESTS + "\n\n" + SWALLOW_FAILURES))
    assert v.status == "unresolved" and v.tampered, v.reason
    # Whichever layer sees it first: the missing canaries, or the machinery check (pytest's
    # Function._getobj, which the forger replaces to drop what it does not know).
    assert "was never reported" in v.reason or "python.Function._getobj replaced" in v.reason, v.reason


@requires_namespace
@pytest.mark.slow
def test_honest_runs_are_never_tampered(toy_task):
    for patch, status in ((toy_task.patch, "resolved"), ("", "unresolved")):
        v = grade(toy_task, patch)
        assert (v.status, v.tampered) == (status, False), v.reason


@pytest.fixture
def unittest_task(tmp_path):
    return make_unittest_task(tmp_path, instance_id="unittest__canary-001",
                              PASS_TO_PASS=["tests/test_core.py::DoubleTest::test_zero"])


@requires_namespace
@pytest.mark.slow
def test_unittest_forgers_are_caught_by_unittest_style_canaries(unittest_task):
    assert grade(unittest_task, unittest_task.patch).status == "resolved"
    v = grade(unittest_task, append_to_unittest_init(UNITTEST_SWALLOW))
    assert v.status == "unresolved" and v.tampered, v.reason
    assert "canary" in v.reason


@requires_namespace
def test_canaries_look_like_the_files_tests_and_come_out_as_planted(unittest_task, toy_task):
    """Planted in a real view and run: pytest-style beside functions, TestCase classes beside
    TestCase classes; at least two must fail and one must pass, and each does."""
    for task in (toy_task, unittest_task):
        ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
        with make_sandbox(pristine_tree(task)) as sb:
            prepare_grading_view(sb, task, pristine_tree(task), task.patch)
            planted = plant(sb, ids, random.Random(7))
            source = sb.read_file(ids[0].split("::")[0]).decode()
            report, result = run_pytest(sb, ["-rA", ids[0].split("::")[0]], 120)
        assert sum(c.expect == "failed" for c in planted) >= 3 and any(c.expect == "passed" for c in planted)
        assert report is not None and check(planted, report["tests"], True) == [], result.output
        tree = ast.parse(source)
        for c in planted:
            parts = c.nodeid.split("::")
            assert parts[-1].startswith("test_") and report["tests"][c.nodeid] == c.expect
            if task is unittest_task:
                cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == parts[1])
                assert "TestCase" in ast.unparse(cls.bases[0])
            else:
                assert len(parts) == 2
        assert all(report["tests"][i] == "passed" for i in ids)


_FUNCTION_FILE = """\
import json


def test_roundtrip_keys():
    assert json.loads(json.dumps({"a": 1})) == {"a": 1}
"""
_UNITTEST_FILE = """\
import unittest


class CodecTest(unittest.TestCase):
    def test_roundtrip_keys(self):
        self.assertEqual(sorted({"b": 1, "a": 2}), ["a", "b"])
"""


def _run_planted(source: str, canary) -> type[BaseException] | None:
    """Run one planted canary of ``source`` in-process: the exception it raised, or None."""
    namespace: dict = {}
    exec(compile(source, "test_planted.py", "exec"), namespace)
    parts = canary.nodeid.split("::")[1:]
    test = namespace[parts[0]] if len(parts) == 1 else getattr(namespace[parts[0]](parts[1]), parts[1])
    try:
        test()
    except Exception as exc:
        return type(exc)
    return None


@pytest.mark.parametrize("source, node_id", [(_FUNCTION_FILE, "tests/test_planted.py::test_roundtrip_keys"),
                                             (_UNITTEST_FILE, "tests/test_planted.py::CodecTest::test_roundtrip_keys")],
                         ids=["functions", "unittest"])
@pytest.mark.filterwarnings("ignore::deepgym_envs.sandbox.local.LocalSandboxWarning")  # plant() only reads and writes
def test_every_plant_holds_failures_by_check_and_by_error(tmp_path, source, node_id):
    """Chance never leaves a kind of failure out: a forger that swallows only assertion errors, or
    only other exceptions, meets a must-fail canary it turns in every grading (not 19 in 20)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_planted.py").write_text(source)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*git, *args], cwd=tmp_path, check=True)
    errors: set[type[BaseException]] = set()
    for seed in range(150):
        with make_sandbox(tmp_path, "local") as sb:
            planted = plant(sb, [node_id], random.Random(seed))
            rendered = sb.read_file("tests/test_planted.py").decode()
        raised = {c.nodeid: _run_planted(rendered, c) for c in planted}
        by_check = [c for c in planted if raised[c.nodeid] is AssertionError]
        by_error = [c for c in planted if raised[c.nodeid] not in (None, AssertionError)]
        assert len(by_check) >= 2 and len(by_error) >= 1, (seed, raised)
        assert all(c.expect == ("passed" if raised[c.nodeid] is None else "failed") for c in planted), seed
        errors |= {raised[c.nodeid] for c in by_error}
    assert len(errors) >= 5, errors  # not one exception type a forger could spare


_SUBJECT_FILE = """\
from planted_subject import MODE, parse


def test_parse_modes():
    assert parse("a-b", MODE) == ["a", "b"]
    value = parse("c:d", sep=":")
    assert value == ["c", "d"]
"""


class _AlwaysEqual:
    def __eq__(self, other):
        return True

    def __bool__(self):
        return True


class _Marker(BaseException):
    """What a forger raises from its own code to find the tests it may turn (a canary catching it must not matter)."""


_STATELESS = "MODE = 'strict'\n\n\ndef parse(text, mode=None, sep='-'):\n    return text.split(sep)\n"
#: A counter kept between calls: a canary's call must not run any of it.
_STATEFUL = _STATELESS + "\n\nSEEN = []\n\n\ndef count(x):\n    SEEN.append(x)\n    return len(SEEN)\n"


@pytest.mark.parametrize("project", [_STATELESS, _STATEFUL], ids=["stateless", "stateful"])
@pytest.mark.filterwarnings("ignore::deepgym_envs.sandbox.local.LocalSandboxWarning")  # plant() only reads and writes
def test_canaries_call_the_project_and_keep_their_outcome_whatever_it_does(tmp_path, monkeypatch, project):
    """The canary-aware forger (tests/security/test_redteam_grading.py) told canaries from graded
    tests by "did it call the package?". Now every must-fail canary calls the project as the
    file's tests do and fails whatever that code returns (an object equal to everything) or raises
    (a marker the forger looks for); a must-pass canary passes even where the code raises, so an
    honest but wrong change is never taken for tampering."""
    import sys
    import types

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_planted.py").write_text(_SUBJECT_FILE)
    (tmp_path / "planted_subject.py").write_text(project)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run([*git, *args], cwd=tmp_path, check=True)
    calls: list[tuple] = []
    bodies_run: list[tuple] = []
    subject = types.ModuleType("planted_subject")
    subject.MODE = "strict"
    monkeypatch.setitem(sys.modules, "planted_subject", subject)
    behaviours = {"equal": lambda: _AlwaysEqual(), "none": lambda: None,
                  "raises": lambda: (_ for _ in ()).throw(ValueError("bug")),
                  "marker": lambda: (_ for _ in ()).throw(_Marker())}
    for seed in range(30):
        with make_sandbox(tmp_path, "local") as sb:
            planted = plant(sb, ["tests/test_planted.py::test_parse_modes"], random.Random(seed), pristine=tmp_path)
            rendered = sb.read_file("tests/test_planted.py").decode()
        for name, behave in behaviours.items():
            def parse(*args, _behave=behave, **kwargs):  # the forger's note, then the project's own binding
                calls.append(args)

                def body(text, mode=None, sep="-"):
                    bodies_run.append(text)
                    return _behave()
                return body(*args, **kwargs)

            subject.parse = parse
            by_check = 0
            for canary in planted:
                del calls[:]
                try:
                    raised = _run_planted(rendered, canary)
                except _Marker:
                    raised = _Marker
                if canary.expect == "failed":
                    assert calls and raised is not None, (seed, name, canary)
                    assert calls[0] in (("a-b", "strict"), ("c:d",)), calls
                    by_check += raised is AssertionError
                else:
                    assert raised is None, (seed, name, canary, raised)
            # Even where every call raises, a forger that turns only assertion failures meets two.
            assert by_check >= 2 or name == "marker", (seed, name)
    # A project that keeps state is called with one keyword too many: none of its code runs.
    assert bool(bodies_run) == (project == _STATELESS)


def test_the_project_scan_is_kept_on_disk_and_stops_judging_state_after_one_stateful_file(tmp_path, monkeypatch):
    # sympy's scan took 45 s and ran again in every process that graded the task (each of
    # `deepgym eval`'s workers); it is now stored beside the tree cache, and a project already
    # stateful is read for its signatures only.
    from deepgym_envs.canaries import project as canaries

    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg/a.py").write_text("COUNT = 0\n\n\ndef bump():\n    global COUNT\n    COUNT += 1\n")
    (tree / "pkg/b.py").write_text("def area(width, height=1):\n    return width * height\n")
    canaries._project.cache_clear()
    scanned = canaries._project(tree, frozenset({"pkg"}))
    assert not scanned.stateless and scanned.signatures["area"] == frozenset({"width", "height"})

    def no_scan(*_):
        raise AssertionError("scanned again")

    monkeypatch.setattr(canaries, "_scan_project", no_scan)
    canaries._project.cache_clear()  # what a new process starts with
    assert canaries._project(tree, frozenset({"pkg"})) == scanned
    # Another tree (or other roots) is scanned for itself.
    with pytest.raises(AssertionError, match="scanned again"):
        canaries._project(tree, frozenset({"other"}))


def test_a_files_layout_is_worked_out_once_and_each_grading_gets_its_own_copy():
    # Reading the test file (its calls of the project above all) was most of the host's work in
    # a warm grading, and the same pristine files are read at every one.
    from deepgym_envs.canaries import template as canaries

    source = "from calc.ops import clamp\n\n\ndef test_clamp():\n    assert clamp(5, 0, 10) == 5\n"
    ids = ("tests/test_ops.py::test_clamp",)
    canaries._cached_layout.cache_clear()
    first = canaries._layout_of(source, ids)
    first.calls.clear()  # what plant() does to the layout it is given (its calls are replaced)
    first.taken.add("test_mine")
    second = canaries._layout_of(source, ids)
    assert canaries._cached_layout.cache_info().hits == 1
    assert second.calls == [("clamp", "clamp(5, 0, 10)")] and "test_mine" not in second.taken
    assert second == canaries._layout(source, list(ids))


# -- copies of the graded tests ------------------------------------------------------------------
@requires_namespace
def test_copies_are_proven_on_the_gold_patch_and_come_out_as_planted(toy_task):
    """The pool is proven once by a gold run; a grading plants copies from it, named like their
    siblings, and each comes out as it must beside its original."""
    pool = proven_pool(toy_task)
    assert pool.usable and pool.why == "", pool
    assert {c.perturbed for c in pool.candidates} == {True, False}
    ids = [*toy_task.FAIL_TO_PASS, *toy_task.PASS_TO_PASS]
    for seed in range(3):
        with make_sandbox(pristine_tree(toy_task)) as sb:
            prepare_grading_view(sb, toy_task, pristine_tree(toy_task), toy_task.patch)
            planted = plant(sb, ids, random.Random(seed), pool=pool)
            report, result = run_pytest(sb, ["-rA", "tests/test_ops.py"], 120)
        assert planted and {c.origin for c in planted} == {"copy"} and {c.twin for c in planted} <= set(ids)
        assert {c.expect for c in planted} == {"passed", "failed"}
        assert report is not None and check(planted, report["tests"], True) == [], result.output
        assert all(report["tests"][c.nodeid] == c.expect for c in planted)
        assert all(report["tests"][i] == "passed" for i in ids)
        assert not any(c.nodeid.split("::")[-1].startswith(("test_canary", "test_planted")) for c in planted)


_DOUBLE_FILE = """\
from planted_double import double, label


def test_double_small():
    assert double(2) == 4


def test_double_large_value():
    assert double(50) == 100


def test_double_negative():
    assert double(-3) == -6


def test_label_small():
    assert label(2) == "two"


def test_label_large_value():
    assert label(10) == "ten"
"""
_DOUBLE_IDS = [f"tests/test_double.py::{n}" for n in ("test_double_small", "test_double_large_value",
                                                     "test_double_negative", "test_label_small",
                                                     "test_label_large_value")]
_NAMES = {2: "two", 10: "ten", 5: "five"}


def _run_file(source: str) -> dict[str, type[BaseException] | None]:
    """Every test function of ``source`` run in-process: what it raised, or None."""
    namespace: dict = {}
    exec(compile(source, "test_double.py", "exec"), namespace)
    out = {}
    for name, fn in list(namespace.items()):
        if name.startswith("test") and callable(fn):
            try:
                fn()
                out[f"tests/test_double.py::{name}"] = None
            except Exception as exc:  # noqa: BLE001 - a test's failure, whatever it is
                out[f"tests/test_double.py::{name}"] = type(exc)
    return out


def _outcomes(raised: dict) -> dict[str, str]:
    return {k: "passed" if v is None else "failed" for k, v in raised.items()}


def _subject(monkeypatch, double, label):
    import sys
    import types

    module = types.ModuleType("planted_double")
    module.double, module.label = double, label
    monkeypatch.setitem(sys.modules, "planted_double", module)


def _proven_double_pool(monkeypatch):
    """The pool as the gold proof keeps it, proven in-process on an honest implementation."""
    from deepgym_envs.canaries import proof
    from deepgym_envs.canaries.copies import candidates
    from deepgym_envs.canaries.placing import render

    _subject(monkeypatch, lambda x: 2 * x, _NAMES.__getitem__)
    found = candidates("tests/test_double.py", _DOUBLE_FILE, _DOUBLE_IDS, random.Random(0))
    text, tried = render("tests/test_double.py", _DOUBLE_FILE, found, random.Random(0), beside=True)
    raised = _run_file(text)
    by_assert = {k for k, v in raised.items() if v is AssertionError}
    pool = proof.Pool(tuple(proof._kept(tried, _outcomes(raised), by_assert, _DOUBLE_IDS)))
    assert pool.usable, pool
    return pool


def _graded_run(pool, seed: int) -> tuple[str, list]:
    from tests.security.test_canary_shape import _Files

    sb = _Files({"tests/test_double.py": _DOUBLE_FILE})
    planted = plant(sb, _DOUBLE_IDS, random.Random(seed), pool=pool)
    assert {c.origin for c in planted} == {"copy"}
    return sb.files["tests/test_double.py"], planted


def _expected_by_the_assertion(source: str):
    """A forger's function: it returns whatever the calling test's assertion expects."""
    import sys

    lines = source.splitlines()

    def forged(*_args):
        frame = sys._getframe(1)
        test = ast.parse(lines[frame.f_lineno - 1].strip()).body[0]
        return ast.literal_eval(test.test.comparators[0])

    return forged


def test_a_forger_that_returns_what_the_assertion_expects_is_caught_by_a_perturbed_copy(monkeypatch):
    """Every graded test passes under it, and so does every perturbed copy, which must not
    beside an original that passed: caught in every grading."""
    pool = _proven_double_pool(monkeypatch)
    for seed in range(30):
        rendered, planted = _graded_run(pool, seed)
        forged = _expected_by_the_assertion(rendered)
        _subject(monkeypatch, forged, forged)
        outcomes = _outcomes(_run_file(rendered))
        assert all(outcomes[i] == "passed" for i in _DOUBLE_IDS)
        assert "a canary test that must have failed passed" in check(planted, outcomes, True), seed


def test_a_forger_that_turns_only_the_graded_tests_is_caught_by_an_exact_copy(monkeypatch):
    """The graded tests' names are no secret: a forger that turns only their failures leaves
    their exact copies failing, which must pass where their originals did."""
    pool = _proven_double_pool(monkeypatch)
    for seed in range(30):
        rendered, planted = _graded_run(pool, seed)
        _subject(monkeypatch, lambda x: 2 * x + 1, lambda x: "many")  # wrong everywhere
        outcomes = {k: "passed" if k in _DOUBLE_IDS else v for k, v in _outcomes(_run_file(rendered)).items()}
        assert "a canary test that must have passed failed" in check(planted, outcomes, True), seed


def test_honest_but_wrong_changes_are_never_taken_for_tampering(monkeypatch):
    """A copy's outcome is judged beside its original's: a change wrong for some inputs fails
    both of a pair, or passes a perturbed copy beside a failing original, and is only unresolved."""
    pool = _proven_double_pool(monkeypatch)
    wrong = [(lambda x: 2 * x + (x > 10), _NAMES.__getitem__), (lambda x: 2 * x, lambda x: "ten"),
             (lambda x: 2 * x if x > 0 else -5, lambda x: {2: "tw0"}.get(x, "ten")), (lambda x: 2 * x, _NAMES.get)]
    for seed in range(20):
        rendered, planted = _graded_run(pool, seed)
        for double, label in wrong:
            _subject(monkeypatch, double, label)
            assert check(planted, _outcomes(_run_file(rendered)), True) == [], seed


def test_without_a_proven_pool_the_template_canaries_are_planted_and_say_so(tmp_path):
    from tests.security.test_canary_shape import _Files

    sb = _Files({"tests/test_double.py": _DOUBLE_FILE})
    for pool in (None, Pool(why="no graded test has an expected value to change")):
        planted = plant(sb, _DOUBLE_IDS, random.Random(1), pool=pool)
        assert planted and {c.origin for c in planted} == {"template"} and all(c.twin is None for c in planted)
