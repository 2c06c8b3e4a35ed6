"""The files a SWE-bench row's tests run from: the official harness's reading of ``test_patch``.

The harness hands pytest the target of every ``diff --git a/X b/Y`` line of the test patch, less
data files. A file renamed at 100 % similarity has no ``+++`` line, so a parser of ``+++`` lines
skips it, its PASS_TO_PASS tests come out missing and the gold fix is graded unresolved.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import pytest

import _swebench_fixture as fx
from deepgym_envs.cli import main
from deepgym_envs.grading import grade
from deepgym_envs.tasks import files_of_test_patch, harness_cannot_run, load_tasks, patch_paths

ROOT = Path(__file__).resolve().parents[1]

#: The harness's own rule, written out here independently of the package: its pattern over the
#: whole patch, and the extensions it drops (its list, "csv" without the dot included).
HARNESS_PATTERN = re.compile(r"diff --git a/.* b/(.*)")
HARNESS_NON_TEST = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


def reference(test_patch: str) -> list[str]:
    """The harness's directives, deduplicated (pytest runs a file named twice once) and without
    the empty name (its command line, joined with spaces, drops it)."""
    found = [d for d in HARNESS_PATTERN.findall(test_patch) if not d.endswith(HARNESS_NON_TEST)]
    return [d for d in dict.fromkeys(found) if d]


def shipped_test_patches() -> dict[str, str]:
    """Every test patch the project ships: each row of each task file under tasks/ and tests/, and
    each string in a test module that holds a diff (the fixtures tests build rows from)."""
    out: dict[str, str] = {}
    for base in (ROOT / "tasks", ROOT / "tests"):
        for file in sorted([*base.rglob("*.jsonl"), *base.rglob("*.json")]):
            text = file.read_text(encoding="utf-8", errors="replace")
            try:
                rows = [json.loads(text)] if file.suffix == ".json" else \
                    [json.loads(line) for line in text.splitlines() if line.strip()]
            except json.JSONDecodeError:
                continue
            rows = [r for v in rows for r in (v if isinstance(v, list) else [v]) if isinstance(r, dict)]
            for n, row in enumerate(rows):
                if isinstance(row.get("test_patch"), str) and row["test_patch"]:
                    out[f"{file.relative_to(ROOT)}#{n}"] = row["test_patch"]
    for module in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "diff --git" in node.value:
                out[f"{module.relative_to(ROOT)}:{node.lineno}"] = node.value
    return out


def test_every_shipped_test_patch_gives_the_harness_files():
    patches = shipped_test_patches()
    assert len(patches) > 300  # the task sets' rows and the tests' own patches were all found
    wrong = {k: (files_of_test_patch(p), reference(p)) for k, p in patches.items()
             if files_of_test_patch(p) != reference(p)}
    assert not wrong, list(wrong.items())[:3]


def _git(repo: Path, *args: str, **kwargs) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false",
                           "-C", str(repo), *args], check=True, capture_output=True, **kwargs).stdout


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[str, list[str]]:
    """A test patch in the shape git writes for a published row, made by git in a real
    repository: a pure rename, a rename with edits, a copy, a deletion, a mode change, a binary
    file, a data file, names with spaces and with non-ASCII characters (which git quotes), a
    rename from a plain name to a quoted one. Returns the patch and every path git says it touches."""
    repo = tmp_path_factory.mktemp("published")
    _git(repo, "init", "-q")
    files = {"tests/test_old.py": "def test_a():\n    pass\n" * 20,
             "tests/test_edit_old.py": "".join(f"def test_{i}():\n    assert {i}\n" for i in range(30)),
             "tests/test_src.py": "".join(f"def test_c{i}():\n    assert {i}\n" for i in range(30)),
             "tests/test_gone.py": "def test_gone():\n    pass\n",
             "tests/test_mode.py": "def test_mode():\n    pass\n",
             "tests/x y.py": "def test_space():\n    pass\n" * 10,
             "tests/t\u00e9st.py": "def test_accent():\n    pass\n" * 10,
             "tests/plain.py": "def test_plain():\n    pass\n" * 10,
             "tests/a b/c.py": "def test_deep():\n    pass\n"}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "mv", "tests/test_old.py", "tests/test_new.py")
    _git(repo, "mv", "tests/test_edit_old.py", "tests/test_edit_new.py")
    (repo / "tests/test_edit_new.py").write_text(files["tests/test_edit_old.py"] + "def test_more():\n    pass\n")
    (repo / "tests/test_copy.py").write_text(files["tests/test_src.py"])
    (repo / "tests/test_src.py").write_text(files["tests/test_src.py"] + "def test_src_more():\n    pass\n")
    _git(repo, "rm", "-q", "tests/test_gone.py")
    (repo / "tests/test_mode.py").chmod(0o755)
    (repo / "tests/data.bin").write_bytes(b"\0\1\2binary")
    (repo / "tests/fixture.json").write_text("{}\n")
    _git(repo, "mv", "tests/x y.py", "tests/x z.py")
    _git(repo, "mv", "tests/t\u00e9st.py", "tests/t\u00ebst.py")
    _git(repo, "mv", "tests/plain.py", "tests/pl\u00e4in.py")
    (repo / "tests/a b/c.py").write_text("def test_deep():\n    assert 1\n")
    _git(repo, "add", "-A")
    patch = _git(repo, "diff", "--cached", "-M", "-C", "--find-copies-harder", "--binary", text=True)
    names = _git(repo, "diff", "--cached", "-M", "-C", "--find-copies-harder", "--name-status", "-z")
    fields = [f.decode() for f in names.split(b"\0") if f]
    touched, i = [], 0
    while i < len(fields):  # status, then one path (two for a rename or copy)
        n = 2 if fields[i][0] in "RC" else 1
        touched += fields[i + 1:i + 1 + n]
        i += 1 + n
    return patch, touched


def test_a_published_shaped_patch_gives_the_harness_files(published):
    patch, _ = published
    assert "similarity index 100%" in patch and "copy to" in patch and "new mode" in patch \
        and '"a/tests/t\\303\\251st.py"' in patch and "GIT binary patch" in patch  # git wrote each shape
    assert files_of_test_patch(patch) == reference(patch)
    got = files_of_test_patch(patch)
    for run in ("tests/test_new.py", "tests/test_edit_new.py", "tests/test_copy.py", "tests/test_gone.py",
                "tests/test_mode.py", "tests/data.bin", "tests/x z.py"):
        assert run in got, (run, got)
    assert "c.py" in got  # "tests/a b/c.py", cut by the harness's greedy pattern at its last " b/"
    for not_run in ("tests/fixture.json", "tests/t\u00ebst.py", "tests/pl\u00e4in.py", "tests/test_old.py"):
        assert not_run not in got  # a data file; names git quotes, which the harness's pattern misses


def test_every_path_git_names_is_protected(published):
    """Protection reads more than the harness runs: both sides of each rename and copy, quoted
    names decoded, and files whose only header is ``diff --git`` (a mode change, a pure rename)."""
    patch, touched = published
    assert set(touched) <= set(patch_paths(patch)), set(touched) - set(patch_paths(patch))
    assert patch_paths("diff --git a/t/m.py b/t/m.py\nold mode 100644\nnew mode 100755\n") == ["t/m.py"]


def test_a_row_the_harness_cannot_run_is_said_why(published):
    patch, _ = published
    assert "no prediction resolves this row there" in harness_cannot_run(patch)
    gone = patch[patch.index("diff --git a/tests/test_gone.py"):]
    assert "'tests/test_gone.py' (a file the test patch deletes)" in harness_cannot_run(gone)
    ok = "diff --git a/t/x.py b/t/x.py\n--- a/t/x.py\n+++ b/t/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert harness_cannot_run(ok) == ""
    in_hunk = ok.replace("+b\n", '+s = "diff --git a/p b/q"\n')
    assert "read from a line inside a hunk" in harness_cannot_run(in_hunk)
    names_a_file = ok.replace("+b\n", "+# diff --git a/p b/t/y.py\n")  # the harness runs t/y.py too: fine if there
    assert "'t/y.py' (read from a line inside a hunk" in harness_cannot_run(names_a_file, {"t/x.py"}.__contains__)
    assert harness_cannot_run(names_a_file, {"t/x.py", "t/y.py"}.__contains__) == ""
    assert "splits or expands" in harness_cannot_run(ok.replace("t/x.py", "t/x y.py"))
    assert "cut at its line's last ' b/' from the name 't/a b/x.py'" in harness_cannot_run(
        ok.replace("t/x.py", "t/a b/x.py"))


RENAME = """diff --git a/test_six.py b/tests/test_six_moved.py
similarity index 100%
rename from test_six.py
rename to tests/test_six_moved.py
"""


@pytest.mark.slow
def test_a_pure_rename_in_the_test_patch_is_run_and_the_gold_fix_resolves(tmp_path):
    """The row's PASS_TO_PASS tests live in a file the test patch only renames: the harness runs
    it, so they pass with the gold fix (graded unresolved, P2P missing, when ``+++`` lines were read)."""
    commits = fx.make_mirror(tmp_path / "mirrors")
    moved = ["tests/test_six_moved.py::test_add_doc", "tests/test_six_moved.py::test_integer_types"]
    rows = fx.write_rows(tmp_path / "rows.jsonl", fx.row(commits, test_patch=fx.TEST_PATCH + RENAME,
                                                         PASS_TO_PASS=json.dumps(fx.P2P + moved)))
    rc = main(["tasks", "import", str(rows), "--out", str(tmp_path / "set"), "--repos", str(tmp_path / "mirrors"),
               "--json"])
    assert rc == 0
    task = load_tasks(tmp_path / "set")[0]
    gold = grade(task, task.patch)
    assert gold.status == "resolved", (gold.reason, {t: gold.tests.get(t) for t in moved})
    assert all(gold.tests[t] == "passed" for t in moved)
    assert grade(task, "").status == "unresolved"
