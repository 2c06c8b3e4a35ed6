"""The workspace diff from HEAD's entries under the changed paths is the diff from all of HEAD.

Each case runs the diff twice on the same workspace and the same changed paths: once as it is
(:func:`stage_head_entries`), once with the index filled from all of HEAD (``read-tree HEAD``, the
way every diff was made before), and compares the bytes: the diff, the names (``changed_files``)
and what the bounds say.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from conftest import toy_row, write_toy_repo
from deepgym_envs.errors import ChangeTooLarge
from deepgym_envs.gitrepo import run_git
from deepgym_envs.sandbox import SandboxLimits, base, make_sandbox
from deepgym_envs.sandbox.head_entries import PLACEHOLDER
from deepgym_envs.tasks import task_from_row
from deepgym_envs.trees import pristine_tree

ODD = ":(top)junk"  # a name that is pathspec magic, unless literal


def _whole_head(base_args: list[str], changed: list[str], kw: dict) -> str:
    return base._stage_head(base_args, kw)


def _both(monkeypatch: pytest.MonkeyPatch, fn):
    """``fn()`` with the index from the changed paths' entries, then from all of HEAD."""
    new = _outcome(fn)
    with monkeypatch.context() as m:
        m.setattr(base, "stage_head_entries", _whole_head)
        old = _outcome(fn)
    return new, old


def _outcome(fn):
    try:
        return fn()
    except ChangeTooLarge as exc:
        return f"ChangeTooLarge: {exc}"


def _repo(root: Path) -> Path:
    """The toy project plus one file or directory for every case the diff must get right."""
    write_toy_repo(root)
    files = {
        "src/keep.py": "KEEP = 1\n",
        "old_name.py": "".join(f"line {i}\n" for i in range(40)),
        "moved_and_edited.py": "".join(f"row {i}\n" for i in range(40)),
        "bin/data.bin": bytes(range(256)) * 4,
        "script.sh": "echo hi\n",
        "exec.sh": "echo run\n",
        ".gitignore": "*.log\nignored/\nbuild/\n",
        "ignored/tracked.log": "tracked though ignored\n",
        "notes.log": "a tracked log\n",
        "dir2file/a.txt": "a\n",
        "dir2file/sub/b.txt": "b\n",
        "file2dir": "a file\n",
        "gone/one.txt": "1\n",
        "gone/deeper/two.txt": "2\n",
        "pkg/a.py": "A = 1\n",
        "a/b/inside.txt": "sibling of a/bc\n",
        ".gitattributes": "*.dat binary\n",
        "x.dat": "text that attributes call binary\n",
        f"odd/{ODD}": "magic\n",
        "odd/*": "star\n",
        "odd/sp ace.txt": "space\n",
        "data/deep/er/still.txt": "still\n",
    }
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (root / "exec.sh").chmod(0o755)
    os.symlink("src/keep.py", root / "link")
    os.symlink("src/keep.py", root / "link_to_file")
    (root / "file_to_link").write_text("regular\n")
    return root


