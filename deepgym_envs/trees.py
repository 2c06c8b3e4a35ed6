"""Pristine trees: each task's base state, built once per machine and shared by every sandbox.

A pristine tree is a git repository whose single commit is the task's base state. Sandboxes
mount it read-only as the lower layer of a copy-on-write view, so starting or resetting an
episode never copies the repository. The tree's own ``.git`` is the reference that diffs and
grading compare against; the agent only ever sees its copy-on-write view of it.

Trees live under ``$DEEPGYM_CACHE`` (default ``~/.cache/deepgym_envs``) in a directory named by
the task id and a fingerprint of everything that shapes the tree, and are built atomically, so
concurrent processes building the same tree is safe.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

import git

from deepgym_envs.errors import InfrastructureError, TaskFormatError
from deepgym_envs.tasks import Task

#: Fixed identity and dates make the base commit reproducible.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "deepgym", "GIT_AUTHOR_EMAIL": "deepgym@localhost",
    "GIT_COMMITTER_NAME": "deepgym", "GIT_COMMITTER_EMAIL": "deepgym@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}
_IGNORED_WHEN_COPYING = shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".pytest_cache", ".benchmarks")


def cache_root() -> Path:
    """Where pristine trees are kept."""
    return Path(os.environ.get("DEEPGYM_CACHE", Path.home() / ".cache" / "deepgym_envs"))


def pristine_tree(task: Task) -> Path:
    """The task's base state on disk, building it on first use. Never modify what it returns.

    A row without a local repository takes it from its container image (docker backend).
    """
    if not task.repo_path:
        from deepgym_envs.sandbox.docker_tasks import image_task_tree

        tree = image_task_tree(task, cache_root())
        if tree is not None:
            return tree
    return _pristine_tree(str(cache_root()), task.instance_id, _fingerprint(task), task.repo_path,
                          task.base_commit, task.patch if task.gold_reverse_base else "")


@lru_cache(maxsize=4096)
def _pristine_tree(cache: str, instance_id: str, key: str, repo_path: str, base_commit: str,
                   reverse_patch: str) -> Path:
    dest = Path(cache) / "trees" / f"{_safe_name(instance_id)}-{key}"
    if (dest / ".git").is_dir():
        return dest
    if not repo_path:
        raise InfrastructureError(
            f"task {instance_id}: no local repository (repo_path) to build from; tasks that only name a "
            "remote repo need an image (the 'image' field, or a SWE-bench instance image on the "
            "Docker engine) and the docker backend")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        _build(Path(repo_path), base_commit, reverse_patch, staging / "tree", instance_id)
        try:
            os.rename(staging / "tree", dest)
        except OSError:
            if not (dest / ".git").is_dir():  # somebody else won the race only if the tree is there
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def _build(src: Path, base_commit: str, reverse_patch: str, out: Path, instance_id: str) -> None:
    if not src.is_dir():
        raise TaskFormatError(str(src), None, "repo_path", f"task {instance_id}: not a directory")
    if base_commit:
        # A real git repository at a given commit: clone it, then drop every ref so that the
        # fix's future history cannot be reached from the agent's view.
        repo = git.Repo.clone_from(str(src), str(out), no_checkout=True)
        repo.git.checkout("--detach", base_commit)
        for ref in repo.refs:
            repo.git.update_ref("-d", ref.path)
        repo.git.reflog("expire", "--expire=now", "--all")
        repo.git.gc("--prune=now", "--quiet")
        return
    shutil.copytree(src, out, ignore=_IGNORED_WHEN_COPYING, symlinks=True)
    repo = git.Repo.init(str(out), initial_branch="main")
    if reverse_patch:
        _git_apply(repo, reverse_patch, reverse=True, what=f"task {instance_id}: gold patch")
    repo.git.add("-A")
    repo.git.commit("-q", "-m", "base", "--no-gpg-sign", env=_GIT_ENV)
    # One pack instead of a loose object per file: the agent's .git copy is then cheap to restore.
    repo.git.repack("-a", "-d", "-q")
    repo.git.prune_packed()


def _git_apply(repo: git.Repo, diff: str, *, reverse: bool, what: str) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False) as fh:
        fh.write(diff)
    try:
        args = ["--whitespace=nowarn", "-R", fh.name] if reverse else ["--whitespace=nowarn", fh.name]
        repo.git.apply(*args)
    except git.GitCommandError as exc:
        raise TaskFormatError(repo.working_dir, None, "patch", f"{what} does not apply: {exc.stderr.strip()}") from None
    finally:
        os.unlink(fh.name)


def tree_fingerprint(task: Task) -> str:
    """What the task's pristine tree is built from, hashed: changes whenever the tree would."""
    return _fingerprint(task)


def _fingerprint(task: Task) -> str:
    h = hashlib.sha256()
    for part in (task.repo_path, task.base_commit, task.patch if task.gold_reverse_base else ""):
        h.update(part.encode() + b"\0")
    if task.repo_path and not task.base_commit:
        h.update(_dir_fingerprint(task.repo_path).encode())
    return h.hexdigest()[:16]


@lru_cache(maxsize=256)
def _dir_fingerprint(path: str) -> str:
    """Path, size and mtime of every file: cheap, and changes whenever the source does."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__", ".pytest_cache", ".benchmarks"))
        for name in sorted(files):
            st = os.lstat(os.path.join(root, name))
            h.update(f"{os.path.relpath(os.path.join(root, name), path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]


def git_env() -> dict[str, str]:
    """Environment for host-side git commands: fixed identity, no user configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ENV, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    return env


def run_git(args: list[str], *, cwd: str | Path = "/", input: str | None = None, check: bool = True,
            env: dict[str, str] | None = None, wrap: list[str] | tuple[str, ...] = ()) -> str:
    """Run git on the host with a fixed environment; argv only, never a shell string.

    ``wrap`` prefixes the argv (for example ``nsenter ...`` to run in a sandbox's mount namespace).
    """
    proc = subprocess.run([*wrap, "git", *args], cwd=cwd, input=input, capture_output=True, text=True,
                          env={**git_env(), **(env or {})}, errors="surrogateescape")
    if check and proc.returncode != 0:
        raise InfrastructureError(f"git {args[0]} failed: {proc.stderr.strip()[:2000]}")
    return proc.stdout
