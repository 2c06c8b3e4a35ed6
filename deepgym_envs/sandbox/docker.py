"""The ``docker`` backend: one long-lived, locked-down container per sandbox.

The workspace is a private copy of the pristine tree (as on the ``local`` backend) that the host
can reach by path; file access, diffs and reset therefore run on the host without a round trip to
the engine, and only commands go through ``docker exec``.

Least privilege, as on every backend: commands run as a non-zero uid (the host user's own, or
:data:`~deepgym_envs.sandbox.docker_support.SANDBOX_UID` when the host user is root), with no
capabilities, ``no-new-privileges``, deepgym's seccomp filter (:mod:`.seccomp`: no mount,
namespaces, ptrace, keyrings, BPF...) and no network. The root filesystem is read-only; what a
command can write is size-capped: ``/tmp``, ``/dev/shm`` and, when the host user is root, the
workspace and the report directory, each a tmpfs of ``disk_bytes`` (the workspace: plus the tree
it starts from). The workspace is then an anonymous ``local`` volume of type tmpfs, which the
engine mounts on the host where root can reach it. An ordinary user cannot reach such a mount, so
there the workspace stays a bind-mounted host directory, bounded per file by ``RLIMIT_FSIZE`` and
otherwise by that user's own quota. tmpfs pages count against the container's memory cap, which
bounds all of them together. Processes and memory are capped by the container's cgroup.

Every command runs under a small wrapper that kills whatever the command left running once it
ends (``kill -KILL -1`` spares only PID 1 and the caller), so, as in the namespace backend's
per-command PID namespace, no background process outlives its command; a timeout kills the same
way from a second ``exec``. Commands in one sandbox are therefore serialised, and host-side file
operations never race a sandboxed process.

A task's Python environment runs from the host, bound read-only (:mod:`.docker_pyenv`); other
tasks use the image's own Python.

PID 1 reaps orphans and reads its stdin, which is a socket this process holds attached: when the
owner dies, for any reason, the container stops and the engine removes it with its volumes.
``close()`` removes it at once; ``deepgym sandbox reap`` removes what an engine restart or a crash
left behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from deepgym_envs.defaults import REPORT_BYTES
from deepgym_envs.docker_engine import default_image, engine, owner_labels, require_image
from deepgym_envs.errors import SandboxError, SandboxUnavailable, ToolError
from deepgym_envs.sandbox.base import (ExecResult, HostViewSandbox, SandboxLimits, command_argv, command_env,
                                       open_regular, remove_tree, rmtree, task_python_env)
from deepgym_envs.sandbox.docker_pyenv import python_env_binds, python_env_mounts
from deepgym_envs.sandbox.hidden import tree_packages
from deepgym_envs.sandbox.docker_support import (EXEC_WRAPPER, REPORT_DIR, SUPPORT_DIR, docker_support_dir,
                                                 own_paths, sandbox_user)
from deepgym_envs.sandbox.identity import own_tree
from deepgym_envs.sandbox.local import CopiedWorkspace
from deepgym_envs.sandbox.seccomp import docker_profile

#: SWE-bench images keep the repository's Python environment here (conda env "testbed").
CONDA_TESTBED_BIN = "/opt/miniconda3/envs/testbed/bin"

#: PID 1: reaps orphans (the shell's wait reaps any child) and keeps a reader on stdin (the
#: owner's attached socket), restarted whenever a command's cleanup kills it. Only the reader's
#: own status 7, at EOF, stops the container. No signal handlers (the shell's own SIGINT one is
#: turned off): PID 1 of a namespace gets no signal it does not handle, so a command cannot kill
#: it and turn its episode into a no_verdict.
_INIT_SCRIPT = r"""
trap '' INT
exec 3<&0
while :; do
  { while read -r _; do :; done; exit 7; } <&3 &
  wait "$!"
  [ "$?" -eq 7 ] && exit 0
