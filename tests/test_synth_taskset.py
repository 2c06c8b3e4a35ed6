"""The committed synthesised task set works from a fresh checkout, not just from the tree that wrote it."""

from __future__ import annotations

import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from deepgym_envs.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def _committed_copy(dest: Path) -> Path:
    """tasks/synth exactly as git holds it (empty directories and untracked files do not travel)."""
    try:
        blob = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(ROOT), "archive", "--format=tar", "HEAD",
                               "tasks/synth"],
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout with tasks/synth committed: {exc}")
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        # Our own archive; the filter only where this Python has it (3.11.4+, 3.10.12+).
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return dest / "tasks" / "synth"


def test_every_synthesised_repository_builds_task_trees_from_a_fresh_checkout(tmp_path, monkeypatch):
    from deepgym_envs.trees import pristine_tree

    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "cache"))
    tasks = load_tasks(_committed_copy(tmp_path / "checkout"))
    assert len(tasks) >= 50
    first_per_repo = {t.repo_path: t for t in reversed(tasks)}
    assert len(first_per_repo) >= 3
    for task in first_per_repo.values():
        tree = pristine_tree(task)
        head = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(tree), "rev-parse", "HEAD"],
                              capture_output=True, text=True)
        assert head.returncode == 0, f"{task.instance_id}: {head.stderr}"
        assert any(tree.glob("**/*.py")), f"{task.instance_id}: the tree has no Python code"


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
