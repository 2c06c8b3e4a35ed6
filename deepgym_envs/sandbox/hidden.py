"""What a sandbox must not show of this host, whichever backend binds host directories in.

deepgym's own package and task files (gold patches, hidden tests), the tree cache and every folder
task data was loaded from lie inside directories a sandbox binds read-only (a Python's prefix,
site-packages); the namespace and docker backends cover those with empty directories. So are the
installed copies of the project under test itself (:func:`tree_packages`): a later release of it in
a bound site-packages holds the fix (the audit's leak scan found sympy's, a dependency of torch, in
deepgym's own interpreter, readable from every sympy task's sandbox).

A task with an environment of its own imports nothing from any other Python's installed packages,
so a sandbox for it shows none of them (:func:`package_dirs`): a vendored copy of the project
(setuptools' ``_vendor/more_itertools``) or a single-module install (``xmltodict.py``) is no
package the tree names, and the leak scan found gold lines in both.

Nor does a sandbox show the host's credentials (:func:`credential_paths`): pip's configuration
(index URLs with tokens, constraint files, a client certificate), ``.netrc``, cloud and registry
logins, SSH keys, tokens. They are hidden wherever a bound directory would show them: every
system directory is bound, and a home directory under ``/opt`` or a Python inside a home are not rare.
"""

from __future__ import annotations

import configparser
import functools
import glob
import os
import pwd
import sys

from deepgym_envs.tasks import task_sources
from deepgym_envs.trees import cache_root

#: Host system directories every sandbox binds read-only (readable by any user anyway).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")


@functools.lru_cache(maxsize=1)
def installed_copies() -> tuple[str, ...]:
    """Every ``deepgym_envs`` directory in this Python's site-packages, whichever one is imported:
    an editable install still puts the built-in task files (gold patches, hidden tests) there.
    A virtual environment's base interpreter is bound too, so its installs count as well."""
    return copies_under(*_this_python())


def _this_python() -> tuple[tuple[str, ...], frozenset[str]]:
    """This interpreter's site-packages directories and prefixes (its base's included)."""
    import site

    return ((*site.getsitepackages(), site.getusersitepackages()),
            frozenset((sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)))


@functools.lru_cache(maxsize=64)
def copies_under(site_dirs: tuple[str, ...], prefixes: frozenset[str] | tuple[str, ...],
                 names: tuple[str, ...] = ("deepgym_envs",)) -> tuple[str, ...]:
    """The package directories ``names`` in ``site_dirs`` and in the site-packages of each Python
    prefix. Kept per argument, as :func:`installed_copies` is: the globbing cost ~0.3 ms, and every
    command a sandbox runs asks again for the same binds."""
    dirs = list(site_dirs)
    for prefix in prefixes:
        dirs += glob.glob(os.path.join(glob.escape(prefix), "lib*", "python*", "*-packages"))
    found = {os.path.realpath(os.path.join(d, name)) for d in dirs for name in names
             if os.path.isdir(os.path.join(d, name))}
    return tuple(sorted(found))


#: Packages the test runner itself imports: a task of one of them is not supported (README), and
#: hiding its installed copy would take the runner down with it.
_RUNNER_PACKAGES = frozenset({"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py", "exceptiongroup",
                              "tomli", "colorama", "deepgym_envs"})


@functools.lru_cache(maxsize=256)
def tree_packages(tree: str) -> tuple[str, ...]:
    """The top-level packages a pristine tree holds (a directory with ``__init__.py`` at its root or
    under ``src/``): the project under test, whose installed copies a sandbox must not show."""
    names = set()
    for base in (tree, os.path.join(tree, "src")):
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        names.update(e for e in entries if e.isidentifier() and os.path.isfile(os.path.join(base, e, "__init__.py")))
    return tuple(sorted(names - _RUNNER_PACKAGES))


@functools.lru_cache(maxsize=256)
def _project_copies(packages: tuple[str, ...], extra_dests: tuple[str, ...]) -> tuple[str, ...]:
    """Installed copies of ``packages`` in this interpreter's site-packages (its base's too) and in
    the bound Pythons ``extra_dests``."""
    site_dirs, prefixes = _this_python()
    return copies_under(site_dirs, prefixes | frozenset(extra_dests), packages)


