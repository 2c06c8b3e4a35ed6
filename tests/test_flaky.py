"""Flaky tests: found by repeated validation, recorded in the task file, left out of grading."""

from __future__ import annotations

import json
import warnings

import pytest

from conftest import TEST_PATCH, requires_namespace, toy_row, write_toy_repo
from deepgym_envs import grade, load_tasks
from deepgym_envs.cli import main
from deepgym_envs.grading import FlakyTestWarning

pytestmark = [requires_namespace, pytest.mark.slow]

FLAKY_TEST = "tests/test_ops.py::test_coin"
#: The hidden tests plus one that passes half of the time, whatever the code does.
FLAKY_PATCH = TEST_PATCH.replace("@@ -7,3 +7,7 @@", "@@ -7,3 +7,12 @@") + (
    "+\n+\n+def test_coin():\n+    import random\n+    assert random.SystemRandom().random() < 0.5\n")


@pytest.fixture
def flaky_jsonl(tmp_path):
    row = toy_row(write_toy_repo(tmp_path / "calc"), test_patch=FLAKY_PATCH)
    row["PASS_TO_PASS"].append(FLAKY_TEST)
    path = tmp_path / "flaky.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return path


def test_validate_runs_flags_records_and_grading_excludes(flaky_jsonl, capsys):
    # 8 runs of each state: the chance that a fair coin never flips in 16 throws is 2 * 2**-16.
    main(["tasks", "validate", str(flaky_jsonl), "--runs", "8", "--record-flaky", "--workers", "1"])
    out = capsys.readouterr().out
    assert "1 with flaky tests" in out and "recorded flaky tests" in out
    task = load_tasks(flaky_jsonl)[0]
    assert task.flaky == [FLAKY_TEST]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        verdicts = [grade(task, task.patch) for _ in range(4)]
    assert all(v.status == "resolved" for v in verdicts)  # the coin no longer decides anything
    assert FLAKY_TEST not in verdicts[0].tests
    assert any(issubclass(w.category, FlakyTestWarning) for w in caught)
    # and once recorded, validation is clean
    assert main(["tasks", "validate", str(flaky_jsonl), "--workers", "1"]) == 0
