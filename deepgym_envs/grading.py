"""Hidden-test grading that the agent cannot game (DESIGN §5 outcome, §6 anti-cheat).

The agent's change arrives as a diff and is applied to a *fresh* sandbox over the pristine tree,
never graded in place. Then, in that grading view:

1. every protected path the change touched (test files, every ``conftest.py``, test-runner
   configuration, files of the hidden test patch) is put back exactly as it is in the pristine tree;
2. files the change added that could hijack the test run (a ``pytest.py`` / ``_pytest`` shadow,
   ``sitecustomize.py``, ``.pth`` files, package metadata registering plugins) are removed;
3. the hidden test patch is applied;
4. pytest runs from deepgym's own runner (outside the repository, so the working directory is not
   first on ``sys.path``), and per-test outcomes travel to the host on a private pipe.

The report is cross-checked: every expected test id must be reported (a missing test fails), and
the report must agree with pytest's exit status. A failure of the harness itself is
``no_verdict``, never a silent 0.

>>> v = grade(task, task.patch)          # doctest: +SKIP
>>> v.status, v.fail_to_pass
('resolved', {'passed': 2, 'total': 2})
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from deepgym_envs.errors import InfrastructureError, SandboxError, SandboxUnavailable, ToolError
from deepgym_envs.pyenv import sandbox_options
from deepgym_envs.sandbox import Sandbox, SandboxLimits, make_sandbox
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.tasks import Task, patch_paths
from deepgym_envs.trees import pristine_tree, run_git, tree_fingerprint

Status = Literal["resolved", "unresolved", "no_verdict"]
TestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "missing"]

TEST_DIR_NAMES = frozenset({"tests", "test", "testing"})
CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})
SHADOW_NAMES = frozenset({"pytest.py", "py.py", "_pytest", "pytest", "sitecustomize.py", "usercustomize.py",
                          "pluggy", "conftest.py"})
#: Default wall-clock limit for one hidden-test run.
GRADING_TIMEOUT = 900.0


@dataclass
class Verdict:
    """The outcome of grading one change against a task's hidden tests."""

    status: Status
    tests: dict[str, str] = field(default_factory=dict)
    """Test id → passed / failed / error / skipped / xfailed / missing, for every graded id."""
    fail_to_pass: dict[str, int] = field(default_factory=lambda: {"passed": 0, "total": 0})
    pass_to_pass: dict[str, int] = field(default_factory=lambda: {"passed": 0, "total": 0})
    reason: str = ""
    duration: float = 0.0
    log: str = ""
    """The tail of the test run's output (never shown to the agent)."""

    @property
    def resolved(self) -> bool:
        return self.status == "resolved"

    @property
    def masked(self) -> bool:
        """True when trainers must not learn from this result (the harness failed)."""
        return self.status == "no_verdict"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def no_verdict(cls, reason: str, duration: float = 0.0) -> "Verdict":
        return cls(status="no_verdict", reason=reason, duration=duration)


def is_test_path(path: str) -> bool:
    """Test files and everything under a test directory."""
    parts = path.split("/")
    name = parts[-1]
    return (any(p in TEST_DIR_NAMES for p in parts[:-1]) or name in TEST_DIR_NAMES
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))


def is_protected(path: str, task: Task) -> bool:
    """Paths put back to pristine before grading, whatever the agent did to them."""
    name = posixpath.basename(path)
    return is_test_path(path) or name in CONFIG_NAMES or path in task.hidden_test_files


def is_shadow(path: str) -> bool:
    """Added paths that could take over the test run; removed before grading."""
    parts = path.split("/")
    return (any(p in SHADOW_NAMES or p.endswith((".dist-info", ".egg-info")) for p in parts)
            or parts[-1].endswith(".pth") or parts[-1] in CONFIG_NAMES)


@lru_cache(maxsize=1024)
def pristine_files(tree: Path) -> frozenset[str]:
    """Every path in the pristine tree's commit (files, and the directories that hold them)."""
    files = run_git(["ls-files", "-z"], cwd=tree).split("\0")
    out: set[str] = set()
    for f in filter(None, files):
        out.add(f)
        while "/" in f:
            f = f.rsplit("/", 1)[0]
            out.add(f)
    return frozenset(out)