#: Where a Python keeps installed packages, relative to a directory a sandbox binds: a prefix
#: (``lib/python3.11/site-packages``, Debian's ``lib/python3/dist-packages``), ``/usr``'s
#: ``local/``, or an installation one level below (``/opt/conda``).
_PACKAGE_GLOBS = ("lib*/python*/*-packages", "local/lib*/python*/*-packages", "*/lib*/python*/*-packages")


@functools.lru_cache(maxsize=64)
def package_dirs(bound: tuple[str, ...], own: str) -> tuple[str, ...]:
    """Every installed-packages directory of a Python in ``bound`` (the system directories, this
    interpreter's site-packages and user site included) that is not under ``own``, the task's
    environment: what a task with an environment of its own has no need to see."""
    import site

    found = {*site.getsitepackages(), site.getusersitepackages()}
    for root in (*SYSTEM_DIRS, *bound):
        for pattern in _PACKAGE_GLOBS:
            found.update(glob.glob(os.path.join(glob.escape(root), pattern)))
    real = {os.path.realpath(d) for d in found if os.path.isdir(d)}
    return tuple(sorted(d for d in real if not covered(d, [own])))


def covered(path: str, dirs: list[str] | tuple[str, ...]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def hidden_paths(extra_dests: tuple[str, ...], packages: tuple[str, ...] = (), own_python: str | None = None) -> list[str]:
    """Directories with hidden data (this package and its task files, the tree cache, every
    directory a task file was loaded from, installed copies of the project's ``packages``) that a
    read-only bind would otherwise show; with ``own_python`` (the task's environment), every other
    Python's installed packages too."""
    bound = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)] + list(extra_dests)
    pkg = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    secrets = {pkg, os.path.join(os.path.dirname(pkg), "tasks"), os.path.realpath(cache_root()),
               *task_sources(), *installed_copies(), *copies_under((), extra_dests)}
    if packages:
        secrets.update(_project_copies(packages, extra_dests))
    if own_python:
        secrets.update(package_dirs(extra_dests, own_python))
    shown = [s for s in secrets if covered(s, bound) and os.path.isdir(s)]
    # Hiding a directory hides what is inside it (and its mount points would be gone anyway).
    return sorted(s for s in shown if not any(o != s and covered(s, [o]) for o in shown))


#: Files and folders, relative to a home directory, that hold credentials or a package index's
#: configuration (pip's own are in :data:`PIP_HOME`).
HOME_SECRETS = (".netrc", ".pypirc", ".git-credentials", ".gitconfig", ".config/git", ".docker", ".aws", ".azure",
                ".config/gcloud", ".ssh", ".gnupg", ".huggingface", ".cache/huggingface/token",
                ".cache/huggingface/stored_tokens", ".kube", ".config/gh", ".npmrc", ".yarnrc", ".condarc",
                ".cargo/credentials", ".cargo/credentials.toml", ".config/uv", ".local/share/keyrings",
                ".password-store", ".terraform.d", ".vault-token")
#: pip's user configuration, relative to a home directory.
PIP_HOME = (".pip", ".config/pip")
#: Variables that name such a file or folder (``KUBECONFIG`` a list of them).
SECRET_VARS = ("NETRC", "GIT_CONFIG_GLOBAL", "DOCKER_CONFIG", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
               "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "HF_TOKEN_PATH", "KUBECONFIG", "UV_CONFIG_FILE",
               "AZURE_CONFIG_DIR")
#: System-wide: the variables PAM gives every login (where a machine's API keys often go), and the
#: system configuration of git (``http.extraHeader`` tokens, credential helpers), npm
#: (``_authToken``), uv and conda (index credentials), apt (``auth.conf``) and boto. The sandbox's
#: own git needs none of it: its workspace belongs to the user it runs as.
SYSTEM_SECRETS = ("/etc/environment", "/etc/gitconfig", "/etc/npmrc", "/etc/uv", "/etc/xdg/uv", "/etc/conda/.condarc",
                  "/etc/conda/condarc", "/etc/conda/condarc.d", "/opt/conda/.condarc", "/etc/apt/auth.conf",
                  "/etc/apt/auth.conf.d", "/etc/boto.cfg", "/etc/netrc")
