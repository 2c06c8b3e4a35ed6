"""pytest plugins a task's environment installs, loaded by name (``-p MODULE``).

Plugin autoloading is off in every test run (``testrun/runner.py``: a plugin the agent plants must
never register itself, and loading every installed plugin costs seconds). The official harness runs
with autoloading on, so a row whose tests use a plugin's fixture (pytest-mock's ``mocker``) errors
at setup here unless the plugin is named. A plugin is named:

* by the task's ``test_cmd`` (``["-p", "pytest_mock"]``), or a spec's ``plugins``
  (:mod:`deepgym_envs.swebench_specs`), which the import writes into ``test_cmd``;
* automatically, when the task's ``python_env`` requirements install one of :data:`KNOWN`.

Plugins that change which tests run or in what order (pytest-xdist, pytest-randomly,
pytest-rerunfailures) are never loaded automatically: they would change verdicts, and xdist's
workers escape the grading process the seal watches. Nor is pytest-cov: given ``--cov`` it starts
coverage's tracer, which the seal refuses to the code under test's process.

Automatic loading is for imported rows only (:attr:`~deepgym_envs.tasks.Task.pytest_args`): the
built-in and synthesised sets were validated with no plugin loaded.

>>> plugin_args(["pytest==7.4.4", "pytest-mock==3.14.0"], [])
['-p', 'pytest_mock']
>>> plugin_args(["pytest-mock==3.14.0"], ["-p", "no:pytest_mock"])
[]
>>> fixture_provider("mocker")
('pytest-mock', 'pytest_mock')
"""

from __future__ import annotations

import re
from typing import Sequence

#: Distribution name (normalised) -> the module ``-p`` loads: each one's ``pytest11`` entry point.
KNOWN = {
    "pytest-mock": "pytest_mock",
    "pytest-asyncio": "pytest_asyncio.plugin",
    "pytest-timeout": "pytest_timeout",
    "pytest-django": "pytest_django.plugin",
    "pytest-benchmark": "pytest_benchmark.plugin",
    "requests-mock": "requests_mock.contrib._pytest_plugin",
    "hypothesis": "_hypothesis_pytestplugin",
    "anyio": "anyio.pytest_plugin",
}

#: Fixtures that installed plugins provide: fixture -> (distribution, module to load or "").
FIXTURES = {
    **{name: ("pytest-mock", "pytest_mock") for name in
       ("mocker", "class_mocker", "module_mocker", "package_mocker", "session_mocker")},
    "event_loop": ("pytest-asyncio", "pytest_asyncio.plugin"),
    "benchmark": ("pytest-benchmark", "pytest_benchmark.plugin"),
    "requests_mock": ("requests-mock", "requests_mock.contrib._pytest_plugin"),
    **{name: ("pytest-django", "pytest_django.plugin") for name in
       ("db", "rf", "client", "admin_client", "settings", "django_db_setup", "django_user_model")},
    "httpserver": ("pytest-httpserver", "pytest_httpserver"),
    "httpx_mock": ("pytest-httpx", "pytest_httpx"),
    "snapshot": ("syrupy", "syrupy"),
    "datadir": ("pytest-datadir", "pytest_datadir.plugin"),
    "anyio_backend": ("anyio", "anyio.pytest_plugin"),
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def named_plugins(test_cmd: Sequence[str]) -> set[str]:
    """The ``-p`` values of ``test_cmd`` (``no:NAME`` included, as given)."""
    args = list(test_cmd)
    out = {b for a, b in zip(args, args[1:]) if a == "-p"}
    return out | {a[2:] for a in args if a.startswith("-p") and len(a) > 2 and not a.startswith("-p=")}


def plugin_args(requirements: Sequence[str], test_cmd: Sequence[str]) -> list[str]:
    """``-p MODULE`` for each :data:`KNOWN` plugin the requirements install that ``test_cmd`` does
    not already name (nor block with ``-p no:...``)."""
    named = named_plugins(test_cmd)
    out: list[str] = []
    for line in requirements:
        match = _NAME.match(line)
        module = KNOWN.get(_normalise(match.group(0))) if match else None
        if module is None:
            continue
        blocked = {module, module.split(".")[0], _normalise(match.group(0)) if match else ""}
        if module in named or any(f"no:{b}" in named for b in blocked) or module in out:
            continue
        out += ["-p", module]
    return out


def fixture_provider(fixture: str) -> tuple[str, str] | None:
    """(distribution, module) of the plugin that provides ``fixture``, where it is a well-known one."""
    return FIXTURES.get(fixture)