def prepare_grading_view(sb: Sandbox, task: Task, tree: Path, patch: str) -> None:
    """Apply the agent's patch, restore protected paths, drop shadows, apply the hidden tests.

    What changed is read back from the view itself (git, ignoring nothing), not from the patch
    text, so quoted or renamed paths in the diff cannot slip a file past these rules.
    """
    if patch.strip():
        sb.apply_patch(patch)  # ToolError when it does not apply: the candidate is unresolved
    in_pristine = pristine_files(tree)
    changed = set(patch_paths(patch)) | set(sb.changed_files()) if patch.strip() else set()
    # Parents before children, so a directory replaced by a symlink is restored as a directory.
    for path in sorted(changed, key=lambda p: (p.count("/"), p)):
        if path in in_pristine and is_protected(path, task):
            _restore(sb, tree, path)
        elif path not in in_pristine and (is_protected(path, task) or is_shadow(path)):
            sb.remove(path)
    if task.test_patch.strip():
        try:
            sb.apply_patch(task.test_patch)
        except ToolError as exc:
            raise InfrastructureError(f"hidden test patch does not apply: {exc}") from None


def _restore(sb: Sandbox, tree: Path, path: str) -> None:
    sb.remove(path)
    src = tree / path
    if src.is_dir() and not src.is_symlink():
        for root, dirs, files in os.walk(src):
            dirs[:] = [d for d in dirs if d != ".git"]
            for name in files:
                full = Path(root) / name
                sb.write_file(str(full.relative_to(tree)), full.read_bytes())
    elif src.is_file() and not src.is_symlink():
        sb.write_file(path, src.read_bytes())


def test_files(ids: list[str]) -> list[str]:
    """The files that hold these test ids, in first-seen order."""
    out: list[str] = []
    for test_id in ids:
        path = test_id.split("::", 1)[0]
        if path not in out:
            out.append(path)
    return out


def run_pytest(sb: Sandbox, args: list[str], timeout: float, *, warm: bool = False
               ) -> tuple[dict[str, Any] | None, Any]:
    """Run pytest through deepgym's runner; return (report or None, ExecResult).

    ``warm``: use the sandbox's warm test server where it has one (same results, no interpreter
    start-up); any failure of the server itself falls back to a cold run.
    """
    support = getattr(sb, "support_dir")
    pytest_args = ["-p", "no:cacheprovider", *args]
    # Plugins are not auto-loaded from installed packages: it is faster (pytest-benchmark alone
    # costs seconds here) and nothing the agent plants can register itself. Tasks that need a
    # plugin name it in their test_cmd (``-p NAME``).
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    warm_run = getattr(sb, "warm_pytest", None) if warm else None
    result = warm_run(pytest_args, timeout, env) if warm_run is not None else None
    if result is None:
        result = sb.exec(["python", f"{support}/deepgym_pytest.py", *pytest_args], timeout, env=env, report=True)
    return parse_report(result.report), result


def parse_report(raw: str | None) -> dict[str, Any] | None:
    """The plugin's final report, authenticated by the nonce on the pipe's first line.

    Anything else on the pipe (a report without the nonce, a second report) was written by code
    under test: it is ignored, and counted in ``report["forged"]`` so the verdict can say so.
    """
    if not raw:
        return None
    nonce, *rest = raw.split("\n")
    reports, forged = [], 0
    for line in filter(None, rest):
        if line.startswith(nonce + " ") and len(nonce) == 32:
            try:
                reports.append(json.loads(line[len(nonce) + 1:]))
                continue
            except json.JSONDecodeError:
                pass
        forged += 1
    if len(reports) != 1 or not isinstance(reports[0], dict):
        return None
    report = reports[0]
    report["forged"] = forged
    return report


def grade(task: Task, patch: str, *, backend: str | None = None, limits: SandboxLimits | None = None,
          timeout: float = GRADING_TIMEOUT, views: ViewPool | None = None) -> Verdict:
    """Grade a unified diff against the task's pristine tree with its hidden tests.

    ``no_verdict`` (never a silent 0) when the harness fails: the sandbox cannot start or dies,
    the disk fills up, or the test run outlives ``timeout``.

    ``views``: take the grading view from this pool (renewed, never an agent's sandbox) and run
    the tests on its warm server; the same verdict, without interpreter start-up.
    """
    start = time.monotonic()
    if task.flaky:
        warnings.warn(f"{task.instance_id}: flaky tests excluded from grading: {', '.join(task.flaky)}",
                      FlakyTestWarning, stacklevel=2)
    try:
        tree = pristine_tree(task)
        options = sandbox_options(task)
        with (views.view(tree, backend, limits, **options) if views is not None
              else make_sandbox(tree, backend, limits, **options)) as sb:
            try:
                prepare_grading_view(sb, task, tree, patch)
            except ToolError as exc:
                if "No space left on device" in str(exc):
                    raise SandboxError(f"disk full while applying the patch: {exc}") from None
                return _unresolved_all(task, f"patch does not apply: {exc}", time.monotonic() - start)
            ids = [t for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if t not in task.flaky]
            report, result = run_pytest(sb, [*task.test_cmd, "-rA", *test_files(ids)], timeout,
                                        warm=views is not None)
    except (InfrastructureError, SandboxUnavailable) as exc:
        return Verdict.no_verdict(str(exc), time.monotonic() - start)
    if result.timed_out:
        return Verdict.no_verdict(f"grading timed out: the hidden tests ran longer than {timeout:.0f}s",
                                  time.monotonic() - start)
    return judge(task, report, result, time.monotonic() - start)


