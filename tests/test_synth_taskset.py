"""The committed synthesised task set works from a fresh checkout, not just from the tree that wrote it."""

from __future__ import annotations

import re
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from deepgym_envs.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def _committed_copy(dest: Path, name: str = "synth") -> Path:
    """tasks/NAME exactly as git holds it (empty directories and untracked files do not travel)."""
    try:
        blob = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(ROOT), "archive", "--format=tar", "HEAD",
                               f"tasks/{name}"],
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout with tasks/{name} committed: {exc}")
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        # Our own archive; the filter only where this Python has it (3.11.4+, 3.10.12+).
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return dest / "tasks" / name


@pytest.mark.parametrize("name, tasks_at_least, repos_at_least", [("synth", 50, 3), ("synth-curated", 220, 55)])
def test_every_synthesised_repository_builds_task_trees_from_a_fresh_checkout(tmp_path, monkeypatch, name,
                                                                              tasks_at_least, repos_at_least):
    from deepgym_envs.trees import pristine_tree

    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    tasks = load_tasks(_committed_copy(tmp_path / "checkout", name))
    assert len(tasks) >= tasks_at_least
    first_per_repo = {t.repo_path: t for t in reversed(tasks)}
    assert len(first_per_repo) >= repos_at_least
    for task in first_per_repo.values():
        tree = pristine_tree(task)
        head = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(tree), "rev-parse", "HEAD"],
                              capture_output=True, text=True)
        assert head.returncode == 0, f"{task.instance_id}: {head.stderr}"
        assert any(tree.glob("**/*.py")), f"{task.instance_id}: the tree has no Python code"


def test_the_curated_set_reads_like_issues_with_a_script_each(tmp_path):
    """Every statement of tasks/synth-curated quotes a script and names no changed file or function."""
    tasks = load_tasks(_committed_copy(tmp_path / "checkout", "synth-curated"))
    for t in tasks:
        assert "```python" in t.problem_statement, t.instance_id
        synth = t.extra["synth"]
        # As a path, not inside a name: six's module is six.py, and its scripts call six.python_2_...
        assert not re.search(rf"(?<![\w.]){re.escape(synth['module'])}(?!\w)", t.problem_statement), t.instance_id
        for artefact in ("Use -v to get", "...r'", "AssertionError: assert"):
            assert artefact not in t.problem_statement, (t.instance_id, artefact)
    kinds = {t.extra["synth"]["kind"] for t in tasks}
    assert len(kinds) >= 8  # the bug kinds are spread, not one kind per package


def test_committed_repositories_carry_no_git_sample_hooks():
    # 13 hooks/*.sample per repository, in every committed bare repository, served no purpose;
    # synthesis now makes its repositories without git's template.
    try:
        files = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(ROOT), "ls-files", "tasks/synth/repos"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout: {exc}")
    if not files:
        pytest.skip("tasks/synth is not in this checkout")
    assert [f for f in files if f.endswith(".sample")] == []


def _objects(git_dir_or_tree: Path) -> set[str]:
    listing = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(git_dir_or_tree), "cat-file",
                              "--batch-all-objects", "--batch-check=%(objectname)"],
                             capture_output=True, text=True, check=True).stdout
    return set(listing.split())


def _blob(text: str) -> str:
    return subprocess.run(["git", "hash-object", "--stdin"], input=text, capture_output=True, text=True,
                          check=True).stdout.strip()


# A second module, so that tasks on one module hold the other module clean: its tasks' fix.
SECOND_MODULE = {
    "src/tinylib/__init__.py": "from tinylib.ops import clamp, mean, first_positive\nfrom tinylib.text import shout\n",
    "src/tinylib/text.py": "def shout(word, times):\n    if times < 1:\n        return ''\n"
                           "    return (word.upper() + '!') * times\n",
    "tests/test_text.py": "from tinylib import shout\n\n\ndef test_shout():\n    assert shout('a', 2) == 'A!A!'\n\n\n"
                          "def test_shout_none():\n    assert shout('a', 0) == ''\n",
}


@pytest.fixture(scope="module")
def synthesised(tmp_path_factory):
    """The tinylib fixture synthesised twice, once per repository format (no validation: quicker)."""
    from tests.conftest import NAMESPACE_OK, NAMESPACE_WHY
    from tests.test_synth import LIB, _git_repo

    from deepgym_envs.synth import SourceSpec, SynthConfig, synthesize

    if not NAMESPACE_OK:
        pytest.skip(f"namespace sandbox unavailable: {NAMESPACE_WHY}")
    root = tmp_path_factory.mktemp("synth-formats")
    repo = _git_repo(root / "tinylib", {**LIB, **SECOND_MODULE})
    outs = {}
    for fmt in ("bundle", "bare"):
        config = SynthConfig(max_candidates=14, max_combined=0, workers=1, seed=3, use_host_python=True,
                             show_progress=False, validate=False, repo_format=fmt)
        report = synthesize(SourceSpec.parse(f"git:{repo}"), root / fmt, config)
        assert report.ok, report.reason
        outs[fmt] = root / fmt
    return outs


