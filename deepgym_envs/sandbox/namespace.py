"""The default backend: Linux namespaces, no root needed.

Two layers, because Debian's bubblewrap (0.8) cannot mount overlays itself:

1. A *holder* process per sandbox lives in a new user + mount + network namespace. It mounts a
   size-capped tmpfs and, on it, an overlay of the task's pristine tree (read-only lower layer)
   and an empty upper layer: the agent's copy-on-write workspace. Starting one costs a few
   milliseconds and copies nothing; reset replaces it with a fresh one.
2. Each command enters the holder's namespaces (``nsenter``) and runs under ``bwrap``: a new
   PID namespace (a timeout kills the whole tree), no network, the system bound read-only,
   the workspace at ``/testbed``, ``/tmp`` and ``/dev/shm`` on the size-capped tmpfs, the rest of
   ``/`` and ``/dev`` read-only, rlimits on memory, processes and file size. Host-side file
   access goes through ``/proc/<holder>/root`` and never starts a process.

Least privilege (README, "Security model: the agent is the attacker"): every command runs in a
user namespace of its own as uid 1000 with no capabilities in any set, ``no_new_privs`` and the
seccomp filter of :mod:`.seccomp`. The
holder's namespace maps the invoking user, or, when that is root, the unprivileged uid of
:mod:`.identity`: root is never mapped, so nothing in a sandbox acts as the host's root. As root,
the holder first binds what that uid could not reach (a Python under ``/root``, the pristine
tree) into the sandbox's own directory, read-only, and then drops to it.

Only the system directories and the Python installation are visible inside; the task files
(which hold hidden tests and gold patches), the tree cache and the package are not.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Sequence, TypeVar, cast

from deepgym_envs.errors import SandboxError, SandboxUnavailable
from deepgym_envs.sandbox import identity, netstack, seccomp, staging
from deepgym_envs.sandbox.base import (HostViewSandbox, Resident, SandboxLimits, apply_rlimits, command_env,
                                       host_tool, launcher_env, limits_argv, remove_tree, task_python_env,
                                       user_process_baseline)
from deepgym_envs.sandbox.cgroup import PidsCgroup
from deepgym_envs.sandbox.hidden import (SYSTEM_DIRS, covered, credential_paths, hidden_paths, package_dirs,
                                         tree_packages)
from deepgym_envs.sandbox.support import support_host_dir

_PAGE = 4096

#: The holder: mount the workspace, say so, then wait. Arguments, never interpolation.
_HOLDER_SCRIPT = r"""
set -e
mount -t tmpfs -o "$2,mode=0755" deepgym "$1"
mount --make-shared "$1"  # so renew()'s new overlays show in every bubblewrap view of this sandbox
mkdir "$1/upper" "$1/work" "$1/merged" "$1/tmp" "$1/shm" "$1/empty"
: > "$1/empty-file"  # what a hidden credential file reads as
mount -t overlay overlay -o "lowerdir=$3,upperdir=$1/upper,workdir=$1/work,userxattr" "$1/merged"
mnt=$1
shift 3
for dir in "$@"; do mkdir "$mnt/$dir"; done  # a build step's writable directories, on the capped tmpfs
echo ready
read -r _ || true  # our stdin is a pipe from the owning process: EOF when it dies, for any reason
"""
#: renew(): drop the last renewed layer, mount a fresh one over the workspace, empty /tmp and /dev/shm.
_RENEW_SCRIPT = r"""
set -e
mnt=$1 layer=$2 lower=$3 old=$4
shift 4
if [ -n "$old" ]; then umount "$mnt/merged" || umount -l "$mnt/merged"; rm -rf "$old"; fi
mkdir "$layer" "$layer/upper" "$layer/work"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$layer/upper,workdir=$layer/work,userxattr" "$mnt/merged"
find "$mnt/shm" -mindepth 1 -delete
find "$mnt/tmp" -mindepth 1 -depth "$@" -delete
"""
_R = TypeVar("_R", bound=Resident)
SUPPORT_DIR = "/deepgym"  # where deepgym's own helper files appear (read-only)
#: Holders a sandbox keeps started ahead of its resets: with two, a reset right after a reset
#: still finds one whose workspace is mounted (starting one is six process starts, ~10-20 ms).
SPARE_HOLDERS = 2
#: Seconds after a reset before the spares used up are replaced: the process starts that takes
#: (holding the interpreter lock for milliseconds each, and a core on this 2-core machine for the
#: command server's start) would otherwise land on the agent's first step or the next reset.
SPARE_DELAY = 0.05


def available() -> tuple[bool, str]:
    """Whether this machine can run the namespace backend, and why not."""
    return _probe()


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, "the namespace backend needs Linux"
    missing = [t for t in ("unshare", "nsenter", "bwrap", "setpriv") if shutil.which(t) is None]
    if missing:
        return False, f"missing {', '.join(missing)} (Debian/Ubuntu: apt-get install bubblewrap util-linux)"
    try:
        program = seccomp.program_fd()
    except SandboxUnavailable as exc:
        return False, str(exc)
    # The same shape as a real command: a user namespace inside the holder's, uid 1000, no
    # capabilities, the seccomp filter. As root the outer namespace is entered as the sandbox uid.
    drop = (["setpriv", f"--reuid={identity.service_uid()}", f"--regid={identity.service_uid()}",
             "--clear-groups", "--"] if identity.running_as_root() else [])
    try:
        proc = subprocess.run([*drop, host_tool("unshare"), "--user", "--map-root-user", "--mount", "--net", "--",
                               host_tool("bwrap"), "--unshare-user", "--uid", str(identity.SANDBOX_UID), "--disable-userns",
                               "--cap-drop", "ALL", "--seccomp", str(program), "--ro-bind", "/", "/",
                               "--unshare-all", "--", "true"],
                              capture_output=True, text=True, timeout=30, pass_fds=(program,), env=launcher_env(), cwd="/")
    finally:
        os.close(program)
    if proc.returncode != 0:
        return False, ("this kernel does not let this user create (nested) namespaces "
                       f"({proc.stderr.strip()[:300]}); enable unprivileged user namespaces "
                       "(sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu 24.04+ "
                       "kernel.apparmor_restrict_unprivileged_userns=0)")
    return True, ""


def require_available() -> None:
    ok, why = available()
    if not ok:
        raise SandboxUnavailable(
            f"The 'namespace' sandbox cannot run here: {why}. To run anyway, choose another backend: "
            "gym.make('deepgym/SWE-v0', sandbox='local') or `deepgym eval --sandbox local` "
            "(no isolation: the agent's commands run directly on this machine, as you).")


class NamespaceSandbox(HostViewSandbox):
    """Copy-on-write workspace in a user namespace; commands under bubblewrap."""

    support_dir = SUPPORT_DIR

    def __init__(self, pristine: Path, limits: SandboxLimits | None = None, *, warm_tests: bool = True,
                 python_prefix: str | None = None, pythonpath: tuple[str, ...] | list[str] = (),
                 network: bool = False, writable: Sequence[tuple[str, str]] = (),
                 readonly: Sequence[str | tuple[str, str]] = (), allow_hosts: Sequence[str] = ()) -> None:
        """``warm_tests``: let testrun serve pytest runs from a pre-imported resident server;
        ``python_prefix``: a task's environment (:mod:`deepgym_envs.pyenv`), bound read-only and
        first on ``PATH``; ``pythonpath``: workspace directories put on ``PYTHONPATH``.

        For build steps (:mod:`.build`) only: ``network`` gives outbound network through a user-mode
        stack (:mod:`.netstack`: the public Internet, never the host's services; pip must reach its
        index); ``allow_hosts``: addresses it routes although private (the index's); ``writable``:
        (host directory, path inside) pairs, directories the caller made
        for the step: each is a directory of the size-capped tmpfs, filled at the start with what
        the host directory holds, and writes there stay there (the host directory is never bound:
        a build could fill the host's disk through it) until the caller copies them out from
        :meth:`writable_path` (a reset empties them); ``readonly``: more host directories bound
        read-only, at the same path or as (host, inside)."""
        require_available()
        super().__init__(pristine, limits or SandboxLimits())
        self._python_prefix = os.path.realpath(python_prefix) if python_prefix else None
        self._pythonpath = tuple(pythonpath)
        self._network = network
        self._allow_hosts = tuple(allow_hosts)
        self._net: netstack.UserNet | None = None
        if network:
            netstack.require()
        self._rw_binds = [(os.path.realpath(host), inside) for host, inside in writable]
        extra_ro = tuple((os.path.realpath(p), p) if isinstance(p, str) else (os.path.realpath(p[0]), p[1])
                         for p in readonly)
        lower = str(Path(pristine).resolve())
        if any(c in lower for c in ",:\n"):
            raise SandboxUnavailable(f"pristine tree path {lower!r} has a character overlayfs cannot take")
        self._as_root = identity.running_as_root()
        # The owner's pid in the name: a leak check (or a reaper) can tell whose it is.
        self._tmp = tempfile.mkdtemp(prefix=f"deepgym-ns-{os.getpid()}-")
        self._mnt = os.path.join(self._tmp, "mnt")
        os.mkdir(self._mnt)
        if network:
            netstack.resolv_conf(self._tmp)
        self._host_lower = lower
        # Read-only binds of Python and deepgym's files: (host source, path inside). As root, the
        # holder binds each source under our directory first, since the sandbox uid may not reach it.
        self._ro_binds = [*_python_binds(), *((self._python_prefix, self._python_prefix),) * bool(self._python_prefix),
                          *extra_ro]
        # The host's credentials that a bound directory shows, read once: a fetch step (network)
        # is the one sandbox that uses the pip configuration it is given.
        self._secrets = credential_paths(tuple(dest for src, dest in self._ro_binds if src == dest),
                                         pip=not network, prefixes=(self._python_prefix,) * bool(self._python_prefix))
        if self._as_root:
            # What the sandbox uid cannot reach (a tree or a Python under /root) it finds staged.
            identity.give_tree(lower)
            identity.give(self._tmp, recursive=True)
            for host, _ in self._rw_binds:
                identity.give(host, recursive=True)
            self._lower = staging.stager().stage(lower)
            self._transient: list[str] = []  # staged for this sandbox only: handed back at close
            try:
                self._bind_sources = [self._stage(src, transient=(src, dest) in extra_ro)
                                      for src, dest in self._ro_binds]
                self._rw_sources = [self._stage(host, transient=True) for host, _ in self._rw_binds]
            except BaseException:
                self._unstage()
                raise
        else:
            self._lower = lower
            self._bind_sources = [src for src, _ in self._ro_binds]
            self._rw_sources = [host for host, _ in self._rw_binds]
        self._holder: subprocess.Popen | None = None
        self._spares: list[_Spare] = []  # the next resets' holders, started ahead, the next first
        self._spares_lock = threading.Lock()
        self._filler: threading.Thread | None = None  # starting spares, off the reset's path
        self._closing = threading.Event()  # wakes a filler that waits out SPARE_DELAY
        self._dying: list[subprocess.Popen] = []  # killed holders not yet reaped
        self._layer: str | None = None  # the directory of the layer renew() mounted, if any
        self.warm_tests = warm_tests
        self._residents: dict[str, Resident] = {}
        self._makers: dict[str, Callable[[], Resident]] = {}  # how each resident is made, for the spares'
        self._cgroup = PidsCgroup.create(self.limits.max_processes)
        try:
            self._start_holder()
            self._fill_writable()
        except BaseException:
            self.close()
            raise

    def _stage(self, path: str, *, transient: bool) -> str:
        """Stage ``path`` for the sandbox uid (root only); a build step's own directories are
        staged for this sandbox only and handed back by :meth:`_unstage`."""
        staged = staging.stager().stage(path, transient=transient)
        if transient:
            self._transient.append(path)
        return staged

    def _unstage(self) -> None:
        for path in getattr(self, "_transient", ()):
            staging.stager().unstage(path)
        self._transient = []

    def _fill_writable(self) -> None:
        """Copy what each writable host directory holds onto the tmpfs, inside the holder's
        namespaces: the copy is the sandbox's own, and counts against its disk cap."""
        for i, ((host, _), src) in enumerate(zip(self._rw_binds, self._rw_sources)):
            if not os.listdir(host):
                continue
            proc = subprocess.run([*self._enter(), "cp", "-PR", "--preserve=mode,timestamps,links", "--",
                                   f"{src}/.", f"{self._mnt}/rw-{i}"], capture_output=True, text=True, timeout=600,
                                  env=launcher_env(), cwd="/")
            if proc.returncode != 0:
                raise SandboxError(f"could not copy {host} onto the sandbox's disk (capped at {self.limits.disk_bytes} "
                                   f"bytes): {proc.stderr.strip()[-500:]}")

    def writable_path(self, index: int) -> str:
        """Where the host reads the ``index``-th writable directory while the sandbox is open."""
        return f"/proc/{self._holder_pid()}/root{self._mnt}/rw-{index}"

    def disk_space(self) -> tuple[int, int]:
        """(size, free bytes) of the tmpfs that holds the workspace, ``/tmp`` and the writable directories."""
        st = os.statvfs(f"/proc/{self._holder_pid()}/root{self._mnt}")
        return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize

    # -- holder --------------------------------------------------------------------------------
    def _spawn_holder(self) -> subprocess.Popen:
        """Start a holder without waiting for it to mount the workspace."""
        # Inodes are kernel memory that no other cap counts (empty files cost no blocks): one per
        # page of the cap, as many as files of one page each could fill.
        disk = self.limits.disk_bytes
        size = f"size={disk},nr_inodes={max(disk // _PAGE, 1024)}" if disk else "size=50%"
        # As root the holder starts in the staging namespace as the sandbox uid: root is never
        # mapped into its user namespace.
        argv = [*(staging.stager().enter_as_sandbox_uid() if self._as_root else ()),
                host_tool("unshare"), "--user", "--map-root-user", "--mount", "--net", "--",
                "sh", "-c", _HOLDER_SCRIPT, "deepgym-holder", self._mnt, size, self._lower,
                *(f"rw-{i}" for i in range(len(self._rw_binds)))]
        # Not PR_SET_PDEATHSIG: that fires when the *thread* that started the holder exits,
        # and environments are often created in worker threads.
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, close_fds=True, env=launcher_env(), cwd="/")

    def _start_holder(self, spare: _Spare | None = None) -> None:
        """Make ``spare``'s holder (a new one if None) this sandbox's, once its workspace is mounted."""
        spare = spare or _Spare(self._spawn_holder())
        holder = spare.proc
        if not spare.mounted():
            err = _kill_holder(holder, read_error=True)
            raise SandboxError(f"namespace sandbox did not start: {err.strip()[:500] or 'holder exited'}")
        self._holder = holder
        if self._network:  # before any command runs: its routes are fenced by then
            self._net = netstack.UserNet(holder.pid, self._enter(), self._allow_hosts)

    def _detach_net(self) -> None:
        net, self._net = self._net, None
        if net is not None:
            net.close()

    def _stop_holder(self) -> None:
        self._detach_net()
        holder, self._holder = self._holder, None
        if holder is not None:
            _kill_holder(holder)

    def _reap(self, block: bool) -> None:
        """Collect holders that reset() killed without waiting for the kernel to tear them down."""
        for holder in self._dying:
            if block:
                holder.wait()
            else:
                holder.poll()
        self._dying = [h for h in self._dying if h.returncode is None]

    def _holder_pid(self) -> int:
        self._check_open()
        if self._holder is None or self._holder.poll() is not None:
            raise SandboxError("namespace sandbox died (its holder process is gone)")
        return self._holder.pid

    def host_root(self) -> str:
        return f"/proc/{self._holder_pid()}/root{self._mnt}/merged"

    def _enter(self, holder: int | None = None) -> list[str]:
        """argv prefix that runs a host program inside the holder's namespaces (no bwrap);
        ``holder``: the pid of another holder of this sandbox's (a spare) instead.

        As root it becomes the namespace's root, that is the sandbox uid: what it writes is the
        sandbox's, and it reads nothing that uid could not. An ordinary user stays itself."""
        keep = () if self._as_root else ("--preserve-credentials",)
        return [host_tool("nsenter"), "-t", str(holder or self._holder_pid()), "-U", "-m", "-n", *keep, "--"]

    def _pristine_git_dir(self) -> str:
        return f"{self._lower}/.git"

    def _scratch_dir(self) -> str:
        return self._tmp

    def _command_fds(self) -> list[int]:
        return [seccomp.program_fd()]

    def _host_writes(self):
        return identity.acting_as_sandbox()

    def _git_view(self) -> tuple[list[str], str]:
        # Paths under /proc/<pid>/root do not survive git's realpath(); run git in the namespace.
        return self._enter(), f"{self._mnt}/merged"

    def _change_root(self) -> str:
        return f"/proc/{self._holder_pid()}/root{self._layer or self._mnt}/upper"

    def _changed_paths(self) -> list[str]:
        """What the upper layer holds: files written, whiteouts of deletions, opaque directories.

        Walked by an explicit stack, not os.walk's recursion: the agent nests directories as deep
        as it likes, and a ``RecursionError`` here would escape ``env.step``."""
        upper = self._change_root()
        changed: list[str] = []
        pending = [""]
        while pending:
            rel = pending.pop()
            try:
                entries = list(os.scandir(os.path.join(upper, rel)))
            except OSError:
                continue
            for entry in entries:
                path = f"{rel}/{entry.name}" if rel else entry.name
                if path == ".git":
                    continue
                if not entry.is_dir(follow_symlinks=False):
                    changed.append(path)
                elif _is_opaque(entry.path):
                    changed.append(path)
                else:
                    pending.append(path)
        return changed

    # -- commands ------------------------------------------------------------------------------
    def _argv(self, cmd: list[str], env: dict[str, str], cwd: str, fds: list[int] | None = None,
              holder: int | None = None) -> list[str]:
        """``fds``: what :meth:`_command_fds` opened for this command (the seccomp program); the
        file that holds bubblewrap's arguments is added to it. ``holder``: see :meth:`_enter`.

        bubblewrap stays in the sandbox as its PID 1, so its command line is readable inside:
        it reads its arguments (every host path it binds, the command's environment) from that
        file, and its command line is ``bwrap --args FD -- CMD...``."""
        env = task_python_env(env, self._python_prefix, self._pythonpath, self.workdir)
        env["PATH"] = f"{SUPPORT_DIR}/bin:{_python_bin_dir()}:{env.get('PATH', '/usr/bin:/bin')}"
        if self._python_prefix:  # the task's interpreter wins over deepgym's `python` wrapper
            env["PATH"] = f"{self._python_prefix}/bin:{env['PATH']}"
        binds: list[str] = []
        for src, (_, dest) in zip(self._bind_sources, self._ro_binds):
            binds += ["--ro-bind", src, dest]
        # Whatever of the package, its task files or the tree cache a bind above covers is hidden
        # (and a bind that lies inside what was hidden, a task's environment say, is made again).
        # With an environment of its own, every other Python's installed packages are hidden too,
        # and a bind of one of them is not made again.
        dests = tuple(dest for _, dest in self._ro_binds)
        hidden = hidden_paths(dests, tree_packages(str(self.pristine)), self._python_prefix)
        foreign = package_dirs(dests, self._python_prefix) if self._python_prefix else ()
        for path in hidden:
            binds += ["--ro-bind", f"{self._mnt}/empty", path]
        for src, (_, dest) in zip(self._bind_sources, self._ro_binds):
            if covered(dest, hidden) and not covered(dest, foreign):
                binds += ["--ro-bind", src, dest]
        rebound = [dest for _, dest in self._ro_binds if covered(dest, hidden) and not covered(dest, foreign)]
        for path, is_dir in self._secrets:  # inside what was hidden there is nothing left to hide
            if not covered(path, hidden) or covered(path, rebound):
                binds += ["--ro-bind", f"{self._mnt}/empty" if is_dir else f"{self._mnt}/empty-file", path]
        for i, (_, dest) in enumerate(self._rw_binds):  # last: visible even under a hidden one
            binds += ["--bind", f"{self._mnt}/rw-{i}", dest]
        # /tmp first: a Python installed under /tmp (a CI venv) is then bound on top of it.
        args = ["--unshare-user", "--uid", str(identity.SANDBOX_UID), "--gid", str(identity.SANDBOX_UID),
                "--disable-userns", "--cap-drop", "ALL", *(("--seccomp", str(fds[0])) if fds else ()),
                "--bind", f"{self._mnt}/tmp", "/tmp",
                *_system_binds(), *binds,
                # With network: the holder's namespace (its user-mode stack), whose DNS forwarder this names.
                *(("--ro-bind", f"{self._tmp}/resolv.conf", _resolv_conf_dest())
                  if self._network and _resolv_conf_dest() else ()),
                "--bind", f"{self._mnt}/merged", self.workdir,
                "--dev", "/dev", "--bind", f"{self._mnt}/shm", "/dev/shm", "--proc", "/proc",
                # Nothing else is writable: the tmpfs bubblewrap builds / and /dev on is not capped.
                "--remount-ro", "/dev", "--remount-ro", "/",
                "--unshare-all", *(("--share-net",) if self._network else ()),
                "--die-with-parent", "--new-session", "--hostname", "sandbox",
                "--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return [*self._enter(holder), host_tool("bwrap"), "--args", str(_args_file(args, fds)), "--", *cmd]

    def spawn(self, cmd: list[str], env: dict[str, str], cwd: str, pass_fds: Sequence[int],
              into: object | None = None) -> subprocess.Popen:
        """Start ``cmd`` as a resident: this sandbox's view, limits and cgroup, a PID namespace of its
        own (as every command has), but its own session, no output and no parent-death signal.
        ``into``: a spare holder (what :meth:`reset` passes to a resident it starts ahead), whose
        pristine workspace is then the one it sees; this waits for that workspace to be mounted."""
        self._check_open()
        holder = None
        if into is not None:
            if not isinstance(into, _Spare) or not into.mounted():
                raise SandboxError("the spare holder did not start")
            holder = into.proc.pid
        fds = self._command_fds()
        try:
            # Programs set the limits where they are installed, so this process is not forked (a
            # fork copies it whole with the interpreter lock held, which a reset returning waits
            # out); the pre-exec hook otherwise.
            prefix = limits_argv(self.limits, user_process_baseline(), self._cgroup, parent_death=False)
            hook = None if prefix is not None else functools.partial(_resident_preexec, self.limits,
                                                                      user_process_baseline(), self._cgroup)
            return subprocess.Popen([*(prefix or ()), *self._argv(cmd, command_env(env), cwd, fds, holder)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=launcher_env(), cwd="/",
                                    stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                                    pass_fds=(*pass_fds, *fds), preexec_fn=hook)
        finally:
            for fd in fds:
                os.close(fd)

    def resident(self, key: str, make: Callable[[], _R] | None = None) -> _R | None:
        """The resident under ``key`` (made by ``make()`` at first use); it lives until ``reset()``
        or ``close()`` and serves only this sandbox."""
        self._check_open()
        found = self._residents.get(key)
        if found is None and make is not None:
            found = self._residents[key] = make()
            self._makers[key] = make
        return cast("_R | None", found)

    # -- lifecycle -----------------------------------------------------------------------------
    def renew(self) -> None:
        """Back to the pristine tree *in the same holder*: a fresh copy-on-write layer is mounted
        over the workspace, and every process of this sandbox sees it at once (mount propagation),
        so a resident keeps serving. ``/tmp`` and ``/dev/shm`` are emptied too. Only between
        commands. A resident bound to the view (:attr:`Resident.bound_to_view`: the warm test
        server, whose Landlock rules hold the old mount) is restarted over the new one instead: it
        starts importing pytest now, while the next grading prepares its view.

        For grading views (see :mod:`deepgym_envs.sandbox.pool`): the next candidate must see
        nothing of the last. What the last one could have changed is the workspace, ``/tmp``,
        ``/dev/shm`` (renewed here) and processes (the server kills them; this checks from the
        host that none is left, and raises :class:`SandboxError` otherwise, so the pool replaces
        the view). Everything else it sees is read-only to it, and the server's memory is
        unreachable (no capabilities, not dumpable, ptrace refused by seccomp). An agent's sandbox
        uses ``reset()``, which replaces every process as well.
        """
        self._check_open()
        restart = []
        for resident in self._residents.values():
            if resident.started and (resident.bound_to_view or not resident.ready):
                resident.stop()  # a server that served nothing is simply started again
                if resident.bound_to_view:
                    restart.append(resident)
        layer = f"{self._mnt}/layer-{os.urandom(6).hex()}"
        proc = subprocess.run([*self._enter(), "sh", "-c", _RENEW_SCRIPT, "deepgym-renew", self._mnt, layer,
                               self._lower, self._layer or "", *self._tmp_mount_points()],
                              capture_output=True, text=True, timeout=60, env=launcher_env(), cwd="/")
        if proc.returncode != 0:
            raise SandboxError(f"could not renew the sandbox's workspace: {proc.stderr.strip()[:500]}")
        self._layer = layer
        left = self._leftovers()
        deadline = time.monotonic() + 1.0
        while left and time.monotonic() < deadline:  # SIGKILLed but not yet scheduled to die
            time.sleep(0.01)
            left = self._leftovers()
        if left:
            raise SandboxError(f"grading view not clean: {len(left)} process(es) outlived the last run")
        for resident in restart:  # after the check: a server still starting counts as a leftover
            resident.start()

    def _leftovers(self) -> list[int]:
        return [pid for resident in self._residents.values() for pid in resident.leftovers()]

    def _tmp_mount_points(self) -> list[str]:
        """``find`` tests that spare what commands bind under /tmp (a Python installed there).

        Emptying /tmp must not remove those mount points: unlinking a directory that is a mount
        point in another namespace detaches that mount there (Linux >= 3.18), and a warm server
        would lose the interpreter it has not finished importing from.
        """
        targets = [dest for _, dest in self._ro_binds]  # the task's Python environment included
        tests: list[str] = []
        for target in targets:
            if not target.startswith("/tmp/"):
                continue
            inside = f"{self._mnt}/tmp{target[len('/tmp'):]}"
            tests += ["!", "-path", f"{inside}/*"]
            while inside != f"{self._mnt}/tmp":
                tests += ["!", "-path", inside]
                inside = os.path.dirname(inside)
        return tests

    def reset(self) -> None:
        """A fresh holder over the same pristine tree: the old upper layer vanishes with its tmpfs.

        The holder was started ahead, at an earlier reset (two are kept, so back-to-back resets
        find one mounted); it has run nothing but a resident started in it ahead of need (the
        command server), which has served nothing. A resident this sandbox had that was not
        started ahead (the warm test server: too large to keep a spare of) is replaced too, its
        view being of the old workspace; the new one starts importing pytest now, in the background.
        """
        self._check_open()
        restart = {key for key, resident in self._residents.items() if resident.started}
        for resident in self._residents.values():
            resident.stop(wait=False)  # it sees only the old holder's workspace while it dies
        self._detach_net()
        old, self._holder = self._holder, None
        if old is not None:
            _kill_holder(old, wait=False)
            self._dying.append(old)
        self._reap(block=False)
        with self._spares_lock:
            spare = self._spares.pop(0) if self._spares else None
        try:
            self._start_holder(spare)
        except SandboxError:
            if spare is None:
                raise
            spare.stop_residents()
            spare = None
            self._start_holder()  # the spare died (it is an ordinary process): start one now
        self._layer = None
        adopted = spare.residents if spare is not None else {}
        for key in restart - adopted.keys():
            self._residents[key].start()
        self._residents.update(adopted)
        # A build step's holder gets its network at its reset: nothing is started in it before.
        ahead = {} if self._network else {key: self._makers[key] for key in sorted(restart | adopted.keys())
                                         if self._residents[key].ahead}
        self._filler = threading.Thread(target=self._fill_spares, args=(ahead, self._filler),
                                        name="deepgym-spares", daemon=True)
        self._filler.start()

    def _fill_spares(self, ahead: dict[str, Callable[[], Resident]], last: threading.Thread | None) -> None:
        """Start holders until :data:`SPARE_HOLDERS` are waiting, then the residents ``ahead`` names
        in the next one. In a thread: a process start holds the interpreter lock for milliseconds,
        which a reset returning, or an agent's step, should not wait for."""
        if last is not None:
            last.join()  # one filler at a time
        if self._closing.wait(SPARE_DELAY):
            return
        while True:
            with self._spares_lock:
                if self._closed or len(self._spares) >= SPARE_HOLDERS:
                    break
            try:
                spare = _Spare(self._spawn_holder())
            except OSError:
                return  # no spare: the next reset starts its holder itself
            with self._spares_lock:
                if self._closed:
                    _kill_holder(spare.proc)
                    return
                self._spares.append(spare)
        with self._spares_lock:
            if self._closed or not self._spares:
                return
            spare = self._spares[0]
            for key, make in ahead.items():
                if key not in spare.residents:
                    spare.residents[key] = make()
                    spare.residents[key].start(into=spare)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for resident in self._residents.values():
            resident.stop()
        self._closing.set()
        if self._filler is not None:
            self._filler.join()  # it sees _closed and stops
            self._filler = None
        for spare in self._spares:
            spare.stop_residents()  # before its holder: a start may be waiting for it to mount
        self._stop_holder()
        for spare in self._spares:
            _kill_holder(spare.proc)
        self._spares = []
        self._reap(block=True)
        if self._cgroup is not None:
            self._cgroup.close()
        # The mount existed only inside the holder's namespace, so this is a plain empty directory.
        remove_tree(self._tmp)
        self._unstage()


class _Spare:
    """A holder started ahead of a reset, and the residents started in it ahead of need."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.residents: dict[str, Resident] = {}
        self._lock = threading.Lock()  # the reset and a resident's start may both wait for it
        self._mounted: bool | None = None

    def mounted(self) -> bool:
        """Wait for the holder to say its workspace is mounted; False if it ended first."""
        with self._lock:
            if self._mounted is None:
                assert self.proc.stdout is not None
                self._mounted = self.proc.stdout.readline().strip() == b"ready"
            return self._mounted

    def stop_residents(self) -> None:
        for resident in self.residents.values():
            resident.stop()
        self.residents = {}


def _resident_preexec(limits: SandboxLimits, baseline: int, cgroup: PidsCgroup | None) -> None:
    """A command's limits, without its parent-death signal: that fires when the *thread* that
    started the resident ends. A resident exits when its owner's channel to it closes instead."""
    import ctypes

    apply_rlimits(limits, baseline, cgroup)
    ctypes.CDLL(None, use_errno=True).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG off


def _kill_holder(holder: subprocess.Popen, read_error: bool = False, wait: bool = True) -> str:
    """Kill a holder (its workspace goes with its mount namespace), close its pipes; with
    ``read_error``, return what it wrote to stderr (why it did not start). ``wait=False``: the
    caller reaps it later (tearing down its mounts takes the kernel a few milliseconds)."""
    try:
        os.killpg(holder.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if wait or read_error:
        holder.wait()
    err = holder.stderr.read().decode(errors="replace") if read_error and holder.stderr else ""
    for stream in (holder.stdin, holder.stdout, holder.stderr):
        if stream:
            stream.close()
    return err


def _is_opaque(path: str) -> bool:
    try:
        return os.getxattr(path, "user.overlay.opaque", follow_symlinks=False) == b"y"
    except OSError:
        return False


def _args_file(args: list[str], fds: list[int] | None) -> int:
    """A file holding ``args`` NUL-separated, for ``bwrap --args FD``, added to ``fds`` (the caller
    passes it to the child and closes it). A memory file: no size limit, nothing on disk, and
    bubblewrap has read it to its end and closed it before the command starts."""
    if fds is None:
        raise ValueError("bubblewrap's arguments go in a file descriptor: pass the list to add it to")
    fd = os.memfd_create("deepgym-bwrap-args", os.MFD_CLOEXEC)
    fds.append(fd)
    data = b"".join(os.fsencode(a) + b"\0" for a in args)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.lru_cache(maxsize=1)
def _python_bin_dir() -> str:
    # Not realpath: a venv's bin/ (with its own site-packages) must win over the base interpreter's.
    return os.path.dirname(os.path.abspath(sys.executable))


def _resolv_conf_dest() -> str | None:
    """Where a bind makes ``/etc/resolv.conf`` read as a fetch step's own: the file, or where its
    link leads (systemd-resolved's stub under ``/run``, which bubblewrap then makes on its root);
    None when there is nowhere (no file in the read-only ``/etc``)."""
    path = "/etc/resolv.conf"
    if os.path.islink(path):
        target = os.path.realpath(path)
        return target if os.path.isfile(target) or not covered(target, SYSTEM_DIRS) else None
    return path if os.path.isfile(path) else None


@functools.lru_cache(maxsize=1)
def _system_binds() -> tuple[str, ...]:
    """bwrap arguments for the system directories, read-only (readable by any user anyway)."""
    args: list[str] = []
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return tuple(args)


@functools.lru_cache(maxsize=1)
def _python_binds() -> tuple[tuple[str, str], ...]:
    """(source, destination) read-only binds: this Python and its packages, deepgym's support files."""
    bound = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    import site

    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix,
                  os.path.dirname(_python_bin_dir()), *site.getsitepackages()]
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        candidates.append(site.getusersitepackages())
    out: list[tuple[str, str]] = []
    for path in sorted({os.path.realpath(p) for p in candidates if os.path.isdir(p)}, key=len):
        if not covered(path, bound):
            out.append((path, path))
            bound.append(path)
    out.append((support_host_dir(), SUPPORT_DIR))
    return tuple(out)
