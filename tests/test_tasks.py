"""Task loading: SWE-bench rows load as they are; malformed files fail naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepgym_envs.errors import TaskFormatError, UnknownTaskError
from deepgym_envs.tasks import Task, find_task, load_tasks, patch_paths, task_from_row

GOOD = {"instance_id": "a__b-1", "problem_statement": "it breaks", "FAIL_TO_PASS": ["tests/test_x.py::test_a"]}


def write_jsonl(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def row(**fields: object) -> str:
    return json.dumps({**GOOD, **fields})


# -- the built-in set ----------------------------------------------------------------------------

def test_builtin_set_loads_as_tasks_with_swe_bench_fields():
    tasks = load_tasks("builtin")
    assert tasks and all(isinstance(t, Task) for t in tasks)
    first = tasks[0]
    assert first.instance_id == "deepgym__cronparse-001"
    for t in tasks:
        assert t.instance_id and t.repo and t.problem_statement.strip()
        assert t.patch.startswith("diff --git") and t.test_patch.startswith("diff --git")
        assert t.FAIL_TO_PASS and all(isinstance(x, str) for x in t.FAIL_TO_PASS)
        assert isinstance(t.PASS_TO_PASS, list)
        # repo_path is resolved against the task file, so it works from any working directory
        assert Path(t.repo_path).is_absolute() and Path(t.repo_path).is_dir()
        assert t.source.rsplit(":", 1)[1].isdigit()
    assert len({t.instance_id for t in tasks}) == len(tasks)


# -- SWE-bench rows ------------------------------------------------------------------------------

def test_swe_bench_row_with_json_string_test_lists_and_unknown_fields(tmp_path):
    swe = {
        "instance_id": "astropy__astropy-12907", "repo": "astropy/astropy",
        "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
        "problem_statement": "Modeling's separability_matrix does not compute separability correctly",
        "patch": "diff --git a/astropy/modeling/separable.py b/astropy/modeling/separable.py\n",
        "test_patch": ("diff --git a/astropy/modeling/tests/test_separable.py "
                       "b/astropy/modeling/tests/test_separable.py\n"),
        "FAIL_TO_PASS": json.dumps(["astropy/modeling/tests/test_separable.py::test_separable[compound_model6]"]),
        "PASS_TO_PASS": json.dumps(["astropy/modeling/tests/test_separable.py::test_coord_matrix"]),
        "version": "4.3", "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
        "hints_text": "", "created_at": "2022-03-03T15:14:54Z",
        "model_name": "gpt-4o", "nested": {"k": [1, 2]},
    }
    path = write_jsonl(tmp_path / "swe.jsonl", json.dumps(swe))
    (task,) = load_tasks(path)
    assert task.FAIL_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_separable[compound_model6]"]
    assert task.PASS_TO_PASS == ["astropy/modeling/tests/test_separable.py::test_coord_matrix"]
    assert task.version == "4.3" and task.base_commit == swe["base_commit"]
    assert task.extra == {"model_name": "gpt-4o", "nested": {"k": [1, 2]}}
    assert task.source == f"{path}:1"
    out = task.to_dict()
    assert out["model_name"] == "gpt-4o" and out["nested"] == {"k": [1, 2]}
    assert "extra" not in out and "source" not in out
    # written back, the row loads to the same task
    again = task_from_row(json.loads(json.dumps(out)))
    assert again.to_dict() == out


def test_empty_json_string_test_list_and_null_fields_are_empty(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", row(PASS_TO_PASS="", hints_text=None, version=None))
    (task,) = load_tasks(path)
    assert task.PASS_TO_PASS == [] and task.hints_text == "" and task.version == ""


def test_blank_lines_are_skipped_and_line_numbers_stay_true(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", row(), "", row(instance_id="a__b-2"))
    tasks = load_tasks(path)
    assert [t.instance_id for t in tasks] == ["a__b-1", "a__b-2"]
    assert tasks[1].source.endswith(":3")


def test_directory_loads_every_jsonl_in_name_order(tmp_path):
    write_jsonl(tmp_path / "b.jsonl", row(instance_id="from-b"))
    write_jsonl(tmp_path / "a.jsonl", row(instance_id="from-a"))
    (tmp_path / "notes.txt").write_text("not a task file")
    assert [t.instance_id for t in load_tasks(tmp_path)] == ["from-a", "from-b"]


# -- malformed files -----------------------------------------------------------------------------

def load_error(path: Path) -> TaskFormatError:
    with pytest.raises(TaskFormatError) as info:
        load_tasks(path)
    return info.value


def test_bad_json_names_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", row(), row(instance_id="x2"), '{"instance_id": "x3", oops}')
    err = load_error(path)
    assert err.path == str(path) and err.line == 3
    assert f"{path}:3" in str(err) and "invalid JSON" in str(err)


def test_missing_instance_id_names_the_field(tmp_path):
    bad = dict(GOOD)
    del bad["instance_id"]
    path = write_jsonl(tmp_path / "t.jsonl", row(), json.dumps(bad))
    err = load_error(path)
    assert (err.line, err.field) == (2, "instance_id")
    assert f"{path}:2" in str(err) and "'instance_id'" in str(err) and "missing" in str(err)


@pytest.mark.parametrize("value, words", [
    ("tests/test_x.py::test_a", "not a JSON list"),        # a bare string, not JSON
    (json.dumps({"a": 1}), "list of strings"),              # JSON, but not a list
    ({"tests/test_x.py::test_a": 1}, "list of strings"),
    ([1, 2], "list of strings"),
    ([], "at least one test"),
])
def test_fail_to_pass_must_be_a_non_empty_list_of_strings(tmp_path, value, words):
    path = write_jsonl(tmp_path / "t.jsonl", row(FAIL_TO_PASS=value))
    err = load_error(path)
    assert (err.line, err.field) == (1, "FAIL_TO_PASS")
    assert words in str(err)


@pytest.mark.parametrize("field, value, words", [
    ("problem_statement", 42, "expected a string, got int"),
    ("repo", ["a", "b"], "expected a string, got list"),
    ("gold_reverse_base", "yes", "expected true or false"),
    ("instance_id", "", "must not be empty"),
    ("gold_seconds", "1.5", "expected seconds (a number, 0 or more), got '1.5'"),
    ("gold_seconds", -1, "got -1"),
    ("gold_seconds", True, "got True"),
    ("gold_seconds", float("nan"), "got nan"),   # json.dumps writes NaN, and json.loads reads it
    ("gold_seconds", float("inf"), "got inf"),
])
def test_wrong_field_type_names_the_field(tmp_path, field, value, words):
    path = write_jsonl(tmp_path / "t.jsonl", row(**{field: value}))
    err = load_error(path)
    assert (err.path, err.line, err.field) == (str(path), 1, field)
    assert words in str(err)


def test_gold_seconds_round_trips_and_defaults_to_never_timed(tmp_path):
    timed, never, null = load_tasks(write_jsonl(tmp_path / "t.jsonl", row(gold_seconds=1.25),
                                                row(instance_id="x2"), row(instance_id="x3", gold_seconds=None)))
    assert timed.gold_seconds == 1.25 and never.gold_seconds == 0.0 and null.gold_seconds == 0.0
    assert task_from_row(json.loads(json.dumps(timed.to_dict()))).gold_seconds == 1.25


def test_a_row_that_is_not_an_object(tmp_path):
    err = load_error(write_jsonl(tmp_path / "t.jsonl", json.dumps([GOOD])))
    assert err.line == 1 and "expected a JSON object, got list" in str(err)


def test_duplicate_ids_name_both_places(tmp_path):
    path = write_jsonl(tmp_path / "t.jsonl", row(), row(instance_id="other"), row())
    err = load_error(path)
    assert (err.line, err.field) == (3, "instance_id")
    assert "duplicate id 'a__b-1'" in str(err) and f"{path}:1" in str(err)


def test_duplicate_ids_across_files_of_a_directory(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", row())
    second = write_jsonl(tmp_path / "b.jsonl", row())
    err = load_error(tmp_path)
    assert err.path == str(second) and err.line == 1 and "duplicate" in str(err)


def test_empty_directory(tmp_path):
    err = load_error(tmp_path)
    assert err.path == str(tmp_path) and "no .jsonl task files" in str(err)


def test_missing_path_suggests_builtin(tmp_path):
    err = load_error(tmp_path / "nope.jsonl")
    assert str(tmp_path / "nope.jsonl") in str(err) and "builtin" in str(err)


# -- find_task, patch_paths ----------------------------------------------------------------------

def test_find_task_returns_the_task_or_suggests_close_ids():
    tasks = load_tasks("builtin")
    assert find_task(tasks, "deepgym__cronparse-001") is tasks[0]
    with pytest.raises(UnknownTaskError) as info:
        find_task(tasks, "deepgym__cronparse-01")
    msg = str(info.value)
    assert "'deepgym__cronparse-01'" in msg and "Did you mean" in msg and "deepgym__cronparse-001" in msg
    assert isinstance(info.value, KeyError)  # `except KeyError` keeps working for callers
    with pytest.raises(UnknownTaskError) as info:
        find_task(tasks, "zzzzzzzzzzzzzzzzzzzz")
    assert "Did you mean" not in str(info.value)


def test_patch_paths_lists_every_touched_file_once_in_order():
    diff = (
        "diff --git a/src/m.py b/src/m.py\n--- a/src/m.py\n+++ b/src/m.py\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/tests/test_new.py\t(tab-separated timestamp)\n@@ -0,0 +1 @@\n+x\n"
        "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n"
    )
    assert patch_paths(diff) == ["src/m.py", "tests/test_new.py", "old.txt"]
    assert patch_paths("") == []


def test_task_knows_its_gold_and_hidden_test_files():
    (task,) = [t for t in load_tasks("builtin") if t.instance_id == "deepgym__cronparse-001"]
    assert task.gold_files and all(p.startswith("src/") for p in task.gold_files)
    assert task.hidden_test_files and all(p.startswith("tests/") for p in task.hidden_test_files)


def test_find_task_with_a_non_string_id_names_what_an_id_is():
    """env.reset(options={"task_id": 3}) raised a TypeError from difflib."""
    from deepgym_envs.tasks import UnknownTaskError, find_task, load_tasks

    tasks = load_tasks("builtin")
    with pytest.raises(UnknownTaskError, match="a task id is a string such as 'deepgym__"):
        find_task(tasks, 3)
