"""Task-set tooling: stats, splits by repository, SWE-bench-style datasets, per-task environments."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from deepgym_envs.errors import DeepgymError, TaskFormatError
from deepgym_envs.tasks import load_tasks, task_from_row
from deepgym_envs.taskset import lines_changed, sample_per_repo, split_by_repo, taskset_stats, write_split
from tests.conftest import requires_namespace


def _row(i: int, repo: str, **extra) -> dict:
    return {"instance_id": f"{repo.replace('/', '__')}-{i}", "repo": repo, "problem_statement": "p",
            "FAIL_TO_PASS": json.dumps([f"tests/test_a.py::t{i}"]), "PASS_TO_PASS": "[]",
            "patch": "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", **extra}


def _tasks(counts: dict[str, int]):
    return [task_from_row(_row(i, repo)) for repo, n in counts.items() for i in range(n)]


def test_stats_count_per_repo_and_measure_patches():
    stats = taskset_stats(load_tasks("builtin"))
    assert stats.tasks == 36 and {r.repo for r in stats.repos} >= {"deepgym/semverkit", "deepgym/tabkit"}
    assert sum(r.tasks for r in stats.repos) == 36
    assert stats.lines_changed["min"] >= 1 and stats.files_touched["max"] >= 2  # some fixes span modules
    assert stats.f2p["min"] >= 1
    assert lines_changed("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n") == 2


def test_split_by_repo_is_deterministic_and_never_splits_a_repo(tmp_path):
    tasks = _tasks({"o/a": 10, "o/b": 10, "o/c": 5, "o/d": 20, "o/e": 5})
    first = split_by_repo(tasks, eval_frac=0.2, seed=7)
    again = split_by_repo(list(reversed(tasks)), eval_frac=0.2, seed=7)
    assert first.eval_repos == again.eval_repos
    train_repos = {t.repo for t in first.train}
    assert not train_repos & set(first.eval_repos)
    assert len(first.train) + len(first.eval) == 50
    assert 5 <= len(first.eval) <= 15  # close to 20 % of 50, in whole repositories
    seeds = {tuple(split_by_repo(tasks, eval_frac=0.2, seed=s).eval_repos) for s in range(10)}
    assert len(seeds) > 1  # the seed matters
    train, evaluation = write_split(first, tmp_path / "split")
    assert len(load_tasks(train)) == len(first.train) and len(load_tasks(evaluation)) == len(first.eval)


def test_split_needs_two_repos_and_a_sane_fraction():
    with pytest.raises(DeepgymError, match="two repositories"):
        split_by_repo(_tasks({"o/a": 3}))
    with pytest.raises(DeepgymError, match="eval-frac"):
        split_by_repo(_tasks({"o/a": 3, "o/b": 3}), eval_frac=1.5)


def test_split_keeps_local_repositories_loadable(tmp_path):
    out = tmp_path / "split"
    split = split_by_repo(load_tasks("builtin"), eval_frac=0.3, seed=1)
    write_split(split, out)
    reloaded = load_tasks(out / "eval.jsonl")
    assert reloaded and all(os.path.isdir(t.repo_path) for t in reloaded)


def _kinded(counts: dict[str, dict[str, int]]):
    return [task_from_row(_row(f"{kind}-{i}", repo, synth={"kind": kind}))
            for repo, kinds in counts.items() for kind, n in kinds.items() for i in range(n)]


def test_a_sample_takes_at_most_n_per_repo_spread_over_kinds_and_is_seeded():
    tasks = _kinded({"o/a": {"flip": 10, "drop": 2, "swap": 1}, "o/b": {"flip": 2}})
    chosen = sample_per_repo(tasks, 4, seed=3)
    from collections import Counter

    a = Counter(t.extra["synth"]["kind"] for t in chosen if t.repo == "o/a")
    assert a == {"flip": 2, "drop": 1, "swap": 1} or a == {"flip": 1, "drop": 2, "swap": 1}  # every kind first
    assert sum(1 for t in chosen if t.repo == "o/b") == 2  # a small repository gives all it has
    assert [t.instance_id for t in chosen] == [t.instance_id for t in tasks if t in chosen]  # input order kept
    again = sample_per_repo(list(reversed(tasks)), 4, seed=3)
    assert {t.instance_id for t in again} == {t.instance_id for t in chosen}
    assert len({frozenset(t.instance_id for t in sample_per_repo(tasks, 4, seed=s)) for s in range(8)}) > 1
    assert sample_per_repo(tasks, 0) == tasks
    with pytest.raises(DeepgymError, match="per-repo"):
        sample_per_repo(tasks, -1)


def test_cli_sample_writes_a_loadable_set_with_its_repositories(tmp_path, capsys):
    from deepgym_envs.cli import main

    assert main(["tasks", "sample", "builtin", "--per-repo", "2", "--out", str(tmp_path / "s")]) == 0
    assert "12 of 36 tasks (6 repositories" in capsys.readouterr().out
    sampled = load_tasks(tmp_path / "s")
    assert len(sampled) == 12 and all(os.path.isdir(t.repo_path) for t in sampled)
    assert all(str(tmp_path / "s") in os.path.realpath(t.repo_path) for t in sampled)


def test_cli_stats_and_split(tmp_path, capsys):
    from deepgym_envs.cli import main

    assert main(["tasks", "stats", "builtin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == 36
    assert main(["tasks", "split", "builtin", "--by", "repo", "--eval-frac", "0.2", "--out", str(tmp_path)]) == 0
    assert "train:" in capsys.readouterr().out
    assert len(load_tasks(tmp_path / "train.jsonl")) + len(load_tasks(tmp_path / "eval.jsonl")) == 36


def test_swebench_rows_load_from_parquet_and_arrow_files(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [_row(i, "django/django", base_commit="abc", hints_text=None, created_at="2023-01-01") for i in range(3)]
    table = pa.Table.from_pylist(rows)
    pq.write_table(table, tmp_path / "test-00000-of-00001.parquet")
    tasks = load_tasks(tmp_path)
    assert [t.instance_id for t in tasks] == [r["instance_id"] for r in rows]
    assert tasks[0].FAIL_TO_PASS == ["tests/test_a.py::t0"] and tasks[0].hints_text == ""
    # `Dataset.save_to_disk` layout: Arrow stream files next to dataset_info.json.
    saved = tmp_path / "saved"
    if importlib.util.find_spec("datasets") is not None:
        import datasets

        datasets.Dataset.from_list(rows).save_to_disk(str(saved))
    else:  # what save_to_disk writes, without the library
        saved.mkdir()
        (saved / "dataset_info.json").write_text("{}")
        with pa.OSFile(str(saved / "data-00000-of-00001.arrow"), "wb") as sink, \
                pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    assert [t.instance_id for t in load_tasks(saved)] == [r["instance_id"] for r in rows]


def test_a_bad_dataset_row_names_file_row_and_field(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    bad = _row(0, "o/a")
    bad["FAIL_TO_PASS"] = "not json"
    pq.write_table(pa.Table.from_pylist([_row(1, "o/a"), bad]), tmp_path / "t.parquet")
    with pytest.raises(TaskFormatError, match=r"t\.parquet:2: field 'FAIL_TO_PASS'"):
        load_tasks(tmp_path / "t.parquet")


def test_python_env_field_is_checked():
    task = task_from_row(_row(0, "o/a", python_env={"requirements": ["attrs==24.2.0"], "pythonpath": ["src"]}))
    assert task.python_env["requirements"] == ["attrs==24.2.0"]
    with pytest.raises(TaskFormatError, match="python_env.*relative"):
        task_from_row(_row(0, "o/a", python_env={"pythonpath": ["/etc"]}))
    with pytest.raises(TaskFormatError, match="python_env.*unknown"):
        task_from_row(_row(0, "o/a", python_env={"requirement": []}))


def test_python_env_environ_takes_only_variables_known_to_be_harmless():
    """A row is untrusted: ``PYTEST_ADDOPTS`` (or ``PYTHONPATH``, ``LD_PRELOAD``) would steer the
    runner, and a value with a newline or a quote would be more than one .pth line."""
    task = task_from_row(_row(0, "o/a", python_env={"requirements": [], "environ": {"SYMPY_USE_CACHE": "no"}}))
    assert task.python_env["environ"] == {"SYMPY_USE_CACHE": "no"}
    for bad in ({"PYTEST_ADDOPTS": "-p evil"}, {"PYTHONPATH": "/tmp"}, {"LD_PRELOAD": "x.so"},
                {"SYMPY_USE_CACHE": "no\nimport evil"}, {"SYMPY_USE_CACHE": "no'); import evil; ('"}, ["x"]):
        with pytest.raises(TaskFormatError, match="python_env.*environ"):
            task_from_row(_row(0, "o/a", python_env={"environ": bad}))


@requires_namespace
def test_an_environments_environ_is_set_in_the_sandboxs_interpreters(tmp_path, toy_task):
    from deepgym_envs.pyenv import PythonEnv, create_venv, env_key, finish_env
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    env = PythonEnv.from_dict({"requirements": [], "pythonpath": ["src"], "environ": {"SYMPY_USE_CACHE": "no"}})
    assert env_key(env, "/usr/bin/python3") != env_key(PythonEnv((), ("src",)), "/usr/bin/python3")
    prefix = tmp_path / "env"
    create_venv(prefix)
    finish_env(prefix, env)
    with make_sandbox(pristine_tree(toy_task), "namespace", python_prefix=str(prefix), pythonpath=["src"]) as sb:
        result = sb.exec(["python", "-c", "import os; print(os.environ.get('SYMPY_USE_CACHE'))"])
        assert result.exit_code == 0 and result.stdout.strip() == "no", result.output


@requires_namespace
def test_the_sandbox_runs_a_tasks_environment_read_only_and_first_on_path(tmp_path, toy_task):
    from deepgym_envs.pyenv import PythonEnv, create_venv, finish_env
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    prefix = tmp_path / "env"
    create_venv(prefix)  # offline: no packages, just the interpreter
    finish_env(prefix, PythonEnv((), ("src",)))
    site = next(prefix.glob("lib/python*/site-packages"))
    (site / "helper.py").write_text("WHO = 'environment'\n")  # stands for a package the tests depend on
    with make_sandbox(pristine_tree(toy_task), "namespace", python_prefix=str(prefix), pythonpath=["src"]) as sb:
        sb.write_file("src/helper.py", b"WHO = 'planted by the agent'\n")
        result = sb.exec(["python", "-c", "import sys, calc, helper; print(sys.prefix, calc.__file__, helper.WHO)"])
        assert result.exit_code == 0, result.output
        # The project comes from the workspace; what the environment installed cannot be shadowed from it.
        assert result.stdout.split() == [str(prefix.resolve()), "/testbed/src/calc/__init__.py", "environment"]
        denied = sb.exec(["touch", f"{prefix.resolve()}/bin/planted"])
        assert denied.exit_code != 0 and not (prefix / "bin" / "planted").exists()


def test_cli_sample_leaves_out_what_an_audit_or_a_validation_flags(tmp_path, capsys):
    from deepgym_envs.cli import main

    ids = [t.instance_id for t in load_tasks("builtin")]
    audit = {"summary": {}, "meta": {}, "leaks": [{"task_id": ids[0], "kind": "gold", "location": "/tmp/x"}],
             "attempts": [{"task_id": ids[1], "strategy": "empty_patch", "exploited": True, "status": "resolved"},
                          {"task_id": ids[2], "strategy": "empty_patch", "exploited": False, "status": "no_verdict"},
                          {"task_id": ids[3], "strategy": "empty_patch", "exploited": False, "status": "unresolved"}]}
    validation = {"taskset": "builtin", "valid": 1, "invalid": 1,
                  "tasks": [{"task_id": ids[4], "valid": False, "problems": ["gold patch does not resolve"]},
                            {"task_id": ids[3], "valid": True, "problems": []}]}
    (tmp_path / "audit.json").write_text(json.dumps(audit))
    (tmp_path / "valid.json").write_text(json.dumps(validation))
    assert main(["tasks", "sample", "builtin", "--per-repo", "0", "--drop", str(tmp_path / "audit.json"),
                 "--drop", str(tmp_path / "valid.json"), "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert f"{len(ids) - 4} of {len(ids)} tasks" in out and "4 left out" in out
    assert f"left out {ids[0]}: leaks its gold at /tmp/x" in out and "gold patch does not resolve" in out
    assert {t.instance_id for t in load_tasks(tmp_path / "s")} == set(ids) - set(ids[:3]) - {ids[4]}
    (tmp_path / "other.json").write_text("{}")
    assert main(["tasks", "sample", "builtin", "--per-repo", "0", "--drop", str(tmp_path / "other.json"),
                 "--out", str(tmp_path / "t")]) != 0
