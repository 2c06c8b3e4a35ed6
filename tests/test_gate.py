"""The validation gate: an imported task that does not validate is never graded as if it did.

The fixture is the toy task made an imported row (``harness: swebench``) whose hidden tests add a
PASS_TO_PASS test using pytest-mock's ``mocker``, which deepgym's own interpreter does not have: as
a published pvlib row did, its gold patch errors at setup, and every grading path must say
``no_verdict`` with the validation's reason instead of grading a change ``unresolved``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import pytest

from conftest import GOLD_PATCH, TEST_PATCH, requires_namespace, toy_row, write_toy_repo
from deepgym_envs.batch import run_batch
from deepgym_envs.cli import main
from deepgym_envs.env import SWEEnv
from deepgym_envs.evaluation import evaluate
from deepgym_envs.grading import Verdict
from deepgym_envs.predictions import Prediction, grade_predictions
from deepgym_envs.tasks import Task, task_from_row
from deepgym_envs.validate import TaskValidation

pytestmark = requires_namespace

MOCKER_TEST = """
+
+
+def test_mean_of_a_mocked_sum(mocker):
+    mocker.patch("builtins.sum", return_value=9)
+    assert mean([1, 2, 3]) == 3
"""
#: The toy's hidden tests plus one PASS_TO_PASS test that needs pytest-mock's ``mocker``.
MOCKER_TEST_PATCH = TEST_PATCH.replace("@@ -7,3 +7,7 @@", "@@ -7,3 +7,12 @@") + MOCKER_TEST.lstrip("\n")
MOCKER_ID = "tests/test_ops.py::test_mean_of_a_mocked_sum"


@pytest.fixture
def gate_mod():
    """The gate's module (imported here, so that on a tree without it the behaviour tests fail as
    assertions, not all at once at import)."""
    import deepgym_envs.gate

    return deepgym_envs.gate


def mocker_row(repo: Path, **overrides: object) -> dict:
    row = toy_row(repo, instance_id="toy__calc-mocker", harness="swebench", test_patch=MOCKER_TEST_PATCH)
    row["PASS_TO_PASS"] = [*row["PASS_TO_PASS"], MOCKER_ID]
    row.update(overrides)
    return row


@pytest.fixture
def invalid_task(tmp_path: Path) -> Task:
    """An imported-style row whose gold patch cannot pass: its environment lacks pytest-mock."""
    return task_from_row(mocker_row(write_toy_repo(tmp_path / "calc")))


def _says_why(reason: str) -> None:
    assert "does not validate" in reason and "mocker" in reason and "pytest-mock" in reason, reason


def test_run_batch_gives_an_invalid_task_no_verdict_with_the_reason(invalid_task):
    verdicts = run_batch(invalid_task, [GOLD_PATCH, ""], workers=1)
    assert [v.status for v in verdicts] == ["no_verdict", "no_verdict"]
    _says_why(verdicts[0].reason)
    assert all(v.masked for v in verdicts)


def test_grade_predictions_reports_an_invalid_task_as_an_error_not_unresolved(invalid_task):
    report = grade_predictions([Prediction(invalid_task.instance_id, GOLD_PATCH, "m")], [invalid_task], workers=1)
    assert report["unresolved_ids"] == [] and report["error_ids"] == [invalid_task.instance_id]
    _says_why(report["errors"][invalid_task.instance_id])
    assert report["instances"][invalid_task.instance_id]["deepgym"]["status"] == "no_verdict"


class _Submitter:
    """Submits at once: the gate decides before any grading of the workspace."""

    def reset(self, obs: str, info: dict) -> None:
        pass

    def act(self, obs: str, info: dict) -> dict:
        return {"name": "submit", "arguments": {}}


def test_eval_runs_no_episode_for_an_invalid_task_and_says_why(invalid_task):
    result = evaluate("scripted", lambda t: _Submitter(), [invalid_task], concurrency=1, show_progress=False)
    episode = result.episodes[0]
    assert episode.status == "no_verdict" and episode.steps == 0
    _says_why(episode.reason)


def test_the_envs_final_verdict_is_masked_for_an_invalid_task(invalid_task):
    env = SWEEnv([invalid_task], max_steps=3)
    try:
        env.reset(seed=0)
        *_, terminated, _, info = env.step({"name": "submit", "arguments": {}})
    finally:
        env.close()
    assert terminated and info["verdict"]["status"] == "no_verdict" and info["masked"]
    _says_why(info["verdict"]["reason"])


def test_built_in_style_tasks_and_the_opt_out_are_graded_as_before(invalid_task, monkeypatch, gate_mod):
    """The gate costs the built-in and synthesised sets nothing (no harness: never validated first);
    a user who knows better turns it off."""
    calls = []
    monkeypatch.setattr(gate_mod, "validate_task", lambda *a, **k: calls.append(a) or pytest.fail("validated"))
    local = dataclasses.replace(invalid_task, harness="")
    assert run_batch(local, [GOLD_PATCH], workers=1)[0].status == "unresolved"
    assert run_batch(invalid_task, [GOLD_PATCH], workers=1, validate_first=False)[0].status == "unresolved"
    monkeypatch.setenv(gate_mod.GATE_ENV, "0")
    assert run_batch(invalid_task, [GOLD_PATCH], workers=1)[0].status == "unresolved"
    assert calls == []


def _validation(task: Task, valid: bool, base: str = "unresolved") -> TaskValidation:
    return TaskValidation(task.instance_id, valid, [] if valid else ["gold patch does not resolve: because"],
                          Verdict(base, reason="base reason"), Verdict("resolved"))


def test_one_validation_per_task_content_even_under_concurrent_use(invalid_task, monkeypatch, gate_mod):
    calls = []

    def slow(task, **kwargs):
        calls.append(task.instance_id)
        time.sleep(0.3)
        return _validation(task, False)

    monkeypatch.setattr(gate_mod, "validate_task", slow)
    found = []
    threads = [threading.Thread(target=lambda: found.append(gate_mod.gate(invalid_task))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(v is not None and "because" in v.reason for v in found)
    # The cache is on disk: another process (here: a cleared memory) reads it.
    gate_mod._RECENT.clear()
    assert gate_mod.gate(invalid_task) is not None and len(calls) == 1
    # A change to anything the outcome depends on is validated again.
    changed = dataclasses.replace(invalid_task, PASS_TO_PASS=invalid_task.PASS_TO_PASS[:2])
    gate_mod.gate(changed)
    assert len(calls) == 2


def test_a_validation_with_no_verdict_of_its_own_is_never_stored_as_invalid(invalid_task, monkeypatch, gate_mod):
    calls = []
    monkeypatch.setattr(gate_mod, "validate_task",
                        lambda task, **k: calls.append(1) or _validation(task, False, base="no_verdict"))
    blocked = gate_mod.gate(invalid_task)
    assert blocked is not None and "could not be validated" in blocked.reason
    assert not gate_mod._entry(invalid_task, None).exists()
    gate_mod.gate(invalid_task)
    assert len(calls) == 1  # remembered a while in this process, so a batch does not validate per candidate
    gate_mod._RECENT.clear()  # a later run asks again
    gate_mod.gate(invalid_task)
    assert len(calls) == 2


def test_tasks_validate_writes_the_cache_the_gate_reads(invalid_task, tmp_path, monkeypatch, capsys, gate_mod):
    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(mocker_row(Path(invalid_task.repo_path))) + "\n")
    assert main(["tasks", "validate", str(path), "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "mocker" in out and "pytest-mock" in out, out
    monkeypatch.setattr(gate_mod, "validate_task", lambda *a, **k: pytest.fail("validated again"))
    from deepgym_envs.tasks import load_tasks

    blocked = gate_mod.gate(load_tasks(path)[0])
    assert blocked is not None
    _says_why(blocked.reason)


#: pytest-mock as pip installs it for the toy (deepgym's own Python): built once per cache, in a build sandbox.
WITH_PYTEST_MOCK = {"requirements": ["pytest==7.4.4", "pytest-mock==3.14.0"], "pythonpath": ["src"]}


@pytest.mark.slow
def test_a_mocker_task_validates_once_its_environment_installs_pytest_mock(tmp_path):
    """The plugin is loaded because the requirements install it (autoloading stays off), or because
    the spec names it in test_cmd; graded sealed, with canaries planted beside the mocker test."""
    from deepgym_envs.grading import grade, plants_canaries
    from deepgym_envs.validate import validate_task

    repo = write_toy_repo(tmp_path / "calc")
    for test_cmd in ([], ["-p", "pytest_mock"]):
        task = task_from_row(mocker_row(repo, python_env=WITH_PYTEST_MOCK, test_cmd=test_cmd))
        result = validate_task(task)
        assert result.valid, (result.problems, result.gold.log[-2000:])
        assert result.gold.tests[MOCKER_ID] == "passed" and "plugins: mock-3.14.0" in result.gold.log
        assert run_batch(task, [GOLD_PATCH], workers=1)[0].status == "resolved"
    # The mocked test is graded like the others (canaries planted beside it): a change that passes
    # the plain test_mean but ignores sum() fails it.
    assert plants_canaries(task.pytest_args)
    constant = GOLD_PATCH.replace(" def mean(values):\n", " def mean(values):\n-    return sum(values) / len(values)\n"
                                  "+    return 2\n").replace("@@ -1,6 +1,6 @@", "@@ -1,7 +1,7 @@")
    verdict = grade(task, constant)
    assert verdict.status == "unresolved" and verdict.tests[MOCKER_ID] == "failed", verdict.reason
    assert verdict.tests["tests/test_ops.py::test_mean"] == "passed"
    # pytest-mock is project-side code next to the report plugin, which stays the authority: a change
    # that replaces pytest's runner at import is caught (canaries and machinery checks), never resolved.
    forged = "lambda item, when, **kw: _r.CallInfo.from_call(lambda: None, when)"
    tamper = GOLD_PATCH.replace(" def clamp(x, lo, hi):\n", f"+import _pytest.runner as _r\n+_r.call_runtest_hook = {forged}\n"
                                " def clamp(x, lo, hi):\n").replace("@@ -1,6 +1,6 @@", "@@ -1,6 +1,8 @@")
    verdict = grade(task, tamper)
    assert verdict.status == "unresolved" and verdict.tampered, verdict.reason


def test_without_pytest_mock_validation_names_the_fixture_the_package_and_the_plugin(invalid_task):
    from deepgym_envs.validate import validate_task

    problems = validate_task(invalid_task).problems
    assert "fixture 'mocker' not found" in problems[0] and "pytest-mock" in problems[0], problems
    assert "pytest_mock" in problems[0]


def test_a_missing_fixture_is_named_even_when_a_large_suite_pushes_it_out_of_the_logs_tail(tmp_path):
    """pvlib's 281 tests: ``-rA``'s summary alone outgrows the log's tail, and the setup error with it."""
    from deepgym_envs.validate import validate_task

    many = ("diff --git a/tests/test_many.py b/tests/test_many.py\nnew file mode 100644\n--- /dev/null\n"
            "+++ b/tests/test_many.py\n@@ -0,0 +1,6 @@\n+import pytest\n+\n+\n"
            "+@pytest.mark.parametrize('i', range(400))\n+def test_many(i):\n+    assert i >= 0\n")
    task = task_from_row(mocker_row(write_toy_repo(tmp_path / "calc"), test_patch=MOCKER_TEST_PATCH + many))
    result = validate_task(task)
    assert len(result.gold.log) > 8000  # the tail, led by the setup error it cut
    assert "fixture 'mocker' not found" in result.problems[0] and "pytest-mock" in result.problems[0], result.problems


def test_pvlibs_spec_installs_pytest_mock_and_loads_its_plugin():
    from deepgym_envs.swebench_specs import spec_for

    spec = spec_for("pvlib/pvlib-python", "0.9")
    assert "pytest-mock==3.14.0" in spec.requirements and spec.plugins == ("pytest_mock",)
    assert list(spec.test_cmd[:2]) == ["-p", "pytest_mock"]


def test_a_set_validated_with_recorded_gold_seconds_is_not_validated_again(tmp_path, monkeypatch, gate_mod):
    from deepgym_envs.tasks import load_tasks

    path = tmp_path / "set.jsonl"
    path.write_text(json.dumps(toy_row(write_toy_repo(tmp_path / "calc"), harness="swebench")) + "\n")
    assert main(["tasks", "validate", str(path), "--workers", "1", "--record-gold-seconds"]) == 0
    task = load_tasks(path)[0]
    assert task.gold_seconds > 0  # the row changed; its validation is kept under the new key
    monkeypatch.setattr(gate_mod, "validate_task", lambda *a, **k: pytest.fail("validated again"))
    assert gate_mod.gate(task) is None
