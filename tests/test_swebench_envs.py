"""The environment an imported row gets (deepgym_envs/swebench_envs.py): the row's own ``python_env``
and ``--env-overrides FILE`` win over the spec table, checked as any task's ``python_env`` is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import _swebench_fixture as fx
from deepgym_envs.cli import main
from deepgym_envs.swebench_envs import declared_requirements, merge_declared
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
    assert envs["benjaminp__six-1"] == {"requirements": SIX, "pythonpath": ["."], "python": "3.11",
                                        "install_project": True}
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


# -- the environment set-up commit's declared requirements -----------------------------------------

def test_declared_requirements_are_read_from_each_kind_of_file_never_run():
    files = {
        "setup.cfg": "[options]\ninstall_requires =\n    astroid>=2.12.2,<=2.14.0-dev0\n    dill>=0.2\n",
        "pyproject.toml": '[project]\ndependencies = ["tomlkit>=0.10.1", "evil @ https://evil.example/e.tgz"]\n',
        "setup.py": 'import os\nREQS = ["isort>=4.2.5,<6", "../local"]\nos.system("touch /tmp/pwned")\n'
                    "setup(name='x', install_requires=REQS)\n",
        "requirements.txt": "-e .\n--index-url https://evil.example\nplatformdirs>=2.2.0  # comment\n/abs/path\n",
    }
    # requirements.txt is not read: pip install -e . does not read it (a project's tools of its day).
    assert declared_requirements(files.get) == ["astroid<=2.14.0-dev0,>=2.12.2", "dill>=0.2", "tomlkit>=0.10.1",
                                                "isort<6,>=4.2.5"]
    assert declared_requirements({}.get) == []


def test_the_tables_pins_win_unless_the_project_excludes_them():
    pins = ["pytest==7.4.4", "astroid==2.11.7", "dill==0.3.7"]
    declared = ["astroid<=2.14.0-dev0,>=2.12.2", "dill>=0.2", "tomli>=1.1.0; python_version < '3.11'",
                "typing-extensions>=3.10; python_version < '3.10'", "colorama; sys_platform == 'win32'"]
    kept, ranges, replaced = merge_declared(pins, declared, "3.10")
    assert kept == ["pytest==7.4.4", "dill==0.3.7"]
    assert ranges == ["astroid<=2.14.0-dev0,>=2.12.2", "tomli>=1.1.0"]
    assert replaced == ["astroid==2.11.7"]


def _pylint_mirror(mirrors: Path, *setup_cfgs: str) -> list[str]:
    """A pylint-dev/pylint mirror with one commit per ``setup.cfg`` text; their ids."""
    repo = mirrors / "pylint-dev__pylint"
    (repo / "pylint").mkdir(parents=True)
    (repo / "pylint" / "__init__.py").write_text("")
    fx._git(repo, "init", "-q")
    commits = []
    for text in setup_cfgs:
        (repo / "setup.cfg").write_text(text)
        fx._git(repo, "add", "-A")
        fx._git(repo, "commit", "-q", "-m", "setup.cfg")
        commits.append(fx._git(repo, "rev-parse", "HEAD"))
    return commits


def test_an_imported_row_gets_what_its_base_and_environment_setup_commits_declare(tmp_path, capsys):
    """pylint 2.15's later commits need astroid>=2.12.2 (the table pins 2.11.7); its earlier ones
    pin astroid below 2.12 in setup.cfg. The set-up commit is the later one; the base commit's own
    range wins, as the harness's `pip install -e .` at the base makes it hold."""
    mirrors = tmp_path / "mirrors"
    early, late = _pylint_mirror(
        mirrors, "[options]\ninstall_requires =\n    astroid>=2.11.7,<=2.12.0-dev0\n    dill>=0.2\n",
        "[options]\ninstall_requires =\n    astroid>=2.12.2,<=2.14.0-dev0\n    dill>=0.2\n"
        "    url-dep @ https://evil.example/x.tgz\n    tomlkit>=0.10.1\n")
    row = fx.row({"base": late, "1.16.0": late}, repo="pylint-dev/pylint", instance_id="pylint-dev__pylint-1",
                 version="2.15")
    rows = fx.write_rows(tmp_path / "rows.jsonl", row,
                         {**row, "instance_id": "pylint-dev__pylint-2", "base_commit": early},
                         {**row, "instance_id": "pylint-dev__pylint-3", "environment_setup_commit": "f" * 40})
    rc, report = _import(rows, tmp_path / "set", mirrors, capsys)
    assert rc == 0, report
    envs = _envs(tmp_path / "set")
    late_env, early_env = envs["pylint-dev__pylint-1"], envs["pylint-dev__pylint-2"]
    assert late_env["derived"] == ["astroid<=2.14.0-dev0,>=2.12.2"]  # dill: the table's pin satisfies it
    assert "astroid==2.11.7" not in late_env["requirements"] and "dill==0.3.7" in late_env["requirements"]
    assert "instead of the table's astroid==2.11.7" in report["rows"][0]["reason"]
    # The base's own range holds the table's pin: kept; tomlkit the table pins already.
    assert "derived" not in early_env and "astroid==2.11.7" in early_env["requirements"]
    # A set-up commit the mirror lacks: the base commit's declarations alone.
    assert envs["pylint-dev__pylint-3"]["derived"] == late_env["derived"]


def test_pydicom_2_gets_the_setuptools_its_pkg_resources_import_needs():
    from deepgym_envs.swebench_specs import spec_for

    for version in ("2.0", "2.4"):
        assert any(r.startswith("setuptools==") for r in spec_for("pydicom/pydicom", version).requirements)
