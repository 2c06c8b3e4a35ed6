"""Trees copied out of a row's image: only files, directories and in-tree links reach the host.

A row's ``image`` is a stranger's: its ``/testbed`` can hold a ``.git`` that is a link to a git
directory of the attacker's (whose ``core.fsmonitor`` and hooks ran on the host when the tree was
committed), device nodes and FIFOs (recreated in the host's cache, read by the host), links out of
the tree, and files far larger than their layer. Each image is built here, offline, from the
project's own base image. These skip without an engine and image, except under
``DEEPGYM_REQUIRE_DOCKER=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import GOLD_PATCH, TEST_PATCH, TOY_FILES, require_docker
from deepgym_envs.tasks import task_from_row
from deepgym_envs.trees import pristine_tree

pytestmark = pytest.mark.docker


def _engine():
    from deepgym_envs.docker_engine import engine

    return engine()


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _build(ctx: Path, tag: str, run: str) -> str:
    from deepgym_envs.docker_engine import default_image

    (ctx / "Dockerfile").write_text(f"FROM {default_image()}\nUSER root\nCOPY testbed /testbed\nRUN {run}\n")
    _engine().images.build(path=str(ctx), tag=tag, rm=True, pull=False, network_mode="none")
    return tag


@pytest.fixture(scope="module")
def marker(tmp_path_factory) -> Path:
    """A host path the attacker's git directory tries to write (it must stay absent)."""
    return tmp_path_factory.mktemp("host") / "ran-on-the-host"


@pytest.fixture(scope="module")
def hostile_image(tmp_path_factory, marker):
    """``/testbed`` at the toy task's base state, plus everything a tree copied out must not carry."""
    require_docker()
    ctx = tmp_path_factory.mktemp("hostile-image")
    testbed = ctx / "testbed"
    for rel, text in TOY_FILES.items():
        (testbed / rel).parent.mkdir(parents=True, exist_ok=True)
        (testbed / rel).write_text(text)
    subprocess.run(["git", "-C", str(testbed), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(testbed), "apply", "-R"], input=GOLD_PATCH, text=True, check=True)
    # The attacker's git directory, inside the tree; /testbed/.git is a link to it.
    evil = testbed / ".hidden" / "evil.git"
    evil.parent.mkdir()
    os.rename(testbed / ".git", evil)
    _git(evil, "--git-dir", str(evil), "config", "core.fsmonitor", f"echo fsmonitor >> {marker}; true")
    for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction", "post-index-change"):
        (evil / "hooks" / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (evil / "hooks" / hook).chmod(0o755)
    (testbed / ".git").symlink_to(".hidden/evil.git")
    # The nodes and links only a build step can make (COPY would not carry them).
    run = " && ".join([
        "mknod /testbed/zero c 1 5", "mkfifo /testbed/pipe",
        "ln -s /etc/shadow /testbed/shadow", "ln -s ../../etc/passwd /testbed/src/passwd",
        "mkdir /testbed/d", "ln -s .. /testbed/d/up", "ln -s d/up/.. /testbed/chain",
        "ln -s src/calc /testbed/docs", "ln /testbed/src/calc/ops.py /testbed/ops_hardlink.py",
    ])
    name = _build(ctx, f"deepgym-test/hostile-testbed-{os.getpid()}:latest", run)
    yield name
    _engine().images.remove(name, force=True)


@pytest.fixture
def hostile_task(hostile_image):
    return task_from_row({"instance_id": "evil__calc-1", "repo": "evil/calc", "image": hostile_image,
                          "base_commit": "", "problem_statement": "clamp(50, 0, 10) returns 50; expected 10.",
                          "patch": GOLD_PATCH, "test_patch": TEST_PATCH,
                          "FAIL_TO_PASS": ["tests/test_ops.py::test_clamp_above"],
                          "PASS_TO_PASS": ["tests/test_ops.py::test_clamp_inside", "tests/test_ops.py::test_mean"]})


def test_an_images_git_link_never_runs_on_the_host(hostile_task, marker):
    from deepgym_envs import run_batch

    tree = pristine_tree(hostile_task)
    assert not marker.exists(), marker.read_text()
    gitdir = tree / ".git"
    assert gitdir.is_dir() and not gitdir.is_symlink()
    config = (gitdir / "config").read_text()
    assert "fsmonitor" not in config and "hooksPath" not in config
    assert not (gitdir / "hooks").exists() or not any((gitdir / "hooks").iterdir())
    # The task works (graded in its image) and nothing the attacker's git directory holds ran.
    gold, empty = run_batch(hostile_task, [hostile_task.patch, ""], workers=1, backend="docker")
    assert gold.status == "resolved", gold.reason
    assert empty.status == "unresolved"
    assert not marker.exists(), marker.read_text()


def test_devices_fifos_and_escaping_links_are_not_recreated(hostile_task):
    tree = pristine_tree(hostile_task)
    for gone in ("zero", "pipe", "shadow", "src/passwd", "chain"):
        assert not os.path.lexists(tree / gone), gone
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            mode = os.lstat(os.path.join(root, name)).st_mode
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode), os.path.join(root, name)
    assert os.readlink(tree / "docs") == "src/calc" and os.readlink(tree / "d" / "up") == ".."
    # The image's hard link is a file of its own: same bytes, no inode shared with anything.
    copy = os.lstat(tree / "ops_hardlink.py")
    assert stat.S_ISREG(copy.st_mode) and copy.st_nlink == 1
    assert (tree / "ops_hardlink.py").read_bytes() == (tree / "src" / "calc" / "ops.py").read_bytes()


@pytest.fixture(scope="module")
def sparse_image(tmp_path_factory):
    """A small repository with a 64 MiB sparse file (a few bytes in the layer, 64 MiB once copied)."""
    require_docker()
    ctx = tmp_path_factory.mktemp("sparse-image")
    for rel, text in TOY_FILES.items():
        (ctx / "testbed" / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / "testbed" / rel).write_text(text)
    name = _build(ctx, f"deepgym-test/sparse-testbed-{os.getpid()}:latest", "truncate -s 64M /testbed/huge.bin")
    yield name
    _engine().images.remove(name, force=True)


@pytest.mark.parametrize("cap", ["DEEPGYM_MAX_TREE_BYTES", "DEEPGYM_MAX_EXPORT_BYTES"])
def test_a_sparse_file_over_the_caps_is_refused(sparse_image, monkeypatch, cap):
    from deepgym_envs.untrusted_tree import TreeTooLarge

    task = task_from_row({"instance_id": f"sparse__calc-{cap[12:16].lower()}", "image": sparse_image,
                          "problem_statement": "-", "FAIL_TO_PASS": ["tests/test_ops.py::test_mean"]})
    monkeypatch.setenv(cap, "16M")
    with pytest.raises(TreeTooLarge) as err:
        pristine_tree(task)
    assert cap in str(err.value) and task.instance_id in str(err.value) and err.value.field == "image"
    monkeypatch.setenv(cap, "0")  # off: the user trusts this image
    assert (pristine_tree(task) / "huge.bin").stat().st_size == 64 << 20
