"""The environment an imported row gets (deepgym_envs/swebench_envs.py): the row's own ``python_env``
and ``--env-overrides FILE`` win over the spec table, checked as any task's ``python_env`` is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import _swebench_fixture as fx
from deepgym_envs.cli import main
from deepgym_envs.tasks import load_tasks

SIX = ["pytest==7.4.4", "six==1.16.0"]


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("swebench_envs") / "mirrors"
    return root, fx.make_mirror(root)


def _import(rows: Path, out: Path, mirrors: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[int, dict]:
    rc = main(["tasks", "import", str(rows), "--out", str(out), "--repos", str(mirrors), "--json", *extra])
    return rc, json.loads(capsys.readouterr().out)


def _envs(out: Path) -> dict[str, dict]:
    return {t.instance_id: t.python_env for t in load_tasks(out)}


def test_a_rows_own_python_env_wins_over_the_spec_table(mirrors, tmp_path, capsys):
    root, commits = mirrors
    rows = fx.write_rows(tmp_path / "rows.jsonl",
                         fx.row(commits, python_env={"requirements": SIX, "python": "3.11"}),
                         fx.row(commits, instance_id="benjaminp__six-2"))
    rc, report = _import(rows, tmp_path / "set", root, capsys)
    assert rc == 0, report
    envs = _envs(tmp_path / "set")
    # The keys the row gives replace the spec's; the ones it leaves out (pythonpath) stay.
    assert envs["benjaminp__six-1"] == {"requirements": SIX, "pythonpath": ["."], "python": "3.11"}
    assert envs["benjaminp__six-2"]["requirements"] == []  # no python_env: the (generic) spec's
    notes = {r["instance_id"]: r["reason"] for r in report["rows"]}
    assert notes["benjaminp__six-1"] == "python_env from the row"
    assert "not in deepgym's spec table" in notes["benjaminp__six-2"]


def test_env_overrides_choose_by_instance_id_then_repo_at_version_then_repo(mirrors, tmp_path, capsys):
    root, commits = mirrors
    rows = fx.write_rows(tmp_path / "rows.jsonl",
                         fx.row(commits, instance_id="benjaminp__six-1"),
                         fx.row(commits, instance_id="benjaminp__six-2", version="1.15"),
                         fx.row(commits, instance_id="benjaminp__six-3"),
                         fx.row(commits, instance_id="benjaminp__six-4", python_env={"requirements": ["six==1.15.0"]}))
    overrides = tmp_path / "envs.json"
    overrides.write_text(json.dumps({
        "benjaminp__six-1": {"requirements": ["six==1.16.0"]},
        "benjaminp/six@1.15": {"requirements": ["six==1.15.0"], "pythonpath": ["src"]},
        "benjaminp/six": {"requirements": SIX},
    }))
    rc, report = _import(rows, tmp_path / "set", root, capsys, "--env-overrides", str(overrides))
    assert rc == 0, report
    envs = _envs(tmp_path / "set")
    assert envs["benjaminp__six-1"]["requirements"] == ["six==1.16.0"]
    assert envs["benjaminp__six-2"]["requirements"] == ["six==1.15.0"]
    assert envs["benjaminp__six-2"]["pythonpath"] == ["src"]
    assert envs["benjaminp__six-3"]["requirements"] == SIX
    assert envs["benjaminp__six-4"]["requirements"] == ["six==1.15.0"]  # the row's own wins over the file
    notes = {r["instance_id"]: r["reason"] for r in report["rows"]}
    assert notes["benjaminp__six-2"] == f"python_env from {overrides} (benjaminp/six@1.15)"


@pytest.mark.parametrize("env, said", [
    ({"requirements": ["six"]}, "not pinned"),
    ({"requirements": ["six @ https://evil.example/six.tar.gz"]}, "URLs are not allowed"),
    ({"requirements": ["--index-url=https://evil.example"]}, "pip options are not allowed"),
    ({"environ": {"PYTEST_ADDOPTS": "-p evil"}}, "is not a variable a task may set"),
    ("six==1.16.0", "expected an object"),
])
def test_a_python_env_that_is_not_pinned_plain_requirements_is_that_rows_error(mirrors, tmp_path, capsys, env, said):
    root, commits = mirrors
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits, python_env=env),
                         fx.row(commits, instance_id="benjaminp__six-2"))
    rc, report = _import(rows, tmp_path / "set", root, capsys)
    assert rc == 1
    bad, good = report["rows"]
    assert bad["status"] == "error" and "python_env" in bad["reason"] and said in bad["reason"], bad
    assert good["status"] == "imported"


def test_a_malformed_overrides_file_names_the_file_and_the_key(mirrors, tmp_path, capsys):
    root, commits = mirrors
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits))
    overrides = tmp_path / "envs.json"
    overrides.write_text(json.dumps({"benjaminp/six": {"requirements": ["six>=1"]}}))
    rc = main(["tasks", "import", str(rows), "--out", str(tmp_path / "set"), "--repos", str(root),
               "--env-overrides", str(overrides)])
    err = capsys.readouterr()
    assert rc != 0
    text = err.out + err.err
    assert str(overrides) in text and "benjaminp/six" in text and "not pinned" in text
