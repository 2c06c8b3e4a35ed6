"""The sandbox protocol, its result and limit types, and the pieces every backend shares.

A backend only has to say how to start a command (``_argv``) and where its workspace can be read
on the host (``host_root``); running the process with a deadline, an output cap and a
process-tree kill, host-side file access with path checks, and diffs are written once, here.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import selectors
import shutil
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence, TypeVar, runtime_checkable

from deepgym_envs.defaults import REPORT_BYTES
from deepgym_envs.errors import ChangeTooLarge, GitError, SandboxError, ToolError
from deepgym_envs.gitrepo import OutputLimit, run_git
from deepgym_envs.sandbox import identity
from deepgym_envs.sandbox.head_entries import stage_head_entries

#: Where the repository appears inside every sandbox (SWE-bench images use the same path).
WORKDIR = "/testbed"
#: Build artefacts that never belong in a diff.
DIFF_EXCLUDES = ("__pycache__/", "*.pyc", ".pytest_cache/", "*.egg-info/")


@dataclass(frozen=True)
class ExecResult:
    """What a command did. ``exit_code`` is -9 (or another negative signal) when it was killed."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    duration: float = 0.0
    truncated: bool = False
    """Output went past the cap and the rest was dropped."""
    report: str | None = None
    """What the command wrote to its private report pipe (``exec(..., report=True)``)."""

    @property
    def output(self) -> str:
        """stdout and stderr together, as a terminal would show them (roughly)."""
        return self.stdout + (("\n" if self.stdout and not self.stdout.endswith("\n") else "") + self.stderr if self.stderr else "")


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits, applied on every backend. 0 means off."""

    timeout: float = 120.0
    """Default wall-clock seconds for one command; the whole process tree is killed after it."""
    output_bytes: int = 256 * 1024
    """Bytes kept of each of stdout and stderr; the rest is drained and dropped."""
    memory_bytes: int = 4 << 30
    """Address-space cap per process (RLIMIT_AS)."""
    max_processes: int = 512
    """Processes the sandbox may have at once, beyond what this user already runs."""
    disk_bytes: int = 1 << 30
    """Bytes the workspace's copy-on-write layer (and /tmp) may hold; also the largest file."""
    cpus: float = 0.0
    """CPUs the sandbox may use (docker backend: the container's CPU quota)."""
    change_bytes: int = 16 << 20
    """Bytes the agent's change may hold (files it added or modified, at their size, that git would
    stage); its diff may hold twice that. The host diffs and grades the change: past this it is
    the agent's outcome (:class:`~deepgym_envs.errors.ChangeTooLarge`), before git reads a byte."""
    change_files: int = 10_000
    """Files the agent's change may add or modify (that git would stage)."""


@dataclass(frozen=True)
class DirEntry:
    name: str
    kind: str  # "file", "dir", "link", "other"
    size: int


@runtime_checkable
class Sandbox(Protocol):
    """An isolated view of one repository. Every backend passes the same conformance tests.

    What only some backends offer is a capability of its own, checked with ``isinstance``:
    :class:`HostPaths`, :class:`Renewable`, :class:`HostsResidents`.
    """

    workdir: str
    """Where the repository appears to commands."""
    support_dir: str
    """Where deepgym's own helper files appear to commands, read-only (testrun's runner among them)."""

    def exec(self, cmd: list[str] | str, timeout: float | None = None, *, env: dict[str, str] | None = None,
             cwd: str | None = None, report: bool = False) -> ExecResult:
        """Run a command (argv list, or a string for ``bash -c``) in the workspace.

        With ``report=True`` the command gets a private pipe (its descriptor number in
        ``$DEEPGYM_REPORT_FD``) whose contents come back as ``ExecResult.report``.
        """

    def apply_patch(self, diff: str) -> None:
        """Apply a git diff to the workspace; ToolError if it does not apply."""

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def list_dir(self, path: str = ".") -> list[DirEntry]: ...

    def exists(self, path: str) -> bool: ...

    def remove(self, path: str) -> None: ...

    def diff(self) -> str:
        """The agent's change against the pristine tree, as a git unified diff (binary-safe)."""

    def changed_files(self) -> list[str]:
        """Every path that differs from the pristine tree (``.gitignore`` disregarded)."""

    def reset(self) -> None:
        """Back to the pristine tree (without copying the repository)."""

    def close(self) -> None:
        """Release everything. Idempotent."""

    def __enter__(self) -> "Sandbox": ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class HostPaths(Protocol):
    """A sandbox whose workspace this process can read by host path (every backend here)."""

    def host_root(self) -> str:
        """The workspace's root as the host sees it."""

    def resolve(self, path: str, *, follow_last: bool = True) -> str:
        """The host path of a workspace path; ToolError for anything that leads outside the workspace."""