# Every change the agent can make that the diff must show (or, for ignored files, show only by name).
CHANGES = r"""
set -e
printf 'x = 2\n' >> src/calc/ops.py
git mv -f old_name.py new_name.py 2>/dev/null || mv old_name.py new_name.py
mv moved_and_edited.py moved/edited.py 2>/dev/null || { mkdir moved; mv moved_and_edited.py moved/edited.py; }
printf 'row 40\n' >> moved/edited.py
printf '\x00\x01\x02' >> bin/data.bin
printf '\000\001binary' > bin/new.bin
chmod +x script.sh
chmod -x exec.sh
ln -sfn src/calc/ops.py link
rm link_to_file && printf 'now a file\n' > link_to_file
rm file_to_link && ln -s src/keep.py file_to_link
printf 'edited\n' >> ignored/tracked.log
printf 'new and ignored\n' > ignored/new.log
mkdir -p build && printf 'obj\n' > build/out.o
printf 'untracked log\n' > fresh.log
rm -rf dir2file && printf 'was a directory\n' > dir2file
rm file2dir && mkdir file2dir && printf 'now inside\n' > file2dir/x.txt
rm -rf gone
(cd pkg && git init -q . && printf 'B = 2\n' > b.py && printf 'A = 2\n' > a.py)
mkdir -p emb && (cd emb && git init -q . && printf 'e\n' > e.txt)
mkdir -p a/bc && printf 'new\n' > a/bc/new.txt
printf 'more text\n' >> x.dat
printf 'edited magic\n' >> 'odd/:(top)junk'
printf 'edited star\n' >> 'odd/*'
rm 'odd/sp ace.txt' && printf 'tab\n' > "$(printf 'odd/tab\tname')" && printf 'nl\n' > "$(printf 'odd/new\nline')"
printf 'x\n' > "$(printf 'caf\351.txt')"  # not UTF-8
mkdir -p data/deep/er/new/deeper && printf 'deep\n' > data/deep/er/new/deeper/file.txt
touch src/keep.py
printf 'HEAD\n' > HEAD
: > empty.txt
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return pristine_tree(task_from_row(toy_row(_repo(tmp_path / "calc"))))


@pytest.fixture
def changed_box(tree, backend):
    with make_sandbox(tree, backend, SandboxLimits(timeout=60, change_files=100_000)) as sb:
        res = sb.exec(["bash", "-c", CHANGES])
        assert res.exit_code == 0, res.stderr
        yield sb


def test_every_kind_of_change_diffs_to_the_same_bytes(changed_box, monkeypatch):
    sb = changed_box
    (diff, names), (old_diff, old_names) = _both(monkeypatch, lambda: (sb.diff(), sb.changed_files()))
    assert diff == old_diff
    assert names == old_names
    # The cases were exercised: each shows, as it should.
    for marker in ("rename from old_name.py", "rename to moved/edited.py", "GIT binary patch",
                   "deleted file mode", "new file mode 120000", "dir2file/sub/b.txt", "file2dir/x.txt",
                   "ignored/tracked.log", "a/bc/new.txt", "pkg/b.py", "odd/:(top)junk", "odd/*", "caf",
                   "bin/new.bin", "data/deep/er/new/deeper/file.txt", "diff --git a/HEAD b/HEAD"):
        assert marker in diff, marker
    assert "ignored/new.log" in names and "ignored/new.log" not in diff  # grading sees every file
    assert "build/out.o" in names and "src/keep.py" not in names
    assert "emb/e.txt" not in names  # a new embedded repository is not staged, either way
    assert PLACEHOLDER not in diff + "".join(names)


def test_the_bounds_say_the_same(tree, backend, monkeypatch):
    # 3 files that count and 3 that .gitignore hides: over a bound of 4 only before git is asked.
    for limit, expect_error in ((4, False), (2, True)):
        with make_sandbox(tree, backend, SandboxLimits(timeout=60, change_files=limit)) as sb:
            sb.exec("printf 1 > n1.py; printf 2 > n2.py; printf 3 >> src/keep.py; mkdir -p build; "
                    "printf x > build/1.o; printf y > build/2.o; printf z > ignored/z.log")
            new, old = _both(monkeypatch, sb.diff)
            assert new == old
            assert new.startswith("ChangeTooLarge") == expect_error, new


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    return run_git(list(args), cwd=repo, input=input)


def test_a_submodule_on_the_way_to_a_changed_path_is_one_in_the_index_too(tmp_path, monkeypatch):
    """A path inside a submodule of HEAD makes git add refuse the whole change, both ways."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "top.txt").write_text("top\n")
    _git(repo, "add", "top.txt")
    _git(repo, "update-index", "--add", "--cacheinfo", f"160000,{'1' * 40},sub")
    _git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "base")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "top.txt").write_text("top, edited\n")
    (work / "sub" / "x.txt").write_text("inside the submodule\n")
    for changed in (["sub/x.txt", "top.txt"], ["top.txt"], ["sub/x.txt"]):
        new, old = _both(monkeypatch, lambda: base.workspace_diff(str(repo / ".git"), str(work), changed))
        assert new == old, changed


