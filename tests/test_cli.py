"""The ``deepgym`` command line: list, validate and evaluate task sets."""

from __future__ import annotations

import json

import pytest
from _fixtures import BUGGY_LINE, FIXED_LINE, NOT_A_FIX, TASK_ID, needs_namespace, task_row, write_repo, write_task_file

from deepgym_envs.cli import main

BROKEN_ID = "wordy__broken-001"


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run ``deepgym ARGS``; returns (exit code, stdout)."""
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps tables to the terminal; keep ids on one line
    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))

    def run(*args: str) -> tuple[int, str]:
        code = main(list(args))
        return code, capsys.readouterr().out

    return run


@pytest.fixture
def wordy_cli_tasks(tmp_path):
    return write_task_file(tmp_path / "taskset")


@pytest.fixture
def broken_cli_tasks(tmp_path):
    """A task whose 'gold patch' leaves the bug in place: validation must reject it."""
    repo = write_repo(tmp_path / "broken" / "wordy")
    core = repo / "src/wordy/core.py"
    core.write_text(core.read_text().replace(FIXED_LINE, BUGGY_LINE))
    return write_task_file(tmp_path / "broken", task_row(instance_id=BROKEN_ID, gold_reverse_base=False,
                                                          patch=NOT_A_FIX))


def test_tasks_list_builtin(cli):
    code, out = cli("tasks", "list", "builtin")
    assert code == 0
    assert "deepgym__cronparse-001" in out and "deepgym/cronparse" in out
    assert "36 tasks in builtin" in out


def test_tasks_list_a_jsonl_file(cli, wordy_cli_tasks):
    code, out = cli("tasks", "list", str(wordy_cli_tasks))
    assert code == 0 and TASK_ID in out and "1 tasks in" in out and "is_even(4) returns False" in out


def test_tasks_list_reports_a_malformed_file_without_a_traceback(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(task_row()) + "\n" + json.dumps(task_row(FAIL_TO_PASS=7)) + "\n")
    code, out = cli("tasks", "list", str(bad))
    assert code == 2
    assert "error:" in out and "bad.jsonl:2" in out and "FAIL_TO_PASS" in out


@needs_namespace
def test_tasks_validate_accepts_a_good_task(cli, wordy_cli_tasks):
    code, out = cli("tasks", "validate", str(wordy_cli_tasks), "--workers", "1", "--record-gold-seconds")
    assert code == 0
    assert TASK_ID in out and "valid" in out and "1 valid, 0 invalid" in out
    # The gold run's time is written back: grading derives the task's deadline from it.
    from deepgym_envs.tasks import load_tasks

    (task,) = load_tasks(wordy_cli_tasks)
    assert task.gold_seconds > 0 and "gold_seconds" in out


@needs_namespace
def test_tasks_validate_rejects_a_gold_patch_that_does_not_fix(cli, broken_cli_tasks):
    code, out = cli("tasks", "validate", str(broken_cli_tasks), "--workers", "1")
    assert code == 1
    assert BROKEN_ID in out and "INVALID" in out and "gold patch does not resolve" in out
    assert "0 valid, 1 invalid" in out


@needs_namespace
def test_eval_noop_resolves_nothing(cli, wordy_cli_tasks, tmp_path):
    out_file = tmp_path / "results" / "noop.json"
    code, out = cli("eval", "--agent", "noop", "--tasks", str(wordy_cli_tasks), "--out", str(out_file),
                    "--concurrency", "1")
    assert code == 0 and "resolved 0/1" in out
    result = json.loads(out_file.read_text())
    assert result["agent"] == "noop"
    assert result["summary"]["resolved"] == 0 and result["summary"]["tasks"] == 1
    assert result["summary"]["no_verdict"] == 0
    (episode,) = result["episodes"]
    assert episode["task_id"] == TASK_ID and episode["status"] == "unresolved" and episode["steps"] == 1


@needs_namespace
def test_eval_oracle_resolves_the_task(cli, wordy_cli_tasks, tmp_path):
    out_file = tmp_path / "oracle.json"
    code, out = cli("eval", "--agent", "oracle", "--tasks", str(wordy_cli_tasks), "--out", str(out_file),
                    "--concurrency", "1")
    assert code == 0 and "resolved 1/1" in out
    result = json.loads(out_file.read_text())
    assert result["summary"]["resolved"] == 1 and result["summary"]["resolved_rate"] == 1.0
    (episode,) = result["episodes"]
    assert episode["status"] == "resolved" and episode["invalid_actions"] == 0
    assert episode["fail_to_pass"] == {"passed": 1, "total": 1}


def test_eval_unknown_agent_is_an_error_message_not_a_traceback(cli, wordy_cli_tasks):
    code, out = cli("eval", "--agent", "gpt-7", "--tasks", str(wordy_cli_tasks))
    assert code == 2
    assert "unknown agent 'gpt-7'" in out and "oracle" in out and "noop" in out


def test_unknown_subcommand_is_a_usage_error(cli, capsys):
    with pytest.raises(SystemExit) as info:
        main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