@runtime_checkable
class Renewable(Protocol):
    """A sandbox that goes back to its pristine tree in place, its processes kept (pooled grading views)."""

    def renew(self) -> None:
        """A fresh workspace, ``/tmp`` emptied, nothing of the last run left; SandboxError if not clean."""


class Resident(Protocol):
    """A long-lived helper process a sandbox keeps for its user (testrun's warm test server)."""

    @property
    def started(self) -> bool:
        """It was started (and not stopped since)."""

    @property
    def ready(self) -> bool:
        """It said it is ready: a renewed view may keep it (unless :attr:`bound_to_view`)."""

    ahead: bool
    """Worth starting in the next reset's view before that reset (small, and wanted at once after
    one: the command server); a large one (the warm test server) is started again by the reset."""

    bound_to_view: bool
    """Its confinement names the workspace mount it started on (Landlock rules hold mounts, not
    paths: the warm test server's): ``renew()``'s new mount would be out of its reach, so a
    renewal restarts it over the new one instead of keeping it."""

    def start(self, into: object | None = None) -> None:
        """Start it, without waiting for it to be ready. ``into``: the next reset's view, handed
        over by the sandbox (:meth:`HostsResidents.spawn`), instead of the current one."""

    def stop(self, wait: bool = True) -> None:
        """Kill it and everything it runs (``wait=False``: leave reaping it to a later call)."""

    def leftovers(self) -> list[int]:
        """Host pids of live processes it started that are not itself (what a run left behind)."""


_R = TypeVar("_R", bound=Resident)


@runtime_checkable
class HostsResidents(Protocol):
    """A sandbox that hosts resident helper processes (namespace): each started as one of its
    commands is, in a PID namespace of its own, stopped by ``reset()`` (and started again over the
    new view if it was running, or replaced by one started there ahead of it) and ``close()``;
    ``renew()`` keeps one that is ready (restarts one bound to the view) and checks that none left
    a process behind."""

    limits: SandboxLimits
    warm_tests: bool
    """Whether this sandbox's user asked for warm helpers (:attr:`SandboxSpec.warm_tests`)."""

    def spawn(self, cmd: list[str], env: dict[str, str], cwd: str, pass_fds: Sequence[int],
              into: object | None = None) -> subprocess.Popen:
        """Start ``cmd`` inside the sandbox, detached: its own session, no output, the command limits,
        and no parent-death signal (it would fire when the calling *thread* ends); ``pass_fds``
        are inherited. The caller owns the process (:meth:`Resident.stop` kills its group).
        ``into``: what the sandbox passed to :meth:`Resident.start`: the next reset's view."""

    def resident(self, key: str, make: Callable[[], _R] | None = None) -> _R | None:
        """The resident kept under ``key``, made by ``make()`` at first use (None without ``make``)."""


_HostView = TypeVar("_HostView", bound="HostViewSandbox")


