"""Per-task Python environments: the interpreter and packages a task's tests run with.

Built-in tasks run with deepgym's own interpreter. Tasks made from real projects need that
project's dependencies (and its test dependencies), which must not be installed into deepgym's
interpreter, nor once per sandbox. A task names its environment in the ``python_env`` field:

    "python_env": {"requirements": ["pytest==8.3.3", "attrs==24.2.0"], "pythonpath": ["src"]}

* ``requirements`` — pinned packages, ``name[extras]==version`` with an optional environment
  marker and nothing else (no URLs, paths or pip options: a row is untrusted input, and pip
  would fetch and run whatever it names). They are installed once per machine
  into a virtual environment under ``$DEEPGYM_CACHE/envs/<hash>`` (built at first use, under a
  file lock, like pristine trees), which every sandbox binds **read-only** and puts first on
  ``PATH``, so ``python`` inside the sandbox, the test runner included, is that environment's.
  An empty list means deepgym's own interpreter (which then must have what the tests need).
  Every pip step (resolving, building an sdist, installing) runs in a build sandbox
  (:mod:`deepgym_envs.sandbox.build`) that may write only that environment's directory; the
  host never runs the environment's interpreter nor writes through anything the build made. The
  pip that runs is the one the environment's Python ships for ``ensurepip``
  (:func:`~deepgym_envs.sandbox.build.pip_argv`): the host's may refuse an older Python.
* ``derived`` — ranges a project declares (``name<specifier>``), resolved to the newest releases
  they allow in the build, the pins chosen recorded in the environment's ``.complete``.
* ``install_project`` — the project installed as the harness's ``pip install -e .`` installs it,
  its metadata only, in a per-task copy of the environment (:func:`ensure_project`).
* ``pythonpath`` — directories of the repository, relative to its root, put on ``PYTHONPATH``
  inside the sandbox: the project is imported from the agent's (or the grader's) working copy,
  never from an installed copy, so a fix takes effect without reinstalling anything.
* ``environ`` — variables set in every interpreter the environment starts, for a project's own
  switches an official harness sets (``{"SYMPY_USE_CACHE": "no"}``); only names deepgym lists as
  harmless (:data:`~deepgym_envs.envspec.ENVIRON_ALLOWED`): a row is untrusted, and a variable
  such as ``PYTEST_ADDOPTS`` would steer the test runner.
* ``python`` — the interpreter version (``"3.9"``). The environment is made from that
  interpreter (:func:`find_python`: uv-managed, pyenv, ``python3.X`` on ``PATH``), bound
  read-only into every sandbox that uses it; a version this machine lacks is an
  :class:`~deepgym_envs.errors.InfrastructureError` naming how to install it (so the task's
  verdict is ``no_verdict``, never a run on the wrong interpreter).

>>> env = PythonEnv.from_dict({"requirements": [], "pythonpath": ["src"]})
>>> sandbox_spec_for(env).pythonpath
('src',)
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from deepgym_envs.envspec import PythonEnv, check_range, check_requirement
from deepgym_envs.errors import InfrastructureError, ToolError
from deepgym_envs.sandbox.base import WORKDIR, open_regular
from deepgym_envs.sandbox import pipfetch
from deepgym_envs.sandbox.build import (BuildSandbox, base_python, bundled_pip, pip_argv, pip_refusal,
                                        prepared_pip)
from deepgym_envs.sandbox.spec import SandboxSpec
from deepgym_envs.trees import cache_root, pristine_tree

#: Seconds one environment build may take (pip resolving and downloading included).
BUILD_TIMEOUT = 900


def env_root() -> Path:
    return cache_root() / "envs"


def host_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _wants_other_python(env: PythonEnv) -> bool:
    return bool(env.python) and env.python != host_version()


def ensure_env(env: PythonEnv) -> Path | None:
    """The environment's prefix (a virtual environment), building it on first use.

    ``None`` when the environment is deepgym's own interpreter (no requirements, and no other
    Python asked for). Concurrent callers, in this process or others, wait on a file lock and
    build it once. The build runs in a build sandbox; ValueError for a requirement that is not
    pinned (see :func:`check_requirement`); InfrastructureError when the Python asked for is not
    on this machine.
    """
    if not env.requirements and not env.derived and not _wants_other_python(env) and not env.environ:
        return None
    requirements = [str(check_requirement(line)) for line in env.requirements]
    requirements += [str(check_range(line)) for line in env.derived]
    base = _python_for(env)
    dest = env_root() / env_key(env, base)
    if (dest / ".complete").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            return dest
        shutil.rmtree(dest, ignore_errors=True)  # a build that died half-way (rmtree follows no link)
        # Built under another name and renamed when complete; inside the sandbox it is at ``dest``
        # already, since a venv's scripts name their prefix.
        build = dest.parent / f".build-{dest.name}-{uuid.uuid4().hex[:8]}"
        os.mkdir(build, 0o755)
        prepare_pip(base)
        try:
            with BuildSandbox(writable=[(str(build), str(dest))], readonly=python_binds(base)) as sb:
                make_venv(sb, str(dest), base)
                if requirements:
                    pip_install(sb, str(dest), ["--prefer-binary", *requirements], python=base)
                resolved = pip_freeze(sb, str(dest), python=base) if env.derived else []
            finish_env(build, env, _version_of(base), resolved)
            os.rename(build, dest)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    return dest


def _python_for(env: PythonEnv) -> str:
    return find_python(env.python) if _wants_other_python(env) else base_python()


def env_prefix(env: PythonEnv) -> Path:
    """Where :func:`ensure_env` builds (or has built) ``env``; InfrastructureError when its Python is missing."""
    return env_root() / env_key(env, _python_for(env))


def env_key(env: PythonEnv, base: str) -> str:
    """Names a built environment: the same requirements on the same interpreter share one."""
    parts: list[Any] = [sorted(env.requirements), list(env.pythonpath), os.path.realpath(base)]
    if env.derived:
        parts.append(sorted(env.derived))
    spec = json.dumps([*parts, dict(env.environ)] if env.environ else parts)
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def find_python(version: str) -> str:
    """The path of an interpreter of ``version`` (``"3.9"``) on this machine.

    Looked for where people keep them: uv's managed Pythons, pyenv's versions, then
    ``pythonX.Y`` in the usual system directories and on ``PATH`` (pyenv's shims skipped: they
    would pick a version by the working directory). Where none is and ``uv`` is on ``PATH``, ``uv
    python install X.Y`` is run once (where the network allows; ``DEEPGYM_NO_PYTHON_INSTALL=1``
    turns it off). InfrastructureError naming how to get one otherwise.
    """
    if not _VERSION.fullmatch(version or ""):
        raise InfrastructureError(f"python_env.python {version!r}: expected a version such as '3.9'")
    if version == host_version():
        return base_python()
    found = _installed_python(version)
    tried = ""
    if found is None and shutil.which("uv") and not os.environ.get("DEEPGYM_NO_PYTHON_INSTALL"):
        with _UV_LOCK:
            found = _installed_python(version)
            if found is None:
                tried = _uv_install(version)
                found = _installed_python(version)
    if found is not None:
        return found
    raise InfrastructureError(
        f"this task needs Python {version}, which is not installed here (looked in uv's and pyenv's "
        f"versions and for python{version} on PATH{tried}). Install it with `uv python install {version}` or "
        f"`pyenv install {version}` (or your system's python{version} package), then run again")


_UV_LOCK = threading.Lock()


def _installed_python(version: str) -> str | None:
    name = f"python{version}"
    candidates: list[str] = []
    home = Path.home()
    for root in (Path(os.environ.get("UV_PYTHON_INSTALL_DIR", home / ".local/share/uv/python")),):
        candidates += [str(p / "bin" / name) for p in sorted(_listed(root, f"cpython-{version}.*"), reverse=True)]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", home / ".pyenv"))
    candidates += [str(p / "bin" / name) for p in sorted(_listed(pyenv_root / "versions", f"{version}.*"),
                                                         key=_version_sort_key, reverse=True)]
    dirs = ["/usr/local/bin", "/usr/bin", *os.environ.get("PATH", "").split(os.pathsep)]
    candidates += [os.path.join(d, name) for d in dirs if d and "shims" not in Path(d).parts]
    return next((p for p in candidates if os.path.isfile(p) and os.access(p, os.X_OK)), None)


def _listed(folder: Path, pattern: str) -> list[Path]:
    """``folder.glob(pattern)``, or nothing where this user may not list it (another user's
    ``PYENV_ROOT``, inherited through ``su``)."""
    try:
        return list(folder.glob(pattern))
    except OSError:
        return []


def _uv_install(version: str) -> str:
    """Run ``uv python install VERSION``; what of it the error message should say ("" when it ran)."""
    try:
        proc = subprocess.run(["uv", "python", "install", version], capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"; `uv python install {version}` failed: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return f"; `uv python install {version}` failed: {last}"
    return ""


_VERSION = re.compile(r"[23]\.\d{1,2}")


def _version_sort_key(path: Path) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in path.name.split("."))


def _version_of(python: str) -> str:
    """``X.Y`` of an interpreter found by :func:`find_python` (from its file name, never by running it)."""
    name = os.path.basename(python)
    if name == os.path.basename(base_python()) or python == sys.executable:
        return host_version()
    return name.removeprefix("python")


def python_binds(python: str) -> list[str]:
    """Host directories a sandbox must see for this interpreter to run: its installation (first),
    and its pip made ready (:func:`prepare_pip`) where it is."""
    if python == base_python():
        return []  # deepgym's own Python is bound into every sandbox already
    wheel = bundled_pip(python)
    ready = [prepared_pip(wheel)] if wheel and os.path.isfile(os.path.join(prepared_pip(wheel), ".complete")) else []
    return [os.path.dirname(os.path.dirname(os.path.realpath(python))), *ready]


def prepare_pip(python: str) -> None:
    """Unpack and compile, once per machine, the pip that ``python``'s installation ships (which
    drives its environments: :func:`~deepgym_envs.sandbox.build.pip_argv`), in a build sandbox:
    run from its wheel, pip compiles its modules anew on every step. Nothing when ``python`` is
    deepgym's own (its own pip drives it) or ships none, or is older than 3.7 (no hash-checked
    byte code): pip then runs from the wheel."""
    wheel = bundled_pip(python)
    if wheel is None or python == base_python() or _version_sort_key(Path(_version_of(python))) < (3, 7):
        return
    dest = Path(prepared_pip(wheel))
    if (dest / ".complete").is_file():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f"{dest.name}.lock", "w") as lock:  # the name holds dots: no with_suffix
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            return
        shutil.rmtree(dest, ignore_errors=True)
        build = dest.parent / f".build-{dest.name}-{uuid.uuid4().hex[:8]}"
        os.mkdir(build, 0o755)
        try:
            with BuildSandbox(writable=[(str(build), str(dest))], readonly=python_binds(python)) as sb:
                unzip = "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])"
                _check(sb.exec([python, "-I", "-c", unzip, wheel, str(dest)], timeout=300), "unpacking pip")
                # unchecked-hash: the copy out keeps no modification times to check against.
                _check(sb.exec([python, "-I", "-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash",
                                str(dest)], timeout=600), "compiling pip")
            _write_new(build, (".complete",), wheel + "\n")
            os.rename(build, dest)
        finally:
            shutil.rmtree(build, ignore_errors=True)


def finish_env(prefix: Path, env: PythonEnv, version: str | None = None, resolved: list[str] | None = None) -> None:
    """Point the environment at the workspace, and mark it complete.

    The repository's import roots go into a ``.pth`` file, which ``site`` appends *after*
    site-packages: the project is imported from ``/testbed``, but a module the agent plants there
    (an ``iniconfig.py``, say) can never shadow one the test runner imports. ``PYTHONPATH`` would
    put ``/testbed`` first and let it.

    Both files are new files written through directories opened without following links: the
    rest of the prefix was written by a build sandbox, which may have left links anywhere.
    """
    site = ("lib", f"python{version or host_version()}", "site-packages")
    lines = [os.path.normpath(os.path.join(WORKDIR, p)) for p in env.pythonpath]
    _write_new(prefix, (*site, "deepgym-workspace.pth"), "".join(f"{line}\n" for line in lines))
    if env.environ:  # a .pth line that starts with "import" runs as the interpreter starts
        sets = "; ".join(f"os.environ[{k!r}] = {v!r}" for k, v in env.environ)
        _write_new(prefix, (*site, "deepgym-environ.pth"), f"import os; {sets}\n")
    record = {**env.to_dict(), "resolved": resolved} if resolved else env.to_dict()  # what the ranges became
    _write_new(prefix, (".complete",), json.dumps(record, indent=1) + "\n")


def _write_new(root: Path, parts: tuple[str, ...], text: str) -> None:
    """Write ``root/parts`` as a fresh regular file; no link on the way (or at the end) is followed."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, flags)
        try:
            for part in parts[:-1]:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(part, flags, dir_fd=fd)
                os.close(fd)
                fd = nxt
            try:
                os.unlink(parts[-1], dir_fd=fd)
            except FileNotFoundError:
                pass
            out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                          dir_fd=fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise InfrastructureError(f"cannot write {'/'.join(parts)} in the environment at {root}: {exc} "
                                  "(its build left something other than a directory on the way)") from None
    with os.fdopen(out, "w") as fh:
        fh.write(text)


