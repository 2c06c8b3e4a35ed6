"""Host-side git: the fixed environment every git command runs with, and the repository chores
pristine trees from any source share (a fresh repository, a sealed object store, a safe name).

Below trees and sandboxes alike: both run git on the host, neither through the other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from deepgym_envs.errors import GitError

#: Fixed identity and dates make the base commit reproducible.
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "deepgym", "GIT_AUTHOR_EMAIL": "deepgym@localhost",
    "GIT_COMMITTER_NAME": "deepgym", "GIT_COMMITTER_EMAIL": "deepgym@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000",
}


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]


def init_repo(out: Path) -> None:
    # No template: no sample hooks, no description; the config is git's defaults, no remote.
    run_git(["init", "-q", "--template=", "--initial-branch=main", str(out)])


def seal_object_store(tree: Path) -> None:
    """Leave in ``tree/.git`` only what HEAD reaches: one pack, no reflogs, no stray refs or objects.

    The agent's view copies this ``.git``; anything unreachable here (an earlier attempt's
    objects, an upstream fix) would be readable with ``git cat-file --batch-all-objects``.
    """
    gitdir = tree / ".git"
    branch = run_git(["symbolic-ref", "-q", "HEAD"], cwd=tree, check=False).strip()
    for ref in run_git(["for-each-ref", "--format=%(refname)"], cwd=tree).split():
        if ref != branch:
            run_git(["update-ref", "-d", ref], cwd=tree)
    shutil.rmtree(gitdir / "logs", ignore_errors=True)
    for name in ("FETCH_HEAD", "ORIG_HEAD"):
        (gitdir / name).unlink(missing_ok=True)
    # One pack instead of a loose object per file: the agent's .git copy is then cheap to restore.
    run_git(["repack", "-a", "-d", "-q"], cwd=tree)
    run_git(["prune", "--expire=now"], cwd=tree)
    run_git(["prune-packed"], cwd=tree)


def copy_tracked(tree: Path, paths: list[str], dest: Path) -> frozenset[str]:
    """Copy the regular files among ``paths`` that ``tree``'s checkout tracks to the same places
    under ``dest`` (a path the tree lacks is one a patch creates; a link is never followed), so a
    patch can be applied there with the tree, its index and its object store untouched. Returns
    every path the tree tracks."""
    tracked = frozenset(run_git(["ls-files", "-z"], cwd=tree).split("\0")) - {""}
    for path in paths:
        if path in tracked and (tree / path).is_file() and not (tree / path).is_symlink():
            (dest / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tree / path, dest / path)
    return tracked


def git_env() -> dict[str, str]:
    """Environment for host-side git commands: fixed identity, no user configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_ENV, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    # Configuration given in the environment outranks every repository's own config, and reaches
    # the git processes git starts (upload-pack in a source repository): no hook, no fsmonitor
    # command, whatever config a repository carries. Filter and diff drivers named by an in-tree
    # .gitattributes run only when a config defines them, and the only configs read are the git
    # directories the project created (source repositories are only ever fetched from).
    settings = {
        # Run as root, pristine trees belong to the sandbox uid (sandbox.identity): git's check against
        # repositories owned by someone else would refuse our own. Sandboxed code never reaches them.
        "safe.directory": "*",
        "core.hooksPath": os.devnull,
        "core.fsmonitor": "false",
    }
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    # No per-user attributes file either (git would look under $HOME, which the sandbox uid may
    # not read): what decides how files are written is the repository's own.
    env["XDG_CONFIG_HOME"] = "/nonexistent"
    return env


class OutputLimit(Exception):
    """git wrote more than the caller's ``limit`` to stdout; it was stopped there."""


def run_git(args: list[str], *, cwd: str | Path = "/", input: str | None = None, check: bool = True,
            env: dict[str, str] | None = None, wrap: list[str] | tuple[str, ...] = (),
            timeout: float | None = None, limit: int | None = None) -> str:
    """Run git on the host with a fixed environment; argv only, never a shell string.

    ``wrap`` prefixes the argv (for example ``nsenter ...`` to run in a sandbox's mount namespace).
    ``timeout``: git is killed after it (``subprocess.TimeoutExpired``). ``limit``: stdout is read
    as it comes, and git is killed once it wrote more bytes than this (:class:`OutputLimit`).
    """
    argv, full_env = [*wrap, "git", *args], {**git_env(), **(env or {})}
    if limit is not None:
        return _run_git_bounded(argv, args, cwd, input, check, full_env, timeout, limit)
    proc = subprocess.run(argv, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout,
                          env=full_env, errors="surrogateescape")
    if check and proc.returncode != 0:
        stderr = proc.stderr.strip()[:2000]
        raise GitError(f"git {_git_command(args)} in {_git_place(args, cwd)} failed: {stderr}", stderr)
    return proc.stdout


def _run_git_bounded(argv: list[str], args: list[str], cwd: str | Path, input: str | None, check: bool, env: dict[str, str],
                     timeout: float | None, limit: int) -> str:
    """:func:`run_git` with stdout streamed into a buffer that stops at ``limit`` bytes."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err)
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            proc.kill()

        timer = threading.Timer(timeout, expire) if timeout else None
        feeder = threading.Thread(target=_feed, args=(proc.stdin, input), daemon=True) if input is not None else None
        try:
            if timer:
                timer.start()
            if feeder:
                feeder.start()
            out = bytearray()
            while chunk := proc.stdout.read(1 << 16):
                out += chunk
                if len(out) > limit:
                    proc.kill()
                    raise OutputLimit(f"git {_git_command(args)} wrote more than {limit} bytes")
            proc.wait()
        finally:
            if timer:
                timer.cancel()
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            proc.wait()
        if fired.is_set():
            raise subprocess.TimeoutExpired(argv, timeout)
        if check and proc.returncode != 0:
            err.seek(0)
            stderr = err.read(4000).decode("utf-8", "replace").strip()[:2000]
            raise GitError(f"git {_git_command(args)} in {_git_place(args, cwd)} failed: {stderr}", stderr)
    return out.decode("utf-8", "surrogateescape")


def _feed(pipe, text: str) -> None:
    try:
        pipe.write(text.encode("utf-8", "surrogateescape"))
        pipe.close()
    except (BrokenPipeError, OSError):
        pass


def _git_command(args: list[str]) -> str:
    """The subcommand of a git argv (``apply``), past its global options (``-C DIR``, ``-c K=V``)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree") else 1
    return args[i] if i < len(args) else " ".join(args)


def _git_place(args: list[str], cwd: str | Path) -> str:
    for flag in ("-C", "--git-dir", "--work-tree"):
        if flag in args[:-1]:
            return args[args.index(flag) + 1]
    git_dir = next((a.split("=", 1)[1] for a in args if a.startswith("--git-dir=")), None)
    return git_dir or str(cwd)
