"""The ``local`` backend: a private copy of the repository and no isolation at all.

For machines where neither namespaces nor Docker are available, and for debugging. Commands run
as this user, with this user's network and files; only the rlimits and the timeout apply. It must
be chosen explicitly and it warns every time it starts.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from deepgym_envs.sandbox.base import HostViewSandbox, SandboxLimits
from deepgym_envs.sandbox.support import support_host_dir
from deepgym_envs.trees import run_git


class LocalSandboxWarning(RuntimeWarning):
    """The local backend runs agent commands without any isolation."""


class LocalSandbox(HostViewSandbox):
    """A copied workspace in a temporary directory; commands run directly on the host."""

    def __init__(self, pristine: Path, limits: SandboxLimits | None = None) -> None:
        warnings.warn("sandbox='local' gives NO isolation: agent commands run on this machine as "
                      "this user, with network access", LocalSandboxWarning, stacklevel=3)
        super().__init__(pristine, limits or SandboxLimits())
        self._tmp = tempfile.mkdtemp(prefix="deepgym-local-")
        self.workdir = os.path.join(self._tmp, "testbed")
        self.support_dir = support_host_dir()
        shutil.copytree(self.pristine, self.workdir, symlinks=True)

    def host_root(self) -> str:
        self._check_open()
        return self.workdir

    def _argv(self, cmd: list[str], env: dict[str, str], cwd: str) -> list[str]:
        path = (f"{self.support_dir}/bin:{os.path.dirname(os.path.abspath(sys.executable))}:"
                f"{env.get('PATH', '/usr/bin:/bin')}")
        env = {**env, "PATH": path, "HOME": self._tmp}
        # `env -i` gives the command exactly this environment; `-C` sets its directory.
        return ["env", "-i", "-C", cwd, *(f"{k}={v}" for k, v in env.items()), *cmd]

    def reset(self) -> None:
        """Restore tracked files from the pristine repository and delete everything else."""
        self._check_open()
        shutil.rmtree(os.path.join(self.workdir, ".git"), ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="deepgym-index-") as tmp:
            base = ["--git-dir", str(self.pristine / ".git"), "--work-tree", self.workdir]
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            run_git([*base, "read-tree", "HEAD"], env=env)
            run_git([*base, "checkout-index", "-a", "-f"], env=env)
            run_git([*base, "clean", "-ffdxq", "-e", ".git"], env=env)
        shutil.copytree(self.pristine / ".git", os.path.join(self.workdir, ".git"), symlinks=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        shutil.rmtree(self._tmp, ignore_errors=True)