def create_venv(dest: Path) -> None:
    """An empty virtual environment of this interpreter, made on the host (it runs no package code)."""
    _run([base_python(), "-I", "-m", "venv", "--without-pip", str(dest)],
         what=f"creating a virtual environment at {dest}")


def make_venv(sb: BuildSandbox, prefix: str, python: str | None = None) -> None:
    """An empty virtual environment at ``prefix`` (a writable directory of ``sb``), made inside
    by ``python`` (default: the interpreter behind deepgym's own)."""
    _check(sb.exec([python or base_python(), "-I", "-m", "venv", "--without-pip", prefix]),
           f"creating a virtual environment at {prefix}")


def pip_install(sb: BuildSandbox, prefix: str, args: list[str], *, timeout: float = BUILD_TIMEOUT,
                python: str | None = None, prefetch: list[str] | None = None) -> None:
    """``pip install ARGS`` into the environment at ``prefix`` (made by :func:`make_venv` from
    ``python``), inside the offline build sandbox ``sb``, from what fetch steps download
    (:mod:`deepgym_envs.sandbox.pipfetch`: the step that may run a package's build backend never
    holds the index credentials). The pip that runs is ``python``'s own
    (:func:`~deepgym_envs.sandbox.build.pip_argv`); ``prefetch``: see :func:`~.pipfetch.install`."""
    _check(pipfetch.install(sb, f"{prefix}/bin/python", args, timeout=timeout, interpreter=python,
                            prefetch=prefetch or ()), "pip install")