def _random_tree(rng: random.Random, root: Path, files: int) -> None:
    for i in range(files):
        depth = rng.randint(0, 3)
        rel = "/".join(rng.choice("abc") for _ in range(depth))
        path = root / rel / f"f{i}{rng.choice(['.py', '.txt', '.log', ''])}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{rng.random()}\n" for _ in range(rng.randint(0, 6))))


def _mutate(rng: random.Random, work: Path) -> None:
    paths = sorted(p for p in work.rglob("*") if ".git" not in p.parts)
    for _ in range(rng.randint(1, 8)):
        if not paths:
            break
        p = rng.choice(paths)
        op = rng.choice(["edit", "delete", "rename", "new", "to_dir", "to_link", "chmod", "rmdir"])
        if not (p.exists() or p.is_symlink()):
            continue
        if op == "edit" and p.is_file() and not p.is_symlink():
            p.write_text(p.read_text() + f"{rng.random()}\n")
        elif op == "delete" and (p.is_file() or p.is_symlink()):
            p.unlink()
        elif op == "rename" and p.is_file() and not p.is_symlink():
            dest = p.parent / f"renamed_{p.name}"
            p.rename(dest)
        elif op == "new":
            d = p if p.is_dir() and not p.is_symlink() else p.parent
            (d / f"new{rng.randint(0, 99)}.txt").write_text("new\n")
        elif op == "to_dir" and p.is_file() and not p.is_symlink():
            p.unlink()
            p.mkdir()
            (p / "inner.txt").write_text("inner\n")
        elif op == "to_link" and p.is_file() and not p.is_symlink():
            p.unlink()
            p.symlink_to("f0")
        elif op == "chmod" and p.is_file() and not p.is_symlink():
            p.chmod(0o755)
        elif op == "rmdir" and p.is_dir() and not p.is_symlink():
            subprocess.run(["rm", "-rf", str(p)], check=True)
            if rng.random() < 0.5:
                p.write_text("a file where a directory was\n")


@pytest.mark.parametrize("seed", range(12))
def test_random_changes_diff_to_the_same_bytes(tmp_path, monkeypatch, seed):
    """Random trees, random changes, the changed paths named the local backend's way (and with
    untouched paths among them, as an overlay's copy-up names them)."""
    rng = random.Random(seed)
    repo = tmp_path / "repo"
    repo.mkdir()
    _random_tree(rng, repo, rng.randint(5, 40))
    (repo / ".gitignore").write_text("*.log\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A", "-f")
    _git(repo, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "base")
    work = tmp_path / "work"
    subprocess.run(["cp", "-a", str(repo), str(work)], check=True)
    subprocess.run(["rm", "-rf", str(work / ".git")], check=True)
    env = {"GIT_INDEX_FILE": str(tmp_path / "stat-index")}
    gb = ["--git-dir", str(repo / ".git"), "--work-tree", str(work), "-C", str(work)]
    run_git([*gb, "read-tree", "HEAD"], env=env)
    run_git([*gb, "update-index", "-q", "--refresh"], env=env, check=False)
    _mutate(rng, work)
    modified = run_git([*gb, "diff-files", "--name-only", "-z"], env=env).split("\0")
    others = run_git([*gb, "ls-files", "--others", "-z"], env=env).split("\0")
    changed = sorted(p for p in {*modified, *others} if p)
    untouched = [p for p in run_git([*gb, "ls-files", "-z"], env=env).split("\0") if p and p not in changed]
    changed_plus = changed + rng.sample(untouched, min(3, len(untouched)))
    for paths in (changed, changed_plus):
        for names_only in (False, True):
            new, old = _both(monkeypatch, lambda: base.workspace_diff(str(repo / ".git"), str(work), paths,
                                                                       names_only=names_only))
            assert new == old, (paths, names_only)
