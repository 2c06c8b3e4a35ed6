"""SWE-bench rows: import from a mirror, graded as the official harness grades (issue 14).

The fixture is real code (six's sdists at two versions made into a repository, see
tests/_swebench_fixture.py) with rows in the exact published shape. Each defect the issue lists
has a test here, named after it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import _swebench_fixture as fx
from conftest import require_docker
from deepgym_envs.cli import main
from deepgym_envs.errors import InfrastructureError
from deepgym_envs.grading import counts_as_passing, files_of_test_patch, grade, is_protected, outcome_of
from deepgym_envs.pyenv import find_python
from deepgym_envs.swebench_specs import PYTEST_BELOW_311, known_repos, spec_for
from deepgym_envs.tasks import load_tasks, task_from_row
from deepgym_envs.validate import validate_task

MISSING_DEP_TEST_PATCH = """diff --git a/test_needs_flask.py b/test_needs_flask.py
new file mode 100644
--- /dev/null
+++ b/test_needs_flask.py
@@ -0,0 +1,5 @@
+import deepgym_absent_dependency  # the row's environment lacks it, as a row without flask would
+
+
+def test_iscomment():
+    assert True
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The fixture's mirror, and a task set imported from it: the good row, one whose environment
    lacks a dependency, one naming a commit the mirror lacks, one whose mirror is missing."""
    root = tmp_path_factory.mktemp("swebench")
    commits = fx.make_mirror(root / "mirrors")
    rows = [fx.row(commits),
            fx.row(commits, instance_id="benjaminp__six-2", test_patch=MISSING_DEP_TEST_PATCH,
                   FAIL_TO_PASS=json.dumps(["test_needs_flask.py::test_iscomment"]), PASS_TO_PASS="[]"),
            fx.row(commits, instance_id="benjaminp__six-3", base_commit="0" * 40),
            fx.row(commits, instance_id="someone__else-1", repo="someone/else")]
    fx.write_rows(root / "rows.jsonl", *rows)
    rc = main(["tasks", "import", str(root / "rows.jsonl"), "--out", str(root / "set"), "--repos",
               str(root / "mirrors"), "--json"])
    assert rc == 1  # two rows failed; the run went on
    return root, commits


def _task(root: Path, instance_id: str):
    return next(t for t in load_tasks(root / "set") if t.instance_id == instance_id)


def test_per_row_errors_never_abort_the_import(imported, capsys):
    root, _ = imported
    ids = [t.instance_id for t in load_tasks(root / "set")]
    assert ids == ["benjaminp__six-1", "benjaminp__six-2"]
    main(["tasks", "import", str(root / "rows.jsonl"), "--out", str(root / "again"), "--repos", str(root / "mirrors"),
          "--json"])
    rows = {r["instance_id"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["benjaminp__six-3"]["status"] == "error"
    assert "is not a commit of the mirror" in rows["benjaminp__six-3"]["reason"]
    assert "git clone --mirror https://github.com/someone/else" in rows["someone__else-1"]["reason"]
    assert rows["benjaminp__six-1"]["spec"] == "generic" and "not in deepgym's spec table" in \
        rows["benjaminp__six-1"]["reason"]


def test_import_keeps_the_base_commit_alone(imported):
    root, commits = imported
    task = _task(root, "benjaminp__six-1")
    repo = root / "set" / task.repo_path
    assert task.base_commit == commits["base"] and task.harness == "swebench"
    git = ["git", "-c", "safe.directory=*", "-C", str(repo)]
    history = subprocess.run([*git, "rev-list", "--all"], capture_output=True, text=True).stdout.split()
    assert history == [commits["base"]]
    for later_or_earlier in (commits["fix"], commits["1.15.0"]):
        assert subprocess.run([*git, "cat-file", "-e", later_or_earlier], capture_output=True).returncode != 0
    assert task.python_env["pythonpath"] == ["."]


def test_gold_resolves_and_base_does_not_with_truncated_ids_xfail_and_gold_edited_setup_cfg(imported):
    """Test files come from test_patch (ids cut at a space are not files), ``test_ensure_text[b\\xffad``
    and ``[plain`` match as SWE-bench's parser matches them, XFAIL and a skipped P2P test pass, and
    the gold patch's setup.cfg edit survives the protected-path restore."""
    root, _ = imported
    result = validate_task(_task(root, "benjaminp__six-1"))
    assert result.valid, result.problems
    assert result.gold.tests[fx.F2P[0]] == "passed" and result.base.tests[fx.F2P[0]] == "failed"
    assert result.gold.tests["test_ensure.py::test_ensure_text_of_bytearray"] == "xfailed"
    assert result.gold.tests["test_ensure.py::test_unicode_on_python2"] == "skipped"
    assert result.base.status == "unresolved"


def test_missing_dependency_is_no_verdict_and_show_log_shows_why(imported, capsys):
    root, _ = imported
    task = _task(root, "benjaminp__six-2")
    verdict = grade(task, "")
    assert verdict.status == "no_verdict", verdict.reason
    assert "gold patch's run fails the same way" in verdict.reason
    assert verdict.reason.count("the environment cannot run") == 1  # the gold run's reason, not wrapped twice
    rc = main(["tasks", "validate", str(root / "set"), "--show-log", "benjaminp__six-2", "--workers", "1"])
    out = capsys.readouterr().out
    assert rc == 1 and "deepgym_absent_dependency" in out and "no_verdict" in out


def test_a_change_that_breaks_collection_is_still_unresolved(imported):
    root, _ = imported
    task = _task(root, "benjaminp__six-1")
    breaking = fx.GOLD.replace("+        return s.decode(encoding, errors)", "+        return s.decode(encoding, errors) +")
    verdict = grade(task, breaking)
    assert verdict.status == "unresolved", verdict.reason


def test_grade_predictions_honours_instance_id(imported, tmp_path):
    root, _ = imported
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in [
        {"instance_id": "benjaminp__six-1", "model_patch": fx.GOLD, "model_name_or_path": "m"},
        {"instance_id": "benjaminp__six-2", "model_patch": "", "model_name_or_path": "m"},
        {"instance_id": "not-in-the-set", "model_patch": fx.GOLD, "model_name_or_path": "m"}]))
    out = tmp_path / "report.json"
    rc = main(["grade-predictions", str(preds), "--tasks", str(root / "set"), "--out", str(out), "--json"])
    report = json.loads(out.read_text())
    assert rc == 1 and report["schema_version"] == 2
    assert report["resolved_ids"] == ["benjaminp__six-1"] and report["empty_patch_ids"] == [
        "benjaminp__six-2"] and report["error_ids"] == ["not-in-the-set"]
    status = report["instances"]["benjaminp__six-1"]["tests_status"]
    assert status["FAIL_TO_PASS"]["failure"] == [] and len(status["PASS_TO_PASS"]["success"]) == 4


