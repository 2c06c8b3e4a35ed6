"""Class 6 (a grading slot held for the fixed timeout): a change that makes the suite spin is cut off
at a deadline derived from the task's own gold run, not at the fixed ceiling.

The gold run of the toy task takes about a second; a patch whose ``clamp`` never returns used to
keep its grading busy for the whole fixed timeout (900 s), once per rollout. Now the task carries
the gold run's time (``gold_seconds``, recorded by ``deepgym tasks validate --record-gold-seconds``)
and grading stops at ``grading_deadline``: the change is ``unresolved``, never ``no_verdict``,
since only the change makes the tests outlive a bound the gold run fits in many times over.
"""

from __future__ import annotations

import pytest

from deepgym_envs import grade
from deepgym_envs import grading
from deepgym_envs.grading import GRADING_TIMEOUT
from deepgym_envs.tasks import task_from_row
from tests.conftest import requires_namespace, toy_row, write_toy_repo
from tests.security.test_forgery import append_to_init

#: ``clamp`` never returns: every test that calls it hangs (a sleep, so the spin costs no CPU here).
SPIN = "import time\n\n\ndef clamp(x, lo, hi):\n    while True:\n        time.sleep(0.05)\n"


def toy(tmp_path, **fields):
    return task_from_row(toy_row(write_toy_repo(tmp_path / "calc"), **fields))


@requires_namespace
@pytest.mark.timeout(180)  # a safety net only: on a tree without deadlines the run waits out the ceiling
def test_a_spinning_change_ends_at_the_deadline_the_gold_run_gives(tmp_path, monkeypatch):
    # A small scale, margin and floor keep this test short; the formula is the real one
    # (test_the_deadline_scales_with_the_gold_run pins the defaults).
    monkeypatch.setattr(grading, "DEADLINE_SCALE", 2.0, raising=False)
    monkeypatch.setattr(grading, "DEADLINE_MARGIN", 2.0, raising=False)
    monkeypatch.setattr(grading, "DEADLINE_FLOOR", 3.0, raising=False)
    task = toy(tmp_path, gold_seconds=0.5)
    v = grade(task, append_to_init(SPIN), timeout=GRADING_TIMEOUT)  # the fixed timeout is only the ceiling
    assert v.status == "unresolved" and not v.masked, v.reason
    assert v.deadline == 3.0  # 2 x 0.5 s + 2 s, not the 900 s given
    assert "longer than the task's deadline of 3s" in v.reason and "gold" in v.reason
    assert v.tests["tests/test_ops.py::test_clamp_above"] == "missing"


def test_the_deadline_scales_with_the_gold_run(tmp_path):
    deadline = grading.grading_deadline
    task = toy(tmp_path)
    assert deadline(task, GRADING_TIMEOUT) == GRADING_TIMEOUT  # never measured: the ceiling alone
    with_gold = [task_from_row(toy_row(tmp_path / "calc", gold_seconds=s)) for s in (1.0, 20.0, 200.0)]
    assert [deadline(t, GRADING_TIMEOUT) for t in with_gold] == [
        grading.DEADLINE_FLOOR,                                    # seconds of tests: the floor
        grading.DEADLINE_SCALE * 20.0 + grading.DEADLINE_MARGIN,   # scaled with the gold run
        GRADING_TIMEOUT]                                           # never past the ceiling
    assert deadline(with_gold[1], 30.0) == 30.0  # a caller's smaller timeout wins


def test_a_slow_gold_run_is_not_cut_off(tmp_path):
    """The deadline is a bound on the change, never tighter than the gold run it was derived from:
    even on a machine ten times slower than the one that measured it, the gold run fits."""
    for seconds in (0.01, 0.5, 3.0, 12.0, 60.0, 85.0):
        task = task_from_row(toy_row(tmp_path / "calc", gold_seconds=seconds))
        assert grading.grading_deadline(task, GRADING_TIMEOUT) >= min(10 * seconds, GRADING_TIMEOUT)


def test_a_task_file_cannot_stretch_the_ceiling(tmp_path):
    """``gold_seconds`` is data from whoever wrote the task file: a huge value gives the ceiling."""
    task = toy(tmp_path, gold_seconds=1e12)
    assert grading.grading_deadline(task, GRADING_TIMEOUT) == GRADING_TIMEOUT