def pip_uninstall(sb: BuildSandbox, prefix: str, name: str, *, python: str | None = None) -> None:
    """Remove ``name`` from the environment; not an error when it is not there."""
    sb.exec(pip_argv(["uninstall", "-y", "-q", name], python=f"{prefix}/bin/python", interpreter=python), timeout=300)


def pip_freeze(sb: BuildSandbox, prefix: str, *, python: str | None = None) -> list[str]:
    """The environment's packages, pinned; local builds (``name @ file://``) are left out. What
    comes back was written by the packages themselves: :func:`check_requirement` it before use."""
    result = sb.exec(pip_argv(["freeze", "--all"], python=f"{prefix}/bin/python", interpreter=python), timeout=300)
    _check(result, "pip freeze")
    return [line.strip() for line in result.stdout.splitlines()
            if line.strip() and not line.startswith(("#", "-e ")) and " @ " not in line
            and line.split("==")[0].lower() not in ("pip", "setuptools", "wheel")]


def sandbox_spec_for(env: PythonEnv | None, backend: str | None = None) -> SandboxSpec:
    """The :class:`~deepgym_envs.sandbox.SandboxSpec` that runs in this environment (building it first)."""
    if env is None:
        return SandboxSpec()
    prefix = ensure_env(env)
    # Another Python's installation is bound where the environment's interpreter links to it (the
    # local backend sees the host as it is). The host finds it again: the link is the build's.
    other = prefix is not None and _wants_other_python(env) and backend != "local"
    home = python_binds(find_python(env.python)) if other else []
    return SandboxSpec(python_prefix=str(prefix) if prefix is not None else None, pythonpath=env.pythonpath,
                       python_home=home[0] if home else None)


