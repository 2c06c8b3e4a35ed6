"""Task rows from strangers: their paths stay in the task file's folder, their trees within caps.

A task file (or a hub dataset) is data written by whoever published it. Its ``repo_path`` becomes
the pristine tree the agent reads, so a row that names ``../../`` or an absolute path would copy
a folder of this machine (``~/.ssh``) into the agent's workspace. Each test builds the hostile
input in ``tmp_path`` and checks that the host's secret reaches no pristine tree, that the error
names the file, line (or row) and field, and that a user who trusts the file can still opt in.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import GOLD_PATCH, toy_row, write_toy_repo
from deepgym_envs.errors import TaskFormatError
from deepgym_envs.gitrepo import run_git
from deepgym_envs.tasks import load_tasks
from deepgym_envs.trees import cache_root, pristine_tree, tree_fingerprint
from deepgym_envs.untrusted_tree import TreeTooLarge

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- host key of this machine"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A home folder of this machine, with a key no task may ever show the agent."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    return home


def hub_folder(tmp_path: Path, *rows: dict, name: str = "tasks.jsonl") -> Path:
    """A downloaded task folder: one good task beside its repository, then the ``rows``."""
    folder = tmp_path / "downloads" / "evil-taskset"
    write_toy_repo(folder / "repos" / "calc")
    good = toy_row(folder / "repos" / "calc", instance_id="good__calc-1", repo_path="repos/calc")
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in (good, *rows)))
    return path


def secret_in_cache(secret: str = SECRET) -> list[str]:
    """Every file under the tree cache that holds ``secret`` (links are read as links)."""
    found = []
    for root, _, files in os.walk(cache_root()):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                if "id_rsa" in os.readlink(path) or ".ssh" in os.readlink(path):
                    found.append(path)
                continue
            try:
                with open(path, "rb") as fh:
                    if secret.encode() in fh.read():
                        found.append(path)
            except OSError:
                pass
    return found


def build_all(path: Path) -> list:
    """Load the set and build every tree from a local repository (where a secret would be copied)."""
    return [pristine_tree(t) for t in load_tasks(path) if t.repo_path]


@pytest.mark.parametrize("how", ["climbing", "absolute", "link"])
def test_repo_path_outside_the_task_folder_is_refused(tmp_path, host, how):
    folder = tmp_path / "downloads" / "evil-taskset"
    value = {"climbing": "../../home", "absolute": str(host), "link": "repos/home"}[how]
    if how == "link":  # inside by name, outside once links are followed
        (folder / "repos").mkdir(parents=True)
        (folder / "repos" / "home").symlink_to(host)
    # No patch to reverse: the tree is the folder as it is, ~/.ssh included.
    path = hub_folder(tmp_path, toy_row(host, instance_id="evil__calc-2", repo_path=value, gold_reverse_base=False))
    with pytest.raises(TaskFormatError) as err:
        build_all(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), 2, "repo_path")
    assert "DEEPGYM_ALLOW_REPO_PATH_OUTSIDE" in str(err.value)
    assert secret_in_cache() == []


def test_the_task_folder_itself_is_refused(tmp_path):
    """Its tree would hold the task file: gold patch and hidden tests in the agent's workspace."""
    path = hub_folder(tmp_path, toy_row(tmp_path, instance_id="self__calc-2", repo_path="."))
    with pytest.raises(TaskFormatError, match=r"tasks\.jsonl:2: field 'repo_path'.*own folder"):
        load_tasks(path)


def test_repo_path_outside_is_used_when_the_user_opts_in(tmp_path, monkeypatch):
    mine = write_toy_repo(tmp_path / "my-projects" / "calc")
    path = hub_folder(tmp_path, toy_row(mine, instance_id="mine__calc-2", repo_path="../../my-projects/calc"))
    [_, by_keyword] = load_tasks(path, allow_repo_path_outside=True)
    assert by_keyword.repo_path == str(mine.resolve())
    monkeypatch.setenv("DEEPGYM_ALLOW_REPO_PATH_OUTSIDE", "1")
    [_, by_env] = load_tasks(path)
    tree = pristine_tree(by_env)
    assert "return max(lo, x)" in (tree / "src" / "calc" / "ops.py").read_text()  # the gold patch reversed
    with pytest.raises(TaskFormatError):  # an explicit False wins over the environment
        load_tasks(path, allow_repo_path_outside=False)


