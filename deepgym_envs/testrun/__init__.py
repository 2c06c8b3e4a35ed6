"""Running tests in a sandbox and reading their results: the one place that knows pytest.

* :mod:`.runner` — :func:`run_pytest`: deepgym's runner, cold or on a warm server;
* :mod:`.report` — :func:`parse_report`: the report channel's stream, authenticated;
* :mod:`.warm` — the warm test server (pre-imported pytest, a fork per run) on sandboxes that can
  host a resident process;
* :mod:`.config` — which files pytest reads as configuration, and the pristine one to name;
* ``in_sandbox/`` — the scripts that run *inside* sandboxes (runner, report plugin, the seal
  ``deepgym_lockdown``: what the code under test may not see or hold while it is graded, with
  ``deepgym_reach``: whether what an allowed frame reader calls is still as installed; warm server,
  tracer, and ``deepgym_django``: Django's runtests.py set-up, loaded when ``-p deepgym_django``
  asks), copied into every sandbox's read-only support directory, never imported here.

Tools (``run_tests``), grading, synthesis, validation and the audit call this package; sandboxes
only offer what it uses (a private report channel, a read-only support directory, resident
processes), without knowing what runs there.
"""

from deepgym_envs.testrun.report import OUTCOMES, parse_report
from deepgym_envs.testrun.runner import run_pytest, runner_argv

__all__ = ["OUTCOMES", "parse_report", "run_pytest", "runner_argv"]
