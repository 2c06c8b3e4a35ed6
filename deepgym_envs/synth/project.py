"""What a fetched project looks like: where its code and tests are, and the environment they need.

Layout is read from the files, never configured per project, so synthesis runs on a package it
has never seen: ``src/`` layouts and flat ones, tests in a top-level ``tests/`` directory, inside
the package (``toolz/tests``) or as ``test_*.py`` files at the root.

The environment is built once per project: the project is installed with its test extras into
a scratch virtual environment (so pip resolves every dependency), then uninstalled again — the
tests must import the working copy at ``/testbed``, which ``pythonpath`` points at — and what is
left is frozen into pinned requirements that anyone can rebuild from (:mod:`deepgym_envs.pyenv`).
All of it runs in a build sandbox (:mod:`deepgym_envs.sandbox.build`): the project's build is
its own code.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deepgym_envs.errors import InfrastructureError, SandboxUnavailable, ToolError
from deepgym_envs.grading import TEST_DIR_NAMES, is_test_path
from deepgym_envs.pyenv import (PythonEnv, check_requirement, ensure_env, make_venv, pip_freeze, pip_install,
                                pip_uninstall)
from deepgym_envs.sandbox.base import open_regular
from deepgym_envs.sandbox.build import BuildSandbox
from deepgym_envs.sandbox.hidden import covered
from deepgym_envs.sandbox.pipfetch import requirement_names
from deepgym_envs.synth.fetch import Fetched, SynthError
from deepgym_envs.untrusted_tree import remove_untrusted

#: Directories that hold no library code worth mutating.
_SKIP_DIRS = {"docs", "doc", "examples", "example", "benchmarks", "bench", "build", "dist", "scripts",
              "tools", ".git", ".github", ".tox", ".nox", "__pycache__", "site-packages", "node_modules"}
_SKIP_FILES = {"setup.py", "conftest.py", "noxfile.py", "fabfile.py", "tasks.py", "conf.py", "_version.py",
               "version.py", "__main__.py", "__about__.py"}
_TEST_EXTRAS = ("test", "tests", "testing")
_ROOT_TEST_FILES = ("test.py", "tests.py")
_META_BYTES = 1 << 20


@dataclass(frozen=True)
class Layout:
    """Where things are, relative to the project root."""

    pythonpath: tuple[str, ...]
    """Import roots (``src`` or the root itself)."""
    test_targets: tuple[str, ...]
    """What pytest is pointed at: test directories and root-level test files."""
    modules: tuple[str, ...]
    """Library modules that bugs may be injected into."""


def read_layout(root: Path) -> Layout:
    """The project's layout; SynthError when it ships no tests or no library code."""
    src = root / "src"
    import_root = src if src.is_dir() and any(_is_code(p) for p in src.iterdir()) else root
    pythonpath = ("src",) if import_root == src else (".",)
    targets = _test_targets(root)
    if not targets:
        raise SynthError("no tests shipped: " + _why_no_tests(root))
    modules = sorted(_modules(root, import_root))
    if not modules:
        raise SynthError("no library modules found to inject bugs into")
    return Layout(pythonpath, tuple(targets), tuple(modules))


def _is_code(path: Path) -> bool:
    return (path.is_dir() and (path / "__init__.py").is_file()) or (path.suffix == ".py" and path.name not in _SKIP_FILES)


def _test_targets(root: Path) -> list[str]:
    targets: list[str] = []
    for dirpath, dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for d in list(dirs):
            if d in TEST_DIR_NAMES:
                path = os.path.normpath(os.path.join(rel, d))
                if any(_is_test_file(f) for _, _, fs in os.walk(os.path.join(dirpath, d)) for f in fs):
                    targets.append(path)
                else:  # files pytest collects only when named: voluptuous' tests/tests.py
                    targets += _named_test_modules(root, os.path.join(dirpath, d))
                dirs.remove(d)  # one target covers everything below it
        if rel == ".":
            # pygtrie ships its suite as test.py at the root.
            targets += sorted(f for f in files if _is_test_file(f) or f in _ROOT_TEST_FILES)
    return targets


def _named_test_modules(root: Path, folder: str) -> list[str]:
    """Modules of a test folder that pytest's default patterns miss but that hold tests
    (voluptuous' ``tests/tests.py``, pytimeparse's ``tests/testtimeparse.py``): pytest collects a
    file it is pointed at whatever its name."""
    found = []
    for dirpath, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py") and (name.startswith("test") or name.endswith("tests.py")):
                path = os.path.join(dirpath, name)
                text = _read_meta(Path(path))  # untrusted: no link followed, bounded
                if text is not None and re.search(r"^\s*def test|^class \w*Test|TestCase\)", text, re.M):
                    found.append(os.path.relpath(path, root))
    return found


