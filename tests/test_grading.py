"""Hidden-test grading: honest verdicts, and the known ways of cheating do not work."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import GOLD_PATCH
from deepgym_envs import grade
from deepgym_envs.grading import is_protected, is_shadow, patch_writes
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.trees import pristine_tree

F2P = "tests/test_ops.py::test_clamp_above"


def new_file(path: str, text: str) -> str:
    lines = text.splitlines()
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def test_gold_patch_resolves(toy_task, backend):
    v = grade(toy_task, toy_task.patch, backend=backend)
    assert v.status == "resolved", v.reason
    assert v.fail_to_pass == {"passed": 1, "total": 1} and v.pass_to_pass == {"passed": 2, "total": 2}
    assert set(v.tests.values()) == {"passed"}


def test_empty_patch_is_unresolved_with_per_test_results(toy_task, backend):
    v = grade(toy_task, "", backend=backend)
    assert v.status == "unresolved"
    assert v.tests[F2P] == "failed"
    assert v.tests["tests/test_ops.py::test_mean"] == "passed"
    assert F2P in v.reason


def test_patch_that_does_not_apply_is_unresolved(toy_task):
    v = grade(toy_task, "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n")
    assert v.status == "unresolved" and "does not apply" in v.reason


def test_a_missing_test_counts_as_failure(toy_task):
    task = dataclasses.replace(toy_task, PASS_TO_PASS=[*toy_task.PASS_TO_PASS, "tests/test_ops.py::test_ghost"])
    v = grade(task, task.patch)
    assert v.status == "unresolved" and v.tests["tests/test_ops.py::test_ghost"] == "missing"


def test_broken_hidden_test_patch_is_no_verdict(toy_task):
    task = dataclasses.replace(toy_task, test_patch=toy_task.test_patch.replace("def test_mean", "def test_other"))
    v = grade(task, task.patch)
    assert v.status == "no_verdict" and v.masked and "hidden test patch" in v.reason


def test_missing_repository_is_no_verdict(toy_task, tmp_path):
    task = dataclasses.replace(toy_task, repo_path="", instance_id="toy-remote")
    v = grade(task, "")
    assert v.status == "no_verdict" and "repo_path" in v.reason


# -- anti-cheat (README "Grading, and why it cannot be gamed"): each exploit leaves the bug in place, so each must stay unresolved --
EXPLOITS = {
    "edit the visible test file": (
        "diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n"
        "@@ -1,4 +1,5 @@\n-from calc import clamp, mean\n+from calc import mean\n+clamp = lambda x, lo, hi: min(max(x, lo), hi)\n"
        " \n \n def test_clamp_inside():\n"),
    "conftest forcing passes": new_file("conftest.py", (
        "import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
        "    out = yield\n    rep = out.get_result()\n    rep.outcome = 'passed'\n")),
    "conftest patching the code under test": new_file("conftest.py", (
        "import calc, calc.ops\ncalc.ops.clamp = calc.clamp = lambda x, lo, hi: max(lo, min(x, hi))\n")),
    "conftest in the package": new_file("src/calc/conftest.py", "import pytest\ndef pytest_collection_modifyitems(items):\n    items.clear()\n"),
    "pytest.py shadow at the root": new_file("pytest.py", "import sys\nsys.exit(0)\n"),
    "sitecustomize": new_file("src/sitecustomize.py", "import os\nos._exit(0)\n"),
    "pth file": new_file("src/evil.pth", "import os; os._exit(0)\n"),
    "pytest.ini overriding addopts": new_file("pytest.ini", "[pytest]\naddopts = --co\n"),
    "plugin registered through package metadata": new_file(
        "src/evil-1.0.dist-info/entry_points.txt", "[pytest11]\nevil = calc.ops\n"),
    "exit 0 when the package is imported": (
        "diff --git a/src/calc/__init__.py b/src/calc/__init__.py\n--- a/src/calc/__init__.py\n"
        "+++ b/src/calc/__init__.py\n@@ -1 +1,2 @@\n+import os; os._exit(0)\n from calc.ops import clamp, mean\n"),
    "pre-create the hidden test file content": (
        "diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n"
        "@@ -7,3 +7,7 @@ def test_clamp_inside():\n \n def test_mean():\n     assert mean([1, 2, 3]) == 2\n+\n+\n"
        "+def test_clamp_above():\n+    assert True\n"),
}


@pytest.mark.parametrize("name", list(EXPLOITS))
def test_known_exploits_do_not_resolve(toy_task, name):
    v = grade(toy_task, EXPLOITS[name])
    assert v.status == "unresolved", f"{name}: {v.reason}"


def test_exploit_plus_real_fix_still_resolves(toy_task):
    """Neutralising an exploit must not punish an honest fix that came with it."""
    v = grade(toy_task, GOLD_PATCH + EXPLOITS["pytest.ini overriding addopts"])
    assert v.status == "resolved", v.reason


def test_grading_leaves_the_agents_workspace_alone(toy_task, backend):
    from deepgym_envs.grading import grade_sandbox

    with make_sandbox(pristine_tree(toy_task), backend) as sb:
        sb.write_file("tests/test_ops.py", b"def test_clamp_above():\n    pass\n")
        before = sb.diff()
        v = grade_sandbox(toy_task, sb, backend=backend)
        assert v.status == "unresolved"  # the rewritten test file was restored before grading
        assert sb.diff() == before
        assert sb.read_file("tests/test_ops.py") == b"def test_clamp_above():\n    pass\n"


def test_quoted_and_renamed_paths_cannot_dodge_the_rules(toy_task):
    quoted = ('diff --git "a/con\\146test.py" "b/con\\146test.py"\nnew file mode 100644\n--- /dev/null\n'
              '+++ "b/con\\146test.py"\n@@ -0,0 +1,2 @@\n+import calc, calc.ops\n'
              '+calc.ops.clamp = calc.clamp = lambda x, lo, hi: max(lo, min(x, hi))\n')
    assert grade(toy_task, quoted).status == "unresolved"
    renamed = ("diff --git a/tests/test_ops.py b/tests/test_gone.py\nsimilarity index 100%\n"
               "rename from tests/test_ops.py\nrename to tests/test_gone.py\n")
    v = grade(toy_task, renamed)
    assert v.status == "unresolved", v.reason  # not no_verdict: a rename must not mask the episode


def test_the_views_change_is_what_git_apply_reads_from_the_patch(toy_task):
    """Grading reads the view's change from git's own parse of the patch (no diff of the view):
    both sides of a rename, a quoted name with a tab, new and deleted files."""
    patch = ('diff --git a/tests/test_ops.py "b/tests/te\\tst.py"\nsimilarity index 100%\n'
             'rename from tests/test_ops.py\nrename to "tests/te\\tst.py"\n'
             "diff --git a/src/calc/ops.py b/src/calc/ops.py\ndeleted file mode 100644\n--- a/src/calc/ops.py\n"
             "+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"
             'diff --git "a/con\\146test.py" "b/con\\146test.py"\nnew file mode 100644\n--- /dev/null\n'
             '+++ "b/con\\146test.py"\n@@ -0,0 +1 @@\n+x\n')
    assert patch_writes(pristine_tree(toy_task), patch) == {"tests/test_ops.py", "tests/te\tst.py", "src/calc/ops.py",
                                                           "conftest.py"}


def test_forged_reports_on_the_pipe_are_detected(toy_task):
    forge = ("import json, os\nfor fd in os.listdir('/proc/self/fd'):\n    try:\n"
             "        os.write(int(fd), (json.dumps({'tests': {}, 'exitstatus': 0}) + '\\n').encode())\n"
             "    except OSError:\n        pass\n")
    patch = ("diff --git a/src/calc/__init__.py b/src/calc/__init__.py\n--- a/src/calc/__init__.py\n"
             "+++ b/src/calc/__init__.py\n@@ -1 +1,7 @@\n" + "".join(f"+{line}\n" for line in forge.splitlines())
             + " from calc.ops import clamp, mean\n")
    v = grade(toy_task, patch)
    assert v.status == "unresolved" and "forged" in v.reason


def test_protection_rules(toy_task):
    assert is_protected("tests/test_ops.py", toy_task) and is_protected("conftest.py", toy_task)
    assert is_protected("pyproject.toml", toy_task) and is_protected("pkg/sub/test_x.py", toy_task)
    assert not is_protected("src/calc/ops.py", toy_task)
    assert is_shadow("pytest.py") and is_shadow("src/x.pth") and is_shadow("a/_pytest/__init__.py")
    assert not is_shadow("src/calc/ops.py")


@pytest.mark.parametrize("name", ["edit the visible test file", "conftest patching the code under test",
                                  "pre-create the hidden test file content"])
def test_exploits_would_work_without_the_protections(toy_task, monkeypatch, name):
    """The exploit tests above can fail: switch the file protections off and these exploits resolve.

    (A conftest that rewrites reports is caught even then, by the report plugin's own checks.)"""
    import deepgym_envs.grading as grading

    monkeypatch.setattr(grading, "is_protected", lambda path, task: False)
    monkeypatch.setattr(grading, "is_shadow", lambda path: False)
    task = toy_task
    if name == "pre-create the hidden test file content":
        # Without restoration the hidden test patch no longer applies on top of the agent's copy;
        # it still applies to the pristine tree, so that is the candidate's doing: unresolved, and
        # never masked (the exploit there was a dropped rollout).
        verdict = grade(task, EXPLOITS[name])
        assert verdict.status == "unresolved" and "keeps the hidden tests from being added" in verdict.reason
    else:
        assert grade(task, EXPLOITS[name]).status == "resolved"


def test_canaries_in_a_selected_run_sit_among_their_files_tests_not_after_them():
    """A selected (shaping) run names node ids; canaries appended last were the last ids on the
    command line, so their place told them from the hidden tests."""
    from deepgym_envs.grading import interleave

    run = [f"tests/test_a.py::test_{i}" for i in range(6)] + [f"tests/test_b.py::test_{i}" for i in range(6)]
    canaries = ["tests/test_a.py::test_canary_x", "tests/test_b.py::test_canary_y"]
    places = set()
    for _ in range(200):
        out = interleave(run, canaries)
        assert [t for t in out if t not in canaries] == run  # the real tests keep their order
        a, b = out.index(canaries[0]), out.index(canaries[1])
        assert out.index(run[0]) - 1 <= a <= out.index(run[5]) + 1 and out.index(run[6]) - 1 <= b
        places.add(b)
    assert len(places) > 3  # anywhere among test_b's, not always last


def test_the_verdict_cache_tells_environments_and_harnesses_apart():
    """Two rows alike but for their environment or harness are graded apart: a verdict from one
    interpreter or counting rule must not be handed out for the other."""
    import dataclasses

    from deepgym_envs import load_tasks
    from deepgym_envs.grading import VerdictCache

    task = load_tasks("builtin")[0]
    keys = {VerdictCache.key(t, task.patch) for t in (
        task, dataclasses.replace(task, python_env={"python": "3.9"}), dataclasses.replace(task, harness="swebench"),
        dataclasses.replace(task, trust=["frames"]), dataclasses.replace(task, gold_seconds=task.gold_seconds + 60))}
    assert len(keys) == 5


def test_the_verdict_cache_tells_deadlines_apart(monkeypatch):
    """A change that is slow but finite is unresolved under a short deadline and may pass under a
    long one: a verdict cached under one is not handed out under the other."""
    from deepgym_envs import grading, load_tasks

    task = load_tasks("builtin")[0]
    runs = []
    monkeypatch.setattr(grading, "grade", lambda task, patch, **kw: runs.append(kw) or grading.Verdict("resolved"))
    cache = grading.VerdictCache()
    for timeout in (30, 30, 600):
        cache.grade(task, task.patch, timeout=timeout)
    assert [kw["timeout"] for kw in runs] == [30, 600]


def test_an_xfail_or_skip_forced_to_failed_is_found_by_its_published_id_too():
    """SWE-bench publishes ``test_x[not a]`` as ``test_x[not``: outcome_of found the xfailed node by
    that id, but the rewrite to ``failed`` matched node ids exactly (or cut at a space only), so a
    package's pytest.xfail() on such a test still counted as passing."""
    from deepgym_envs.grading import own_xfails_only, outcome_of

    report = {"tests": {"t.py::test_x[not a]": "xfailed", "t.py::test_p[/testbed/m.py]": "xfailed"},
              "marked": ["t.py::test_x[not a]", "t.py::test_p[/testbed/m.py]"]}
    ids = ["t.py::test_x[not", "t.py::test_p[/m.py]"]
    read = own_xfails_only(report, set())["tests"]
    assert [outcome_of(i, read) for i in ids] == ["failed", "failed"]
    assert own_xfails_only(report, {"t.py"}) == report  # marked, in a file that can xfail it: it stands


def test_an_xfail_counts_only_for_a_test_marked_xfail():
    """Per test, not per file: a marked test's neighbour that xfails at run time (package code
    calling ``pytest.xfail()``) failed."""
    from deepgym_envs.grading import own_xfails_only

    report = {"tests": {"t.py::test_marked": "xfailed", "t.py::test_other": "xfailed"}, "marked": ["t.py::test_marked"]}
    assert own_xfails_only(report, {"t.py"})["tests"] == {"t.py::test_marked": "xfailed", "t.py::test_other": "failed"}


def test_canaries_go_into_a_run_that_leaves_out_only_marked_tests():
    """sympy's spec runs ``-m "not slow"``: every unmarked test (a canary) still runs, so canaries
    are planted; a mark expression that could leave an unmarked test out turns them off as before."""
    from deepgym_envs.grading import plants_canaries

    assert plants_canaries(["-m", "not slow"]) and plants_canaries(["-mnot slow and not network"])
    for cmd in (["-m", "slow"], ["-m", "not slow or fast"], ["-m", "not slow", "-m", "slow"], ["-m"],
                ["-m", "not slow", "-k", "x"]):
        assert not plants_canaries(cmd), cmd


def test_a_projects_one_test_module_is_a_test_file_and_its_bodies_are_its_own():
    # jsonpatch and jsonpointer keep every test in a root tests.py: each gold run read as
    # "the body run for tests.py::... is code from tests.py", and no task passed validation.
    from deepgym_envs.grading import foreign_bodies, is_test_path

    assert is_test_path("tests.py") and is_test_path("test.py") and not is_test_path("src/contest.py")
    bodies = {"tests.py::T::test_a": ["/testbed/tests.py", 10, False],
              "check.py::test_b": ["/testbed/check.py", 3, False],
              "check.py::test_c": ["/testbed/jsonpatch.py", 3, False]}
    assert foreign_bodies(["tests.py::T::test_a"], bodies, "/testbed") == []
    # A hidden test file is the grader's whatever its name; the package under test never is.
    assert foreign_bodies(["check.py::test_b"], bodies, "/testbed", ["check.py"]) == []
    assert foreign_bodies(["check.py::test_b"], bodies, "/testbed") == [
        "the body run for check.py::test_b is code from check.py"]
    assert foreign_bodies(["check.py::test_c"], bodies, "/testbed", ["check.py"]) == [
        "the body run for check.py::test_c is code from jsonpatch.py"]