class HostViewSandbox:
    """Shared implementation for backends whose workspace is reachable as a host path."""

    workdir = WORKDIR
    support_dir: str

    def __init__(self, pristine: Path, limits: SandboxLimits) -> None:
        self.pristine = Path(pristine)
        self.limits = limits
        self._closed = False
        self._cgroup = None  # a backend may set a PidsCgroup that every command joins

    # -- what a backend provides ---------------------------------------------------------------
    def host_root(self) -> str:
        """The workspace's root as the host sees it."""
        raise NotImplementedError

    def _argv(self, cmd: list[str], env: dict[str, str], cwd: str, fds: list[int] | None = None) -> list[str]:
        """The host argv that runs ``cmd`` inside the sandbox (``fds``: from :meth:`_command_fds`;
        a file descriptor the argv names is appended to it, and the caller passes and closes it)."""
        raise NotImplementedError

    def _git_view(self) -> tuple[list[str], str]:
        """(argv prefix, workspace root) for running host git over the workspace."""
        return [], self.host_root()

    def _changed_paths(self) -> list[str] | None:
        """Paths that may differ from pristine, or None for "look at everything"."""
        return None

    def _change_root(self) -> str:
        """A host directory where each path :meth:`_changed_paths` names has the agent's size."""
        return self.host_root()

    def _pristine_git_dir(self) -> str:
        """The pristine repository's ``.git`` as the programs of :meth:`_git_view` see it."""
        return str(self.pristine / ".git")

    def _scratch_dir(self) -> str | None:
        """Where those programs may write a temporary index (None: the host's temp directory)."""
        return None

    def _command_fds(self) -> list[int]:
        """Descriptors one command inherits (opened afresh per command, closed once it started)."""
        return []

    def _host_writes(self) -> contextlib.AbstractContextManager:
        """Context for host-side writes into the workspace (the namespace backend writes as the
        sandbox uid when it runs as root, so sandboxed code owns what the tools wrote)."""
        return contextlib.nullcontext()

    # -- commands ------------------------------------------------------------------------------
    def exec(self, cmd: list[str] | str, timeout: float | None = None, *, env: dict[str, str] | None = None,
             cwd: str | None = None, report: bool = False) -> ExecResult:
        self._check_open()
        argv = command_argv(cmd)
        full_env = command_env(env)
        inner_cwd = cwd or self.workdir
        baseline = user_process_baseline()  # counted here, in the parent: the child only calls setrlimit
        pipe = report_channel() if report else None
        if pipe:
            full_env["DEEPGYM_REPORT_FD"] = str(pipe[1])
        fds = self._command_fds()
        try:
            # Limits set by programs (this process is then not forked), else by the pre-exec hook.
            prefix = limits_argv(self.limits, baseline, self._cgroup, parent_death=True)
            hook = None if prefix is not None else functools.partial(apply_rlimits, self.limits, baseline, self._cgroup)
            return run_process([*(prefix or ()), *self._argv(argv, full_env, inner_cwd, fds)],
                               timeout or self.limits.timeout, self.limits, preexec=hook,
                               report_pipe=pipe, pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)

    def apply_patch(self, diff: str) -> None:
        self._check_open()
        wrap, root = self._git_view()
        deadline = self.limits.timeout or None
        try:
            # --recount: hand- and model-written diffs often carry wrong hunk line counts.
            run_git(["-C", root, "apply", "--whitespace=nowarn", "--recount", "-"], input=diff, wrap=wrap,
                    timeout=deadline)
        except GitError as exc:  # the patch does not apply: git's words, not the sandbox's paths
            raise ToolError(exc.stderr) from None
        except subprocess.TimeoutExpired:  # hunks placed to make git search the file for each: the patch's doing
            raise ChangeTooLarge(f"applying the patch took longer than {deadline:.0f}s; send a diff whose hunks "
                                 "sit where they say") from None

    # -- files ---------------------------------------------------------------------------------
    def resolve(self, path: str, *, follow_last: bool = True) -> str:
        """The host path of a workspace path; refuses anything that leads outside the workspace."""
        return resolve_in_root(self.host_root(), path, self.workdir, follow_last=follow_last)

    def read_file(self, path: str) -> bytes:
        self._check_open()
        host = self.resolve(path)
        try:
            with open_regular(host, os.O_RDONLY, path) as fh:
                return read_at_most(fh, self.limits.disk_bytes)
        except FileNotFoundError:
            raise ToolError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise ToolError(f"{path}: is a directory") from None
        except OSError as exc:
            # What the path itself is, all of it the agent's doing: a socket it bound (ENXIO), a file
            # it made unreadable (EACCES, as an ordinary user). Anything else is the host's.
            if exc.errno in _PATH_ERRNOS:
                raise ToolError(f"{path}: {os.strerror(exc.errno)}") from None
            raise

    def write_file(self, path: str, data: bytes) -> None:
        self._check_open()
        if self.limits.disk_bytes and len(data) > self.limits.disk_bytes:
            raise ToolError(f"{path}: {len(data)} bytes is over the sandbox's disk limit")
        host = self.resolve(path)
        if os.path.isdir(host):
            raise ToolError(f"{path}: is a directory")
        try:
            with self._host_writes():
                os.makedirs(os.path.dirname(host), exist_ok=True)
                with open_regular(host, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, path) as fh:
                    fh.write(data)
        except ToolError:
            raise
        except OSError as exc:
            raise ToolError(f"{path}: cannot write: {exc.strerror}") from None

    def exists(self, path: str) -> bool:
        self._check_open()
        return os.path.lexists(self.resolve(path, follow_last=False))

    def remove(self, path: str) -> None:
        self._check_open()
        host = self.resolve(path, follow_last=False)
        with self._host_writes():
            try:
                os.unlink(host)
            except (FileNotFoundError, NotADirectoryError):  # gone already, or its parent is a file now
                pass
            except IsADirectoryError:
                rmtree(host)

    def list_dir(self, path: str = ".") -> list[DirEntry]:
        self._check_open()
        host = self.resolve(path)
        try:
            names = sorted(os.listdir(host))
        except FileNotFoundError:
            raise ToolError(f"{path}: no such directory") from None
        except NotADirectoryError:
            raise ToolError(f"{path}: not a directory") from None
        except PermissionError:  # a directory the agent made unreadable (as an ordinary user)
            raise ToolError(f"{path}: permission denied") from None
        out = []
        for name in names:
            st = os.lstat(os.path.join(host, name))
            kind = ("link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode)
                    else "file" if stat.S_ISREG(st.st_mode) else "other")
            out.append(DirEntry(name, kind, st.st_size))
        return out

    # -- diff ----------------------------------------------------------------------------------
    def diff(self) -> str:
        """Stage the workspace into a throw-away index of the pristine repository, diff against HEAD.

        The pristine ``.git`` lives outside the sandbox, so nothing the agent does to its own
        copy of ``.git`` (or to HEAD) changes what counts as its change. The change is measured
        first and its diff read within bounds (``SandboxLimits.change_bytes`` / ``change_files`` and
        the command timeout): past one, :class:`ChangeTooLarge`.
        """
        self._check_open()
        wrap, root = self._git_view()
        changed = self._changed_paths()
        sizes = change_sizes(self._change_root(), changed)
        return workspace_diff(self._pristine_git_dir(), root, changed, wrap, scratch=self._scratch_dir(),
                              bounds=ChangeBounds.of(self.limits, sizes))

    def changed_files(self) -> list[str]:
        """Every path that differs from the pristine tree, ``.gitignore`` disregarded (exact names)."""
        self._check_open()
        wrap, root = self._git_view()
        out = workspace_diff(self._pristine_git_dir(), root, self._changed_paths(), wrap, names_only=True,
                             scratch=self._scratch_dir())
        return [p for p in out.split("\0") if p]

    # -- lifecycle -----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("sandbox is closed")

    def __enter__(self: _HostView) -> _HostView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - backends override
        self._closed = True