def _why_no_tests(root: Path) -> str:
    """What the source holds instead (pytimeparse's ``tests/testtimeparse.py`` is a unittest module
    pytest does not collect: saying "no tests/ directory" sent its user looking for the wrong thing)."""
    default = "no test_*.py, *_test.py or root test.py file in the source, which is what pytest collects"
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        if os.path.basename(dirpath) in TEST_DIR_NAMES:
            names = sorted(f for f in files if f.endswith(".py") and f != "__init__.py")
            if names:
                rel = os.path.relpath(dirpath, root)
                return f"{rel}/ holds {', '.join(names[:3])}, which pytest does not collect by default ({default})"
    return default


def _is_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _modules(root: Path, import_root: Path) -> list[str]:
    out = []
    for dirpath, dirs, files in os.walk(import_root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".") and d not in TEST_DIR_NAMES]
        here = Path(dirpath)
        # Only importable code: the import root's own modules, and packages (with __init__.py) below it.
        if here != import_root and not (here / "__init__.py").is_file():
            dirs[:] = []
            continue
        for name in files:
            rel = os.path.relpath(here / name, root)
            if name.endswith(".py") and name not in _SKIP_FILES and not is_test_path(rel) \
                    and rel not in _ROOT_TEST_FILES:
                out.append(rel)
    return out


