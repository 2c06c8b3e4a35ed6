"""SWE-bench-format tasks whose repository lives in a container image, not on this host.

A row without ``repo_path`` runs in its ``image``, or in the SWE-bench instance image named after
its id (``sweb.eval.x86_64.<id>:latest``, the harness's local name, or the published
``swebench/sweb.eval.x86_64.<id with __ as _1776_>:latest``). The repository is where those
images keep it, ``/testbed``, with the image's own Python environment (conda env ``testbed``).

Its pristine tree is taken from the image itself: ``/testbed`` is copied out once per image,
checked to be at the row's ``base_commit``, and committed as a single-commit repository (every
file, ignored build products included, so that reset keeps them). Diffs, reset and grading then
work exactly as for local repositories, and the fix's later history, which SWE-bench images carry
in their ``.git``, is out of the agent's reach. A marker next to the tree names the image, so the
docker sandbox runs its commands there.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from deepgym_envs.errors import InfrastructureError, SandboxUnavailable, TaskFormatError
from deepgym_envs.tasks import Task

#: Where SWE-bench images keep the repository.
IMAGE_REPO_PATH = "/testbed"


def swebench_image_names(instance_id: str) -> list[str]:
    """The names SWE-bench gives an instance's image: local build first, then the published one."""
    iid = instance_id.lower()
    docker_safe = iid.replace("__", "_1776_")
    return [f"sweb.eval.x86_64.{iid}:latest", f"sweb.eval.x86_64.{docker_safe}:latest",
            f"swebench/sweb.eval.x86_64.{docker_safe}:latest"]


def task_image(task: Task, client: Any) -> str | None:
    """The image this row runs in: its ``image`` field, else a SWE-bench-named image on the engine."""
    if task.image:
        return task.image
    if task.repo_path:
        return None
    import docker.errors

    for name in swebench_image_names(task.instance_id):
        try:
            client.images.get(name)
            return name
        except docker.errors.ImageNotFound:
            continue
    return None


def image_task_tree(task: Task, cache: Path) -> Path | None:
    """The pristine tree of a row that runs in an image, or None for rows with a local repository.

    None also when no engine runs and the row names no image, so that the caller's own error
    (no repository to build from) is what the user sees.
    """
    if task.repo_path:
        return None
    from deepgym_envs.sandbox.docker import engine, require_image

    try:
        client = engine()
    except SandboxUnavailable:
        if task.image:
            raise
        return None
    image = task_image(task, client)
    if image is None:
        return None
    image_id = require_image(client, image).id
    return _tree(str(cache), task.instance_id, image, image_id, task.base_commit)


@lru_cache(maxsize=1024)
def _tree(cache: str, instance_id: str, image: str, image_id: str, base_commit: str) -> Path:
    from deepgym_envs.trees import _safe_name

    key = hashlib.sha256(f"{image_id}\0{base_commit}".encode()).hexdigest()[:16]
    dest = Path(cache) / "trees" / f"{_safe_name(instance_id)}-image-{key}"
    marker = Path(f"{dest}.image")
    if (dest / ".git").is_dir() and marker.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _copy_out(image, staging, instance_id)
        tree = staging / IMAGE_REPO_PATH.strip("/")
        _check_base(tree, base_commit, image, instance_id)
        _commit_all(tree)
        try:
            os.rename(tree, dest)
        except OSError:
            if not (dest / ".git").is_dir():
                raise
        marker.write_text(image + "\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _copy_out(image: str, into: Path, instance_id: str) -> None:
    """Stream the image's repository directory into ``into`` (from a created, never started, container)."""
    from deepgym_envs.sandbox.docker import engine, owner_labels

    client = engine()
    container = client.containers.create(image, ["true"], labels=owner_labels(), network_mode="none",
                                         entrypoint=[])
    try:
        try:
            stream, _ = container.get_archive(IMAGE_REPO_PATH)
        except Exception as exc:
            raise InfrastructureError(f"task {instance_id}: image {image} has no {IMAGE_REPO_PATH} ({exc})") from None
        with _ChunkReader(stream) as raw, tarfile.open(fileobj=raw, mode="r|") as tar:
            tar.extractall(into, filter="tar")
    finally:
        container.remove(force=True, v=True)


class _ChunkReader(io.RawIOBase):
    """A file object over the SDK's iterator of byte chunks, so tarfile can stream it."""

    def __init__(self, chunks: Any) -> None:
        self._chunks = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _check_base(tree: Path, base_commit: str, image: str, instance_id: str) -> None:
    from deepgym_envs.trees import run_git

    if not (tree / ".git").exists():
        if base_commit:
            raise TaskFormatError(image, None, "base_commit",
                                  f"task {instance_id}: {IMAGE_REPO_PATH} in the image is not a git repository")
        return
    head = run_git(["-C", str(tree), "rev-parse", "HEAD"], check=False).strip()
    if base_commit and not head.startswith(base_commit) and not base_commit.startswith(head or "-"):
        raise TaskFormatError(image, None, "base_commit",
                              f"task {instance_id}: the image's {IMAGE_REPO_PATH} is at {head[:12] or 'no commit'}, "
                              f"not at the row's base_commit {base_commit[:12]}")


def _commit_all(tree: Path) -> None:
    """Replace the image's history with one commit of exactly what the image holds."""
    import git

    from deepgym_envs.trees import _GIT_ENV, seal_object_store

    shutil.rmtree(tree / ".git", ignore_errors=True)
    repo = git.Repo.init(str(tree), initial_branch="main")
    repo.git.add("-A", "-f")
    repo.git.commit("-q", "-m", "base", "--no-gpg-sign", "--allow-empty", env=_GIT_ENV)
    seal_object_store(tree)