def command_argv(cmd: list[str] | str) -> list[str]:
    """The argv a sandbox runs: a string goes to ``bash -c``; an empty command, or one with a NUL
    byte (no program can receive it), is the caller's mistake."""
    argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    if not argv:
        raise ToolError("empty command")
    if any("\0" in str(a) for a in argv):
        raise ToolError("the command contains a NUL byte")
    if any(len(str(a).encode("utf-8", "surrogateescape")) >= _MAX_ARG for a in argv):
        # Decided here, not from exec's errno: a PATH search can report another error instead.
        raise ToolError("the command is too long to run (the kernel's limit is 128 KiB per argument); "
                        "write it to a file and run the file")
    return argv


#: Errors of opening a workspace path that say what the agent made of it (a tool error, not a crash).
_PATH_ERRNOS = (errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EACCES, errno.EPERM,
                errno.ENODEV, errno.EOPNOTSUPP)
#: The kernel's limit on one argument (MAX_ARG_STRLEN, 32 pages).
_MAX_ARG = 32 * 4096


def report_channel() -> tuple[int, int]:
    """(host's read end, command's write end) of a private report channel.

    A socket pair, not a pipe: a pipe's write end can be reopened for *reading* through
    ``/proc/self/fd`` by anyone the pipe belongs to (the sandboxed code, when deepgym runs as an
    ordinary user), which would let code under test take report lines off the channel; a socket
    cannot be reopened that way, and what a socket sends only its peer receives.
    """
    import socket

    host, command = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    host.shutdown(socket.SHUT_WR)  # nothing goes the other way
    return host.detach(), command.detach()


def open_regular(host: str, flags: int, shown: str):
    """Open a workspace file host-side, refusing what is not a regular file.

    Never blocks (a FIFO the agent planted would hang the host's tool call) and never follows a
    final symlink (``resolve`` already did, within the workspace).
    """
    fd = os.open(host, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"{shown}: not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb" if flags & os.O_ACCMODE == os.O_RDONLY else "wb")


#: The whole environment of every host program that starts or holds a sandbox (a launcher such as
#: bubblewrap or ``env -i``, a namespace's holder, the user-mode network stack). bubblewrap stays
#: in the sandbox as its PID 1, whose environment anything inside reads in ``/proc/1/environ``:
#: the host's own (an API key the trainer was started with) must never be handed on.
LAUNCHER_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}


def launcher_env() -> dict[str, str]:
    """A fresh copy of :data:`LAUNCHER_ENV` (``subprocess`` may be handed it to keep). Started in
    ``/`` as well: a shell among the launchers exports its directory as ``PWD``."""
    return dict(LAUNCHER_ENV)


@functools.lru_cache(maxsize=None)
def host_tool(name: str) -> str:
    """Where the host's program ``name`` is, found on this process's ``PATH``: a launcher starts
    with :data:`LAUNCHER_ENV`'s, which need not hold it (a bubblewrap in ``~/.local/bin``)."""
    return shutil.which(name) or name


