"""Task synthesis end to end, offline: a tiny library in a local git repository becomes validated tasks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from _chat_server import chat_server

from deepgym_envs.gitrepo import git_env
from deepgym_envs.grading import grade
from deepgym_envs.synth import SourceSpec, SynthConfig, synthesize, synthesize_all
from deepgym_envs.tasks import load_tasks
from deepgym_envs.trees import pristine_tree
from tests.conftest import requires_namespace

LIB = {
    "pyproject.toml": '[project]\nname = "tinylib"\nversion = "1.0"\n\n[tool.pytest.ini_options]\n'
                      'addopts = "--cov=tinylib"\n',  # a plugin the grader does not load: must be neutralised
    "src/tinylib/__init__.py": "from tinylib.ops import clamp, mean, first_positive\n",
    "src/tinylib/ops.py": (
        "def clamp(x, lo, hi):\n"
        "    if x < lo:\n"
        "        return lo\n"
        "    if x > hi:\n"
        "        return hi\n"
        "    return x\n\n\n"
        "def mean(values):\n"
        "    if not values:\n"
        "        raise ValueError('mean of nothing')\n"
        "    return sum(values) / len(values)\n\n\n"
        "def first_positive(values):\n"
        "    for v in values:\n"
        "        if v > 0 and v is not None:\n"
        "            return v\n"
        "    return None\n"),
    "tests/test_clamp.py": (
        "from tinylib import clamp\n\n\n"
        "def test_clamp_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
        "def test_clamp_below():\n    assert clamp(-3, 0, 10) == 0\n\n\n"
        "def test_clamp_above():\n    assert clamp(50, 0, 10) == 10\n"),
    "tests/test_stats.py": (
        "import pytest\n\nfrom tinylib import first_positive, mean\n\n\n"
        "def test_mean():\n    assert mean([1, 2, 3, 6]) == 3\n\n\n"
        "def test_mean_empty():\n    with pytest.raises(ValueError):\n        mean([])\n\n\n"
        "def test_first_positive():\n    assert first_positive([-1, 0, 4, 5]) == 4\n"),
}


def _git_repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    # -f: a tracked file that .gitignore names (as in an sdist, where nothing is ignored) stays.
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, env=git_env())
    return root


TEST_STAGE_REASONS = {"no test fails", "breaks too many tests", "timeout", "test run crashed"}
CONFIG = SynthConfig(max_candidates=6, max_combined=1, workers=1, seed=3, use_host_python=True, show_progress=False)


@pytest.mark.slow
@requires_namespace
def test_synthesis_from_a_local_git_repository_makes_validated_tasks(tmp_path):
    repo = _git_repo(tmp_path / "tinylib", LIB)
    out = tmp_path / "out"
    report = synthesize(SourceSpec.parse(f"git:{repo}"), out, CONFIG)

    assert report.ok, report.reason
    assert report.reliable_tests == 6
    assert report.written >= 2
    # Every candidate is accounted for: kept by the test run or rejected there, and every kept one
    # written or rejected later (duplicate, no reproduction, failed validation).
    at_tests = sum(v for k, v in report.rejected.items() if k in TEST_STAGE_REASONS)
    assert report.tried == report.kept + at_tests
    assert report.written == report.kept - (sum(report.rejected.values()) - at_tests)
    assert report.rejected["failed validation"] == 0
    tasks = load_tasks(out)
    assert len(tasks) == report.written
    for task in tasks:
        assert task.repo == "git/tinylib" and task.base_commit and task.python_env["pythonpath"] == ["src"]
        assert task.gold_files == ["src/tinylib/ops.py"]
        tree = pristine_tree(task)
        hidden = task.hidden_test_files
        # The tests that decide the task are not in the agent's repository; the rest are. When
        # they span every test file, they are cut out of their files instead of the files going.
        assert hidden
        for path in hidden:
            if (tree / path).exists():
                text = (tree / path).read_text()
                assert not any(f"def {t.split('::')[-1]}(" in text for t in task.FAIL_TO_PASS if t.startswith(path))
        assert all(path.split("::")[0] in hidden for path in task.FAIL_TO_PASS)
        # No history holds the fix: the base commit has no parent.
        # safe.directory: as root the tree belongs to the sandbox's uid, not to us.
        parents = subprocess.run(["git", "-c", "safe.directory=*", "rev-list", "--parents", "-n1", "HEAD"], cwd=tree,
                                 capture_output=True, text=True, check=True).stdout.split()
        assert parents == [task.base_commit]
        # The issue never quotes the line the fix changes.
        removed = [line[1:].strip() for line in task.patch.splitlines()
                   if line.startswith("-") and not line.startswith("---")]
        assert removed and not any(line in task.problem_statement for line in removed if len(line) > 3)
    # Grading agrees with validation: the gold patch resolves a task, doing nothing does not.
    task = tasks[0]
    assert grade(task, task.patch).status == "resolved"
    assert grade(task, "").status == "unresolved"
    # The environment is recorded next to the tasks (here: deepgym's own interpreter).
    assert [p.name for p in (out / "envs").iterdir()] == [f"tinylib-{task.version}.txt"]


@pytest.mark.slow
@requires_namespace
def test_a_project_without_tests_is_reported_and_the_run_goes_on(tmp_path):
    bare = _git_repo(tmp_path / "notests", {"src/notests/__init__.py": "def f(x):\n    return x + 1\n"})
    good = _git_repo(tmp_path / "tinylib", LIB)
    reports = synthesize_all([SourceSpec.parse(f"git:{bare}"), SourceSpec.parse(f"git:{tmp_path}/missing"),
                              SourceSpec.parse(f"git:{good}")], tmp_path / "out",
                             SynthConfig(max_candidates=3, max_combined=0, workers=1, use_host_python=True,
                                         validate=False, show_progress=False))
    assert [r.ok for r in reports] == [False, False, True]
    assert "no tests shipped" in reports[0].reason
    assert "cannot clone" in reports[1].reason


def test_a_test_folder_of_files_pytest_skips_is_named_in_the_reason(tmp_path):
    # pytimeparse 1.1.8 ships pytimeparse/tests/testtimeparse.py and was told "no tests/ directory".
    from deepgym_envs.synth.fetch import SynthError
    from deepgym_envs.synth.project import read_layout

    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pkg" / "tests" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tests" / "testpkg.py").write_text("import unittest\n")
    with pytest.raises(SynthError, match=r"pkg/tests/ holds testpkg.py, which pytest does not collect"):
        read_layout(tmp_path)


def test_test_modules_pytest_collects_only_when_named_are_named(tmp_path):
    # voluptuous 0.14.2 keeps its tests in voluptuous/tests/tests.py, pytimeparse 1.1.8 in
    # pytimeparse/tests/testtimeparse.py: both were "no tests shipped", though pytest runs a file
    # it is pointed at whatever its name.
    from deepgym_envs.synth.project import read_layout

    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pkg" / "tests" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tests" / "tests.py").write_text("from pkg import f\n\n\ndef test_f():\n    assert f() == 1\n")
    (tmp_path / "pkg" / "tests" / "testpkg.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_f(self):\n        pass\n")
    (tmp_path / "pkg" / "tests" / "testdata.py").write_text("VALUES = [1, 2]\n")
    layout = read_layout(tmp_path)
    assert layout.test_targets == ("pkg/tests/testpkg.py", "pkg/tests/tests.py")
    assert layout.modules == ("pkg/__init__.py",)


def test_a_root_test_py_is_a_test_suite(tmp_path):
    # pygtrie ships its suite as test.py at the root and was told "no tests shipped".
    from deepgym_envs.synth.project import read_layout

    (tmp_path / "pygtrie.py").write_text("def f():\n    return 1\n")
    (tmp_path / "test.py").write_text("import pygtrie\n\n\ndef test_f():\n    assert pygtrie.f() == 1\n")
    layout = read_layout(tmp_path)
    assert layout.test_targets == ("test.py",) and layout.modules == ("pygtrie.py",)


def test_source_specs_parse_and_reject_nonsense():
    spec = SourceSpec.parse("pypi:cachetools==5.3.3")
    assert (spec.kind, spec.name, spec.version) == ("pypi", "cachetools", "5.3.3")
    spec = SourceSpec.parse("git:/some/where/lib.git@v1.2")
    assert (spec.kind, spec.name, spec.version, spec.location) == ("git", "lib", "v1.2", "/some/where/lib.git")
    from deepgym_envs.errors import DeepgymError

    with pytest.raises(DeepgymError, match="expected pypi"):
        SourceSpec.parse("cachetools")


def test_the_cli_reports_failures_per_source(tmp_path, capsys):
    from deepgym_envs.cli import main

    bare = _git_repo(tmp_path / "notests", {"notests.py": "def f(x):\n    return x + 1\n"})
    code = main(["tasks", "synth", "--from", f"git:{bare}", "--out", str(tmp_path / "out"), "--host-python",
                 "--no-validate"])
    out = capsys.readouterr().out
    assert code == 1
    assert "no tests shipped" in out
    assert "0 tasks (not validated: --no-validate)" in out and "validated tasks" not in out
    assert not (tmp_path / "out" / "repos").exists() and not (tmp_path / "out" / "envs").exists()
    summary = json.loads((tmp_path / "out" / "synth-summary.json").read_text())
    assert summary["tasks"] == 0 and summary["sources"][0]["reason"].startswith("no tests shipped")


def test_llm_rewrite_through_a_local_openai_compatible_server():
    from deepgym_envs.audit.llm import OpenAIChatClient
    from deepgym_envs.synth.rewrite import rewrite_statement

    answers: list[str] = []

    def respond(body: dict, n: int) -> tuple[int, dict, dict]:
        return 200, {"choices": [{"message": {"role": "assistant", "content": answers.pop(0)}}]}, {}

    with chat_server(respond) as (url, requests):
        client = OpenAIChatClient(url, "fake", api_key="", max_retries=0)
        template = "tinylib: clamp is broken\n\n```python\nassert clamp(50, 0, 10) == 10\n```\n\nActual: 50\n"
        fix = "--- a/ops.py\n+++ b/ops.py\n@@ -1 +1 @@\n-    if x >= hi:\n+    if x > hi:\n"
        good = "clamp ignores the upper bound\n\n```python\nassert clamp(50, 0, 10) == 10\n```\nI get 50."
        answers += [good, good.replace("I get 50.", "The line `if x >= hi:` is wrong."), "No code here."]
        assert rewrite_statement(client, template, fix) == good + "\n"
        assert rewrite_statement(client, template, fix) == template  # it quoted the fix: kept the template
        assert rewrite_statement(client, template, fix) == template  # it lost the reproduction
    seen = [r["body"] for r in requests]
    assert seen[0]["model"] == "fake" and seen[0]["messages"][1]["content"] == template
    assert "if x" not in json.dumps(seen)  # the model never sees the patch


def test_the_failing_line_comes_from_the_traceback_and_the_script_from_the_test():
    from deepgym_envs.synth.repro import failing_line, reproduction
    from deepgym_envs.synth.runner import failure_sections, header_name

    test_file = ("import tinylib\n\n\nclass Checks:\n    def test_clamp_above(self):\n"
                 "        assert 10 == tinylib.clamp(50, 0, 10)\n        assert tinylib.clamp(0, 0, 1) == 0\n"
                 "\n\nclass TestClamp(Checks):\n    pass\n")
    output = ("=================================== FAILURES ===================================\n"
              "__________________________ TestClamp.test_clamp_above __________________________\n"
              "tests/test_clamp.py:6: in test_clamp_above\n"
              "    assert 10 == tinylib.clamp(50, 0, 10)\n"
              "src/tinylib/ops.py:4: in clamp\n"
              "    if x >= hi:\n"
              "E   assert 10 == 50\n"
              "E    +  where 50 = <function clamp at 0x7f3a2b>(50, 0, 10)\n"
              "=========================== short test summary info ============================\n")
    test_id = "tests/test_clamp.py::TestClamp::test_clamp_above"
    section = failure_sections(output)[header_name(test_id)]
    line = failing_line(output, "tests/test_clamp.py", section)
    assert line == 6
    script = reproduction(test_file, test_id, line)  # inherited from the mixin, cut after line 6
    assert script == ("import tinylib\nresult = tinylib.clamp(50, 0, 10)\nprint(repr(result))\n"
                      "assert 10 == result\n")
    assert "x >= hi" not in script and "ops.py" not in script


# ordered-set and isodate in small: one test file, and parameters from a set (ids in hash order).
ONEFILE = {
    "pyproject.toml": '[project]\nname = "onefile"\nversion = "1.0"\n',
    ".gitignore": "src/onefile/version.py\n",
    "src/onefile/version.py": "VERSION = '1.0'\n",  # gitignored, and the tests import it
    "src/onefile/__init__.py": "from onefile.ops import clamp, mean\nfrom onefile.version import VERSION\n",
    "src/onefile/ops.py": LIB["src/tinylib/ops.py"].split("def first_positive")[0],
    "tests/test_all.py": (
        "import pytest\n\nfrom onefile import VERSION, clamp, mean\n\n"
        # Strings: their hashes, so the set's order, change with every interpreter.
        "CASES = {('5', 5), ('-3', 0), ('50', 10), ('0', 0), ('10', 10), ('7', 7), ('11', 10), ('-1', 0)}\n\n\n"
        "class Thing:\n    def __init__(self, x):\n        self.x = x\n\n\n"
        "@pytest.mark.parametrize('x, expected', [(Thing(x), e) for x, e in CASES])\n"
        "def test_clamp_things(x, expected):\n    assert clamp(int(x.x), 0, 10) == expected\n\n\n"
        "def test_version():\n    assert VERSION == '1.0'\n\n\n"
        "def test_clamp_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
        "def test_clamp_above():\n    assert clamp(50, 0, 10) == 10\n\n\n"
        "def test_mean():\n    assert mean([1, 2, 3, 6]) == 3\n\n\n"
        "def test_mean_empty():\n    with pytest.raises(ValueError):\n        mean([])\n"),
}


@pytest.mark.slow
@requires_namespace
def test_one_test_file_and_hash_ordered_ids_still_make_valid_tasks_with_visible_tests(tmp_path):
    from deepgym_envs.cli import main
    from deepgym_envs.pyenv import sandbox_spec
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.synth.measure import reproduction_shows_bug

    repo = _git_repo(tmp_path / "onefile", ONEFILE)
    out = tmp_path / "out"
    code = main(["tasks", "synth", "--from", f"git:{repo}", "--from", f"git:{tmp_path}/missing", "--out", str(out),
                 "--host-python", "--max-candidates", "8", "--max-combined", "1", "--workers", "1"])
    assert code == 1  # one of two sources failed: the exit status says so
    summary = json.loads((out / "synth-summary.json").read_text())
    good, bad = summary["sources"]
    assert good["ok"] and good["written"] >= 1 and good["validated"]
    assert "failed validation" not in good["rejected"]  # isodate: every task failed on hash-ordered ids
    assert "cannot clone" in bad["reason"]
    tasks = load_tasks(out)
    assert len(tasks) == good["written"]
    for task in tasks:
        assert not any("test_clamp_things" in t for t in task.FAIL_TO_PASS + task.PASS_TO_PASS)
        tree = pristine_tree(task)
        # The one test file stays, without the failing tests; the gitignored version.py is there.
        assert (tree / "tests/test_all.py").is_file() and (tree / "src/onefile/version.py").is_file()
        visible = (tree / "tests/test_all.py").read_text()
        assert not any(f"def {t.split('::')[-1]}(" in visible for t in task.FAIL_TO_PASS)
        # The agent can run what stays of the suite, and its reliable tests pass.
        visible_p2p = [t for t in task.PASS_TO_PASS if f"def {t.split('::')[-1]}(" in visible]
        assert visible_p2p
        with make_sandbox(tree, None, spec=sandbox_spec(task)) as sb:
            run = sb.exec(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *visible_p2p], 120)
        assert run.exit_code == 0 and f"{len(visible_p2p)} passed" in run.stdout, run.stdout[-500:]
        # The script fails on the base state and passes with the fix.
        assert reproduction_shows_bug(task).shows_bug
        assert "```python" in task.problem_statement and "Use -v" not in task.problem_statement
    # Every rejected candidate is listed with its reason and log; no git sample hooks are stored.
    rejects = [json.loads(line) for line in (out / good["rejects_file"]).read_text().splitlines()]
    assert all(r["reason"] and (not r["log"] or (out / r["log"]).is_file()) for r in rejects)
    assert not list((out / "repos").glob("*/hooks/*.sample"))
    assert sorted(p.name for p in (out / "repos").iterdir()) == [tasks[0].repo_path.split("/")[-1]]


@requires_namespace
def test_a_test_module_that_cannot_be_imported_costs_only_its_own_tests(tmp_path):
    # pyparsing 3.1.2 gave no tasks: tests/test_diagram.py imports the optional `railroad`, and
    # pytest's collection error stopped the whole run ("no test passes in the sandbox").
    from deepgym_envs.envspec import PythonEnv
    from deepgym_envs.synth.runner import TEST_CMD, SuiteRunner

    _git_repo(tmp_path / "lib", {"lib.py": "def f():\n    return 1\n",
                                 "tests/test_ok.py": "from lib import f\n\n\ndef test_f():\n    assert f() == 1\n",
                                 "tests/test_opt.py": "import railroad_not_installed\n\n\ndef test_g():\n    pass\n"})
    with SuiteRunner(tmp_path / "lib", PythonEnv((), (".",)), test_args=TEST_CMD, timeout=120) as runner:
        run = runner.run(["tests"])
    assert run.passed == {"tests/test_ok.py::test_f"}, run.output[-2000:]


@requires_namespace
def test_a_mark_of_a_plugin_the_runner_does_not_load_is_no_error(tmp_path):
    # python-dateutil 2.9 gave no tasks: its conftest marks every test `no_cover` (pytest-cov's mark;
    # plugins load only when named) and its setup.cfg turns every warning into an error.
    from deepgym_envs.envspec import PythonEnv
    from deepgym_envs.synth.runner import TEST_CMD, SuiteRunner

    _git_repo(tmp_path / "lib", {"lib.py": "def f():\n    return 1\n",
                                 "setup.cfg": "[tool:pytest]\nfilterwarnings =\n    error\n",
                                 "tests/conftest.py": "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
                                                      "    for item in items:\n"
                                                      "        item.add_marker(pytest.mark.no_cover)\n",
                                 "tests/test_ok.py": "from lib import f\n\n\ndef test_f():\n    assert f() == 1\n"})
    with SuiteRunner(tmp_path / "lib", PythonEnv((), (".",)), test_args=TEST_CMD, timeout=120) as runner:
        run = runner.run(["tests"])
    assert run.passed == {"tests/test_ok.py::test_f"}, run.output[-2000:]


def test_development_requirements_stand_in_only_where_nothing_names_the_tests(tmp_path):
    # python-dateutil 2.9 keeps pytest-cov (its conftest's `no_cover` mark), hypothesis and freezegun
    # in requirements-dev.txt, and names no test extra.
    from deepgym_envs.synth.project import _test_requirement_args

    root = tmp_path / "proj"
    root.mkdir()
    (root / "requirements-dev.txt").write_text("pytest-cov\nhypothesis\n")
    assert _test_requirement_args(root) == ["-r", str(root / "requirements-dev.txt")]
    assert _test_requirement_args(root, ["testing"]) == []  # the extra says what the tests need
    (root / "requirements-test.txt").write_text("pytest\n")
    assert _test_requirement_args(root) == ["-r", str(root / "requirements-test.txt")]


def test_tox_deps_stand_in_where_nothing_else_names_what_the_tests_need(tmp_path):
    # natsort 8.4: its conftest imports hypothesis, which only tox.ini's [testenv] deps names.
    from deepgym_envs.synth.project import _test_requirement_args

    root = tmp_path / "proj"
    root.mkdir()
    (root / "tox.ini").write_text("[tox]\nenvlist = py3\n\n[testenv]\npassenv =\n    X\ndeps =\n    pytest\n"
                                  "    hypothesis>=6  # property tests\n    py38: mock\n    -rdocs/req.txt\n"
                                  "    {env:EXTRA:}\ncommands =\n    pytest {posargs}\n\n[testenv:lint]\ndeps = flake8\n")
    assert _test_requirement_args(root) == ["pytest", "hypothesis>=6"]
    assert _test_requirement_args(root, ["tests"]) == []
    (root / "tox.ini").write_text("[testenv\nbroken")
    assert _test_requirement_args(root) == []


def test_of_test_requirements_per_python_version_only_this_pythons_is_installed(tmp_path):
    # wcwidth 0.2.13 ships requirements-tests36/37/39.txt with conflicting pins: installing all three
    # failed ("Cannot install attrs==22.2.0 and attrs==23.1.0").
    from deepgym_envs.synth.project import _one_per_python, _test_requirement_args

    root = tmp_path / "proj"
    root.mkdir()
    for name, pin in (("36", "22.2.0"), ("37", "23.1.0"), ("39", "23.1.0")):
        (root / f"requirements-tests{name}.txt").write_text(f"attrs=={pin}\n")
    (root / "requirements-test.txt").write_text("pytest\n")
    assert _test_requirement_args(root) == ["-r", str(root / "requirements-test.txt"),
                                            "-r", str(root / "requirements-tests39.txt")]
    names = [Path(n) for n in ("r-tests310.txt", "r-tests312.txt", "r-py3.8.txt", "r-py3.13.txt", "other.txt")]
    assert _one_per_python(names, (3, 11)) == [Path("other.txt"), Path("r-py3.8.txt"), Path("r-tests310.txt")]
    assert _one_per_python([Path("r-tests312.txt"), Path("r-tests313.txt")], (3, 11)) == [Path("r-tests312.txt")]


@pytest.mark.slow
@requires_namespace
def test_a_spent_time_budget_leaves_the_remaining_candidates_untried_and_says_so(tmp_path):
    from deepgym_envs.synth.pipeline import UNTRIED

    good = _git_repo(tmp_path / "tinylib", LIB)
    config = SynthConfig(max_candidates=4, max_combined=0, workers=1, use_host_python=True, validate=False,
                         show_progress=False, budget=1e-6)
    report = synthesize(SourceSpec.parse(f"git:{good}"), tmp_path / "out", config)
    assert report.tried == 4 and report.rejected[UNTRIED] == 4 and report.written == 0
    assert "time budget" in report.reason
    rows = [json.loads(line) for line in (tmp_path / "out" / report.rejects_file).read_text().splitlines()]
    assert [r["reason"] for r in rows] == [UNTRIED] * 4


def test_a_project_that_reads_its_own_version_imports_from_the_working_copy(tmp_path):
    # humanize 4.9.0 and semantic-version 2.10.0 call importlib.metadata.version() on themselves
    # at import: every test module failed to import ("no test passes in the sandbox"), since the
    # project is imported from the tree, never installed, and its egg-info is a build artefact.
    import subprocess
    import sys

    from deepgym_envs.synth.fetch import Fetched, SourceSpec
    from deepgym_envs.synth.project import Layout, add_metadata_stub

    root = tmp_path / "semantic_version-2.10.0"
    (root / "src" / "semantic_version").mkdir(parents=True)
    (root / "src" / "semantic_version" / "__init__.py").write_text(
        "from importlib.metadata import version\n__version__ = version('semantic_version')\n")
    fetched = Fetched(SourceSpec.parse("pypi:semantic-version==2.10.0"), root, "semantic-version", "2.10.0",
                      "0" * 64, "semantic_version-2.10.0.tar.gz")
    layout = Layout(("src",), ("tests",), ("src/semantic_version/__init__.py",))
    assert add_metadata_stub(fetched, layout) == root / "src" / "semantic_version-2.10.0.dist-info"
    seen = subprocess.run([sys.executable, "-c", "import semantic_version; print(semantic_version.__version__)"],
                          cwd=root / "src", capture_output=True, text=True)
    assert seen.stdout.strip() == "2.10.0", seen.stderr
    assert add_metadata_stub(fetched, layout) is None  # never over a name that exists
    # A link the sdist planted under that name is not written through.
    other = tmp_path / "elsewhere"
    other.mkdir()
    planted = tmp_path / "planted"
    (planted / "src").mkdir(parents=True)
    (planted / "src" / "semantic_version-2.10.0.dist-info").symlink_to(other)
    assert add_metadata_stub(Fetched(fetched.spec, planted, fetched.name, fetched.version, fetched.sha256,
                                     fetched.origin), layout) is None
    assert list(other.iterdir()) == []