class FlakyTestWarning(UserWarning):
    """A task's flaky tests were left out of its verdict."""


class VerdictCache:
    """Verdicts by (task, hidden tests, patch content): an unchanged workspace is never re-tested.

    Shared by every environment in the process, so K rollouts of one task that reach the same
    state pay for its grading once. ``no_verdict`` results are not kept: they may be transient.
    """

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = maxsize
        self._data: OrderedDict[tuple[str, str, str], Verdict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    @staticmethod
    def key(task: Task, patch: str) -> tuple[str, str, str]:
        spec = json.dumps([tree_fingerprint(task), task.test_patch, task.FAIL_TO_PASS, task.PASS_TO_PASS,
                           task.flaky, task.test_cmd])
        return (task.instance_id, hashlib.sha256(spec.encode()).hexdigest(),
                hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest())

    def grade(self, task: Task, patch: str, **kwargs: Any) -> Verdict:
        key = self.key(task, patch)
        with self._lock:
            if key in self._data:
                self.hits += 1
                self._data.move_to_end(key)
                return self._data[key]
            self.misses += 1
        verdict = grade(task, patch, **kwargs)
        if verdict.status != "no_verdict":
            with self._lock:
                self._data[key] = verdict
                while len(self._data) > self.maxsize:
                    self._data.popitem(last=False)
        return verdict


#: The process-wide cache that environments grade through.
VERDICTS = VerdictCache()


def judge(task: Task, report: dict[str, Any] | None, result: Any, duration: float) -> Verdict:
    """Turn a test report into a verdict, cross-checking it against the process's exit status."""
    log = result.output[-8000:]
    flaky = set(task.flaky)
    f2p = [t for t in task.FAIL_TO_PASS if t not in flaky]
    p2p = [t for t in task.PASS_TO_PASS if t not in flaky]
    reported: dict[str, str] = (report or {}).get("tests", {}) if isinstance(report, dict) else {}
    tests = {t: str(reported.get(t, "missing")) for t in [*f2p, *p2p]}
    counts = {name: {"passed": sum(tests[t] == "passed" for t in ids), "total": len(ids)}
              for name, ids in (("f2p", f2p), ("p2p", p2p))}
    reason = ""
    if report is None:
        reason = f"no test report (pytest exited {result.exit_code} before reporting)"
    elif report.get("tampered") or report.get("forged"):
        what = list(report.get("tampered") or []) + (["a forged report"] if report.get("forged") else [])
        reason = f"the test harness was tampered with: {', '.join(what)}"
    elif report.get("exitstatus") != result.exit_code:
        reason = f"report says exit {report.get('exitstatus')} but the process exited {result.exit_code}"
    elif result.exit_code not in (0, 1):
        reason = f"pytest did not complete (exit {result.exit_code})"
    all_pass = all(v == "passed" for v in tests.values())
    status: Status = "resolved" if all_pass and not reason else "unresolved"
    if not reason and not all_pass:
        bad = [f"{t} {v}" for t, v in tests.items() if v != "passed"]
        reason = f"{len(bad)} of {len(tests)} tests not passing: " + "; ".join(bad[:5])
    return Verdict(status, tests, counts["f2p"], counts["p2p"], reason, duration, log)


def _unresolved_all(task: Task, reason: str, duration: float) -> Verdict:
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return Verdict("unresolved", {t: "missing" for t in ids},
                   {"passed": 0, "total": len(task.FAIL_TO_PASS)}, {"passed": 0, "total": len(task.PASS_TO_PASS)},
                   reason, duration)


def grade_sandbox(task: Task, sb: Sandbox, *, cache: VerdictCache | None = None, **kwargs: Any) -> Verdict:
    """Grade the current state of an agent's sandbox (through its diff; the sandbox is untouched)."""
    try:
        patch = sb.diff()
    except InfrastructureError as exc:
        return Verdict.no_verdict(f"could not read the agent's workspace: {exc}")
    return cache.grade(task, patch, **kwargs) if cache is not None else grade(task, patch, **kwargs)
