"""run_batch: a group of candidate patches for one task, graded in order, each in isolation."""

from __future__ import annotations

import json

import pytest

from conftest import requires_namespace
from deepgym_envs import load_tasks, run_batch
from deepgym_envs.cli import main
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.trees import pristine_tree

pytestmark = requires_namespace


def broken_patches(task) -> list[str]:
    """Seven candidates that do not fix the task, written through a sandbox so they always apply."""
    target = task.gold_files[0]

    def via(edit) -> str:
        with make_sandbox(pristine_tree(task)) as sb:
            edit(sb)
            return sb.diff()

    def append(sb, path, text):
        sb.write_file(path, sb.read_file(path) + text.encode())

    def gold_then_crash(sb):
        sb.apply_patch(task.patch)
        sb.write_file(target, b"raise ImportError('broken on purpose')\n" + sb.read_file(target))

    def rewrite_tests(sb):
        for path in task.hidden_test_files:
            if sb.exists(path):
                sb.write_file(path, b"def test_nothing():\n    pass\n")

    return [
        "",
        via(lambda sb: append(sb, "README.md", "\nA note.\n")),
        via(lambda sb: append(sb, target, "\ndef broken(:\n")),
        via(gold_then_crash),
        via(lambda sb: sb.remove(target)),
        via(rewrite_tests),
        via(lambda sb: sb.write_file("conftest.py", b"import pytest\n@pytest.hookimpl(hookwrapper=True)\n"
                                     b"def pytest_runtest_makereport(item, call):\n    out = yield\n"
                                     b"    out.get_result().outcome = 'passed'\n")),
    ]


def test_order_is_preserved_and_results_do_not_depend_on_workers(toy_task):
    patches = [toy_task.patch, "", toy_task.patch, "not a diff"]
    one = run_batch(toy_task, patches, workers=1)
    two = run_batch(toy_task, patches, workers=2)
    assert [v.status for v in one] == ["resolved", "unresolved", "resolved", "unresolved"]
    assert [(v.status, v.tests) for v in one] == [(v.status, v.tests) for v in two]


def test_candidates_are_isolated_from_each_other(toy_task):
    """A candidate that writes outside the repository in its test run cannot affect the next one."""
    poison = ("diff --git a/src/calc/__init__.py b/src/calc/__init__.py\n--- a/src/calc/__init__.py\n"
              "+++ b/src/calc/__init__.py\n@@ -1 +1,2 @@\n from calc.ops import clamp, mean\n"
              "+open('/tmp/poison', 'w').write('x'); open('/testbed/src/calc/ops.py', 'w').write('')\n")
    verdicts = run_batch(toy_task, [poison, toy_task.patch, poison, toy_task.patch], workers=2)
    assert [v.status for v in verdicts] == ["unresolved", "resolved", "unresolved", "resolved"]


def test_batch_cli_reads_jsonl_and_writes_verdicts(toy_jsonl, toy_task, tmp_path, capsys):
    patches = tmp_path / "candidates.jsonl"
    patches.write_text(json.dumps({"patch": toy_task.patch}) + "\n" + json.dumps("") + "\n")
    out = tmp_path / "verdicts.jsonl"
    assert main(["batch", toy_task.instance_id, "--tasks", str(toy_jsonl), "--patches", str(patches),
                 "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["resolved", "unresolved"]
    assert "resolved" in capsys.readouterr().out


def test_bad_patch_file_names_the_line(toy_jsonl, toy_task, tmp_path, capsys):
    patches = tmp_path / "candidates.jsonl"
    patches.write_text('"ok"\n{"nope": 1}\n')
    assert main(["batch", toy_task.instance_id, "--tasks", str(toy_jsonl), "--patches", str(patches)]) == 2
    assert "candidates.jsonl:2" in capsys.readouterr().out


@pytest.mark.slow
def test_gold_and_seven_broken_patches_on_every_builtin_task():
    failures = {}
    for task in load_tasks("builtin"):
        verdicts = run_batch(task, [task.patch, *broken_patches(task)])
        statuses = [v.status for v in verdicts]
        if statuses != ["resolved"] + ["unresolved"] * 7:
            failures[task.instance_id] = statuses
    assert not failures
