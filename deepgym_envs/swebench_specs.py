"""The environments SWE-bench rows run in: a table keyed by (repository, version) that we ship.

A SWE-bench row names its repository and a ``version`` (the project's release line at the base
commit); the official harness keeps, per pair, the Python version, the packages to install, the
install and test commands and the log parser. This is our table of the same, for repositories
that are pure Python (or close to it), so a row imports with no hand edits
(:mod:`deepgym_envs.swebench_import`):

* ``python`` — the interpreter (:func:`deepgym_envs.pyenv.find_python` finds it);
* ``requirements`` — pinned packages the tests need, installed once per spec into a virtual
  environment built in a build sandbox (:mod:`deepgym_envs.pyenv`);
* ``pythonpath`` — the project is imported from the working copy (``src`` or the root), so a fix
  takes effect at once, and only projects whose import needs no build (no compiled extension, no
  generated version file) are listed; its metadata (version, entry points) is installed as the
  harness's ``pip install -e .`` installs it (``python_env.install_project``, which the import sets);
* ``test_cmd`` — extra pytest arguments; the test files come from the row's ``test_patch``;
* ``plugins`` — pytest plugins the tests use (``pytest_mock``), loaded with ``-p`` (autoloading is
  off: :mod:`deepgym_envs.testplugins`) and so written into the row's ``test_cmd``;
* ``trust`` — capabilities of the seal (:data:`deepgym_envs.tasks.TRUST_CAPABILITIES`) the
  environment's own packages need at import, copied into each row's ``trust``: pandas >= 1.5 imports
  ``ctypes`` unconditionally, so a project importing it is graded with ``ctypes`` kept (what that
  gives up: the README's section on the seal);
* ``parser`` — how the row's test ids name tests: ``pytest`` is SWE-bench's ``parse_log_pytest``
  (ids cut at the first space, as its log lines are split; an absolute-path parameter cut to its
  last component, as ``parse_log_pytest_options`` does for requests, pydicom and pylint);
  ``sympy`` and ``django`` are the ids of ``bin/test`` and ``runtests.py``, which the import
  translates into pytest node ids (:mod:`deepgym_envs.swebench_ids`): those suites run under
  pytest here, never graded from a log.

A repository missing from the table gets :data:`GENERIC`: deepgym's own Python, pytest only, the
project imported from ``src`` or its root. The import says so per row; add a pair here (or fix
the row's ``python_env``) when its tests need more.

>>> spec_for("pallets/flask", "2.3").python
'3.11'
>>> spec_for("someone/unknown", "1.0").key
'generic'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The pytest every environment gets unless its spec pins another (supports Python 3.7–3.12).
PYTEST = "pytest==7.4.4"
#: pytest's dependencies below Python 3.11, pinned: resolving for another interpreter than the
#: one pip runs on, pip leaves out dependencies behind an environment marker.
PYTEST_BELOW_311 = (PYTEST, "exceptiongroup==1.2.0", "tomli==2.0.1")

#: pytest's dependencies on Python 3.7, pinned (the oldest Python deepgym builds environments for:
#: pip's ``--python`` drives no interpreter older than 3.7).
PYTEST_PY37 = (*PYTEST_BELOW_311, "importlib-metadata==6.7.0", "zipp==3.15.0", "typing-extensions==4.7.1",
               "pluggy==1.2.0", "iniconfig==2.0.0", "packaging==23.2")
#: Django's suite: runtests.py's set-up as a pytest plugin (``in_sandbox/deepgym_django.py``).
DJANGO_CMD = ("-p", "no:nose", "-p", "no:warnings", "-p", "deepgym_django")
#: What Django's tests/requirements/py3.txt lists that installs from wheels on Python 3.8-3.11
#: (SWE-bench installs that file; without these, tests of password hashers, Jinja2 templates,
#: image fields and YAML serialisers skip).
DJANGO_TEST_PACKAGES = ("argon2-cffi==23.1.0", "argon2-cffi-bindings==21.2.0", "cffi==1.17.1", "pycparser==2.22",
                        "bcrypt==4.2.0", "docutils==0.20.1", "Jinja2==3.1.4", "MarkupSafe==2.1.5", "numpy==1.24.4",
                        "Pillow==10.4.0", "PyYAML==6.0.2", "pytz==2023.3", "tblib==3.0.0", "tzdata==2024.1")
#: The same for Python 3.7 and the Django of 1.9-3.2 (Jinja2 2.11: Jinja2 3 dropped what their
#: Jinja2 backend's tests use).
DJANGO_TEST_PACKAGES_PY37 = ("argon2-cffi==21.3.0", "argon2-cffi-bindings==21.2.0", "cffi==1.15.1", "pycparser==2.21",
                             "bcrypt==4.0.1", "docutils==0.19", "Jinja2==2.11.3", "MarkupSafe==1.1.1",
                             "numpy==1.21.6", "Pillow==9.5.0", "PyYAML==6.0.1", "tblib==2.0.0", "tzdata==2024.1")
#: seaborn's run-time packages as the harness pins them (pandas per line).
SEABORN_PACKAGES = ("contourpy==1.1.0", "cycler==0.11.0", "fonttools==4.42.1", "importlib-resources==6.0.1",
                    "kiwisolver==1.4.5", "matplotlib==3.7.2", "numpy==1.25.2", "packaging==23.1", "pillow==10.0.0",
                    "pyparsing==3.0.9", "python-dateutil==2.8.2", "pytz==2023.3.post1", "scipy==1.11.2",
                    "six==1.16.0", "tzdata==2023.1", "zipp==3.16.2")
#: xarray's: the harness's pip pins, and of its environment.yml what installs from wheels and
#: grows the tests that run (dask, bottleneck, cftime, matplotlib). numpy 1.21.6, not the harness's
#: 1.23.0: numpy 1.22-1.24 replace their functions' ``__code__`` at import, which the seal refuses
#: when the project's import runs it. scipy imports ctypes unconditionally (``scipy._lib._ccallback``),
#: so the line trusts ctypes, and pandas is the harness's 1.5.3. setuptools-scm: 0.16-2022 set-up commits name it in ``setup_requires``, which the offline
#: install of the project cannot fetch.
XARRAY_PACKAGES = ("numpy==1.21.6", "pandas==1.5.3", "scipy==1.11.1", "packaging==23.1", "python-dateutil==2.8.2",
                   "pytz==2023.3", "six==1.16.0", "setuptools==68.0.0", "dask==2022.8.1", "cloudpickle==2.2.1",
                   "fsspec==2023.9.2", "partd==1.4.1", "locket==1.0.0", "toolz==0.12.0", "PyYAML==6.0.1",
                   "bottleneck==1.3.7", "cftime==1.6.2", "matplotlib==3.7.2", "contourpy==1.1.0",
                   "cycler==0.11.0", "fonttools==4.42.1", "kiwisolver==1.4.5", "pillow==10.0.0", "pyparsing==3.0.9",
                   "setuptools-scm==7.1.0", "typing-extensions==4.7.1")
#: Sphinx's [test] extra and the run-time packages every line shares.
SPHINX_TEST_PACKAGES = ("html5lib==1.1", "six==1.16.0", "webencodings==0.5.1", "Cython==0.29.36",
                        "imagesize==1.4.1", "snowballstemmer==2.2.0", "requests==2.31.0", "urllib3==2.0.7",
                        "idna==3.4", "charset-normalizer==3.3.2", "certifi==2023.7.22", "packaging==23.1",
                        "setuptools==68.0.0", "pytz==2023.3")
#: The sphinxcontrib helpers' last releases that install beside any Sphinx (later ones require
#: Sphinx >= 5); the harness caps them at these or a few releases more.
SPHINX_HELPERS_OLD = ("sphinxcontrib-applehelp==1.0.4", "sphinxcontrib-devhelp==1.0.2",
                      "sphinxcontrib-htmlhelp==2.0.1", "sphinxcontrib-jsmath==1.0.1", "sphinxcontrib-qthelp==1.0.3",
                      "sphinxcontrib-serializinghtml==1.1.5")
DJANGO_NOTES = "runtests.py's set-up under pytest; tests that need a service (memcached, redis, selenium) skip"


@dataclass(frozen=True)
class RepoSpec:
    """How one (repository, version) pair's tests run."""

    key: str
    """``owner/name@version`` of the table entry, or ``generic``."""
    python: str = ""
    """Interpreter version, ``"3.9"``; empty = deepgym's own."""
    requirements: tuple[str, ...] = (PYTEST,)
    pythonpath: tuple[str, ...] = (".",)
    test_cmd: tuple[str, ...] = ()
    parser: str = "pytest"
    notes: str = ""
    environ: tuple[tuple[str, str], ...] = ()
    """Variables the official harness sets for the tests (``SYMPY_USE_CACHE=no``: bin/test -C)."""
    plugins: tuple[str, ...] = ()
    """pytest plugin modules the tests need (``pytest_mock``); ``test_cmd`` loads each with ``-p``."""
    trust: tuple[str, ...] = ()
    """Capabilities of the seal its packages need at import (pandas >= 1.5: ``ctypes``)."""

    def python_env(self, host_python: str) -> dict[str, Any]:
        """The row's ``python_env`` field for this spec."""
        env = {"requirements": list(self.requirements), "pythonpath": list(self.pythonpath),
               "python": self.python or host_python}
        return {**env, "environ": dict(self.environ)} if self.environ else env