def test_hidden_test_files_come_from_the_test_patch_not_the_ids():
    assert files_of_test_patch(fx.TEST_PATCH) == ["test_ensure.py"]
    assert files_of_test_patch(MISSING_DEP_TEST_PATCH + "diff --git a/d.json b/d.json\n--- a/d.json\n+++ b/d.json\n") \
        == ["test_needs_flask.py"]


def test_ids_match_as_swebench_parser_matches_them():
    reported = {"t.py::test_x[not a]": "failed", "t.py::test_x[not b]": "passed", "t.py::test_y": "passed"}
    assert outcome_of("t.py::test_x[not", reported) == "passed"  # the last one, as the parser's dict keeps it
    assert outcome_of("t.py::test_y", reported) == "passed" and outcome_of("t.py::test_z", reported) == "missing"


def test_path_parameters_match_as_the_options_parser_cuts_them():
    # pylint-dev__pylint-7080's published PASS_TO_PASS names test_stdin[/mymodule.py]; pytest reports
    # the absolute path the test parametrises with (SWE-bench's parse_log_pytest_options cuts it).
    reported = {"tests/test_self.py::TestRunTC::test_stdin[/testbed/tests/mymodule.py]": "passed",
                "tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]": "passed",
                "t.py::test_u[//net/share]": "passed"}
    assert outcome_of("tests/test_self.py::TestRunTC::test_stdin[/mymodule.py]", reported) == "passed"
    assert outcome_of("tests/test_self.py::TestRunTC::test_stdin[mymodule.py-mymodule-mymodule.py]", reported) == "passed"
    assert outcome_of("t.py::test_u[/share]", reported) == "missing"  # '//' is left whole, as there


def test_xfail_and_skips_count_the_swebench_way():
    assert counts_as_passing("xfailed", True, True) and counts_as_passing("skipped", False, True)
    assert not counts_as_passing("skipped", True, True)  # a skipped deciding test never resolves
    assert not counts_as_passing("xfailed", False, False)  # deepgym's own tasks: only passed


