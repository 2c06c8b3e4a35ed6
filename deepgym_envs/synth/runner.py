"""Run a project's test suite on a modified copy, in a sandbox, and read per-test outcomes.

Mutated code is untrusted (an inverted loop condition spins forever, a dropped statement may
delete files), so every run happens in the same sandbox agents get, with a timeout, through the
same runner and report plugin grading uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym_envs.envspec import PythonEnv
from deepgym_envs.pyenv import sandbox_spec_for
from deepgym_envs.sandbox import ExecResult, Sandbox, SandboxLimits, make_sandbox
from deepgym_envs.testrun import run_pytest

#: Extra pytest arguments every synthesised task runs with: the project's own ``addopts`` often
#: name plugins (coverage, xdist) the grading runner does not load; and one test module that
#: cannot be imported (pyparsing 3.1.2's ``test_diagram.py`` needs the optional ``railroad``)
#: costs its own tests, not the whole run's. Plugins load only when named, so a mark one of them
#: registers is unknown, which ``filterwarnings = error`` makes fatal (python-dateutil 2.9's
#: conftest marks every test ``no_cover``, pytest-cov's).
TEST_CMD = ["-o", "addopts=", "--continue-on-collection-errors", "-W", "ignore::pytest.PytestUnknownMarkWarning"]


@dataclass
class SuiteRun:
    """One run of the suite: outcome per test id, and how the run itself went."""

    tests: dict[str, str] = field(default_factory=dict)
    exit_code: int = 0
    timed_out: bool = False
    duration: float = 0.0
    output: str = ""
    reported: bool = True
    """False when pytest died before writing its report."""

    @property
    def passed(self) -> set[str]:
        return {t for t, outcome in self.tests.items() if outcome == "passed"}


class SuiteRunner:
    """A sandbox over the project's clean tree; each run starts from that tree plus given edits."""

    def __init__(self, tree: Path, env: PythonEnv, *, test_args: list[str], backend: str | None = None,
                 timeout: float = 300.0) -> None:
        self.test_args = list(test_args)
        self.timeout = timeout
        # Mutants may allocate without bound or fork-bomb: keep the usual caps, a little tighter.
        limits = SandboxLimits(timeout=timeout, memory_bytes=2 << 30, disk_bytes=512 << 20)
        self._sb: Sandbox = make_sandbox(tree, backend, limits, spec=sandbox_spec_for(env))
        self._dirty = False

    def __enter__(self) -> "SuiteRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sb.close()

    def run(self, targets: list[str], *, files: dict[str, str] | None = None, removed: list[str] | None = None,
            extra_args: list[str] | None = None, timeout: float | None = None) -> SuiteRun:
        """Run pytest on ``targets`` after writing ``files`` and deleting ``removed`` (paths in the repo)."""
        if self._dirty:
            self._sb.reset()
        self._dirty = bool(files or removed)
        for path, text in (files or {}).items():
            self._sb.write_file(path, text.encode())
        for path in removed or []:
            self._sb.remove(path)
        report, result = run_pytest(self._sb, [*self.test_args, *(extra_args or []), *targets],
                                    timeout or self.timeout)
        tests: dict[str, Any] = (report or {}).get("tests", {}) if isinstance(report, dict) else {}
        return SuiteRun({str(k): str(v) for k, v in tests.items()}, result.exit_code, result.timed_out,
                        result.duration, result.output, report is not None)


    def run_script(self, script: str, *, files: dict[str, str] | None = None, removed: list[str] | None = None,
                   timeout: float | None = None) -> ExecResult:
        """Run ``python -c script`` at the repository root after the same edits as :meth:`run`."""
        if self._dirty:
            self._sb.reset()
        self._dirty = True  # the script itself may write files
        for path, text in (files or {}).items():
            self._sb.write_file(path, text.encode())
        for path in removed or []:
            self._sb.remove(path)
        return self._sb.exec(["python", "-c", script], timeout or self.timeout)


_HEADER = re.compile(r"^_{3,} (.+?) _{3,}$")


def failure_sections(output: str) -> dict[str, list[str]]:
    """Every line of each failure in ``--tb=short`` output, by the header's test name."""
    out: dict[str, list[str]] = {}
    current: str | None = None
    for line in output.splitlines():
        match = _HEADER.match(line)
        if match:
            current = match.group(1).strip()
            out.setdefault(current, [])
        elif line.startswith("=") and current is not None:
            current = None
        elif current is not None:
            out[current].append(line)
    return out


def header_name(test_id: str) -> str:
    """How pytest titles a test id's failure: ``Class.test[param]`` without the file."""
    return ".".join(test_id.split("::")[1:])
