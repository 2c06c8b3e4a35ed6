"""One pytest run in a sandbox, through deepgym's runner, with its report read back.

The runner (``in_sandbox/deepgym_pytest.py``) starts from deepgym's support directory, outside
the repository, so the working directory is not first on ``sys.path``; it hands pytest the report
plugin as an object before the repository's code loads. The plugin streams per-test outcomes on the
command's private report channel (``Sandbox.exec(..., report=True)``), which
:func:`~deepgym_envs.testrun.report.parse_report` authenticates.
"""

from __future__ import annotations

from typing import Any, Sequence

from deepgym_envs.sandbox import ExecResult, Sandbox
from deepgym_envs.testrun.report import parse_report
from deepgym_envs.testrun.warm import warm_runner

#: The runner's name inside the sandbox's support directory.
RUNNER = "deepgym_pytest.py"
#: Plugins are not auto-loaded from installed packages: it is faster (pytest-benchmark alone costs
#: seconds here) and nothing the agent plants can register itself. Tasks that need a plugin name
#: it in their test_cmd (``-p NAME``); imported rows name those their environment installs
#: (``Task.pytest_args``, :mod:`deepgym_envs.testplugins`).
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


#: The sealed runs' first stage: sets what the seal needs of the kernel, then executes the runner.
STAGE = "deepgym_stage.py"


def runner_argv(sb: Sandbox, args: list[str], *, sealed: bool = False) -> list[str]:
    """The argv that runs pytest with ``args`` through deepgym's runner in ``sb``; ``sealed``: through
    the first stage (``in_sandbox/deepgym_stage.py``), so the graded process never loads ctypes."""
    stage = ["python", "-S", "-I", f"{sb.support_dir}/{STAGE}"] if sealed else ["python"]
    return [*stage, f"{sb.support_dir}/{RUNNER}", *args]


def run_pytest(sb: Sandbox, args: list[str], timeout: float, *, warm: bool = False,
               seal: Sequence[str] | None = None, not_tests: Sequence[str] = ()
               ) -> tuple[dict[str, Any] | None, ExecResult]:
    """Run pytest through deepgym's runner; return (report or None, ExecResult).

    ``seal``: grade sealed (``in_sandbox/deepgym_lockdown.py``): the test files named in ``args``
    are read, compiled and blanked before the repository's code runs, which then gets no view of
    the tests and no hold on the process; the sequence names the capabilities the task keeps
    (its ``trust``). None: an ordinary run (the agent's own ``run_tests``). ``not_tests``: paths
    that look like test code but hold the change under test (files the gold patch edits), which the
    seal must not take for the tests' own.

    ``warm``: use the sandbox's warm test server where it can host one (same results, no
    interpreter start-up); any failure of the server itself falls back to a cold run.
    """
    pytest_args = ["-p", "no:cacheprovider", *args]
    env = dict(PYTEST_ENV)
    if seal is not None:
        env.update(DEEPGYM_SEAL="1", DEEPGYM_ALLOW=",".join(seal), DEEPGYM_NOT_TESTS="\n".join(not_tests))
    runner = warm_runner(sb, env) if warm else None
    result = runner.run(pytest_args, timeout, env, sb.workdir) if runner is not None else None
    if result is None:
        result = sb.exec(runner_argv(sb, pytest_args, sealed=seal is not None), timeout, env=env, report=True)
    return parse_report(result.report), result
