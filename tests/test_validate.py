"""Task validation's own judgement (deepgym_envs/validate.py), over the verdicts grading gives it."""

from __future__ import annotations

from deepgym_envs import validate
from deepgym_envs.grading import Verdict


def test_a_gold_run_that_was_tampered_with_never_makes_a_task_valid(toy_task, monkeypatch):
    # The scale run's funcy 2.0 tasks were "valid" with an unresolved gold: the grader saw its test
    # function replaced (the file re-imports it from another module) and said tampered, but every
    # test had passed, and validation took that for a run unresolved only through flaky tests.
    tests = {t: "passed" for t in [*toy_task.FAIL_TO_PASS, *toy_task.PASS_TO_PASS]}
    base = Verdict("unresolved", {**tests, **{t: "failed" for t in toy_task.FAIL_TO_PASS}})
    gold = Verdict("unresolved", tests, reason="tampered: the code run for x differs from its test file",
                   tampered=True)
    monkeypatch.setattr(validate, "grade", lambda task, patch, backend=None: gold if patch else base)
    result = validate.validate_task(toy_task)
    assert not result.valid and any("gold patch does not resolve: tampered" in p for p in result.problems)
    # A gold unresolved only through a test known to be flaky stays valid.
    flaky = toy_task.PASS_TO_PASS[0]
    task = toy_task.__class__(**{**vars(toy_task), "flaky": [flaky]})
    gold = Verdict("unresolved", {**tests, flaky: "failed"}, reason="1 PASS_TO_PASS failed")
    assert validate.validate_task(task).valid


def test_validation_times_the_gold_run_and_records_it(tmp_path):
    import json

    from conftest import toy_row, write_toy_repo
    from deepgym_envs.tasks import load_tasks

    path = tmp_path / "toy.jsonl"
    row = toy_row(write_toy_repo(tmp_path / "calc"), problem_statement="clamp(50, 0, 10) returns 50 … not 10.")
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    tasks = load_tasks(path)
    (result,) = validate.validate_tasks(tasks, show_progress=False)
    assert result.valid, result.problems
    assert 0 < result.gold_seconds == result.gold.test_seconds < result.gold.duration
    assert validate.record_gold_seconds([result], tasks) == [str(path)]
    (again,) = load_tasks(path)
    assert again.gold_seconds >= result.gold_seconds and again.gold_seconds - result.gold_seconds <= 0.01
    # The rest of the row is written as it was.
    assert path.read_text(encoding="utf-8") == json.dumps({**row, "gold_seconds": again.gold_seconds},
                                                          ensure_ascii=False) + "\n"


def _timed(toy_task, monkeypatch, seconds):
    """validate_task over verdicts whose gold test run took ``seconds``."""
    tests = {t: "passed" for t in [*toy_task.FAIL_TO_PASS, *toy_task.PASS_TO_PASS]}
    base = Verdict("unresolved", {**tests, **{t: "failed" for t in toy_task.FAIL_TO_PASS}}, test_seconds=1.0)
    gold = Verdict("resolved", tests, test_seconds=seconds)
    graded = []

    def fake_grade(task, patch, backend=None):
        graded.append(task.gold_seconds)
        return gold if patch else base

    monkeypatch.setattr(validate, "grade", fake_grade)
    return graded


def test_a_gold_run_too_close_to_its_deadline_makes_the_task_invalid(toy_task, monkeypatch):
    import dataclasses

    # Measured under the grading timeout alone, whatever the file recorded.
    graded = _timed(toy_task, monkeypatch, 40.0)
    recorded = dataclasses.replace(toy_task, gold_seconds=1.0)  # 60 s deadline; the run now takes 40 s
    result = validate.validate_task(recorded)
    assert graded == [0.0, 0.0] and result.gold_seconds == 40.0
    assert not result.valid and any("recorded gold_seconds (1)" in p and "--record-gold-seconds" in p
                                    for p in result.problems)
    assert validate.validate_task(recorded, retime=True).valid  # 40 s gives a deadline of 430 s
    # Near the ceiling no recorded time helps: the gold run would be cut off on a loaded machine.
    _timed(toy_task, monkeypatch, 400.0)
    result = validate.validate_task(toy_task, retime=True)
    assert not result.valid and any("900s grading timeout" in p for p in result.problems)


def test_a_base_run_with_no_verdict_is_said_as_such_not_counted_as_failing_tests(toy_task):
    """``F2P_fail_at_base: 1/1`` read as "the bug is there" when the base run never ran a test."""
    from deepgym_envs.cli import _validation_row

    result = validate.TaskValidation(toy_task.instance_id, False, ["base: no verdict: the sandbox died"],
                                     Verdict.no_verdict("the sandbox died"), Verdict("resolved"))
    row = _validation_row(result, toy_task)
    assert row["F2P_fail_at_base"] == "base: no verdict: the sandbox died" == row["P2P_pass_at_base"]


def test_a_project_that_is_its_own_test_runner_gets_advice_that_can_fix_it(toy_task):
    """pytest-dev rows: no python_env can fix them, so the advice is not "check python_env"."""
    from deepgym_envs.grading import _blame_environment

    log = ("deepgym: pytest or pluggy loads from the repository under test (its project is pytest itself); "
           "deepgym does not grade a project with its own test runner\n")
    verdict = _blame_environment(toy_task, toy_task.patch, Verdict("unresolved", reason="no report", log=log))
    assert verdict.status == "no_verdict" and "check python_env" not in verdict.reason
    assert "leave these rows out" in verdict.reason, verdict.reason
