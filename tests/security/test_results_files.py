"""Class 7 (results files from strangers): the leaderboard reads only what it can bound and check.

Anyone who can drop a file into the results folder is the attacker here. Before the fix
``deepgym leaderboard`` followed a ``*.json`` link wherever it pointed (``/dev/zero``: it read until
memory ran out), blocked for good on a FIFO, aborted the whole build on one file nested too deep for
the JSON parser, and ranked a file by its ``summary`` even where its own episodes said otherwise: a
stranger's file replaced the committed oracle row with numbers its episodes contradict.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from deepgym_envs.errors import ResultsFormatError
from deepgym_envs.leaderboard import load_run, load_runs, rank
from deepgym_envs.leaderboard import results as results_module

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "leaderboard" / "results"


@pytest.fixture
def board(tmp_path: Path) -> Path:
    """A copy of the committed results folder, for strangers to drop files into."""
    return Path(shutil.copytree(COMMITTED, tmp_path / "results"))


def oracle() -> dict:
    return json.loads((COMMITTED / "oracle-builtin.json").read_text())


def reasons(skipped) -> dict[str, str]:
    return {s.path.name: s.reason for s in skipped}


def test_a_link_is_refused_not_followed(board: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps(oracle()))
    (board / "link.json").symlink_to(outside)
    (board / "zero.json").symlink_to("/dev/null")  # a device: /dev/zero would never end
    runs, skipped = load_runs(board)
    why = reasons(skipped)
    assert "link" in why["link.json"] and "link" in why["zero.json"]
    assert str(board / "link.json") in why["link.json"]
    assert len(runs) == len(list(COMMITTED.glob("*.json")))  # the committed files still count


def test_a_fifo_is_refused_without_blocking(board: Path) -> None:
    fifo = board / "fifo.json"
    os.mkfifo(fifo)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(load_runs(board)), daemon=True)
    reader.start()
    reader.join(timeout=60)  # a guard so a regression fails instead of hanging the suite
    if reader.is_alive():
        with open(fifo, "w"):  # let the blocked open return, so the thread ends
            pass
        reader.join(timeout=10)
        pytest.fail("reading the results folder blocked on a FIFO")
    runs, skipped = got[0]
    assert "not a regular file" in reasons(skipped)["fifo.json"]


def test_a_file_over_the_size_cap_is_refused_unread(board: Path) -> None:
    big = board / "big.json"
    with open(big, "wb") as fh:  # sparse: no disk, but the reader would hold it all
        fh.truncate(results_module.MAX_RESULTS_BYTES + 1)
    runs, skipped = load_runs(board)
    assert "larger than" in reasons(skipped)["big.json"]


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"agent": ' + "9" * 5000 + "}"],
                         ids=["nested-too-deep", "number-too-long"])
def test_one_unparseable_file_never_aborts_the_build(board: Path, text: str) -> None:
    (board / "weird.json").write_text(text)
    runs, skipped = load_runs(board)
    assert "weird.json" in reasons(skipped)
    assert len(runs) == len(list(COMMITTED.glob("*.json")))


def test_a_deep_folder_never_aborts_the_build(board: Path) -> None:
    top = where = os.path.join(board, "d")
    for _ in range(1100):  # past Python's recursion limit; one level at a time: mkdir(parents=True) recurses
        os.mkdir(where)
        where = os.path.join(where, "d")
    Path(where).with_name("deep.json").write_text("{}")
    try:
        runs, skipped = load_runs(board)
        assert len(runs) == len(list(COMMITTED.glob("*.json")))
    finally:  # bottom up: pytest's own clean-up of tmp_path recurses too
        os.unlink(Path(where).with_name("deep.json"))
        while where != top:
            where = os.path.dirname(where)
            os.rmdir(where)


def stranger() -> dict:
    """A newer "oracle" row whose summary claims a perfect run its own episodes do not show."""
    data = copy.deepcopy(oracle())
    data["created_at"] = "2099-01-01T00:00:00Z"
    for e in data["episodes"]:
        e["status"] = "unresolved"
    return data


def test_a_summary_its_episodes_contradict_is_refused(board: Path) -> None:
    path = board / "zz-stranger.json"
    path.write_text(json.dumps(stranger()))
    with pytest.raises(ResultsFormatError) as err:
        load_run(path)
    assert str(path) in str(err.value) and "summary.resolved" in str(err.value)
    runs, skipped = load_runs(board)
    assert "zz-stranger.json" in reasons(skipped)
    top = {e.run.agent: e.run for e in rank(runs)["builtin"]}
    assert top["oracle"].path.name == "oracle-builtin.json" and top["oracle"].resolved_rate == 1.0


@pytest.mark.parametrize("field,value", [("resolved_rate", 1.0), ("no_verdict", 0), ("mean_steps", 1.0),
                                         ("pass_at_k", {"1": 1.0}), ("k", 7), ("tasks", 999), ("episodes", "36"),
                                         ("pass_at_k", {"100000": 0.0})])
def test_every_summary_number_is_checked_against_the_episodes(tmp_path: Path, field: str, value) -> None:
    data = copy.deepcopy(oracle())
    data["episodes"][0]["status"] = "no_verdict"  # so that the oracle's own perfect numbers are wrong
    data["summary"].update(resolved=data["summary"]["resolved"] - 1, no_verdict=1,
                           resolved_rate=(data["summary"]["resolved"] - 1) / len(data["episodes"]))
    data["summary"][field] = value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFormatError, match=f"summary.{field}"):
        load_run(path)


def test_a_folder_flooded_with_entries_is_ranked_up_to_a_bound(tmp_path, monkeypatch):
    """Strangers can drop any number of files in a results folder: the walk stops at a bound and
    says so, and what it found is still ranked."""
    from deepgym_envs.leaderboard.results import load_runs

    monkeypatch.setattr(results_module, "MAX_RESULTS_ENTRIES", 50)
    for i in range(200):
        (tmp_path / f"junk{i:03d}.txt").write_text("x")
    runs, skipped = load_runs(tmp_path)
    assert runs == [] and len(skipped) == 1 and "more than 50 entries" in skipped[0].reason
