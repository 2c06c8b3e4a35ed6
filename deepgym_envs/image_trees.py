"""SWE-bench-format tasks whose repository lives in a container image, not on this host.

A row without ``repo_path`` runs in its ``image``, or in the SWE-bench instance image named after
its id (``sweb.eval.x86_64.<id>:latest``, the harness's local name, or the published
``swebench/sweb.eval.x86_64.<id with __ as _1776_>:latest``). The repository is where those
images keep it, ``/testbed``, with the image's own Python environment (conda env ``testbed``).

Its pristine tree is taken from the image itself: ``/testbed`` is copied out once per image
(regular files, directories and in-tree links only, within size caps: see
:mod:`deepgym_envs.untrusted_tree`), checked to be at the row's ``base_commit`` by parsing the
image's ``.git/HEAD`` and refs (its ``.git`` is never written to the host, nor handed to git),
and committed as a single-commit repository in a git directory the project creates (every file,
ignored build products included, so that reset keeps them). Diffs, reset and grading then
work exactly as for local repositories, and the fix's later history, which SWE-bench images carry
in their ``.git``, is out of the agent's reach. A marker next to the tree names the image, so the
docker sandbox runs its commands there.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from deepgym_envs.docker_engine import engine, owner_labels, require_image
from deepgym_envs.errors import InfrastructureError, SandboxUnavailable, TaskFormatError
from deepgym_envs.gitrepo import init_repo, run_git, safe_name, seal_object_store
from deepgym_envs.tasks import Task
from deepgym_envs.untrusted_tree import CountingReader, Origin, TreeCaps, check_cache_entry, extract_tar

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
    return _tree(str(cache), task.instance_id, image, image_id, task.base_commit, task.source)


#: Bumped whenever the way image trees are copied out changes, so trees copied the old way go unused.
_COPY_VERSION = "2"  # 2: only files, directories and in-tree links; the image's .git never on disk


@lru_cache(maxsize=1024)
def _tree(cache: str, instance_id: str, image: str, image_id: str, base_commit: str, source: str = "") -> Path:
    key = hashlib.sha256(f"{_COPY_VERSION}\0{image_id}\0{base_commit}".encode()).hexdigest()[:16]
    dest = Path(cache) / "trees" / f"{safe_name(instance_id)}-image-{key}"
    marker = Path(f"{dest}.image")
    if (dest / ".git").is_dir() and marker.is_file():
        return dest
    origin = Origin(source or image, "image", instance_id)
    caps = TreeCaps.from_env()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        tree = staging / "tree"
        git_meta = _copy_out(image, tree, origin, caps)
        _check_base(read_head(git_meta), base_commit, image, instance_id)
        _commit_all(tree)
        check_cache_entry(tree, caps, origin)
        try:
            os.rename(tree, dest)
        except OSError:
            if not (dest / ".git").is_dir():
                raise
        marker.write_text(image + "\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _is_git_path(rel: str) -> bool:
    """Any ``.git`` in the image (the repository's, a submodule's): the host never uses one."""
    return ".git" in rel.split("/")


def _is_git_metadata(rel: str) -> bool:
    return rel in (".git/HEAD", ".git/packed-refs") or rel.startswith(".git/refs/")


def _copy_out(image: str, into: Path, origin: Origin, caps: TreeCaps) -> dict[str, bytes]:
    """Stream the image's repository directory into ``into`` (from a created, never started,
    container), under :mod:`deepgym_envs.untrusted_tree`'s rules; returns the bytes of the
    image's ``.git/HEAD`` and refs, read from the stream, never written."""
    client = engine()
    container = client.containers.create(image, ["true"], labels=owner_labels(), network_mode="none",
                                         entrypoint=[])
    try:
        try:
            stream, _ = container.get_archive(IMAGE_REPO_PATH)
        except Exception as exc:
            raise InfrastructureError(f"task {origin.instance_id}: image {image} has no {IMAGE_REPO_PATH} ({exc})") from None
        try:
            reader = CountingReader(stream, caps.export_bytes, origin)
            report, meta = extract_tar(reader, into, caps, origin, skip=_is_git_path, keep=_is_git_metadata)
        finally:
            # Stopped early (a cap): the engine holds the container until its archive is read or
            # the connection drops, so drop it before removing the container.
            stream.close()
        report.warn(origin)
        return meta
    finally:
        container.remove(force=True, v=True)


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def read_head(meta: dict[str, bytes]) -> str:
    """The commit a repository's HEAD names, from the bytes of its ``.git/HEAD``, loose refs and
    ``packed-refs`` (parsed, never handed to git); "" when they do not say."""
    name = "HEAD"
    for _ in range(5):  # HEAD -> refs/heads/x -> ...: a short chain, never a loop
        value = _ref_value(meta, name)
        if value is None:
            return ""
        if value.startswith("ref:"):
            name = value[4:].strip()
            continue
        return value if _SHA.fullmatch(value) else ""
    return ""


def _ref_value(meta: dict[str, bytes], name: str) -> str | None:
    if name != "HEAD" and not name.startswith("refs/") or ".." in name.split("/"):
        return None
    raw = meta.get(f".git/{name}")
    if raw is not None:
        return raw.decode("ascii", "replace").strip()
    for line in meta.get(".git/packed-refs", b"").decode("ascii", "replace").splitlines():
        sha, _, ref = line.strip().partition(" ")
        if ref == name and not line.startswith(("#", "^")):
            return sha
    return None


def _check_base(head: str, base_commit: str, image: str, instance_id: str) -> None:
    if not base_commit:
        return
    if not head:
        raise TaskFormatError(image, None, "base_commit",
                              f"task {instance_id}: {IMAGE_REPO_PATH} in the image is not a git repository "
                              "(no .git directory whose HEAD names a commit)")
    if not head.startswith(base_commit) and not base_commit.startswith(head):
        raise TaskFormatError(image, None, "base_commit",
                              f"task {instance_id}: the image's {IMAGE_REPO_PATH} is at {head[:12]}, "
                              f"not at the row's base_commit {base_commit[:12]}")


def _commit_all(tree: Path) -> None:
    """One commit of exactly what was copied out, in a git directory the project creates."""
    init_repo(tree)
    run_git(["add", "-A", "-f"], cwd=tree)
    run_git(["commit", "-q", "-m", "base", "--no-gpg-sign", "--allow-empty"], cwd=tree)
    seal_object_store(tree)
