"""The ``local`` backend: a private copy of the repository and no isolation at all.

For machines where neither namespaces nor Docker are available, and for debugging. Commands run
as this user, with this user's network and files; only the rlimits and the timeout apply. It must
be chosen explicitly and it warns every time it starts.

:class:`CopiedWorkspace` (the private copy, its git-based reset) is shared with the docker
backend, which bind-mounts the same kind of copy into its container.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from deepgym_envs.sandbox.base import HostViewSandbox, SandboxLimits, rmtree, task_python_env
from deepgym_envs.sandbox.support import support_host_dir
from deepgym_envs.gitrepo import run_git


class LocalSandboxWarning(RuntimeWarning):
    """The local backend runs agent commands without any isolation."""


class CopiedWorkspace(HostViewSandbox):
    """A workspace that is a private host copy of the pristine tree, reset through git."""

    def __init__(self, pristine: Path, limits: SandboxLimits, *, tmp_prefix: str) -> None:
        super().__init__(pristine, limits)
        self._tmp = tempfile.mkdtemp(prefix=tmp_prefix)
        self._workspace = os.path.join(self._tmp, "testbed")
        shutil.copytree(self.pristine, self._workspace, symlinks=True)
        # A private index that knows the copy's stat data, so reset only rewrites what changed.
        self._index_env = {"GIT_INDEX_FILE": os.path.join(self._tmp, "index")}
        self._git(["read-tree", "HEAD"])
        self._git(["update-index", "-q", "--refresh"], check=False)

    def _git(self, args: list[str], check: bool = True) -> str:
        base = ["--git-dir", str(self.pristine / ".git"), "--work-tree", self._workspace, "-C", self._workspace]
        return run_git([*base, *args], env=self._index_env, check=check)

    def host_root(self) -> str:
        self._check_open()
        return self._workspace

    def _changed_paths(self) -> list[str]:
        """Tracked paths whose stat data moved, and every untracked path (ignored ones included).

        The private index keeps stat data, so this reads no file contents: diffs then hash only
        what may have changed instead of the whole repository.
        """
        modified = self._git(["diff-files", "--name-only", "-z"]).split("\0")
        others = self._git(["ls-files", "--others", "-z"]).split("\0")
        return sorted(p for p in {*modified, *others} if p)

    def _reset_workspace(self) -> None:
        """Rewrite the tracked files that changed, delete the rest, and restore ``.git``."""
        rmtree(os.path.join(self._workspace, ".git"), ignore_errors=True)
        changed = self._git(["diff-files", "--name-only", "-z"]).split("\0")
        changed = [p for p in changed if p]
        if changed:
            # Replaced by a directory or a symlink: remove first so checkout-index can write a file.
            for path in changed:
                full = os.path.join(self._workspace, path)
                if os.path.isdir(full) and not os.path.islink(full):
                    rmtree(full)
            self._git(["checkout-index", "-f", "-q", "--", *changed])
        self._git(["clean", "-ffdxq", "-e", ".git"])
        self._git(["update-index", "-q", "--refresh"], check=False)
        shutil.copytree(self.pristine / ".git", os.path.join(self._workspace, ".git"), symlinks=True)


class LocalSandbox(CopiedWorkspace):
    """A copied workspace in a temporary directory; commands run directly on the host."""

    def __init__(self, pristine: Path, limits: SandboxLimits | None = None, *, python_prefix: str | None = None,
                 pythonpath: tuple[str, ...] | list[str] = ()) -> None:
        warnings.warn("sandbox='local' gives NO isolation: agent commands run on this machine as "
                      "this user, with network access", LocalSandboxWarning, stacklevel=3)
        super().__init__(pristine, limits or SandboxLimits(), tmp_prefix=f"deepgym-local-{os.getpid()}-")
        self._python_prefix, self._pythonpath = python_prefix, tuple(pythonpath)
        self.workdir = self._workspace
        self.support_dir = support_host_dir()

    def _argv(self, cmd: list[str], env: dict[str, str], cwd: str, fds: list[int] | None = None) -> list[str]:
        path = (f"{self.support_dir}/bin:{os.path.dirname(os.path.abspath(sys.executable))}:"
                f"{env.get('PATH', '/usr/bin:/bin')}")
        if self._python_prefix:
            path = f"{self._python_prefix}/bin:{path}"
        env = {**task_python_env(env, None, self._pythonpath, self.workdir), "PATH": path, "HOME": self._tmp}
        # `env -i` gives the command exactly this environment; `-C` sets its directory.
        return ["env", "-i", "-C", cwd, *(f"{k}={v}" for k, v in env.items()), *cmd]

    def reset(self) -> None:
        self._check_open()
        self._reset_workspace()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        rmtree(self._tmp, ignore_errors=True)
