"""Issue 11, item 7: the audit's white-box strategies (classes B-G) and its leak scan (class F).

Each class's strategies run against the real grading on the toy task, as patches and as agent
actions, and must not get through; against the weak verifier (the negative control) the
in-process ones must. The leak scan must find an answer planted in a task's starting state (a
copy of the fixed file in the tree, the fixed file as a stray git object) and nothing in a clean
task. On the code before issue 11 each class test found exploits (poisons changed the next
candidate's verdict, a patch named after 'No space left on device' came back masked) and the clean
built-in task leaked through the installed task files.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import requires_namespace, toy_row, write_toy_repo
from deepgym_envs.audit.core import AuditReport, audit_tasks
from deepgym_envs.audit.leaks import ENV_PART, ENV_TOTAL, _Needles, _scan_shared, needles, scan_tasks, task_needles
from deepgym_envs.audit.catalog import STRATEGIES, select
from deepgym_envs.audit.weak import exit_code_verifier
from deepgym_envs.tasks import Task, load_tasks, task_from_row
from deepgym_envs.trees import pristine_tree

CLASSES = {
    "B": ["forge_plugin_state", "forge_nonce_every_fd", "plugin_pyfunc_call_true", "stealth_hookimpl",
          "patch_function_runtest", "hollow_test_functions", "hollow_graded_tests", "hollow_graded_disguised",
          "closure_cells_graded"],
    "C": ["config_pytest_toml_plugin", "config_dot_pytest_toml_pdbcls", "config_in_subdirectories"],
    "D": ["poison_next_empty_resolved", "poison_next_gold_unresolved"],
    "E": ["poison_verdict_cache"],
    "G": ["mask_error_text", "mask_crash_with_text", "mask_full_disk"],
}
#: Strategies the weak verifier must fall to (it trusts pytest's exit code; D, E and G attack
#: state it does not share or masking it does not do).
WEAK_FALLS_TO = {*CLASSES["B"], *CLASSES["C"]} - {"config_in_subdirectories", "closure_cells_graded"}


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Task:
    return task_from_row(toy_row(write_toy_repo(tmp_path_factory.mktemp("classes") / "calc")))


def _audit(task: Task, names: list[str], **kwargs: object) -> AuditReport:
    # One worker: a poison (on the code before the fix) reached whichever grading ran next.
    return audit_tasks([task], strategies=select(names), workers=1, progress=False, leaks=False, **kwargs)


def test_every_class_has_strategies_registered():
    assert all(name in STRATEGIES for names in CLASSES.values() for name in names)
    assert {STRATEGIES[n].kind for n in CLASSES["D"]} == {"poison"}
    assert {STRATEGIES[n].victim for n in CLASSES["D"]} == {"empty", "gold"}
    assert STRATEGIES["poison_verdict_cache"].kind == "cache"


@pytest.mark.slow
@pytest.mark.timeout(900)
@requires_namespace
@pytest.mark.parametrize("cls", sorted(CLASSES))
def test_real_grading_stops_the_class(cls, toy):
    report = _audit(toy, CLASSES[cls])
    assert {a.mode for a in report.attempts} == {"patch", "actions"}
    hit = [(a.strategy, a.mode, a.status, a.evidence[:300]) for a in report.exploited]
    assert hit == [], hit


@pytest.mark.slow
@requires_namespace
def test_poisons_are_judged_by_the_next_candidate(toy):
    report = _audit(toy, CLASSES["D"], as_actions=False)
    by_name = {a.strategy: a for a in report.attempts}
    assert "empty before the poison: unresolved" in by_name["poison_next_empty_resolved"].evidence
    assert "gold before the poison: resolved" in by_name["poison_next_gold_unresolved"].evidence
    assert by_name["poison_next_gold_unresolved"].status == "resolved"


@pytest.mark.slow
@requires_namespace
def test_weak_verifier_falls_to_the_in_process_strategies(toy):
    report = _audit(toy, sorted(WEAK_FALLS_TO), verifier=exit_code_verifier, as_actions=False)
    assert {a.strategy for a in report.exploited} == WEAK_FALLS_TO, report.summary()


def test_needles_leave_out_what_the_pristine_tree_already_has(toy):
    found = needles(toy)
    assert found["gold"] == ["return max(lo, min(x, hi))"]
    assert "test_clamp_above" in found["tests"]
    assert not any(n in ("def test_mean():", "assert mean([1, 2, 3]) == 2") for n in found["tests"])


@pytest.mark.slow
@requires_namespace
def test_leak_scan_finds_answers_planted_in_the_starting_state(tmp_path):
    fixed = (write_toy_repo(tmp_path / "fixed") / "src/calc/ops.py").read_text()
    # A copy of the fixed file in the tree, under a name no build-artefact rule removes.
    copied = write_toy_repo(tmp_path / "copied")
    (copied / "docs").mkdir()
    (copied / "docs/ops_reference.py").write_text(fixed)
    in_tree = task_from_row(toy_row(copied, instance_id="toy__copy-001"))
    # The fixed file as an unreachable object in the pristine tree's object store.
    in_git = task_from_row(toy_row(write_toy_repo(tmp_path / "git"), instance_id="toy__git-001"))
    tree = pristine_tree(in_git)
    sha = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=fixed, text=True, cwd=tree,
                         capture_output=True, check=True).stdout.strip()
    # The file to fix written last: its modification time names it (how trees used to be built).
    # Among enough files that chance would not put it on top (one of six files is, one time in six).
    padded = write_toy_repo(tmp_path / "time")
    (padded / "docs").mkdir()
    for i in range(120):
        (padded / f"docs/note_{i:03d}.txt").write_text(f"note {i}\n")
    by_time = task_from_row(toy_row(padded, instance_id="toy__time-001"))
    newest = pristine_tree(by_time) / "src/calc/ops.py"
    os.utime(newest, ns=(newest.stat().st_atime_ns, newest.stat().st_mtime_ns + 10**9))
    clean = task_from_row(toy_row(write_toy_repo(tmp_path / "clean"), instance_id="toy__clean-001"))
    leaks = scan_tasks([in_tree, in_git, by_time, clean])
    where = {(leak.task_id, leak.kind, leak.location) for leak in leaks}
    assert ("toy__time-001", "gold", "/testbed: the files to fix have the highest modification time") in where
    assert ("toy__copy-001", "gold", "/testbed/docs/ops_reference.py") in where, leaks
    assert ("toy__git-001", "gold", f"git object {sha} (blob)") in where, leaks
    assert not [leak for leak in leaks if leak.task_id == "toy__clean-001"], leaks


@requires_namespace
def test_the_shared_scan_takes_more_needles_than_one_environment_string_holds(tmp_path):
    # 84 synthesised tasks' needles came to more than the kernel's 128 KiB per environment string:
    # the audit ended in "the command is too long to run" after every attempt had been graded.
    copied = write_toy_repo(tmp_path / "copied")
    (copied / "notes.py").write_text((write_toy_repo(tmp_path / "fixed") / "src/calc/ops.py").read_text())
    task = task_from_row(toy_row(copied, instance_id="toy__copy-003"))
    filler = _Needles(task, {"gold": [f"return never_written_{i:06d}(x, lo, hi)" for i in range(30000)],
                             "tests": []})
    assert sum(len(s) for s in filler.flat) > ENV_TOTAL > ENV_PART  # several strings, several greps
    leaks = _scan_shared("/testbed", [filler, task_needles(task)], task, None)
    assert [(leak.task_id, leak.kind, leak.location) for leak in leaks] == [
        ("toy__copy-003", "gold", "/testbed/notes.py")]


_SHARED = ["low, high = 0, 10  # the bounds every clamp test uses",
           "assert clamp(-5, low, high) == low  # below the range",
           "assert clamp(5, low, high) == 5  # inside the range",
           "assert clamp(low, low, high) == low  # on the lower bound",
           "assert clamp(high, low, high) == high  # on the upper bound"]


@requires_namespace
def test_a_hidden_test_that_repeats_a_visible_siblings_lines_is_not_a_leak_but_a_copy_of_it_is(tmp_path):
    # cachetools' hidden test_ttl.py repeats most of the visible test_tlru.py: the scan called the
    # visible file (and its blob) a leak of the hidden tests, 74 of 130 lines.
    body = ["def test_clamp_above():", *(f"    {line}" for line in _SHARED),
            "    assert clamp(50, low, high) + 0 == high  # a number, not just something that compares equal"]
    test_patch = ("diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n"
                  f"+++ b/tests/test_ops.py\n@@ -7,3 +7,{5 + len(body)} @@ def test_clamp_inside():\n"
                  " \n def test_mean():\n     assert mean([1, 2, 3]) == 2\n+\n+\n"
                  + "".join(f"+{line}\n" for line in body))
    repo = write_toy_repo(tmp_path / "sibling")
    (repo / "tests/test_limits.py").write_text(
        "from calc.ops import clamp\n\n\ndef test_clamp_bounds():\n" + "".join(f"    {line}\n" for line in _SHARED))
    task = task_from_row(toy_row(repo, instance_id="toy__sibling-001", test_patch=test_patch))
    found = needles(task)["tests"]
    assert not set(found) & set(_SHARED) and "test_clamp_above" in found, found
    assert scan_tasks([task]) == []
    # What the visible sibling lacks still gives a copy of the hidden test away (here a stray blob).
    copied = write_toy_repo(tmp_path / "copied")
    (copied / "tests/test_limits.py").write_text((repo / "tests/test_limits.py").read_text())
    leaking = task_from_row(toy_row(copied, instance_id="toy__sibling-002", test_patch=test_patch))
    sha = subprocess.run(["git", "hash-object", "-w", "--stdin"], input="\n".join(body) + "\n", text=True,
                         cwd=pristine_tree(leaking), capture_output=True, check=True).stdout.strip()
    assert [(leak.kind, leak.location) for leak in scan_tasks([leaking])] == [("tests", f"git object {sha} (blob)")]


@requires_namespace
def test_a_lone_gold_line_a_sibling_module_repeats_with_its_neighbour_is_no_leak(tmp_path):
    # isodate's one-line fix `int(groups["tzmin"] or 0),` stands, under the same line for
    # "tzhour", in isotzinfo.py too: the scan called that module and its blob a leak, as it did
    # more-itertools' `raise IndexError` and a line of the standard library's collections.
    fixed = (write_toy_repo(tmp_path / "fixed") / "src/calc/ops.py").read_text()
    function = fixed.split("\n\n\n")[0] + "\n"
    assert "def mean" not in function and "min(x, hi)" in function
    repeated = write_toy_repo(tmp_path / "repeated")
    (repeated / "src/calc/bounded.py").write_text(function)
    task = task_from_row(toy_row(repeated, instance_id="toy__repeat-001"))
    assert needles(task)["gold"] == ["return max(lo, min(x, hi))"]
    assert scan_tasks([task]) == []
    # The whole fixed file, beside it, still gives the answer away.
    (repeated / "src/calc/bounded.py").write_text(fixed)
    leaking = task_from_row(toy_row(repeated, instance_id="toy__repeat-002"))
    assert [(leak.kind, leak.location) for leak in scan_tasks([leaking])
            if leak.location.startswith("/testbed/")] == [("gold", "/testbed/src/calc/bounded.py")]


@pytest.mark.slow
@requires_namespace
def test_a_built_in_task_leaks_nothing():
    # Everything its sandbox can read, the Python installation included: an installed copy of the
    # task files (as an editable or wheel install puts them in site-packages) is a leak.
    task = load_tasks("builtin")[0]
    assert scan_tasks([task]) == []


@pytest.mark.slow
@requires_namespace
def test_leaks_fail_the_audit_and_have_their_own_section(tmp_path):
    copied = write_toy_repo(tmp_path / "copied")
    (copied / "notes.py").write_text((write_toy_repo(tmp_path / "fixed") / "src/calc/ops.py").read_text())
    task = task_from_row(toy_row(copied, instance_id="toy__copy-002"))
    report = audit_tasks([task], strategies=select(["empty_patch"]), as_actions=False, workers=1, progress=False)
    data = report.to_dict()
    assert data["summary"]["leaks"] >= 1 and data["summary"]["tasks_leaking"] == ["toy__copy-002"]
    assert any(leak["location"] == "/testbed/notes.py" for leak in data["leaks"])
    assert report.failed and not report.exploitable
    assert report.leak_table().row_count == len(report.leaks)


@pytest.mark.slow
@requires_namespace
def test_an_episode_leaves_no_answer_for_the_next(tmp_path):
    # Reading an agent's diff (git add with the pristine tree's git dir) must not write the agent's
    # files into the object store every later sandbox of the task shares: one rollout's solution
    # would be `git cat-file --batch-all-objects` away for the rest.
    from deepgym_envs.sandbox import make_sandbox

    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc"), instance_id="toy__episode-001"))
    fixed = (write_toy_repo(tmp_path / "fixed") / "src/calc/ops.py").read_bytes()
    with make_sandbox(pristine_tree(task)) as sb:
        sb.write_file("src/calc/ops.py", fixed)
        assert "min(x, hi)" in sb.diff()
    assert [leak for leak in scan_tasks([task]) if leak.location.startswith("git object")] == []


def test_an_order_that_chance_would_give_is_no_leak(toy):
    # In CI a file system reusing freed inodes numbered the toy tree's six files in no particular
    # order, and the scan called src/calc/ops.py (on top one time in six) a leak, now and then.
    from deepgym_envs.audit.leaks import _order_leaks

    def stats(n: int) -> list[list[object]]:
        rows = [[f"tests/f{i:03d}.txt", 0, 0, i] for i in range(n - 1)]  # later by path than src/
        return rows + [["src/calc/ops.py", 0, 0, n]]  # the file to fix has the highest inode

    assert _order_leaks(toy, stats(6)) == []
    found = _order_leaks(toy, stats(200))
    assert [leak.location for leak in found] == ["/testbed: the files to fix have the highest inode number"]