def add_metadata_stub(fetched: Fetched, layout: Layout) -> Path | None:
    """Write ``NAME-VERSION.dist-info/METADATA`` (name and version only) at the import root, so a
    project that reads its own version at import (``importlib.metadata.version("humanize")``)
    imports from a working copy: it is never installed, and its sdist's egg-info is a build
    artefact no tree keeps. Nothing is written through a link the sdist holds, nor over a name
    that exists. Returns the folder, or None where none was written."""
    root = os.path.realpath(fetched.root)
    base = fetched.root / layout.pythonpath[0]
    if base.is_symlink() or not covered(os.path.realpath(base), [root]) or not base.is_dir():
        return None
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+!-]*", fetched.version or "") \
            or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", fetched.name or ""):
        return None
    folder = base / f"{re.sub(r'[-_.]+', '_', fetched.name).lower()}-{fetched.version}.dist-info"
    try:
        os.mkdir(folder, 0o755)
        fd = os.open(folder / "METADATA", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError:
        return None
    with os.fdopen(fd, "w") as fh:
        fh.write(f"Metadata-Version: 2.1\nName: {fetched.name}\nVersion: {fetched.version}\n")
    return folder


def build_env(fetched: Fetched, layout: Layout, *, use_host: bool = False) -> PythonEnv:
    """Install the project's dependencies (test extras included) once; return the frozen environment.

    The project's own build runs its code (a build backend, ``setup.py``), so the whole of it
    happens in a build sandbox over a copy of the project and a scratch environment, both thrown
    away afterwards. What leaves the sandbox is text, the frozen requirements, each checked to
    pin one release; the task environment is built from those alone (:func:`ensure_env`, in a
    sandbox of its own), so no environment keyed by its requirements holds anything the
    project's build wrote.

    ``use_host``: run the tests with deepgym's own interpreter instead (for projects without
    dependencies, or offline use); nothing is installed.
    """
    if use_host:
        return PythonEnv((), layout.pythonpath)
    try:
        requirements = _frozen_requirements(fetched)
        env = PythonEnv(requirements, layout.pythonpath)
        ensure_env(env)
        return env
    except (InfrastructureError, SandboxUnavailable) as exc:
        raise SynthError(f"environment: {str(exc)[-400:]}") from None


def _frozen_requirements(fetched: Fetched) -> tuple[str, ...]:
    """Install the project with its test extras into a scratch environment, inside a build
    sandbox, and return what that environment holds, pinned, the project itself left out."""
    extras = _test_extras(fetched.root)
    # Not TemporaryDirectory: its cleanup (Python < 3.11.8) chmods through links the build planted.
    tmp = tempfile.mkdtemp(prefix="deepgym-synth-build-")
    try:
        # A copy: an in-tree build leaves build/lib (the unbroken package) and egg-info in the
        # source, which would otherwise end up in every task's base state.
        build_src = Path(tmp) / "src" / fetched.root.name
        shutil.copytree(fetched.root, build_src, symlinks=True)
        venv = Path(tmp) / "venv"
        with BuildSandbox(scratch=[tmp]) as sb:
            make_venv(sb, str(venv))
            target = str(build_src) + (f"[{','.join(extras)}]" if extras else "")
            try:
                pip_install(sb, str(venv), ["--prefer-binary", target, *_test_requirement_args(build_src, extras)])
            except InfrastructureError as exc:
                raise SynthError(f"build failed: {str(exc)[-400:]}") from None
            pip_install(sb, str(venv), ["--prefer-binary", "pytest"])  # a no-op when the extras brought one
            pip_uninstall(sb, str(venv), fetched.name)
            frozen = pip_freeze(sb, str(venv))
    finally:
        remove_untrusted(tmp)
    for line in frozen:  # written by the installed packages' metadata: untrusted text
        try:
            check_requirement(line)
        except ValueError as exc:
            raise SynthError(f"environment: pip freeze gave {exc}") from None
    return tuple(frozen)


def _pyproject(root: Path) -> dict:
    """pyproject.toml as data; {} when absent, unreadable, or on Python 3.10 without tomli."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            return {}
    try:
        return tomllib.loads(_read_meta(root / "pyproject.toml") or "")
    except ValueError:  # TOMLDecodeError is a ValueError
        return {}


def _read_meta(path: Path) -> str | None:
    """A metadata file of the project, or None: the project is untrusted, so no link is followed
    (``setup.cfg -> /dev/zero`` or ``-> /etc/shadow``), only a regular file of bounded size is read."""
    try:
        fh = open_regular(str(path), os.O_RDONLY, str(path))
    except (OSError, ToolError):
        return None
    with fh:
        if os.fstat(fh.fileno()).st_size > _META_BYTES:
            return None
        return fh.read(_META_BYTES).decode("utf-8", errors="replace")


def _test_extras(root: Path) -> list[str]:
    """Extras named test/tests/testing, from pyproject.toml, setup.cfg or PKG-INFO."""
    found: set[str] = set((_pyproject(root).get("project") or {}).get("optional-dependencies") or {})
    for meta in (root / "PKG-INFO", root / "setup.cfg"):
        text = _read_meta(meta)
        if text is not None:
            for line in text.splitlines():
                if line.startswith("Provides-Extra:"):
                    found.add(line.split(":", 1)[1].strip())
                elif "=" in line and line.strip().split("=")[0].strip() in _TEST_EXTRAS:
                    found.add(line.strip().split("=")[0].strip())
    return sorted(e for e in found if e in _TEST_EXTRAS)


def _test_requirement_args(root: Path, extras: list[str] | None = None) -> list[str]:
    """``-r FILE`` for requirement files that are about tests (``requirements/testing.txt``, ...);
    where nothing names tests (no such file, extra or dependency group), the development ones
    (python-dateutil 2.9 keeps pytest-cov, hypothesis and freezegun in ``requirements-dev.txt``)."""
    candidates = sorted({*root.glob("*requirements*.txt"), *root.glob("requirements/*.txt")})
    groups = _pyproject(root).get("dependency-groups") or {}  # PEP 735 (pip reads them only from 25.1)
    args = [r for key in _TEST_EXTRAS for r in groups.get(key, []) if isinstance(r, str)]
    files = _requirement_files(candidates, "test")
    if not files and not args and not extras:
        files = _requirement_files(candidates, "dev")
        if not files:
            args = _tox_deps(root)  # natsort 8.4 names hypothesis (its conftest imports it) only there
    return [a for path in files for a in ("-r", str(path))] + args


def _tox_deps(root: Path) -> list[str]:
    """The plain requirements of ``tox.ini``'s ``[testenv] deps``: no ``-r``, no factor-conditional
    line (``py38: mock``), nothing with a ``{substitution}``."""
    text = _read_meta(root / "tox.ini")
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text or "")
        deps = parser.get("testenv", "deps", fallback="")
    except configparser.Error:
        return []
    lines = [line.split("#", 1)[0].strip() for line in deps.splitlines()]
    return requirement_names([line for line in lines if line and not line.startswith("-") and "{" not in line
                              and not re.match(r"^[\w.,!-]+:\s", line)])


def _requirement_files(candidates: list[Path], word: str) -> list[Path]:
    out = []
    for path in candidates:
        text = _read_meta(path) if word in path.name.lower() else None
        if text is not None and "-e " not in text and "git+" not in text:
            out.append(path)
    return _one_per_python(out)


def _one_per_python(files: list[Path], version: tuple[int, int] = sys.version_info[:2]) -> list[Path]:
    """Of files that differ only by a Python version (wcwidth 0.2.13 pins ``attrs==22.2.0`` in
    ``requirements-tests36.txt`` and ``attrs==23.1.0`` in ``requirements-tests37.txt``: both at once
    cannot install), the one for the newest version not above ``version``, else the oldest."""
    groups: dict[tuple[Path, str], list[tuple[tuple[int, int], Path]]] = {}
    plain: list[Path] = []
    for path in files:
        match = re.fullmatch(r"(.*?\D)(?:py)?(3)\.?(\d{1,2})(\.txt)", path.name)
        if match:
            key = (path.parent, match.group(1) + match.group(4))
            groups.setdefault(key, []).append(((3, int(match.group(3))), path))
        else:
            plain.append(path)
    for members in groups.values():
        fitting = [m for m in members if m[0] <= version]
        plain.append(max(fitting)[1] if fitting else min(members)[1])
    return sorted(plain)