def test_protected_restore_never_reverts_a_gold_edit():
    row = fx.row({"base": "b", "1.16.0": "e"}, patch=fx.GOLD.replace("setup.cfg", "sympy/testing/runtests.py"))
    task = task_from_row(row)
    assert not is_protected("sympy/testing/runtests.py", task) and is_protected("tox.ini", task)
    assert not is_protected("setup.cfg", task_from_row(fx.row({"base": "b", "1.16.0": "e"})))
    assert is_protected("test_ensure.py", task)  # the hidden tests are always pristine


def test_python_env_python_missing_is_no_verdict_naming_the_fix(imported):
    with pytest.raises(InfrastructureError, match="uv python install 3.2"):
        find_python("3.2")
    root, _ = imported
    task = _task(root, "benjaminp__six-1")
    task.python_env = {**task.python_env, "python": "3.2"}
    verdict = grade(task, task.patch)
    assert verdict.status == "no_verdict" and "Python 3.2" in verdict.reason


def test_a_missing_python_is_installed_with_uv_where_uv_is_there(tmp_path, monkeypatch):
    """uv's download needs GitHub, which CI lacks: a stand-in ``uv`` on PATH does what ``uv python
    install`` does (an interpreter under UV_PYTHON_INSTALL_DIR), so the search after it is real."""
    import sys

    installs, bin_dir = tmp_path / "uv-pythons", tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "uv.log"
    (bin_dir / "uv").write_text(
        "#!/bin/sh\n"
        f"echo \"$*\" >> {log}\n"
        "[ \"$1 $2\" = 'python install' ] || exit 2\n"
        "[ \"$3\" = 3.3 ] && { echo 'error: no download found for 3.3' >&2; exit 1; }\n"
        "d=\"$UV_PYTHON_INSTALL_DIR/cpython-$3.0-linux-x86_64-gnu/bin\"; mkdir -p \"$d\"\n"
        f"ln -s {sys.executable} \"$d/python$3\"\n")
    (bin_dir / "uv").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(installs))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    assert find_python("3.4") == str(installs / "cpython-3.4.0-linux-x86_64-gnu" / "bin" / "python3.4")
    assert find_python("3.4").endswith("python3.4") and log.read_text().count("python install 3.4") == 1
    with pytest.raises(InfrastructureError, match="uv python install 3.3` failed: error: no download found"):
        find_python("3.3")
    monkeypatch.setenv("DEEPGYM_NO_PYTHON_INSTALL", "1")
    with pytest.raises(InfrastructureError, match="uv python install 3.2"):
        find_python("3.2")
    assert "3.2" not in log.read_text()


def test_spec_table_covers_six_repositories():
    assert len(known_repos()) >= 6
    assert spec_for("pallets/flask", "2.0").python == "3.9" and spec_for("x/y", "1").key == "generic"


def test_a_spec_whose_environment_holds_pandas_2_grants_ctypes():
    """pandas >= 1.5 (pandas/errors/__init__.py) and scipy (scipy/_lib/_ccallback.py) import ctypes
    unconditionally: under the seal a project importing them is refused whatever its change, so such a
    line keeps ``ctypes`` in its rows' trust; a line without such a package keeps nothing."""
    from deepgym_envs.swebench_specs import _TABLE

    for repo, lines in _TABLE.items():
        for line in lines:
            spec = spec_for(repo, line.versions[0])
            pandas = [r for r in spec.requirements if r.lower().startswith("pandas==")]
            needs = any(tuple(map(int, r.split("==")[1].split(".")[:2])) >= (1, 5) for r in pandas) or any(
                r.lower().startswith("scipy==") for r in spec.requirements)
            assert ("ctypes" in spec.trust) == needs, (spec.key, spec.requirements, spec.trust)
    assert spec_for("pvlib/pvlib-python", "0.9").trust == ("ctypes",)


def test_pylint_2_13_gets_the_toml_its_config_imports():
    # pylint-dev__pylint-5859 (version 2.13): pylint/config/option_manager_mixin.py imports toml, and
    # astroid must be below 2.10 (setup.cfg); the 2.14/2.15 line (tomlkit, astroid 2.11) broke its conftest.
    reqs = spec_for("pylint-dev/pylint", "2.13").requirements
    assert "toml==0.10.2" in reqs and "astroid==2.9.3" in reqs
    assert "astroid==2.11.7" in spec_for("pylint-dev/pylint", "2.15").requirements