@dataclass(frozen=True)
class _Line:
    """Entries for a range of versions of one repository."""

    versions: tuple[str, ...]
    python: str
    requirements: tuple[str, ...]
    pythonpath: tuple[str, ...] = (".",)
    test_cmd: tuple[str, ...] = ()
    notes: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)
    parser: str = "pytest"
    environ: tuple[tuple[str, str], ...] = ()
    plugins: tuple[str, ...] = ()
    trust: tuple[str, ...] = ()


def _v(*names: str) -> tuple[str, ...]:
    return names


# Pins follow the official harness's constants where it pins, else the releases current at the
# version's time that still install from wheels here.
_TABLE: dict[str, list[_Line]] = {
    "marshmallow-code/marshmallow": [
        _Line(_v("2.18", "2.19", "2.20", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8",
                 "3.9", "3.10", "3.11", "3.12", "3.13", "3.15", "3.16", "3.17", "3.18", "3.19", "3.20", "3.21"),
              "3.9", (*PYTEST_BELOW_311, "pytz==2023.3", "simplejson==3.19.1", "python-dateutil==2.8.2"), ("src",),
              notes="tests import pytz and simplejson"),
    ],
    "pallets/flask": [
        _Line(_v("2.0", "2.1"), "3.9", (*PYTEST_BELOW_311, "Werkzeug==2.0.3", "Jinja2==3.0.3", "MarkupSafe==2.0.1",
                                        "itsdangerous==2.0.1", "click==8.0.4"), ("src",)),
        _Line(_v("2.2"), "3.11", (PYTEST, "Werkzeug==2.2.3", "Jinja2==3.1.2", "MarkupSafe==2.1.3",
                                  "itsdangerous==2.1.2", "click==8.1.7"), ("src",)),
        _Line(_v("2.3", "3.0"), "3.11", (PYTEST, "Werkzeug==2.3.7", "Jinja2==3.1.2", "MarkupSafe==2.1.3",
                                         "itsdangerous==2.1.2", "click==8.1.7", "blinker==1.6.2"), ("src",)),
    ],
    "psf/requests": [
        _Line(_v("0.13", "0.14", "1.1", "1.2", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.7", "2.8", "2.9",
                 "2.10", "2.12", "2.17", "2.18", "2.19", "2.22", "2.26", "2.27", "2.28", "2.29", "2.30", "3.0"),
              "3.9", (*PYTEST_BELOW_311, "urllib3==1.26.18", "idna==3.4", "chardet==5.2.0", "charset-normalizer==3.3.2",
                      "certifi==2023.7.22"),
              notes="tests that reach httpbin.org fail without a network, as they do in the sandbox"),
    ],
    "pylint-dev/astroid": [
        _Line(_v("2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14", "2.15", "2.16",
                 "3.0"),
              "3.9", (*PYTEST_BELOW_311, "lazy-object-proxy==1.9.0", "wrapt==1.15.0", "typing-extensions==4.7.1")),
    ],
    "pydicom/pydicom": [
        _Line(_v("1.2", "1.3", "1.4", "2.0", "2.1", "2.2", "2.3", "2.4", "3.0"), "3.9",
              (*PYTEST_BELOW_311, "numpy==1.26.4", "setuptools==68.2.2"),
              notes="tests that need optional image handlers (gdcm, pylibjpeg) skip; 2.x imports pkg_resources"),
    ],
    "pylint-dev/pylint": [
        # The 2.15 line began on astroid 2.11 (setup.cfg: astroid<=2.12.0-dev0); tests import py.
        # 2.13 still read its config with toml (setup.cfg: toml>=0.9.2, astroid<=2.10.0-dev0, mccabe<0.7).
        _Line(_v("2.13"), "3.9",
              (*PYTEST_BELOW_311, "py==1.11.0", "astroid==2.9.3", "dill==0.3.7", "isort==5.12.0",
               "mccabe==0.6.1", "platformdirs==3.10.0", "toml==0.10.2", "typing-extensions==4.7.1")),
        _Line(_v("2.14", "2.15"), "3.9",
              (*PYTEST_BELOW_311, "py==1.11.0", "astroid==2.11.7", "dill==0.3.7", "isort==5.12.0",
               "mccabe==0.7.0", "platformdirs==3.10.0", "tomlkit==0.12.1", "typing-extensions==4.7.1"),
              notes="later 2.15 commits need astroid 2.12: their setup.cfg says so (the import reads it)"),
    ],
    "sympy/sympy": [
        # SWE-bench runs bin/test -C (no cache); the cache stays on here: off, a test file such as
        # test_trigonometric.py ran past 11 minutes (grading's limit is 15). The one row where the
        # outcome differed (sympy__sympy-13177's test_mod_inverse passes at the base with the cache on)
        # is no better off: with it off the test hits the recursion limit, failing cold as under
        # bin/test -C but passing on the warm server, a few frames shallower. A row can still ask:
        # python_env.environ SYMPY_USE_CACHE=no.
        # bin/test leaves @slow tests out (they are never in a row's lists); under pytest they are
        # marked slow. sympy's own conftest makes XFAIL/SKIP pytest marks; before 1.6 its tests call
        # py.test.raises, which pytest's own py shim lacks.
        _Line(_v("1.0", "1.1", "1.2", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11", "1.12", "1.13",
                 "1.14"),
              "3.9", (*PYTEST_BELOW_311, "py==1.11.0", "mpmath==1.3.0"), test_cmd=("-m", "not slow"),
              parser="sympy", notes="bin/test's ids (bare function names) are matched to the test patch's files"),
    ],
    "django/django": [
        # Django's own suite under pytest: in_sandbox/deepgym_django.py does runtests.py's set-up
        # (--settings=test_sqlite, the apps of the test labels, the test databases). no:nose keeps
        # template_tests' `setup` decorator from being called as a module set-up; no:warnings leaves
        # runtests' warning filters (deprecations are errors) as runtests sets them.
        # SWE-bench runs 1.9-2.2 on Python 3.5 and 3.0-3.2 on 3.6; deepgym builds no environment
        # older than 3.7 (1.9.13 - 3.2.25's auth, urlize and html tests pass there as under runtests).
        _Line(_v("1.9", "1.10", "1.11", "2.0", "2.1"), "3.7", (*PYTEST_PY37, "pytz==2023.3",
                                                                 *DJANGO_TEST_PACKAGES_PY37),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES + "; Python 3.7 (SWE-bench: 3.5)"),
        _Line(_v("2.2"), "3.7", (*PYTEST_PY37, "pytz==2023.3", "sqlparse==0.4.4", *DJANGO_TEST_PACKAGES_PY37),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES + "; Python 3.7 (SWE-bench: 3.5)"),
        _Line(_v("3.0", "3.1", "3.2"), "3.7", (*PYTEST_PY37, "pytz==2023.3", "sqlparse==0.4.4", "asgiref==3.4.1",
                                                *DJANGO_TEST_PACKAGES_PY37),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES + "; Python 3.7 (SWE-bench: 3.6)"),
        _Line(_v("4.0"), "3.8", (*PYTEST_BELOW_311, "asgiref==3.5.2", "sqlparse==0.4.4", "backports.zoneinfo==0.2.1",
                                 *DJANGO_TEST_PACKAGES),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES),
        _Line(_v("4.1"), "3.9", (*PYTEST_BELOW_311, "asgiref==3.5.2", "sqlparse==0.4.4", *DJANGO_TEST_PACKAGES),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES),
        _Line(_v("4.2"), "3.9", (*PYTEST_BELOW_311, "asgiref==3.8.1", "typing-extensions==4.12.2", "sqlparse==0.5.1",
                                 *DJANGO_TEST_PACKAGES),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES),
        _Line(_v("5.0"), "3.11", (PYTEST, "asgiref==3.8.1", "sqlparse==0.5.1", *DJANGO_TEST_PACKAGES),
              test_cmd=DJANGO_CMD, parser="django", notes=DJANGO_NOTES),
    ],
    # The harness: Python 3.9, matplotlib 3.7.2 / numpy 1.25.2 / scipy 1.11.2, pandas 1.3.5 for 0.11 and
    # 2.0.0 for 0.12-0.13, `pip install -e .[dev]` (linters and pytest plugins the tests do not load).
    "mwaskom/seaborn": [
        _Line(_v("0.11"), "3.9", (*PYTEST_BELOW_311, *SEABORN_PACKAGES, "pandas==1.3.5"),
              notes="the harness's pins", trust=("ctypes",)),  # scipy imports ctypes
        _Line(_v("0.12", "0.13", "0.14"), "3.9", (*PYTEST_BELOW_311, *SEABORN_PACKAGES, "pandas==2.0.0"),
              notes="the harness's pins; the [dev] extra's linters left out",
              trust=("ctypes",)),  # scipy imports ctypes
    ],
    # The harness: Python 3.10, pip pins numpy 1.23.0, pandas 1.5.3, scipy 1.11.1, dask 2022.8.1,
    # setuptools 68.0.0 over ci/requirements/environment.yml (conda: netCDF4, zarr, cftime, ...).
    "pydata/xarray": [
        _Line(_v("0.12", "0.18", "0.19", "0.20", "2022.03", "2022.06", "2022.09", "2022.10", "2022.11",
                 "2022.12", "2023.01", "2023.02", "2023.03", "2023.04", "2023.05", "2023.06", "2023.07",
                 "2023.08", "2023.09", "2023.10", "2023.11", "2023.12", "2024.01", "2024.02", "2024.03",
                 "2024.05", "2024.06", "2024.07"),
              "3.10", (*PYTEST_BELOW_311, *XARRAY_PACKAGES),
              notes="the harness's pip pins with the wheels of part of its environment.yml (no netCDF4, "
                    "zarr, h5netcdf, iris, cfgrib, sparse: tests that need them skip); numpy 1.21.6 (harness: 1.23.0)",
              trust=("ctypes",)),  # scipy and pandas >= 1.5 import ctypes
    ],
    # The harness: Python 3.9, `pip install -e .[test]`, run by tox --current-env (pytest -rA); for
    # 3.0-4.4 it caps Jinja2 < 3, markupsafe <= 2.0.1, alabaster < 0.7.12 and the sphinxcontrib helpers
    # by editing setup.py. Here the same caps are pins. Its tests load sphinx.testing.fixtures from
    # their own conftest (pytest_plugins), which autoloading being off does not stop.
    "sphinx-doc/sphinx": [
        _Line(_v("3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "4.0", "4.1", "4.2", "4.3", "4.4"), "3.9",
              (*PYTEST_BELOW_311, *SPHINX_TEST_PACKAGES, *SPHINX_HELPERS_OLD, "Jinja2==2.11.3", "MarkupSafe==2.0.1",
               "alabaster==0.7.11", "docutils==0.17.1", "Pygments==2.16.1", "Babel==2.13.1"),
              notes="the harness's setup.py caps as pins; docutils 0.17.1 (harness: the newest the range allows)"),
        _Line(_v("4.5", "5.0", "5.1", "5.2", "5.3"), "3.9",
              (*PYTEST_BELOW_311, *SPHINX_TEST_PACKAGES, *SPHINX_HELPERS_OLD, "Jinja2==3.1.2", "MarkupSafe==2.1.3",
               "alabaster==0.7.13", "docutils==0.18.1", "Pygments==2.16.1", "Babel==2.13.1")),
        _Line(_v("6.0", "6.1", "6.2", "7.0", "7.1", "7.2", "7.3", "7.4"), "3.9",
              (*PYTEST_BELOW_311, *SPHINX_TEST_PACKAGES, *SPHINX_HELPERS_OLD, "Jinja2==3.1.2", "MarkupSafe==2.1.3",
               "alabaster==0.7.13", "docutils==0.20.1", "Pygments==2.16.1", "Babel==2.13.1",
               "importlib-metadata==6.8.0", "zipp==3.17.0", "filelock==3.12.4"),
              notes="graphviz (which the harness installs for 7.2) is absent: tests that run dot skip"),
    ],
    # The harness: Python 3.9, requirements_dev.txt, `pip install -e .` (its rules and dialects load
    # through entry points, so the project is installed: install_project). Runtime requirements not
    # pinned here are resolved from the set-up commit's setup.py.
    "sqlfluff/sqlfluff": [
        _Line(_v("0.4", "0.5", "0.6", "0.8", "0.9", "0.10", "0.11", "0.12", "0.13", "1.0", "1.1", "1.2", "1.3",
                 "1.4", "2.0", "2.1", "2.2", "2.3", "3.0"), "3.9",
              (*PYTEST_BELOW_311, "click==8.1.7", "colorama==0.4.6", "configparser==6.0.0", "oyaml==1.0",
               "PyYAML==6.0.1", "Jinja2==3.1.2", "MarkupSafe==2.1.3", "diff-cover==7.7.0", "chardet==5.2.0",
               "Pygments==2.16.1", "typing-extensions==4.8.0", "appdirs==1.4.4", "cached-property==1.5.2",
               "pathspec==0.11.2", "tblib==2.0.0", "regex==2023.10.3", "tqdm==4.66.1", "hypothesis==6.88.1",
               "attrs==23.1.0", "sortedcontainers==2.4.0", "setuptools==68.2.2"), ("src",),
              notes="requirements_dev.txt's test packages only (no linters, no dbt templater)"),
    ],
    "pvlib/pvlib-python": [
        # The harness installs the same conda packages for every version; 0.7 kept apart so its pins can move.
        _Line(_v("0.7"), "3.9", (*PYTEST_BELOW_311, "numpy==1.26.4", "pandas==2.0.3", "scipy==1.11.4",
                                 "pytz==2023.3", "requests==2.31.0", "h5py==3.9.0", "setuptools==68.2.2",
                                 "pytest-mock==3.14.0"),
              plugins=("pytest_mock",), notes="as 0.8-0.9", trust=("ctypes",)),  # pandas 2
        _Line(_v("0.8", "0.9"), "3.9", (*PYTEST_BELOW_311, "numpy==1.26.4", "pandas==2.0.3", "scipy==1.11.4",
                                        "pytz==2023.3", "requests==2.31.0", "h5py==3.9.0", "setuptools==68.2.2",
                                        "pytest-mock==3.14.0"),
              plugins=("pytest_mock",),
              notes="its conftest imports pkg_resources (setuptools); its tests use pytest-mock's mocker",
              trust=("ctypes",)),  # pandas 2
    ],
}

GENERIC = RepoSpec(key="generic", requirements=(),
                   notes="repository not in deepgym's table: deepgym's own Python and pytest, the project "
                         "imported from src/ or its root")


def known_repos() -> list[str]:
    """Repositories the table covers."""
    return sorted(_TABLE)


def spec_for(repo: str, version: str, *, has_src: bool = False) -> RepoSpec:
    """The table's spec for (repo, version); :data:`GENERIC` (importing from ``src`` when
    ``has_src``) when the pair is not in it."""
    for line in _TABLE.get(repo, []):
        if version in line.versions:
            reqs = line.extra.get(version, line.requirements)
            loads = tuple(arg for module in line.plugins for arg in ("-p", module))
            return RepoSpec(key=f"{repo}@{version}", python=line.python, requirements=reqs,
                            pythonpath=line.pythonpath, test_cmd=(*loads, *line.test_cmd), parser=line.parser,
                            notes=line.notes, environ=line.environ, plugins=line.plugins,
                            trust=line.trust)
    return RepoSpec(key="generic", requirements=(), pythonpath=("src",) if has_src else (".",), notes=GENERIC.notes)