def read_at_most(fh, limit: int) -> bytes:
    """The file's bytes, at most ``limit`` of them (0: no limit). ``fh.read(limit)`` would allocate
    ``limit`` bytes up front: a gigabyte for every small file read under a 1 GiB disk cap."""
    size = os.fstat(fh.fileno()).st_size
    want = min(size + 1, limit) if limit else size + 1
    data = fh.read(want)
    if len(data) < want or (limit and len(data) >= limit):
        return data
    chunks = [data]  # the file grew since fstat: the rest in bounded pieces
    got = len(data)
    while not limit or got < limit:
        chunk = fh.read(min(1 << 20, limit - got) if limit else 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every sandboxed command starts from (it sees nothing of the host's)."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", **(extra or {})}


@dataclass(frozen=True)
class ChangeBounds:
    """What one diff of a workspace may cost the host, and what the change measured."""

    max_bytes: int
    max_files: int
    seconds: float
    sizes: dict[str, int]  # changed regular file -> its size (None from change_sizes: not measured)

    @classmethod
    def of(cls, limits: SandboxLimits, sizes: dict[str, int] | None) -> "ChangeBounds | None":
        if sizes is None:
            return None
        return cls(limits.change_bytes, limits.change_files, limits.timeout or 600.0, sizes)

    def check(self, ignored: Callable[[list[str]], set[str]]) -> None:
        """ChangeTooLarge when what git would stage is past the bounds (``ignored``: which of the
        paths ``.gitignore`` hides, asked only when the raw measure is past them)."""
        sizes = self.sizes
        if self._over(sizes):
            hidden = ignored(sorted(sizes))
            sizes = {path: size for path, size in sizes.items() if path not in hidden}
        if self.max_files and len(sizes) > self.max_files:
            raise ChangeTooLarge(f"the change adds or modifies {len(sizes)} files, more than the "
                                 f"{self.max_files} files a change may hold; remove what is not part of the fix")
        total = sum(sizes.values())
        if self.max_bytes and total > self.max_bytes:
            big = max(sizes, key=sizes.get)
            raise ChangeTooLarge(f"the change holds {total} bytes of files, more than the {self.max_bytes} bytes a "
                                 f"change may hold (the largest: {big}, {sizes[big]} bytes); remove what is not "
                                 "part of the fix")

    def _over(self, sizes: dict[str, int]) -> bool:
        return bool((self.max_files and len(sizes) > self.max_files)
                    or (self.max_bytes and sum(sizes.values()) > self.max_bytes))


def change_sizes(root: str, changed: list[str] | None) -> dict[str, int] | None:
    """The size of every regular file under the ``changed`` paths of ``root`` (a changed directory
    is walked whole), by an explicit stack: a tree nested past Python's recursion limit is walked
    like any other. None when the backend cannot name its changed paths. What git would not stage
    (:data:`DIFF_EXCLUDES`, ``.gitignore``) is set aside by git itself, when the raw measure is past
    the bounds (:meth:`ChangeBounds.check`)."""
    if changed is None:
        return None
    sizes: dict[str, int] = {}
    pending = list(changed)
    while pending:
        rel = pending.pop()
        try:
            st = os.lstat(os.path.join(root, rel))
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            sizes[rel] = st.st_size
        elif stat.S_ISDIR(st.st_mode):
            try:
                pending += [f"{rel}/{name}" for name in os.listdir(os.path.join(root, rel))]
            except OSError:
                continue
    return sizes


def workspace_diff(git_dir: str, root: str, changed: list[str] | None, wrap: list[str] | None = None,
                   names_only: bool = False, scratch: str | None = None, bounds: ChangeBounds | None = None) -> str:
    try:
        return _workspace_diff(git_dir, root, changed, wrap, names_only, scratch, bounds)
    except subprocess.TimeoutExpired:
        raise ChangeTooLarge(f"diffing the change took longer than {bounds.seconds:.0f}s; remove what is not part "
                             "of the fix") from None
    except OutputLimit:
        raise ChangeTooLarge(f"the change's diff is more than {2 * bounds.max_bytes} bytes (deleted files count "
                             "with every line); remove what is not part of the fix") from None


def _workspace_diff(git_dir: str, root: str, changed: list[str] | None, wrap: list[str] | None,
                    names_only: bool, scratch: str | None, bounds: ChangeBounds | None) -> str:
    """A binary-safe git diff of ``root`` against the HEAD of the pristine ``git_dir``.

    ``names_only``: the changed paths instead (NUL-separated, no renames), with files the
    repository's ``.gitignore`` hides included, as grading must see everything. ``scratch``: a
    directory the ``wrap``ped git may write its temporary index in. ``bounds``: the change is
    checked against them before git stages a byte, and the diff is read up to twice their bytes
    and within their seconds (:class:`ChangeTooLarge` past either).
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="deepgym-index-", dir=scratch) as tmp:
        if scratch is not None:
            identity.give(tmp)  # the wrapped git runs as the sandbox uid
        index = os.path.join(tmp, "index")
        excludes = os.path.join(tmp, "exclude")
        Path(excludes).write_text("\n".join((".git", *DIFF_EXCLUDES)) + "\n")
        base = ["--git-dir", git_dir, "--work-tree", root, "-c", f"core.excludesFile={excludes}",
                "-c", "core.quotePath=false", "-c", "core.fileMode=false"]
        base += ["-C", root]
        # Staging writes the workspace's files as objects: into a directory of this diff's own,
        # never the pristine repository's, which every later sandbox of the task can read (the
        # oracle's run would leave the fix there for the next episode's `git cat-file`).
        objects = os.path.join(tmp, "objects")
        os.mkdir(objects)
        if scratch is not None:
            identity.give(objects)
        # Every path git is handed is a name the agent chose, never a pattern: ':(top)junk' is a file.
        kw = {"env": {"GIT_INDEX_FILE": index, "GIT_OBJECT_DIRECTORY": objects, "GIT_LITERAL_PATHSPECS": "1",
                      "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(git_dir, "objects")},
              "wrap": wrap or ()}
        whole = changed is None or len(changed) > _PATHSPECS_MAX
        against = _stage_head(base, kw) if whole else stage_head_entries(base, changed, kw)
        if bounds is not None:
            bounds.check(lambda paths: _ignored(base, paths, kw))
            kw["timeout"] = bounds.seconds
        force = ["-f"] if names_only else []
        if whole:
            # --ignore-errors, unchecked: a name git will not stage ('.git ', an empty embedded
            # repository) is left out of the change, as below, never a failure of the harness.
            run_git(base + ["add", "-A", *force, "--ignore-errors", "--", "."], check=False, **kw)
        elif changed:
            # Literal pathspecs: a file the agent named '*' must not stage everything. On stdin, not
            # in argv (a few hundred thousand files the agent wrote make argv too long for the
            # kernel: an OSError out of every later diff, and so out of env.step).
            run_git(base + ["--literal-pathspecs", "add", "-A", *force, "--ignore-errors",
                            "--pathspec-from-file=-", "--pathspec-file-nul"],
                    input="".join(f"{path}\0" for path in changed), check=False, **kw)
        # '--' after the tree: a file the agent named 'HEAD' would make git refuse it as ambiguous.
        if names_only:
            return run_git(base + ["diff", "--cached", "--name-only", "--no-renames", "-z", against, "--"], **kw)
        if bounds is not None and bounds.max_bytes:
            kw["limit"] = 2 * bounds.max_bytes  # deletions write nothing, yet their lines are the diff's
        return run_git(base + ["diff", "--cached", "--binary", "--no-color", "--no-ext-diff", against, "--"], **kw)


def _stage_head(base: list[str], kw: dict) -> str:
    """Fill the index of ``kw`` with all of HEAD, for a change whose paths are not known (or too
    many to name: see :data:`_PATHSPECS_MAX`); the tree-ish to diff it against. Time in proportion
    to the repository; with the paths known, :func:`stage_head_entries` takes time of the change."""
    run_git(base + ["read-tree", "HEAD"], **kw)
    return "HEAD"


def _ignored(base: list[str], paths: list[str], kw: dict) -> set[str]:
    """Which of ``paths`` the repository's ``.gitignore`` (and :data:`DIFF_EXCLUDES`) hide from a diff.

    check-ignore refuses literal pathspecs (it fails, and so would hide nothing): each name goes as
    ``./name`` instead, which no pathspec magic starts with (``:(top)junk`` is that file, not ``junk``)."""
    env = {k: v for k, v in kw["env"].items() if k != "GIT_LITERAL_PATHSPECS"}
    out = run_git(base + ["check-ignore", "--stdin", "-z"], input="".join(f"./{p}\0" for p in paths),
                  check=False, **{**kw, "env": env})
    return {p[2:] if p.startswith("./") else p for p in out.split("\0") if p}


#: Above this many changed paths the whole workspace is staged instead: git matches every file
#: against every pathspec, so staging N named files costs N² (300,000 files: beyond ten minutes).
_PATHSPECS_MAX = 2000


def task_python_env(env: dict[str, str], prefix: str | None, pythonpath: tuple[str, ...], workdir: str) -> dict[str, str]:
    """A command's environment with a task's Python environment applied (every backend uses this).

    A task environment built by :mod:`deepgym_envs.pyenv` already finds the workspace at
    ``/testbed`` through a ``.pth`` file, after its own packages. ``PYTHONPATH`` (which comes
    *before* them, so files in the workspace could shadow the test runner's imports) is the
    fallback for deepgym's own interpreter and for workspaces elsewhere (the local backend).
    """
    env = dict(env)
    if prefix:
        env["VIRTUAL_ENV"] = prefix
    if pythonpath and not (prefix and workdir == WORKDIR):
        paths = [os.path.normpath(os.path.join(workdir, p)) for p in pythonpath]
        env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.get("PYTHONPATH", "")])])
    return env


#: The longest workspace path a tool takes, in bytes: the kernel's own PATH_MAX. Longer paths
#: cannot name a file anyway, and resolving one costs the host work in proportion to its length.
MAX_PATH_BYTES = 4096


def resolve_in_root(root: str, path: str, workdir: str = WORKDIR, *, follow_last: bool = True) -> str:
    """Map a workspace path to a host path under ``root``, following symlinks as the sandbox would.

    Absolute paths are accepted only under ``workdir``; ``..`` and symlinks that leave the
    workspace (including absolute ones pointing at the host) are refused with a ToolError, as is a
    path over :data:`MAX_PATH_BYTES`. The work is linear in the path and its links' targets.
    """
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path must be a non-empty string")
    if len(path) > MAX_PATH_BYTES or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise ToolError(f"path is too long ({len(path)} characters; the limit is {MAX_PATH_BYTES} bytes)")
    if "\0" in path:
        raise ToolError("path contains a NUL byte")
    # Parts still to walk, last first (popped from the end), and the host path walked so far with
    # each prefix's length: no list is shifted and no path re-joined per part.
    todo = _split(path.strip(), workdir)[::-1]
    current, lengths = root, []
    hops = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not lengths:
                raise ToolError(f"{path}: outside the workspace ({workdir})")
            current = current[:lengths.pop()]
            continue
        candidate = os.path.join(current, part)
        if (todo or follow_last) and os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise ToolError(f"{path}: too many levels of symbolic links")
            target = os.readlink(candidate)
            if target.startswith("/"):
                current, lengths = root, []
                todo += _split(target, workdir, original=path)[::-1]
            else:
                todo += target.split("/")[::-1]
            continue
        if len(candidate) - len(root) > MAX_PATH_BYTES:  # grown by links' targets: nothing could open it
            raise ToolError(f"{path}: too long once its symbolic links are followed")
        lengths.append(len(current))
        current = candidate
    return current


def _split(path: str, workdir: str, original: str | None = None) -> list[str]:
    if path.startswith("/"):
        if path == workdir or path.startswith(workdir + "/"):
            path = path[len(workdir):]
        else:
            raise ToolError(f"{original or path}: outside the workspace ({workdir})")
    return path.split("/")


def apply_rlimits(limits: SandboxLimits, baseline_procs: int = 0, cgroup=None) -> None:
    """Runs in the child before exec: caps inherited by the whole sandboxed process tree."""
    import resource

    if cgroup is not None:
        cgroup.join()

    if limits.memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    if limits.disk_bytes:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.disk_bytes, limits.disk_bytes))
    if limits.max_processes and cgroup is None:
        # RLIMIT_NPROC counts every process of the real user, so leave room for what runs already.
        # With a pids cgroup the cap is per sandbox, and this shared count is left alone: a fork
        # bomb in one sandbox must not make another sandbox's forks fail (its verdict with them).
        n = baseline_procs + limits.max_processes
        resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _default_signals()
    _set_pdeathsig()


def _default_signals() -> None:
    """Every signal back to its default action, as ``env --default-signal`` does (see limits_argv)."""
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass


def limits_argv(limits: SandboxLimits, baseline_procs: int = 0, cgroup=None, *,
                parent_death: bool = True) -> list[str] | None:
    """argv prefix that does what :func:`apply_rlimits` does, with programs instead of a Python
    pre-exec hook: ``sh`` joins the pids cgroup (it writes its own pid, then becomes the rest),
    ``setpriv`` sets the parent-death signal (``parent_death``), ``prlimit`` the limits, and
    ``env --default-signal`` puts every signal back to its default action.

    The last one makes a sandboxed process independent of how the host was started: a run under
    ``nohup ... &`` ignores SIGHUP, SIGINT and SIGQUIT, an ignored signal stays ignored across exec,
    and a hidden test that interrupts itself (``KeyboardInterrupt``) would pass or fail depending on
    the launch. Docker's commands start with default actions too.

    A pre-exec hook forces a full fork of this process, with the interpreter lock held while its
    page tables are copied: tens of milliseconds for a process the size of a trainer, which every
    other thread waits out. Without one the child is started by vfork. None where ``prlimit`` or
    ``setpriv`` is missing, or ``env`` has no ``--default-signal`` (before coreutils 8.31): the hook
    is used then.
    """
    prlimit, setpriv, env = _limit_programs()
    if prlimit is None or env is None or (parent_death and setpriv is None):
        return None
    out = (["sh", "-c", 'echo 0 > "$0" && exec "$@"', os.path.join(cgroup.path, "cgroup.procs")]
           if cgroup is not None else [])
    if parent_death:
        out += [setpriv, "--pdeathsig", "KILL", "--"]
    out += [prlimit]
    if limits.memory_bytes:
        out.append(f"--as={limits.memory_bytes}")
    if limits.disk_bytes:
        out.append(f"--fsize={limits.disk_bytes}")
    if limits.max_processes and cgroup is None:
        out.append(f"--nproc={baseline_procs + limits.max_processes}")
    # env reads leading NAME=VALUE operands as assignments: what follows it is the sandbox's own
    # launcher (nsenter on the namespace backend, `env -i` on local), never a word of the command
    return [*out, "--core=0", "--", env, "--default-signal"]


@functools.lru_cache(maxsize=1)
def _limit_programs() -> tuple[str | None, str | None, str | None]:
    """``prlimit``, ``setpriv`` and an ``env`` that knows ``--default-signal``, looked up once:
    every command asks."""
    env = shutil.which("env")
    if env is not None:
        try:
            if subprocess.run([env, "--default-signal", "true"], capture_output=True, timeout=10).returncode != 0:
                env = None
        except (OSError, subprocess.SubprocessError):
            env = None
    return shutil.which("prlimit"), shutil.which("setpriv"), env


@functools.lru_cache(maxsize=1)
def user_process_baseline() -> int:
    """Processes this user already runs, plus headroom; counted once per Python process."""
    return _count_user_processes() + 256


def _count_user_processes() -> int:
    uid, n = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def _set_pdeathsig() -> None:
    """Kill the child if this Python process dies, so no sandbox outlives its owner."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except OSError:  # pragma: no cover - not Linux
        pass


def run_process(argv: list[str], timeout: float, limits: SandboxLimits, *, preexec=None,
                stdin: bytes | None = None, report_pipe: tuple[int, int] | None = None,
                pass_fds: Sequence[int] = ()) -> ExecResult:
    """Run argv in its own process group with a deadline and an output cap; kill the group on timeout.
    ``argv`` is a sandbox's launcher, which sets the command's environment itself: it starts from
    :data:`LAUNCHER_ENV`, never the host's.

    ``report_pipe`` (read end, write end): the write end is inherited by the command, and what
    arrives on the read end is returned as ``ExecResult.report``.
    """
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=preexec, close_fds=True, env=launcher_env(), cwd="/",
                                pass_fds=(*pass_fds, *((report_pipe[1],) if report_pipe else ())))
    except OSError as exc:
        if report_pipe:
            os.close(report_pipe[0])
            os.close(report_pipe[1])
        if exc.errno == errno.E2BIG:  # the caller's command itself is too long: its mistake, not ours
            raise ToolError("the command is too long to run (the kernel's limit is 128 KiB per argument); "
                            "write it to a file and run the file") from None
        raise SandboxError(f"cannot start {argv[0]}: {exc}") from exc
    report_file = None
    if report_pipe:
        os.close(report_pipe[1])
        report_file = os.fdopen(report_pipe[0], "rb", buffering=0)
    if stdin is not None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass
    cap = limits.output_bytes or (1 << 62)
    fds = [proc.stdout.fileno(), proc.stderr.fileno()]  # type: ignore[union-attr]
    caps = [cap, cap]
    if report_file is not None:
        fds.append(report_file.fileno())
        caps.append(REPORT_BYTES)
    deadline = start + timeout if timeout else None
    texts, truncated, timed_out = drain_pipes(fds, caps, deadline, report=report_file is not None, close=False)
    if timed_out:
        _kill_group(proc)
    try:
        code = proc.wait(timeout=5 if not timed_out else 10)
    except subprocess.TimeoutExpired:  # pipes closed but the process lingers
        _kill_group(proc)
        code = proc.wait()
    _kill_group(proc)  # anything the command left in its group (daemons in a pid ns are gone with it)
    for stream in (proc.stdout, proc.stderr, report_file):
        if stream is not None:
            stream.close()
    out, err = texts[0], texts[1]
    report = texts[2] if report_file is not None else None
    return ExecResult(code, out, err, timed_out, time.monotonic() - start, truncated, report)


def drain_pipes(fds: list[int], caps: list[int], deadline: float | None, *, report: bool = False,
                close: bool = True) -> tuple[list[str], bool, bool]:
    """Read every pipe to EOF (or the deadline), keeping ``caps[i]`` bytes of pipe i.

    Returns (texts, truncated, timed_out). With ``report``, the last pipe is a report channel:
    its overflow is dropped without marking the command's output truncated.
    """
    bufs = {fd: bytearray() for fd in fds}
    cap_of = dict(zip(fds, caps))
    quiet = fds[-1] if report else None
    truncated = timed_out = False
    with selectors.DefaultSelector() as sel:
        for fd in fds:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(remaining):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                buf = bufs[key.fd]
                room = cap_of[key.fd] - len(buf)
                if room > 0:
                    buf += chunk[:room]
                if len(chunk) > room and key.fd != quiet:
                    truncated = True
    if close:
        for fd in fds:
            os.close(fd)
    return [bufs[fd].decode("utf-8", "replace") for fd in fds], truncated, timed_out


def remove_tree(path: str) -> None:
    """Remove a sandbox's temp dir, retrying briefly: a dying process may still hold it for a moment."""
    for _ in range(3):
        try:
            rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def rmtree(path: str, ignore_errors: bool = False) -> None:
    """``shutil.rmtree`` for trees the agent shaped: Python's recurses once per level (before 3.13)
    and gives up on folders nested past its recursion limit, leaving them on the host's disk;
    ``rm`` walks any depth."""
    import shutil

    try:
        shutil.rmtree(path, ignore_errors=ignore_errors)
    except RecursionError:
        done = subprocess.run(["rm", "-rf", "--one-file-system", "--", path], capture_output=True, check=False,
                              env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"})
        if done.returncode and not ignore_errors and os.path.lexists(path):
            raise OSError(f"could not remove {path}: {done.stderr.decode(errors='replace').strip()[:500]}") from None


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