done
"""
_KILL_ALL = ["sh", "-c", "kill -KILL -1 2>/dev/null; exit 0"]
#: Emptied by reset (the workspace is reset from the host): scratch files, and System V IPC
#: objects, which live in the container's IPC namespace as long as it does.
#: -xdev: a task's Python environment bound under /tmp is read-only and no scratch of the command's.
_CLEAR_SCRATCH = ["sh", "-c", "find /tmp /dev/shm -xdev -mindepth 1 -delete; ipcrm --all 2>/dev/null; exit 0"]
_PAGE = 4096
#: (image, environment prefix) pairs whose interpreter ran in that image.
_PYTHON_OK: set[tuple[str, str | None]] = set()


def image_for_tree(pristine: Path) -> str | None:
    """The image a pristine tree was taken from (SWE-bench-style tasks), if any."""
    marker = Path(f"{pristine}.image")
    return marker.read_text().strip() or None if marker.is_file() else None


class DockerSandbox(CopiedWorkspace):
    """A container with no network and no privileges over a private copy of the tree."""

    support_dir = SUPPORT_DIR

    def __init__(self, pristine: Path, limits: SandboxLimits | None = None, *, image: str | None = None,
                 python_prefix: str | None = None, python_home: str | None = None,
                 pythonpath: tuple[str, ...] | list[str] = ()) -> None:
        """``python_prefix``: a task's environment (:mod:`deepgym_envs.pyenv`), bound read-only at
        its host path with the interpreter it was made from (``python_home``, where that is not
        deepgym's own), and first on ``PATH``;
        ``pythonpath``: workspace directories the project is imported from. SandboxUnavailable
        when that environment cannot run in the image."""
        self._python_prefix = os.path.realpath(python_prefix) if python_prefix else None
        self._pythonpath = tuple(pythonpath)
        self._python_binds = python_env_binds(self._python_prefix, python_home) if self._python_prefix else []
        self._client = engine()
        self.image = image or image_for_tree(pristine) or default_image()
        config = require_image(self._client, self.image).attrs.get("Config") or {}
        image_env = dict(e.split("=", 1) for e in config.get("Env") or [] if "=" in e)
        self._path = f"{CONDA_TESTBED_BIN}:{image_env.get('PATH', '/usr/local/bin:/usr/bin:/bin')}:{SUPPORT_DIR}/bin"
        # Not CopiedWorkspace's copy: on tmpfs volumes the copy can only be made once the container runs.
        HostViewSandbox.__init__(self, pristine, limits or SandboxLimits())
        self._tmp = tempfile.mkdtemp(prefix=f"deepgym-docker-{os.getpid()}-")
        self._uid, self._gid = sandbox_user()
        self._user = f"{self._uid}:{self._gid}"
        # Root on the host: the workspace and report directory are size-capped tmpfs volumes, and
        # what the host writes there is handed to the sandbox's uid.
        self._volumes = os.geteuid() == 0
        self._lock = threading.Lock()
        self._tmp_dirty = False
        self._container: Any = None
        self._stdin: Any = None
        self._workspace = os.path.join(self._tmp, "testbed")
        self._reports = os.path.join(self._tmp, "report")
        try:
            if not self._volumes:
                os.mkdir(self._workspace, 0o755)
                os.mkdir(self._reports, 0o700)
            self._start()
            if self._python_prefix:
                self._check_python_env()
            shutil.copytree(self.pristine, self._workspace, symlinks=True, dirs_exist_ok=True)
            if self._volumes:
                own_tree(self._workspace, (self._uid, self._gid))
            self._index_env = {"GIT_INDEX_FILE": os.path.join(self._tmp, "index")}
            self._git(["read-tree", "HEAD"])
            self._git(["update-index", "-q", "--refresh"], check=False)
        except BaseException as exc:
            self.close()
            if isinstance(exc, Exception) and not isinstance(exc, (SandboxError, SandboxUnavailable)):
                raise SandboxError(f"docker sandbox did not start ({str(exc)[:300]})") from exc
            raise

    def _check_python_env(self) -> None:
        """Run the task environment's interpreter once: a host Python the image cannot run (another
        C library, a missing shared library) is refused here, not reported as failing tests."""
        prefix = self._python_prefix
        key = (self.image, prefix)
        if key in _PYTHON_OK:
            return
        probe = self._run([EXEC_WRAPPER, f"{prefix}/bin/python", "-I", "-c", "import sys; print(sys.prefix)"],
                          {"PATH": "/usr/bin:/bin"}, "/", 60)
        if probe.exit_code != 0 or probe.stdout.strip() != prefix:
            raise SandboxUnavailable(
                f"the task's Python environment ({prefix}) does not run in the docker image {self.image!r}: "
                f"{(probe.stderr or probe.stdout).strip()[-500:] or f'exit code {probe.exit_code}'}. It was built "
                "from this host's interpreter, whose C library the image must share: choose sandbox='namespace', "
                "or an image of this host's distribution")
        _PYTHON_OK.add(key)

    # -- container -----------------------------------------------------------------------------
    def _start(self) -> None:
        import docker.types

        lim = self.limits
        disk = lim.disk_bytes or (1 << 30)
        kwargs: dict[str, Any] = {}
        if lim.memory_bytes:
            kwargs.update(mem_limit=lim.memory_bytes, memswap_limit=lim.memory_bytes)
        if lim.max_processes:
            kwargs["pids_limit"] = lim.max_processes
        if lim.cpus:
            kwargs["nano_cpus"] = int(lim.cpus * 1e9)
        # No POSIX message queues: the kernel counts their bytes per uid across every container.
        ulimits = [docker.types.Ulimit(name="core", soft=0, hard=0),
                   docker.types.Ulimit(name="msgqueue", soft=0, hard=0)]
        if lim.disk_bytes:
            ulimits.append(docker.types.Ulimit(name="fsize", soft=lim.disk_bytes, hard=lim.disk_bytes))
        mounts = [docker.types.Mount(SUPPORT_DIR, docker_support_dir(), type="bind", read_only=True),
                  *python_env_mounts(self._python_binds, self._tmp, tree_packages(str(self.pristine)))]
        if self._volumes:
            mounts += [self._tmpfs_volume(self.workdir, tree_bytes(self.pristine) + disk,
                                          f"uid={self._uid},gid={self._gid},mode=0755"),
                       # The agent's uid may create its report file but not list the directory.
                       self._tmpfs_volume(REPORT_DIR, disk, "mode=1733")]
        else:
            mounts += [docker.types.Mount(self.workdir, self._workspace, type="bind"),
                       docker.types.Mount(REPORT_DIR, self._reports, type="bind")]
        self._container = self._client.containers.create(
            self.image, ["sh", "-c", _INIT_SCRIPT], name=f"deepgym-{os.getpid()}-{secrets.token_hex(6)}",
            labels={**owner_labels(), "deepgym.pristine": str(self.pristine)[-200:]}, user=self._user,
            network_mode="none", cap_drop=["ALL"], read_only=True,
            security_opt=["no-new-privileges", f"seccomp={docker_profile()}"],
            tmpfs={"/tmp": f"size={disk},mode=1777,exec"}, shm_size=disk, mounts=mounts,
            hostname="sandbox", working_dir=self.workdir,
            # Not detached: the engine then closes stdin (StdinOnce) when our attach socket goes.
            stdin_open=True, auto_remove=True, ulimits=ulimits, entrypoint=[],
            **kwargs)
        # Attached before start: our end of this socket is the container's stdin, and closes
        # (so PID 1 stops the container) whenever this process goes away.
        self._stdin = self._client.api.attach_socket(self._container.id, params={"stdin": 1, "stream": 1})
        self._container.start()
        if self._volumes:
            self._workspace, self._reports = self._volume_paths()

    @staticmethod
    def _tmpfs_volume(target: str, size: int, options: str) -> Any:
        import docker.types

        # Anonymous, so the engine removes it with the container; labelled, so reap finds leftovers.
        driver = docker.types.DriverConfig("local", {"type": "tmpfs", "device": "tmpfs",
                                                     "o": f"size={size},nosuid,nodev,{options}"})
        return docker.types.Mount(target, None, type="volume", no_copy=True, labels=owner_labels(),
                                  driver_config=driver)

    def _volume_paths(self) -> tuple[str, str]:
        """Where the engine mounted the workspace and report volumes, proven to be this container's.

        The proof is the device number as seen through the container's own root: a host path that
        merely has the volume's name (an engine in another mount namespace) is refused rather than
        written to.
        """
        attrs = self._client.api.inspect_container(self._container.id)
        pid = int(attrs["State"]["Pid"])
        sources = {m["Destination"]: m["Source"] for m in attrs.get("Mounts") or [] if m.get("Type") == "volume"}
        for target in (self.workdir, REPORT_DIR):
            source = sources.get(target, "")
            try:
                same = os.path.ismount(source) and os.stat(source).st_dev == os.stat(f"/proc/{pid}/root{target}").st_dev
            except OSError:
                same = False
            if not same:
                raise SandboxError(f"cannot reach the container's {target} volume on this host "
                                   f"({source or 'no mount'}): the docker backend needs a local engine")
        return sources[self.workdir], sources[REPORT_DIR]

    def _exec(self, argv: list[str], env: dict[str, str], cwd: str) -> str:
        container = self._container
        if container is None:
            raise SandboxError("sandbox is closed")
        try:
            return self._client.api.exec_create(container.id, argv, stdout=True, stderr=True,
                                                environment=env, workdir=cwd, user=self._user)["Id"]
        except Exception as exc:
            raise self._died(exc) from None

    def _died(self, exc: BaseException) -> SandboxError:
        return SandboxError(f"docker sandbox died or cannot run commands ({str(exc)[:300]})")

    # -- commands ------------------------------------------------------------------------------
    def exec(self, cmd: list[str] | str, timeout: float | None = None, *, env: dict[str, str] | None = None,
             cwd: str | None = None, report: bool = False) -> ExecResult:
        self._check_open()
        argv = command_argv(cmd)
        full_env = task_python_env(command_env({"PATH": self._path, **(env or {})}), self._python_prefix,
                                   self._pythonpath, self.workdir)
        if self._python_prefix:  # the task's interpreter wins over the image's
            full_env["PATH"] = f"{self._python_prefix}/bin:{full_env['PATH']}"
        name = secrets.token_hex(16) if report else ""
        if report:
            # A file outside the workspace, named afresh per run, that the wrapper opens as the
            # command's DEEPGYM_REPORT_FD; the plugin authenticates what it writes with a nonce,
            # exactly as on the pipe of the other backends.
            full_env["DEEPGYM_REPORT_PATH"] = f"{REPORT_DIR}/{name}"
        with self._lock:
            self._check_open()
            self._tmp_dirty = True
            result = self._run([EXEC_WRAPPER, *argv], full_env, cwd or self.workdir, timeout or self.limits.timeout)
            if self._closed:  # close() from another thread killed the command: not the command's own result
                raise SandboxError("sandbox was closed while the command ran")
        if not report:
            return result
        data = self._take_report(name)
        return ExecResult(result.exit_code, result.stdout, result.stderr, result.timed_out, result.duration,
                          result.truncated, data)

    def _take_report(self, name: str) -> str | None:
        """Read and remove a command's report file: a regular file only (the command could have
        swapped it for a link to a host file, or a FIFO that would block the host forever)."""
        path = os.path.join(self._reports, name)
        try:
            with open_regular(path, os.O_RDONLY, name) as fh:
                data = fh.read(REPORT_BYTES).decode("utf-8", "replace")
        except (OSError, ToolError):  # missing, a link (ELOOP), or not a regular file
            data = None
        try:
            os.unlink(path)
        except OSError:
            pass
        return data

    def _run(self, argv: list[str], env: dict[str, str], cwd: str, timeout: float) -> ExecResult:
        start = time.monotonic()
        exec_id = self._exec(argv, env, cwd)
        cap = self.limits.output_bytes or (1 << 62)
        bufs = (bytearray(), bytearray())
        state = {"truncated": False, "error": None}

        def pump() -> None:
            try:
                for chunk in self._client.api.exec_start(exec_id, stream=True, demux=True):
                    for buf, data in zip(bufs, chunk):
                        if data:
                            room = cap - len(buf)
                            if room > 0:
                                buf += data[:room]
                            if len(data) > room:
                                state["truncated"] = True  # keep draining, so the command never blocks
            except Exception as exc:  # reported below, from the caller's thread
                state["error"] = exc

        reader = threading.Thread(target=pump, name="deepgym-docker-exec", daemon=True)
        reader.start()
        reader.join(timeout if timeout else None)
        timed_out = reader.is_alive()
        if timed_out:
            self._kill_all()
            reader.join(30)
        if state["error"] is not None and not timed_out:
            raise self._died(state["error"])
        try:
            code = self._client.api.exec_inspect(exec_id).get("ExitCode")
        except Exception as exc:
            raise self._died(exc) from None
        if code is None:  # the engine lost the process (the container stopped under it)
            raise self._died(RuntimeError("the command has no exit status"))
        out, err = (b.decode("utf-8", "replace") for b in bufs)
        return ExecResult(-9 if timed_out else int(code), out, err, timed_out, time.monotonic() - start,
                          bool(state["truncated"]))

    def _kill_all(self) -> None:
        """Kill every process of the sandbox but PID 1 (the same ``kill -1`` the wrapper ends with)."""
        exec_id = self._exec(_KILL_ALL, {"PATH": "/usr/bin:/bin"}, "/")
        try:
            self._client.api.exec_start(exec_id)
        except Exception as exc:
            raise self._died(exc) from None

    # -- host-side writes: files the sandbox's uid can edit ------------------------------------
    def write_file(self, path: str, data: bytes) -> None:
        super().write_file(path, data)
        if self._volumes:
            own_paths(self._workspace, [os.path.relpath(self.resolve(path), self._workspace)], self._owner)

    def apply_patch(self, diff: str) -> None:
        super().apply_patch(diff)
        if self._volumes:
            own_paths(self._workspace, self._changed_paths(), self._owner)

    def _reset_workspace(self) -> None:
        git_dir = os.path.join(self._workspace, ".git")
        if os.path.islink(git_dir) or os.path.isfile(git_dir):  # rmtree would leave it, and the copy fail
            os.unlink(git_dir)
        if not self._volumes:
            super()._reset_workspace()
            return
        changed = self._git(["diff-files", "--name-only", "-z"]).split("\0")
        super()._reset_workspace()
        own_paths(self._workspace, [p for p in changed if p], self._owner)
        own_tree(os.path.join(self._workspace, ".git"), self._owner)
        # The new owner is stat data the private index compares: record it, or the next reset
        # would see every rewritten file as changed again.
        self._git(["update-index", "-q", "--refresh"], check=False)

    @property
    def _owner(self) -> tuple[int, int]:
        return self._uid, self._gid

    # -- lifecycle -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Kill what runs, empty the scratch directories, put the workspace back; the container stays."""
        self._check_open()
        with self._lock:
            if self._tmp_dirty:  # only commands write scratch (and no process outlives its command)
                res = self._run([EXEC_WRAPPER, *_CLEAR_SCRATCH],
                                {"PATH": "/usr/bin:/bin"}, "/", 60)
                if res.timed_out:
                    raise SandboxError("docker sandbox did not reset: emptying /tmp timed out")
                if self._volumes:  # the sandbox's uid cannot list it: what a command left there goes here
                    for name in os.listdir(self._reports):
                        path = os.path.join(self._reports, name)
                        if os.path.isdir(path) and not os.path.islink(path):
                            rmtree(path)
                        else:
                            os.unlink(path)
                self._tmp_dirty = False
            self._reset_workspace()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Not under the command lock: removing the container ends a running command at once
        # (its exec then fails as "died"), where waiting for the lock could take its whole timeout.
        container, self._container = self._container, None
        if container is not None:
            try:
                container.remove(force=True, v=True)
            except Exception:  # already gone (auto-removed) or being removed by the engine
                pass
        stdin, self._stdin = self._stdin, None
        if stdin is not None:
            _close_socket(stdin)
        remove_tree(self._tmp)


def _close_socket(sock: Any) -> None:
    for obj in (getattr(sock, "_sock", None), sock):
        try:
            if obj is not None:
                obj.close()
        except OSError:
            pass



_TREE_BYTES: dict[str, int] = {}


def tree_bytes(path: Path) -> int:
    """What a copy of a (never changing) pristine tree takes on a tmpfs: whole pages per file."""
    key = str(path)
    if key not in _TREE_BYTES:
        total = 0
        for root, dirs, files in os.walk(path):
            total += _PAGE * (1 + len(dirs))
            for name in files:
                size = os.lstat(os.path.join(root, name)).st_size
                total += -(-size // _PAGE) * _PAGE or _PAGE
        _TREE_BYTES[key] = total
    return _TREE_BYTES[key]