def test_the_cli_opt_in_is_one_flag_for_every_subcommand(tmp_path, monkeypatch, capsys):
    from deepgym_envs.cli import main

    # main() sets the variable for the whole process: recorded here first, so it is undone after the test.
    monkeypatch.setenv("DEEPGYM_ALLOW_REPO_PATH_OUTSIDE", "0")
    monkeypatch.delenv("DEEPGYM_ALLOW_REPO_PATH_OUTSIDE")
    mine = write_toy_repo(tmp_path / "my-projects" / "calc")
    path = hub_folder(tmp_path, toy_row(mine, instance_id="mine__calc-2", repo_path="../../my-projects/calc"))
    assert main(["tasks", "list", str(path)]) == 2
    assert "--allow-repo-path-outside" in capsys.readouterr().out
    assert main(["--allow-repo-path-outside", "tasks", "list", str(path), "--json"]) == 0
    assert "mine__calc-2" in capsys.readouterr().out


def test_a_dataset_row_may_not_name_a_host_path(tmp_path, host, monkeypatch):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    base = json.loads(json.dumps(toy_row(host, gold_reverse_base=False)))
    rows = [{**base, "instance_id": "hub__calc-1", "repo_path": ""},
            {**base, "instance_id": "hub__calc-2", "repo_path": str(host)}]
    dataset = tmp_path / "hub"
    dataset.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), dataset / "test-00000-of-00001.parquet")
    monkeypatch.setenv("DEEPGYM_ALLOW_REPO_PATH_OUTSIDE", "1")  # a hub row never names this machine's paths
    for source in (dataset, dataset / "test-00000-of-00001.parquet"):
        with pytest.raises(TaskFormatError) as err:
            build_all(source)
        assert err.value.line == 2 and err.value.field == "repo_path"
        assert err.value.path.endswith("test-00000-of-00001.parquet")
    relative = [{**base, "instance_id": "hub__calc-3", "repo_path": "calc"}]
    write_toy_repo(dataset / "calc")
    pq.write_table(pa.Table.from_pylist(relative), dataset / "test-00000-of-00001.parquet")
    with pytest.raises(TaskFormatError, match="field 'repo_path'"):
        load_tasks(dataset)
    assert secret_in_cache() == []


def test_a_source_repository_whose_git_directory_is_elsewhere_is_refused(tmp_path, host):
    """``repos/x/.git`` as a file (``gitdir: ...``) or a link would make a host repository's commit the tree."""
    dotfiles = host / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "id_rsa").write_text(SECRET)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(dotfiles)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "keys"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    folder = tmp_path / "downloads" / "evil-taskset"
    for kind in ("file", "link"):
        repo = folder / "repos" / f"x-{kind}"
        repo.mkdir(parents=True)
        if kind == "file":
            (repo / ".git").write_text(f"gitdir: {os.path.relpath(dotfiles / '.git', repo)}\n")
        else:
            (repo / ".git").symlink_to(dotfiles / ".git")
    rows = [toy_row(host, instance_id=f"evil__x-{kind}", repo_path=f"repos/x-{kind}", base_commit=sha,
                    gold_reverse_base=False) for kind in ("file", "link")]
    for task in load_tasks(hub_folder(tmp_path, *rows))[1:]:
        with pytest.raises(TaskFormatError, match="git directory"):
            pristine_tree(task)
    assert secret_in_cache() == []


def test_links_devices_and_fifos_in_a_repository_never_reach_the_tree(tmp_path, host):
    path = hub_folder(tmp_path)
    repo = path.parent / "repos" / "calc"
    (repo / "key").symlink_to(host / ".ssh" / "id_rsa")                    # absolute
    (repo / "src" / "key").symlink_to("../../../../../home/.ssh/id_rsa")  # climbing
    (repo / "d").mkdir()
    (repo / "d" / "up").symlink_to("..")                                  # in the tree on its own...
    (repo / "chain").symlink_to("d/up/..")                                # ...but a chain through it leaves
    (repo / "docs").symlink_to("src/calc")                                # an ordinary in-tree link
    os.mkfifo(repo / "pipe")
    [task] = load_tasks(path)
    tree = pristine_tree(task)
    for gone in ("key", "src/key", "chain", "pipe"):
        assert not os.path.lexists(tree / gone), gone
    assert os.readlink(tree / "docs") == "src/calc" and (tree / "docs" / "ops.py").is_file()
    assert os.readlink(tree / "d" / "up") == ".."
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            mode = os.lstat(os.path.join(root, name)).st_mode
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode), os.path.join(root, name)
    assert secret_in_cache() == []


