"""Build steps for untrusted code (pip downloading, building, installing) run here, never on the host.

Installing a package runs its code: an sdist's build backend prepares metadata and builds the
wheel, and every ``.pth`` file an installed wheel ships runs whenever the environment's interpreter
starts. Packages and repositories come from strangers (PyPI, git, task rows), so each such step
runs in a :class:`~deepgym_envs.sandbox.namespace.NamespaceSandbox` with the hardening every
sandbox has (uid 1000 in a user namespace, no capabilities, the seccomp filter, the system
read-only, the package, task files and caches hidden, a private size-capped ``/tmp``) and exactly
what a build needs besides. Two kinds of step (:mod:`.pipfetch` drives them):

* a **fetch** step (``network=True``) downloads and runs no package code: it gets outbound
  network through a user-mode stack (:mod:`.netstack`: the public Internet and the index hosts,
  never the host's loopback, its other addresses or its abstract sockets) and the user's pip
  configuration (``PIP_*``, ``pip.conf``: index credentials), with its local inputs read-only
  (a ``file://`` index, ``--find-links`` directories, constraint files);
* a **build** step (the default) may run package code: no network at all, nothing of the user's
  pip configuration (the system's and this Python's ``pip.conf`` hidden too, as in every sandbox
  but a fetch step: :func:`~deepgym_envs.sandbox.hidden.credential_paths`), pip pointed at
  :attr:`BuildSandbox.downloads` only (``--no-index``);

and, for both:

* the directories the step names, writable, each at the path the step uses (a venv hard-codes
  its prefix in its scripts), and nothing else writable. They lie on the sandbox's size-capped
  tmpfs with its ``/tmp`` (``disk_bytes``, ``$DEEPGYM_MAX_BUILD_BYTES``), never on the host's
  disk: when the build is done the host copies them out (:mod:`.build_output`), and a build
  over the cap is a :class:`~deepgym_envs.errors.BuildTooLarge` that keeps nothing.

Nothing falls back to the host: without the namespace backend a build is refused, naming why.

>>> from deepgym_envs.sandbox.build import pip_argv
>>> pip_argv(["install", "attrs==24.2.0"])[-2:]
['install', 'attrs==24.2.0']
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from deepgym_envs.errors import BuildTooLarge, SandboxError, SandboxUnavailable
from deepgym_envs.sandbox import namespace, netstack
from deepgym_envs.sandbox.base import ExecResult, SandboxLimits, remove_tree
from deepgym_envs.sandbox.build_output import Budget, OutputCaps, OverCap, Unreadable, copy_out
from deepgym_envs.sandbox.hidden import SYSTEM_DIRS, covered
from deepgym_envs.trees import cache_root
from deepgym_envs.untrusted_tree import parse_size, remove_untrusted

#: Limits of one build step: pip resolving, downloading and compiling takes longer and needs more
#: room than a test run. ``disk_bytes`` caps ``/tmp`` (where pip unpacks and builds) and the
#: step's writable directories together; ``$DEEPGYM_MAX_BUILD_BYTES`` sets it (:func:`build_limits`).
BUILD_LIMITS = SandboxLimits(timeout=900.0, output_bytes=1 << 20, memory_bytes=8 << 30, max_processes=512,
                             disk_bytes=4 << 30)
BUILD_BYTES_ENV = "DEEPGYM_MAX_BUILD_BYTES"
#: A step that leaves less room than this on its disk ran into the cap (tmpfs keeps no reserve).
_FULL_MARGIN = 1 << 20


def build_limits() -> SandboxLimits:
    """:data:`BUILD_LIMITS`, with the disk cap of ``$DEEPGYM_MAX_BUILD_BYTES`` (``8G``) when set."""
    raw = os.environ.get(BUILD_BYTES_ENV, "").strip()
    if not raw:
        return BUILD_LIMITS
    try:
        return dataclasses.replace(BUILD_LIMITS, disk_bytes=parse_size(raw))
    except ValueError as exc:
        raise ValueError(f"{BUILD_BYTES_ENV}: {exc}") from None
#: Where pip downloads from when its configuration names no index: routed even if resolved to a
#: private address (a mirror behind split DNS).
DEFAULT_INDEX_URLS = ("https://pypi.org/simple", "https://files.pythonhosted.org")
#: pip options whose values may name local files or directories the build must read.
_PATH_OPTIONS = ("index-url", "extra-index-url", "find-links", "constraint", "cert")


def require_build_sandbox() -> None:
    """Raise :class:`SandboxUnavailable` when build steps cannot be confined on this machine."""
    ok, why = namespace.available()
    if not ok:
        raise SandboxUnavailable(
            f"building untrusted packages needs the namespace sandbox, which cannot run here: {why}. "
            "Nothing was built: deepgym never runs a package's build or install on the host.")


class BuildSandbox:
    """One build's sandbox: run several steps (``exec``) over the same writable directories.

    ``writable``: host directories (made by the caller) whose contents the steps start from and
    whose results come back, each at the same path inside, or ``(host, inside)`` pairs where a
    directory is built at one path and renamed to another afterwards. Inside they lie on the
    sandbox's capped disk; :meth:`close` copies them back into the host directories (emptied
    first), unless a step went over the cap or the ``with`` block ends in an exception, where the
    host directories keep what they held. ``scratch``: directories like ``writable`` whose results
    are thrown away. ``readonly``: host paths the steps may read (the pip configuration's local
    inputs are added by themselves, in a fetch step). ``network``: a fetch step (see above): run
    nothing in it but pip's downloading, since it holds the index credentials.

    >>> with BuildSandbox(writable=[str(download)], network=True) as sb:          # doctest: +SKIP
    ...     sb.exec(pip_argv(["download", "--only-binary=:all:", "-d", str(download), "attrs==24.2.0"]))
    """

    def __init__(self, *, writable: Sequence[str | tuple[str, str]] = (), readonly: Sequence[str] = (),
                 network: bool = False, limits: SandboxLimits | None = None, scratch: Sequence[str] = ()) -> None:
        require_build_sandbox()
        pairs = [(w, w) if isinstance(w, str) else w for w in (*writable, *scratch)]
        self._results = [host for host, _ in pairs[:len(writable)]]  # copied back at close()
        self._closed = False
        self._keep = True
        for host, inside in pairs:
            if not os.path.isabs(inside) or not os.path.isdir(host) or os.path.islink(host):
                raise ValueError(f"writable {host!r} -> {inside!r}: must be an existing directory and an absolute path")
        self._tmp = tempfile.mkdtemp(prefix="deepgym-build-")
        # Searchable by the sandbox uid, so its empty tree and the input copies need no staging
        # (as root a staged path would stay bound for the rest of the process).
        os.chmod(self._tmp, 0o711)
        #: What pip in an offline step installs from, read-only: fetch steps fill it (:mod:`.pipfetch`).
        self.downloads = os.path.join(self._tmp, "downloads")
        try:
            # The workspace is an empty tree: a build works in the directories it names.
            tree = os.path.join(self._tmp, "tree")
            os.makedirs(os.path.join(tree, ".git"))  # identity.give_tree marks trees it gave there
            os.mkdir(self.downloads)
            os.chmod(self.downloads, 0o755)
            allow: list[str] = []
            if network:  # a fetch step: the user's pip configuration, credentials and all
                settings = pip_settings()
                self.env = settings.env
                inputs = [(p, p) for p in (*readonly, *settings.directories)] + self._copies(settings)
                allow = netstack.index_addresses([*settings.urls, *DEFAULT_INDEX_URLS])
            else:  # may run a package's code: nothing of the user's configuration, no index
                self.env = offline_env(self.downloads)
                # The host's pip configuration is hidden by the sandbox, as in every sandbox but a fetch step.
                inputs = [(p, p) for p in (*readonly, self.downloads)]
            self._sb = namespace.NamespaceSandbox(Path(tree), limits or build_limits(), warm_tests=False,
                                                  network=network, writable=pairs, readonly=inputs,
                                                  allow_hosts=allow)
        except BaseException:
            remove_tree(self._tmp)
            raise

    def _copies(self, settings: "PipSettings") -> list[tuple[str, str]]:
        """Binds that show each file the configuration names, and nothing else of its directory
        (``~/.config/pip`` must not bring the rest of a home directory into a networked sandbox):
        a directory of copies is bound over the file's own directory."""
        shown = [*settings.directories, *SYSTEM_DIRS]
        folders: dict[str, str] = {}
        for path in settings.files:
            if covered(path, shown):
                continue
            parent = os.path.dirname(path)
            if parent not in folders:
                folders[parent] = os.path.join(self._tmp, f"input-{len(folders)}")
                os.mkdir(folders[parent], 0o755)
                os.chmod(folders[parent], 0o755)  # the sandbox uid lists it (umask aside)
            copy = os.path.join(folders[parent], os.path.basename(path))
            shutil.copyfile(path, copy)
            os.chmod(copy, 0o444)
        return [(host, inside) for inside, host in folders.items()]

    def exec(self, argv: list[str], *, timeout: float | None = None, cwd: str = "/tmp",
             env: dict[str, str] | None = None) -> ExecResult:
        """Run ``argv`` inside; the pip configuration comes with the environment.

        :class:`BuildTooLarge` when the step ran out of its disk: it failed saying so, or left its
        disk full (what it wrote may be cut short without its noticing)."""
        result = self._sb.exec(argv, timeout, env={**self.env, **(env or {})}, cwd=cwd)
        size, free = self._sb.disk_space()
        out_of_space = result.exit_code != 0 and "No space left on device" in result.output
        if free < min(_FULL_MARGIN, size // 100) or out_of_space:
            self._keep = False
            raise self._too_large(f"the step {' '.join(argv)[:200]!r} ran out of room", size)
        return result

    def _too_large(self, what: str, size: int) -> BuildTooLarge:
        return BuildTooLarge(
            f"build over its disk cap: {what}. A build step's disk cap is {size} bytes for all it writes (its "
            f"directories and /tmp, held in memory); set {BUILD_BYTES_ENV} higher (e.g. {BUILD_BYTES_ENV}=16G) if "
            "you trust this build. Nothing it wrote was kept.")

    def close(self, keep: bool = True) -> None:
        """Copy the writable directories back to the host (``keep``, and no step went over the
        cap), then end the sandbox. :class:`BuildTooLarge` when what they hold is over the cap
        (a sparse or hard-linked file counts by its length, per name): the host directories are
        left empty then."""
        if self._closed:
            return
        self._closed = True
        try:
            if keep and self._keep:
                self._copy_results()
        finally:
            self._sb.close()
            remove_tree(self._tmp)

    def _copy_results(self) -> None:
        size, _ = self._sb.disk_space()
        # What they hold fits the tmpfs; sparse and hard-linked files could still make more of it.
        budget = Budget(OutputCaps(bytes=size, entries=max(size // 4096, 4096)))
        try:
            for index, host in enumerate(self._results):
                _empty(host)
                copy_out(self._sb.writable_path(index), host, budget)
        except (OverCap, Unreadable, OSError) as exc:
            for host in self._results:
                _empty(host)
            if isinstance(exc, OverCap):
                raise self._too_large(f"its output holds {exc}", size) from None
            what = f"{exc} unreadable" if isinstance(exc, Unreadable) else f"what cannot be copied ({exc})"
            raise SandboxError(f"the build left {what} in its output; nothing it wrote was kept") from None

    def __enter__(self) -> "BuildSandbox":
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(keep=exc_type is None)


def _empty(directory: str) -> None:
    """Remove what ``directory`` holds (it may hold links: none is followed), keeping it."""
    for name in os.listdir(directory):
        remove_untrusted(os.path.join(directory, name))


def run_build(argv: list[str], *, writable: Sequence[str | tuple[str, str]] = (), readonly: Sequence[str] = (),
              network: bool = False, timeout: float | None = None) -> ExecResult:
    """One build step in a sandbox of its own (see :class:`BuildSandbox`)."""
    with BuildSandbox(writable=writable, readonly=readonly, network=network) as sb:
        return sb.exec(argv, timeout=timeout)


def offline_env(downloads: str) -> dict[str, str]:
    """pip's environment in a step that may run package code: no configuration file, no index,
    only ``downloads`` to install from (a build backend inherits all of it)."""
    return {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": downloads,
            "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1"}


def pip_argv(args: list[str], *, python: str | None = None, interpreter: str | None = None) -> list[str]:
    """The argv of ``pip ARGS`` inside a build sandbox.

    Without ``python``: this interpreter's pip (a fetch step's, which only downloads). With it (an
    environment's interpreter): the pip that ``interpreter``, the installation the environment was
    made from (default: the one behind this one), ships for ``ensurepip``, run by ``python`` from its
    wheel: a pip that supports that Python by construction (the host's newest pip refuses
    ``--python`` targets older than its own floor: pip 26 drives nothing below 3.10), and that is
    never installed into the environment. An environment of this interpreter's own Python, or of an
    installation without such a wheel, is driven by this interpreter's pip with ``--python``
    (:func:`pip_refusal` names the fix when it refuses).
    """
    if not python:
        return [sys.executable, "-m", "pip", *args]
    base = interpreter or base_python()
    # This interpreter's own pip supports its version, and starts from compiled modules (one run from
    # a wheel compiles pip's modules anew, seconds per step).
    wheel = None if os.path.realpath(base) == os.path.realpath(base_python()) else bundled_pip(base)
    if wheel is not None:
        ready = prepared_pip(wheel)
        pip = ready if os.path.isfile(os.path.join(ready, ".complete")) else wheel
        return [python, "-I", os.path.join(pip, "pip"), *args]
    return [sys.executable, "-m", "pip", "--python", python, *args]


def base_python() -> str:
    """The interpreter behind this one: a venv made from a venv's python chains to it anyway."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = os.path.join(sys.base_prefix, "bin", name)
    return candidate if os.path.exists(candidate) else sys.executable


#: Where Debian keeps the wheels its ``python3-venv`` gives ``ensurepip`` (its own ``_bundled`` is empty).
_SYSTEM_WHEELS = "/usr/share/python-wheels"


def bundled_pip(interpreter: str) -> str | None:
    """The newest pip wheel ``interpreter``'s installation ships for ``ensurepip``, or None.

    Found by listing files, never by running the interpreter; the installation is one a build
    sandbox binds read-only (:func:`deepgym_envs.pyenv.python_binds`), so the path is the same inside.
    """
    real = os.path.realpath(interpreter)
    home = os.path.dirname(os.path.dirname(real))
    name = os.path.basename(real)
    folders = [os.path.join(home, "lib", name, "ensurepip", "_bundled")] if name.startswith("python") else []
    if home == "/usr":
        folders.append(_SYSTEM_WHEELS)
    found = []
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found += [os.path.join(folder, n) for n in names if n.startswith("pip-") and n.endswith(".whl")]
    return max(found, key=_wheel_version, default=None)


def prepared_pip(wheel: str) -> str:
    """Where the pip of ``wheel`` is kept unpacked and compiled for its interpreter, once per machine
    (:func:`deepgym_envs.pyenv.prepare_pip`): run from the wheel, pip compiles its modules anew on
    every step (seconds each)."""
    real = os.path.realpath(wheel)
    key = hashlib.sha256(real.encode()).hexdigest()[:12]
    return str(cache_root() / "pips" / f"{os.path.basename(real)[:-4]}-{key}")


def _wheel_version(path: str) -> tuple[int, ...]:
    version = os.path.basename(path).split("-")[1]
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def pip_refusal(output: str, python: str) -> str:
    """One line naming the fix when ``output`` is pip refusing to drive ``python``'s version, else ``""``."""
    if "does not support python" not in output:
        return ""
    return (f"the host's pip refuses {python} and its installation ships no pip wheel for ensurepip: "
            "reinstall that Python with ensurepip (pyenv and uv do), or run deepgym from an environment "
            "with `pip install 'pip<26'`")


@dataclass(frozen=True)
class PipSettings:
    """What pip inside a build sandbox needs of the host's pip configuration."""

    env: dict[str, str]
    """``PIP_*`` variables: the host's, and ``PIP_CONFIG_FILE`` for the user's file."""
    directories: list[str]
    """Local directories the configuration names (a ``file://`` index, ``--find-links``)."""
    files: list[str]
    """Local files it names (the configuration file, constraint files, a CA bundle)."""
    urls: list[str]
    """The http(s) indexes and find-links pages it names."""


def pip_settings() -> PipSettings:
    """The host's pip configuration as a build sandbox sees it.

    The system's files (``/etc/pip.conf``, ``/etc/xdg/pip``) are visible inside anyway. The user's
    file lies in a home directory the sandbox does not see: it is shown on its own and named by
    ``PIP_CONFIG_FILE``; ``PIP_*`` variables are passed on. Read afresh per build: tests and users
    change them between builds.
    """
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") and k != "PIP_CONFIG_FILE"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # Nothing a build writes may persist: a cache shared between builds would let one package's
    # build plant wheels that another build installs.
    env["PIP_NO_CACHE_DIR"] = "1"
    named: list[str] = []
    config = os.environ.get("PIP_CONFIG_FILE") or _user_config_file()
    if config and config != os.devnull and os.path.isfile(config):
        env["PIP_CONFIG_FILE"] = os.path.realpath(config)
        named.append(env["PIP_CONFIG_FILE"])
    values = _path_values(env)
    named += [p for p in map(_local_path, values) if p and os.path.exists(p)]
    directories = list(dict.fromkeys(p for p in named if os.path.isdir(p) and p != "/"))
    files = list(dict.fromkeys(p for p in named if os.path.isfile(p)))
    urls = list(dict.fromkeys(v for v in values if v.startswith(("http://", "https://"))))
    return PipSettings(env, directories, files, urls)


def _user_config_file() -> str | None:
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    for path in (os.path.join(xdg, "pip", "pip.conf"), os.path.join(home, ".pip", "pip.conf")):
        if os.path.isfile(path):
            return path
    return None


def _path_values(env: dict[str, str]) -> list[str]:
    """Values of the path-naming options, from the files and variables pip will read."""
    values: list[str] = []
    for option in _PATH_OPTIONS:
        values += env.get("PIP_" + option.upper().replace("-", "_"), "").split()
    # pip takes most of a second to start: asked again only when what it reads may differ.
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(("PIP_", "XDG_")) or k == "HOME"))
    values += _configured_values(key)
    return values


@functools.lru_cache(maxsize=8)
def _configured_values(environment: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The path-naming options of every pip configuration file, as ``pip config list`` shows them
    (pip's own reading, run on the host: it runs no package code)."""
    try:
        # -I and cwd="/": a pip/ folder in the caller's working directory (or on PYTHONPATH)
        # would otherwise be the pip that runs, on the host.
        out = subprocess.run([sys.executable, "-I", "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60, cwd="/", env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    values: list[str] = []
    for line in out.splitlines():
        key, sep, raw = line.partition("=")
        if sep and key.rsplit(".", 1)[-1] in _PATH_OPTIONS:
            values += raw.strip().strip("'\"").split()
    return tuple(values)


def _local_path(value: str) -> str | None:
    if value.startswith("file:"):
        return os.path.realpath(urllib.parse.unquote(urllib.parse.urlparse(value).path))
    if "://" not in value and os.path.isabs(value):
        return os.path.realpath(value)
    return None