#: Options of a pip configuration file that name files which are secret or may name indexes.
_PIP_FILE_OPTIONS = ("constraint", "client-cert", "client_cert")


def credential_paths(bound: tuple[str, ...] | list[str], *, pip: bool = True,
                     prefixes: tuple[str, ...] = ()) -> list[tuple[str, bool]]:
    """``(path, is_directory)`` for each credential file or folder of this host (its user's,
    its system's, and the ones its variables name; pip's configuration too unless ``pip`` is
    False, a fetch step's which must use it) that a sandbox binding the host directories
    ``bound`` (the system directories are added) would show. ``prefixes``: Python installations it
    binds, whose ``pip.conf`` pip reads. Read afresh each time: a sandbox asks once, as it starts.

    Paths are real ones (a link is hidden where it leads); none lies inside another, nor holds a
    bound directory (a Python inside ``~/.config/uv`` stays visible)."""
    dirs = [d for d in SYSTEM_DIRS if os.path.isdir(d) and not os.path.islink(d)] + list(bound)
    names: list[str] = list(SYSTEM_SECRETS)
    for home in _homes():
        names += [os.path.join(home, rel) for rel in HOME_SECRETS]
    config_home = os.environ.get("XDG_CONFIG_HOME")
    if config_home:
        names += [os.path.join(config_home, rel) for rel in ("git", "gcloud", "gh", "uv")]
    hf_home = os.environ.get("HF_HOME")
    if hf_home:
        names += [os.path.join(hf_home, "token"), os.path.join(hf_home, "stored_tokens")]
    for var in SECRET_VARS:
        names += [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    if pip:
        names += pip_config_paths(prefixes)
    found: dict[str, bool] = {}
    for name in names:
        real = os.path.realpath(os.path.expanduser(name))
        if os.path.exists(real) and real != "/" and covered(real, dirs) and not any(covered(b, [real]) for b in bound):
            found[real] = os.path.isdir(real)
    return sorted((p, d) for p, d in found.items() if not any(o != p and covered(p, [o]) for o in found))


def pip_config_paths(prefixes: tuple[str, ...] = ()) -> list[str]:
    """Every file and folder pip reads configuration from (site-wide, per interpreter of this
    Python and of ``prefixes``, the user's, ``PIP_CONFIG_FILE``), and the files they or ``PIP_*``
    variables name as constraints or a client certificate."""
    site_dirs = [d for d in os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d]
    pythons = dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix, *prefixes))
    files = ["/etc/pip.conf", *(os.path.join(p, "pip.conf") for p in pythons),
             *(os.path.join(h, ".pip", "pip.conf") for h in _homes())]
    folders = [*(os.path.join(d, "pip") for d in site_dirs), *(os.path.join(h, ".config", "pip") for h in _homes())]
    if os.environ.get("XDG_CONFIG_HOME"):
        folders.append(os.path.join(os.environ["XDG_CONFIG_HOME"], "pip"))
    user = os.environ.get("PIP_CONFIG_FILE")
    if user and user != os.devnull:
        files.append(user)
    named = [v for var in ("PIP_CONSTRAINT", "PIP_CLIENT_CERT") for v in os.environ.get(var, "").split()]
    for path in [*files, *(os.path.join(d, n) for d in folders for n in _listdir(d))]:
        named += _pip_named_files(path)
    return [*files, *folders, *named]


def _pip_named_files(path: str) -> list[str]:
    """The files a pip configuration file names as constraints or a client certificate."""
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read(path)
    except (configparser.Error, OSError, UnicodeDecodeError):
        return []
    return [value for section in parser.sections() for key, raw in parser.items(section)
            if key in _PIP_FILE_OPTIONS for value in raw.split()]


def _homes() -> list[str]:
    """This user's home directories: ``$HOME`` and the one the password database names."""
    homes = [os.environ.get("HOME", "")]
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    return [h for h in dict.fromkeys(homes) if h and h != "/"]


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