def _on_python_39(imported):
    """The six row asking for Python 3.9, with a hidden test that says which Python runs it."""
    try:
        find_python("3.9")
    except InfrastructureError as exc:
        pytest.skip(str(exc))
    root, _ = imported
    task = _task(root, "benjaminp__six-1")
    task.python_env = {"requirements": list(PYTEST_BELOW_311), "pythonpath": ["."], "python": "3.9"}
    probe = fx.TEST_PATCH.replace("@@ -0,0 +1,28 @@", "@@ -0,0 +1,32 @@").replace(
        "+import os\n", "+import os\n+import sys\n+\n+def test_py39():\n"
        "+    assert sys.version_info[:2] == (3, 9)\n", 1)
    task.test_patch = probe
    task.PASS_TO_PASS = [*task.PASS_TO_PASS, "test_ensure.py::test_py39"]
    return task


@pytest.mark.slow
def test_python_env_python_is_the_interpreter_the_tests_run_on(imported):
    """A row asking for Python 3.9 runs its tests on 3.9 (environment built in a build sandbox)."""
    task = _on_python_39(imported)
    verdict = grade(task, task.patch)
    assert verdict.status == "resolved", (verdict.reason, verdict.log[-2000:])


@pytest.mark.slow
@pytest.mark.docker
def test_python_env_python_runs_on_docker_too(imported):
    """On docker the environment's interpreter links into a pyenv Python the container lacked
    ("bin/python: not found", every such row no_verdict): the host binds the installation it found."""
    require_docker()
    task = _on_python_39(imported)
    verdict = grade(task, task.patch, backend="docker")
    assert verdict.status == "resolved", (verdict.reason, verdict.log[-2000:])
    assert grade(task, "", backend="docker").status == "unresolved"


def test_a_base_commit_missing_from_the_repository_is_that_tasks_error_not_the_runs(imported):
    """Loaded as it is (no import), a row whose base_commit its repo_path lacks is reported per
    task; the other tasks of the run are still validated."""
    from deepgym_envs.validate import validate_tasks

    root, _ = imported
    good = _task(root, "benjaminp__six-1")
    bad = _task(root, "benjaminp__six-1")
    bad.instance_id, bad.base_commit = "benjaminp__six-missing", "1" * 40
    results = validate_tasks([bad, good], workers=1, show_progress=False)
    assert not results[0].valid and "is not a commit of" in results[0].problems[0]
    assert results[1].valid, results[1].problems


def test_parquet_rows_import_like_jsonl(imported, tmp_path):
    """Rows as the Hub serves them (Parquet) import the same way."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    root, commits = imported
    pq.write_table(pa.Table.from_pylist([fx.row(commits)]), tmp_path / "test-00000-of-00001.parquet")
    rc = main(["tasks", "import", str(tmp_path), "--out", str(tmp_path / "set"), "--repos", str(root / "mirrors"),
               "--json"])
    assert rc == 0
    [task] = load_tasks(tmp_path / "set")
    assert task.base_commit == commits["base"] and task.FAIL_TO_PASS == fx.F2P and task.harness == "swebench"


def test_validate_table_counts_the_swebench_way(imported, capsys):
    root, _ = imported
    main(["tasks", "validate", str(root / "set"), "--task", "benjaminp__six-1", "--workers", "1", "--json"])
    [row] = json.loads(capsys.readouterr().out)["tasks"]
    assert row["valid"], row["problems"]
    assert row["P2P_pass_at_base"] == "4/4"  # an XFAIL and a skip among them


def test_a_pyenv_root_this_user_may_not_list_is_skipped_not_an_error(tmp_path, monkeypatch):
    # CI's ordinary user inherits PYENV_ROOT=/root/.pyenv through su: listing its versions raised
    # PermissionError out of find_python instead of looking on PATH.
    from pathlib import Path

    from deepgym_envs.pyenv import _installed_python

    locked = tmp_path / "pyenv"
    (locked / "versions").mkdir(parents=True)
    monkeypatch.setenv("PYENV_ROOT", str(locked))
    real_glob = Path.glob

    def glob(self, pattern):
        if str(self).startswith(str(locked)):
            raise PermissionError(13, "Permission denied", str(self))  # what a non-root user meets
        return real_glob(self, pattern)

    monkeypatch.setattr(Path, "glob", glob)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _installed_python("3.99") is None
