"""bench/swebench_coverage.py: the rows it picks, the files it reads and how it names a row's outcome."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import swebench_coverage as cov  # noqa: E402


def _rows(n: int, repo: str = "o/a") -> list[dict]:
    return [{"instance_id": f"{repo.replace('/', '__')}-{i}", "repo": repo, "_source": "x.jsonl"} for i in range(n)]


def test_rows_come_from_jsonl_a_json_array_and_csv_alike(tmp_path):
    rows = [{"instance_id": "o__a-1", "repo": "o/a", "FAIL_TO_PASS": '["t::x"]'}]
    (tmp_path / "r.jsonl").write_text(json.dumps(rows[0]) + "\n")
    (tmp_path / "r.json").write_text(json.dumps(rows))
    with (tmp_path / "r.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for name in ("r.jsonl", "r.json", "r.csv"):
        assert cov.read_rows(tmp_path / name) == [{**rows[0], "_source": name}]


def test_the_per_repository_draw_is_the_same_every_time_and_a_row_in_two_files_counts_once():
    rows = _rows(10) + _rows(2, "o/b") + [{**_rows(1, "o/b")[0], "_source": "verified.jsonl"}]
    first = cov.pick(rows, 3, seed=0, repos=set(), ids=set())
    assert [r["instance_id"] for r in first] == [r["instance_id"] for r in cov.pick(rows, 3, 0, set(), set())]
    assert sum(r["repo"] == "o/a" for r in first) == 3 and sum(r["repo"] == "o/b" for r in first) == 2
    assert next(r for r in first if r["instance_id"] == "o__b-0")["_source"] == ["verified.jsonl", "x.jsonl"]
    assert [r["instance_id"] for r in cov.pick(rows, 0, 0, {"o/b"}, set())] == ["o__b-0", "o__b-1"]


def test_a_no_verdict_is_named_by_the_line_that_decided_it():
    log = ("deepgym: importing ctypes is refused to the code under test during grading (capability 'ctypes', ...)\n"
           "E   ModuleNotFoundError: No module named 'babel'\n")
    assert cov.problem_group(["base: no verdict (pytest exited 4)"], log) == "no verdict: missing module 'babel'"
    assert cov.problem_group(["PASS_TO_PASS not passing on the base state: t (failed)"],
                             "socket.gaierror: [Errno -3] Temporary failure in name resolution") == \
        "PASS_TO_PASS fail at the base (network (the tests call a host))"


def test_wrong_verdicts_are_oracle_misses_noop_wins_and_rows_judged_ours():
    imported = {"import": {"status": "imported"}}
    valid = {**imported, "validate": {"valid": True, "problems": []}}
    assert cov.verdict_of({**valid, "oracle": {"status": "resolved"}, "noop": {"status": "unresolved"}})[2] is False
    assert cov.verdict_of({**valid, "oracle": {"status": "unresolved"}, "noop": {"status": "unresolved"}})[2]
    assert cov.verdict_of({**valid, "oracle": {"status": "resolved"}, "noop": {"status": "resolved"}})[2]
    invalid = {**imported, "validate": {"valid": False, "problems": ["base: no verdict (x)"], "base": "no_verdict"}}
    assert cov.verdict_of({**invalid, "_judged": {"cause": "ours: the seal"}})[:3] == ("no_verdict", "ours: the seal",
                                                                                        True)
    assert cov.verdict_of({**invalid, "_judged": {"cause": "network"}})[2] is False
    assert cov.verdict_of({})[0] == "not_run"