def sandbox_spec(task: Any, backend: str | None = None) -> SandboxSpec:
    """The sandbox spec a task's ``python_env`` asks for (the default one for tasks that name none),
    for ``backend`` (None: the default one); with ``install_project``, the task's own environment
    (:func:`ensure_project`)."""
    raw = getattr(task, "python_env", None)
    if not raw:
        return SandboxSpec()
    env = PythonEnv.from_dict(raw)
    spec = sandbox_spec_for(env, backend)
    if env.install_project and spec.python_prefix:
        prefix = ensure_project(env, Path(spec.python_prefix), pristine_tree(task))
        spec = dataclasses.replace(spec, python_prefix=str(prefix))
    return spec


#: What of a project's installed metadata a task's environment keeps: the data ``importlib.metadata``
#: and ``pkg_resources`` read (version, entry points, top-level names). Never code (a ``.pth``, a
#: script) nor ``RECORD``, which would list files that are not there: the code is the working copy's.
_METADATA_FILES = ("METADATA", "PKG-INFO", "WHEEL", "entry_points.txt", "top_level.txt", "requires.txt",
                   "namespace_packages.txt")
_METADATA_DIR = re.compile(r"[A-Za-z0-9][\w.+-]*\.(dist|egg)-info")
_METADATA_BYTES = 1 << 20


