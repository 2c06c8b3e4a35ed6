"""``deepgym tasks import``: the shapes rows come in, and one line per row that did not import.

Published rows come as JSON Lines, as a JSON array in a ``.json`` file, or as an object keyed by
instance id. A row that cannot be imported says why in one line with the command that fixes it:
a mirror missing an object (a partial snapshot), an unsupported repository, a row of pytest
itself (which the sealed runner cannot grade), a test patch the official harness cannot run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import _swebench_fixture as fx
from deepgym_envs.cli import main
from deepgym_envs.tasks import load_tasks


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("rows")
    return root / "mirrors", fx.make_mirror(root / "mirrors")


def _import(source: Path, out: Path, repos: Path, capsys, *more: str) -> tuple[int, str]:
    rc = main(["tasks", "import", str(source), "--out", str(out), "--repos", str(repos), *more])
    return rc, capsys.readouterr().out


def _rows(rc_out: tuple[int, str]) -> dict[str, dict]:
    return {r["instance_id"]: r for r in json.loads(rc_out[1])["rows"]}


def test_a_json_array_of_rows_imports(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    source = tmp_path / "rows.json"
    source.write_text(json.dumps([fx.row(commits), fx.row(commits, instance_id="benjaminp__six-2")], indent=2))
    rc, out = _import(source, tmp_path / "set", repos, capsys, "--json")
    assert rc == 0, out
    assert [t.instance_id for t in load_tasks(tmp_path / "set")] == ["benjaminp__six-1", "benjaminp__six-2"]


def test_a_json_object_of_rows_keyed_by_instance_id_imports(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    rows = {"benjaminp__six-7": {k: v for k, v in fx.row(commits).items() if k != "instance_id"}}
    (tmp_path / "rows.json").write_text(json.dumps(rows, indent=2))
    rc, out = _import(tmp_path / "rows.json", tmp_path / "set", repos, capsys, "--json")
    assert rc == 0, out
    assert [t.instance_id for t in load_tasks(tmp_path / "set")] == ["benjaminp__six-7"]


def test_an_object_that_holds_no_rows_is_one_line_and_never_suggests_validating_nothing(mirrors, tmp_path, capsys):
    repos, _ = mirrors
    (tmp_path / "rows.json").write_text(json.dumps({"name": "SWE-bench", "split": "test", "n": 3}, indent=2))
    rc, out = _import(tmp_path / "rows.json", tmp_path / "set", repos, capsys)
    assert rc != 0
    assert out.strip().count("\n") == 0 and "neither a row" in out and "JSON array of rows" in out, out
    assert "validate" not in out


def test_a_truncated_json_array_is_one_error_naming_where(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    text = json.dumps([fx.row(commits)] * 3, indent=2)
    (tmp_path / "rows.json").write_text(text[:len(text) // 2])  # a download cut short
    rc, out = _import(tmp_path / "rows.json", tmp_path / "set", repos, capsys)
    assert rc != 0 and out.strip().count("\n") == 0 and "invalid JSON" in out and "validate" not in out, out


def test_an_import_where_every_row_failed_says_nothing_was_imported(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits, base_commit="0" * 40))
    rc, out = _import(rows, tmp_path / "set", repos, capsys)
    assert rc == 1 and "nothing imported" in out and "tasks validate" not in out, out


def test_a_mirror_missing_a_blob_says_it_is_incomplete_and_how_to_complete_it(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    partial = tmp_path / "partial"
    subprocess.run(["git", "clone", "-q", "--mirror", str(repos / "benjaminp__six"), str(partial / "benjaminp__six")],
                   check=True)
    mirror = partial / "benjaminp__six"
    blob = subprocess.run(["git", "-C", str(mirror), "rev-parse", f"{commits['base']}:six.py"], check=True,
                          capture_output=True, text=True).stdout.strip()
    _drop_object(mirror, blob)
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits))
    rc, out = _import(rows, tmp_path / "set", partial, capsys, "--json")
    reason = _rows((rc, out))["benjaminp__six-1"]["reason"]
    assert rc == 1 and "\n" not in reason
    assert f"the mirror {mirror} is incomplete" in reason and f"unable to read {blob}" in reason, reason
    assert f"`git -C {mirror} fetch --refetch origin`" in reason and "`git clone --mirror " in reason


def _drop_object(mirror: Path, sha: str) -> None:
    """Delete ``sha`` from a repository's object store, as a partial snapshot lacks a large blob:
    every object is made loose (the pack removed), then that one loose file is deleted."""
    packs = list((mirror / "objects" / "pack").glob("*.pack"))
    for pack in packs:
        moved = pack.with_suffix(".old")
        pack.rename(moved)
        pack.with_suffix(".idx").unlink()
        with moved.open("rb") as fh:
            subprocess.run(["git", "-C", str(mirror), "unpack-objects", "-q"], stdin=fh, check=True)
        moved.unlink()
    loose = mirror / "objects" / sha[:2] / sha[2:]
    assert loose.is_file()
    loose.unlink()


def test_the_import_report_shows_the_specs_notes_and_says_plainly_what_is_unsupported(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    known = tmp_path / "known"
    known.mkdir()
    for name in ("benjaminp__six", "marshmallow-code__marshmallow"):
        subprocess.run(["git", "clone", "-q", "--mirror", str(repos / "benjaminp__six"), str(known / name)], check=True)
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits),
                         fx.row(commits, instance_id="marshmallow-code__marshmallow-1",
                                repo="marshmallow-code/marshmallow", version="3.9"),
                         fx.row(commits, instance_id="marshmallow-code__marshmallow-2",
                                repo="marshmallow-code/marshmallow", version="0.1"))
    rows = _rows(_import(rows, tmp_path / "set", known, capsys, "--json"))
    assert rows["marshmallow-code__marshmallow-1"]["reason"] == "spec note: tests import pytz and simplejson"
    assert rows["benjaminp__six-1"]["reason"].startswith(
        "unsupported repository: benjaminp/six is not in deepgym's spec table; imported with the generic spec")
    assert rows["marshmallow-code__marshmallow-2"]["reason"].startswith(
        "unsupported version: version '0.1' of marshmallow-code/marshmallow is not in deepgym's spec table")


def test_a_row_of_pytest_itself_is_refused_by_name_in_one_line(mirrors, tmp_path, capsys):
    """Grading refuses to run a project that is pytest (the sealed runner is the interpreter's
    pytest, which the workspace would replace); the import says so up front, not "check python_env"."""
    repos, commits = mirrors
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits),
                         fx.row(commits, instance_id="pytest-dev__pytest-5103", repo="pytest-dev/pytest"))
    rc, out = _import(rows, tmp_path / "set", repos, capsys, "--json")
    reason = _rows((rc, out))["pytest-dev__pytest-5103"]["reason"]
    assert rc == 1 and "\n" not in reason
    assert "pytest-dev/pytest rows are not imported" in reason and "pytest itself" in reason, reason
    assert "python_env" not in reason.split("no python_env")[0] and "mirror" not in reason
    assert [t.instance_id for t in load_tasks(tmp_path / "set")] == ["benjaminp__six-1"]


def test_a_row_whose_test_patch_the_harness_cannot_run_is_refused_with_why(mirrors, tmp_path, capsys):
    repos, commits = mirrors
    empty_tree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's: the diff to it deletes the file
    deletes = fx.TEST_PATCH + subprocess.run(
        ["git", "-C", str(repos / "benjaminp__six"), "diff", commits["base"], empty_tree, "--", "test_six.py"],
        check=True, capture_output=True, text=True).stdout
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits, test_patch=deletes))
    rows = _rows(_import(rows, tmp_path / "set", repos, capsys, "--json"))
    assert "hands pytest 'test_six.py' (a file the test patch deletes)" in rows["benjaminp__six-1"]["reason"]
