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