def ensure_project(env: PythonEnv, prefix: Path, tree: Path) -> Path:
    """The task's own environment: ``prefix`` (the environment its requirements share with other
    tasks) with the project of ``tree`` installed as ``pip install -e .`` installs it, built on
    first use and kept (one per environment and pristine tree), read-only in every sandbox.

    The project is built and installed (``--no-deps``) in an offline build sandbox from a copy of
    the tree, into a scratch prefix; of what that made, only the metadata files of
    its ``*.dist-info`` / ``*.egg-info`` are kept (:data:`_METADATA_FILES`), with a
    ``direct_url.json`` saying it is an editable install of ``WORKDIR``: the code stays the working
    copy's (the environment's ``.pth``), so an edit takes effect without reinstalling, and nothing
    the build wrote runs when an interpreter starts. The environment is a copy of ``prefix`` made
    of hard links (its scripts rewritten to name the copy), so it costs directories, not bytes.
    InfrastructureError when the project does not install, naming how to turn it off for the row.
    """
    key = hashlib.sha256(f"{prefix.name}\0{os.path.realpath(tree)}".encode()).hexdigest()[:16]
    dest = prefix.parent / f"{prefix.name}-project-{key}"
    if (dest / ".complete").is_file():
        return dest
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / ".complete").is_file():
            return dest
        shutil.rmtree(dest, ignore_errors=True)
        build = dest.parent / f".build-{dest.name}-{uuid.uuid4().hex[:8]}"
        scratch = dest.parent / f".install-{dest.name}-{uuid.uuid4().hex[:8]}"
        os.mkdir(scratch, 0o755)
        os.mkdir(scratch / "prefix", 0o755)
        os.mkdir(scratch / "src", 0o755)  # where the build sandbox has its copy of the tree
        try:
            metadata = _project_metadata(env, prefix, tree, scratch)
            _link_copy(prefix, build, dest)
            site = ("lib", f"python{_version_of(_python_for(env))}", "site-packages")
            for folder, files in metadata.items():
                for name, data in files.items():
                    _write_new(build, (*site, folder, name), data.decode("utf-8", errors="replace"))
                url = {"url": f"file://{WORKDIR}", "dir_info": {"editable": True}}
                _write_new(build, (*site, folder, "direct_url.json"), json.dumps(url) + "\n")
                _write_new(build, (*site, folder, "INSTALLER"), "pip\n")
            _write_new(build, (".complete",), json.dumps({**env.to_dict(), "tree": str(tree)}, indent=1) + "\n")
            os.rename(build, dest)
        finally:
            shutil.rmtree(build, ignore_errors=True)
            shutil.rmtree(scratch, ignore_errors=True)
    return dest