@pytest.mark.slow
def test_a_source_is_stored_once_as_one_bundle_file_and_its_tasks_build_from_it(synthesised, tmp_path, monkeypatch):
    from deepgym_envs.trees import pristine_tree

    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    out = synthesised["bundle"]
    stored = list((out / "repos").iterdir())
    assert len(stored) == 1 and stored[0].is_file() and stored[0].suffix == ".bundle"  # no repository folder left
    tasks = load_tasks(out)
    assert len(tasks) >= 2 and {t.repo_path for t in tasks} == {str(stored[0])}
    # Same tasks, same base commits as the bare layout: only the container changed.
    bare = {t.instance_id: t.base_commit for t in load_tasks(synthesised["bare"])}
    assert {t.instance_id: t.base_commit for t in tasks} == bare
    for task in tasks:
        tree = pristine_tree(task)
        head = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(tree), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert head == task.base_commit


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bundle", "bare"])
def test_a_task_sandbox_cannot_read_another_tasks_fix_from_the_shared_store(synthesised, fmt, tmp_path, monkeypatch):
    # Every task of a project shares one store, and a task's fix is its module as it was, which the
    # base commits of tasks on other modules hold. Only the task's own base commit may reach its sandbox.
    from tests.test_synth import LIB

    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    files = {**LIB, **SECOND_MODULE}
    tasks = load_tasks(synthesised[fmt])
    assert len({t.gold_files[0] for t in tasks}) == 2, "the fixture must give tasks on both modules"
    objects = {t.instance_id: _objects(pristine_tree(t)) for t in tasks}
    # What solves a task: its modules as they were, and the tests it hides (whole files here).
    secrets = {t.instance_id: {_blob(files[p]) for p in [*t.gold_files, *t.hidden_test_files] if p in files}
               for t in tasks}
    task = next(t for t in tasks if any(secrets[t.instance_id] & objects[o.instance_id] for o in tasks if o is not t))
    others = [t for t in tasks if t is not task]
    tree = pristine_tree(task)
    others_only = set().union(*(objects[o.instance_id] for o in others)) - objects[task.instance_id]
    leaked_elsewhere = secrets[task.instance_id] & others_only
    assert leaked_elsewhere  # the other tasks' trees do hold this task's fix ...
    with make_sandbox(tree, "namespace") as box:
        listing = box.exec(["git", "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"])
        assert listing.exit_code == 0, listing.stderr
        seen = set(listing.stdout.split())
        assert seen and not seen & others_only  # ... and none of it is in this task's sandbox
        assert not seen & secrets[task.instance_id]
        for blob in leaked_elsewhere:
            assert box.exec(["git", "cat-file", "-e", blob]).exit_code != 0
        # Nor is the shared store within reach: the task set's file, or the bundle's unpacked copy.
        for store in [task.repo_path, *map(str, (tmp_path / "cache").glob("bundles/*.git"))]:
            assert box.exec(["ls", store]).exit_code != 0
            assert box.exec(["git", "fetch", store, others[0].base_commit]).exit_code != 0


@pytest.mark.slow
def test_a_bundle_ships_to_a_ray_node_and_builds_the_tasks_there(synthesised, tmp_path, monkeypatch):
    """What a node without the driver's files sees: the bundle file alone rebuilds every task."""
    import shutil

    from deepgym_envs._ray import localise, pack_repos
    from deepgym_envs.trees import pristine_tree

    copy = tmp_path / "set"
    shutil.copytree(synthesised["bundle"], copy)
    tasks = load_tasks(copy)
    bundles = pack_repos(tasks)
    assert len(bundles) == 1 and pack_repos(tasks) == bundles  # same content, same digest
    shutil.rmtree(copy)
    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "node-cache"))
    remote = localise(tasks, bundles)
    assert all(t.repo_path.startswith(str(tmp_path / "node-cache")) and t.repo_path.endswith(".bundle")
               for t in remote)
    tree = pristine_tree(remote[0])
    head = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(tree), "rev-parse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert head == remote[0].base_commit


@pytest.mark.slow
def test_a_split_of_a_bundled_set_elsewhere_carries_the_bundle(synthesised, tmp_path, monkeypatch):
    from deepgym_envs.taskset import Split, write_split
    from deepgym_envs.trees import pristine_tree

    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    tasks = load_tasks(synthesised["bundle"])
    train, evaluation = write_split(Split(tasks, [], []), tmp_path / "split")  # one project: all of it to train
    moved = load_tasks(train)
    assert len(moved) == len(tasks) and not load_tasks(evaluation)
    assert {Path(t.repo_path).parent for t in moved} == {tmp_path / "split" / "repos"}
    assert Path(moved[0].repo_path).is_file()
    assert (pristine_tree(moved[0]) / "src" / "tinylib" / "ops.py").is_file()