def test_a_sparse_file_over_the_tree_cap_is_refused(tmp_path, monkeypatch):
    path = hub_folder(tmp_path)
    with open(path.parent / "repos" / "calc" / "huge.bin", "wb") as fh:
        fh.truncate(64 << 20)  # 64 MiB that take no disk: its apparent size counts
    monkeypatch.setenv("DEEPGYM_MAX_TREE_BYTES", "8M")
    [task] = load_tasks(path)
    with pytest.raises(TreeTooLarge) as err:
        pristine_tree(task)
    message = str(err.value)
    assert "DEEPGYM_MAX_TREE_BYTES" in message and task.instance_id in message and "huge.bin" in message
    assert err.value.field == "repo_path" and err.value.path == task.source
    name = f"{task.instance_id}-{tree_fingerprint(task)}"  # nothing half-built stays
    assert not list((cache_root() / "trees").glob(f"{name}*")) and not list((cache_root() / "trees").glob(f".{name}*"))


def test_a_commit_over_the_caps_is_refused_before_it_is_checked_out(tmp_path, monkeypatch):
    """A gigabyte of zeros is a few kilobytes in git's pack: the checkout is what must be capped."""
    path = hub_folder(tmp_path)
    repo = path.parent / "repos" / "calc"
    (repo / "zeros.bin").write_bytes(bytes(16 << 20))
    for i in range(30):
        (repo / f"f{i}.txt").write_text(str(i))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    rows = [toy_row(repo, instance_id="zeros__calc-1", repo_path="repos/calc", base_commit=sha,
                    gold_reverse_base=False)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    [task] = load_tasks(path)
    monkeypatch.setenv("DEEPGYM_MAX_TREE_BYTES", "4M")
    with pytest.raises(TreeTooLarge, match="DEEPGYM_MAX_TREE_BYTES") as err:
        pristine_tree(task)
    assert "zeros.bin" in str(err.value) and task.instance_id in str(err.value)
    monkeypatch.setenv("DEEPGYM_MAX_TREE_BYTES", "0")
    monkeypatch.setenv("DEEPGYM_MAX_TREE_FILES", "20")
    with pytest.raises(TreeTooLarge, match="DEEPGYM_MAX_TREE_FILES"):
        pristine_tree(task)
    monkeypatch.setenv("DEEPGYM_MAX_TREE_FILES", "0")
    assert (pristine_tree(task) / "zeros.bin").stat().st_size == 16 << 20  # 0: no cap


def test_host_git_never_runs_a_repositorys_hooks_or_fsmonitor(tmp_path):
    """run_git over a repository whose config a stranger wrote: neither its fsmonitor nor its hooks run."""
    marker = tmp_path / "ran-on-the-host"
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("pre-commit", "post-commit", "reference-transaction", "post-index-change"):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    with open(repo / ".git" / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = echo fsmonitor >> {marker}; true\n")
    run_git(["add", "-A"], cwd=repo)
    run_git(["status", "--porcelain"], cwd=repo)
    run_git(["commit", "-q", "-m", "x", "--no-gpg-sign"], cwd=repo)
    assert not marker.exists(), marker.read_text()
    # The same config does run git's fsmonitor and hooks outside run_git: the repository is hostile.
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    (repo / "b.txt").write_text("b\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "y"], check=True, env=env)
    assert marker.exists()


def test_a_split_stays_loadable_without_the_opt_in(tmp_path):
    """`tasks split` writes rows whose repositories are inside the split's folder (copied there)."""
    from deepgym_envs.taskset import split_by_repo, write_split

    other = {**toy_row(tmp_path, instance_id="other__calc-2", repo_path="repos/calc"), "repo": "other/calc"}
    tasks = load_tasks(hub_folder(tmp_path, other))
    out = tmp_path / "elsewhere" / "split"
    train, evaluation = write_split(split_by_repo(tasks, eval_frac=0.5, seed=0), out)
    reloaded = load_tasks(train) + load_tasks(evaluation)
    assert sorted(t.instance_id for t in reloaded) == ["good__calc-1", "other__calc-2"]
    assert all(Path(t.repo_path).is_relative_to(out.resolve()) for t in reloaded)
    assert "max(lo, min(x, hi))" in (Path(reloaded[0].repo_path) / "src" / "calc" / "ops.py").read_text()
    assert all(t.patch == GOLD_PATCH for t in reloaded)


def test_a_folder_nested_past_the_depth_cap_is_a_clear_error(tmp_path):
    """Folders nested 300 deep are a few kilobytes of names: refused by the depth cap, naming it."""
    path = hub_folder(tmp_path)
    os.makedirs(path.parent / "repos" / "calc" / "/".join(["a"] * 300))
    [task] = load_tasks(path)
    with pytest.raises(TreeTooLarge, match="DEEPGYM_MAX_TREE_DEPTH"):
        pristine_tree(task)