def _project_metadata(env: PythonEnv, prefix: Path, tree: Path, scratch: Path) -> dict[str, dict[str, bytes]]:
    """Install the project of ``tree`` into ``scratch`` in a build sandbox; its metadata files by folder.

    Editable first, as the harness installs it (a PEP 660 backend writes the metadata and a small
    wheel: Django's took 38 s built in full); then, where that left no ``*.dist-info`` (a legacy
    ``setup.py develop`` writes its metadata into the source tree) or failed, a regular install."""
    base = _python_for(env)
    prepare_pip(base)
    prefix_out, src = scratch / "prefix", str(scratch / "src")
    failed = ""
    for editable in (["-e"], []):
        with BuildSandbox(writable=[str(prefix_out)], scratch=[(str(tree), src)],
                          readonly=[*python_binds(base), str(prefix)]) as sb:
            try:
                pip_install(sb, str(prefix), ["--no-deps", "--no-warn-script-location", "--prefix", str(prefix_out),
                                              *editable, src], python=base, prefetch=pipfetch.build_requires(tree))
            except InfrastructureError as exc:
                failed = str(exc)[-600:]
                continue
        found = _metadata_in(prefix_out)
        if found:
            return found
    what = f"failed ({failed})" if failed else "left no *.dist-info"
    raise InfrastructureError(
        f"installing the project as `pip install -e .` does {what}; where its tests need no installed metadata, "
        'set "install_project": false in the row\'s python_env (or with `deepgym tasks import --env-overrides`)')


def _metadata_in(prefix_out: Path) -> dict[str, dict[str, bytes]]:
    """The metadata files (:data:`_METADATA_FILES`) of each ``*.dist-info`` / ``*.egg-info`` an install left."""
    found: dict[str, dict[str, bytes]] = {}
    for site in sorted(prefix_out.glob("lib/python*/site-packages")):
        for entry in os.scandir(site):
            if not entry.is_dir(follow_symlinks=False) or not _METADATA_DIR.fullmatch(entry.name):
                continue
            files = found.setdefault(entry.name, {})
            for name in _METADATA_FILES:
                try:
                    with open_regular(os.path.join(entry.path, name), os.O_RDONLY, name) as fh:
                        files[name] = fh.read(_METADATA_BYTES)
                except (OSError, ToolError):
                    continue
    return found


def _link_copy(source: Path, build: Path, dest: Path) -> None:
    """``source`` (an environment) again at ``build``, its files hard links, its links copied as
    links; a script naming ``source``'s interpreter is rewritten to name ``dest``'s (where ``build``
    will be renamed). Nothing is followed: the environment was written by a build sandbox."""
    old = f"#!{source}/bin/".encode()
    for root, dirs, files in os.walk(source, followlinks=False):
        rel = os.path.relpath(root, source)
        out = os.path.normpath(os.path.join(build, rel))
        os.mkdir(out, 0o755)
        for name in dirs + files:
            src, dst = os.path.join(root, name), os.path.join(out, name)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                if name in dirs:
                    dirs.remove(name)  # os.walk lists a link to a directory among dirs
            elif name in files and rel == "bin" and _rewrite_script(src, dst, old, f"#!{dest}/bin/".encode()):
                continue
            elif name in files:
                os.link(src, dst, follow_symlinks=False)


def _rewrite_script(src: str, dst: str, old: bytes, new: bytes) -> bool:
    """Write ``dst`` as ``src`` with its ``#!`` line's ``old`` prefix made ``new``; False when it has none."""
    try:
        with open_regular(src, os.O_RDONLY, src) as fh:
            data = fh.read(_METADATA_BYTES + 1)
    except (OSError, ToolError):
        return False
    if not data.startswith(old) or len(data) > _METADATA_BYTES:
        return False
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755)
    with os.fdopen(fd, "wb") as fh:
        fh.write(new + data[len(old):])
    return True


def _check(result: Any, what: str) -> None:
    if result.timed_out:
        raise InfrastructureError(f"{what} took longer than {result.duration:.0f}s")
    if result.exit_code != 0:
        output = (result.stderr or result.stdout).strip()
        refusal = pip_refusal(output, "this environment's Python")
        raise InfrastructureError(f"{what} failed: {refusal or output[-1500:]}")


def _run(argv: list[str], *, what: str, timeout: float = BUILD_TIMEOUT) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"{what} took longer than {timeout:.0f}s") from None
    if proc.returncode != 0:
        raise InfrastructureError(f"{what} failed: {(proc.stderr or proc.stdout).strip()[-1500:]}")
    return proc.stdout
