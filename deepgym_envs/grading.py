"""Hidden-test grading that the agent cannot game (README "Grading, and why it cannot be gamed").

The agent's change arrives as a diff and is applied to a *fresh* sandbox over the pristine tree,
never graded in place. Then, in that grading view:

1. every protected path the change touched (test files, every ``conftest.py``, every file pytest
   reads as configuration, the list taken from pytest itself, files of the hidden test patch) is
   put back exactly as it is in the pristine tree;
2. files the change added that could hijack the test run (a ``pytest.py`` / ``_pytest`` shadow,
   ``sitecustomize.py``, ``.pth`` files, package metadata registering plugins, configuration
   files) are removed;
3. the hidden test patch is applied, and canary tests only the host knows are planted beside the
   hidden tests (:mod:`deepgym_envs.canaries`);
4. pytest runs from deepgym's own runner (outside the repository, so the working directory is not
   first on ``sys.path``) with the pristine configuration named explicitly, *sealed*
   (``testrun/in_sandbox/deepgym_lockdown.py``: the hidden test files compiled and blanked before the
   repository's code runs, which then gets no frames, code objects, heap walks, tracing or raw memory),
   and per-test outcomes stream to the host on a private descriptor as they happen.

The report is cross-checked: every expected test id must be reported (a missing test fails), the
report must agree with pytest's exit status, the stream must be whole and in order, and every
canary must have its outcome. A run that fails a check is ``unresolved`` and ``tampered``. A
failure of the harness itself is ``no_verdict``, never a silent 0; whether it was the harness is
decided from facts the agent cannot write (free space of the host, the harness's own steps),
never from the text of an error message.

>>> v = grade(task, task.patch)          # doctest: +SKIP
>>> v.status, v.fail_to_pass
('resolved', {'passed': 2, 'total': 2})
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import posixpath
import re
import secrets
import shutil
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Sequence

from deepgym_envs import canaries as canary_tests
from deepgym_envs.errors import (DeepgymError, InfrastructureError, SandboxError, SandboxUnavailable, TaskFormatError, ToolError,
                                 agent_shaped)
from deepgym_envs.gitrepo import GitError, run_git
from deepgym_envs.pyenv import sandbox_spec
from deepgym_envs.sandbox import HostPaths, Sandbox, SandboxLimits, make_sandbox
from deepgym_envs.sandbox.base import open_regular
from deepgym_envs.sandbox.pool import ViewPool
from deepgym_envs.selection import MAX_SOURCE_BYTES, TestMap, load_map, select_tests
from deepgym_envs.tasks import Task, files_of_test_patch, patch_paths
from deepgym_envs.testrun import run_pytest
from deepgym_envs.testrun.config import FLOOR, chooses_config, config_file_names, pristine_config_args
from deepgym_envs.trees import pristine_tree, tree_fingerprint

Status = Literal["resolved", "unresolved", "no_verdict"]
TestOutcome = Literal["passed", "failed", "error", "skipped", "xfailed", "missing"]

TEST_DIR_NAMES = frozenset({"tests", "test", "testing", "_testing", "testutils"})
#: A project's one test module (jsonpatch's and jsonpointer's ``tests.py``, pygtrie's ``test.py``).
_TEST_MODULES = frozenset({"tests.py", "test.py"})
#: Modules named as test machinery (a package's assertion helpers, its test runner): a change that
#: hollowed ``assert_close`` in ``calc/testing.py`` passed every test calling it.
TEST_SUPPORT_FILES = frozenset({"testing.py", "_testing.py", "testutils.py", "_testutils.py", "pytest.py",
                                "randtest.py", "runtests.py"})
#: The floor; :func:`config_names` adds every name this pytest reads configuration from.
CONFIG_NAMES = frozenset({"conftest.py", *FLOOR})
#: Configuration files that configure more than pytest: graded with the agent's version in the tree
#: and pytest reading the gold's from a copy (:func:`gold_config_paths`).
SHARED_CONFIGS = frozenset({"pyproject.toml", "setup.cfg", "tox.ini"})
SHADOW_NAMES = frozenset({"pytest.py", "py.py", "_pytest", "pytest", "sitecustomize.py", "usercustomize.py",
                          "pluggy", "conftest.py"})
#: Default wall-clock limit for one hidden-test run: the ceiling of every task's deadline.
GRADING_TIMEOUT = 900.0
#: A task whose gold run was timed (``Task.gold_seconds``) is graded under a deadline of
#: ``DEADLINE_SCALE`` x that time + ``DEADLINE_MARGIN``, at least ``DEADLINE_FLOOR``, at most the
#: timeout given (:func:`grading_deadline`). An order of magnitude and half a minute cover a loaded
#: two-core machine grading many rollouts at once (and a slower one than the one that timed it); the
#: floor covers interpreter and pytest start-up, which no suite escapes. A change that hangs then
#: holds a grading a minute for a task whose tests take a second, not the whole ceiling.
DEADLINE_SCALE = 10.0
DEADLINE_MARGIN = 30.0
DEADLINE_FLOOR = 60.0
#: Validation's margin of safety: a gold run must fit this many times in the deadline it gets.
DEADLINE_HEADROOM = 3.0
#: Below this much free space on the host filesystem that holds sandboxes, a failed write may be
#: the machine's fault: the verdict is masked. Above it, a patch that does not fit is the agent's.
HOST_FREE_FLOOR = 64 << 20


def config_names() -> frozenset[str]:
    """``conftest.py`` and every configuration file name of this pytest (and the floor)."""
    return CONFIG_NAMES | frozenset(config_file_names())


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
    tampered: bool = False
    """The run showed signs of tampering (a canary with the wrong outcome, a changed hook, a forged
    or broken report stream): always ``unresolved``, and ``reason`` says what was seen."""
    selected: int | None = None
    """A verdict for the shaping reward from a test selection: how many hidden tests ran (the rest
    kept their recorded outcome). None for a full run, the only kind that is ever final."""
    deadline: float = 0.0
    """Seconds the hidden-test run was allowed (:func:`grading_deadline`); 0 where none ran."""
    test_seconds: float = 0.0
    """Seconds the hidden-test run took (what the deadline bounds; validation records the gold's)."""

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


def grading_deadline(task: Task, timeout: float = GRADING_TIMEOUT) -> float:
    """Seconds the hidden tests may run when ``task`` is graded with ``timeout`` as the ceiling.

    A task with its gold run timed (``gold_seconds``, which ``deepgym tasks validate
    --record-gold-seconds`` writes) gets ``DEADLINE_SCALE * gold_seconds + DEADLINE_MARGIN``, at
    least ``DEADLINE_FLOOR``; one never timed gets ``timeout``. Never more than ``timeout``: a task
    file cannot stretch it, and a caller's smaller timeout wins.

    >>> from deepgym_envs.tasks import Task
    >>> [grading_deadline(Task("t", "", ["x"], gold_seconds=s)) for s in (0, 1.5, 20, 200)]
    [900.0, 60.0, 230.0, 900.0]
    >>> grading_deadline(Task("t", "", ["x"], gold_seconds=20), timeout=120)
    120.0
    """
    if not task.gold_seconds > 0:
        return float(timeout)
    derived = max(DEADLINE_FLOOR, DEADLINE_SCALE * task.gold_seconds + DEADLINE_MARGIN)
    return float(min(timeout, round(derived, 1)))


def deadline_reason(task: Task, deadline: float, timeout: float) -> str:
    """Why a run that outlived ``deadline`` is the change's failure, naming where the bound came from."""
    if deadline < timeout and task.gold_seconds > 0:
        bound = (f"the task's deadline of {deadline:g}s, derived from the gold patch's {task.gold_seconds:g}s "
                 f"({DEADLINE_SCALE:g}x + {DEADLINE_MARGIN:g}s, at least {DEADLINE_FLOOR:g}s)")
    else:
        bound = f"{deadline:g}s, the grading timeout"
    return f"the hidden tests ran longer than {bound}: a hang or an endless loop in the change counts against it"


def is_test_path(path: str) -> bool:
    """Test files, test machinery (:data:`TEST_SUPPORT_FILES`) and everything under a test directory."""
    parts = path.split("/")
    name = parts[-1]
    return (any(p in TEST_DIR_NAMES for p in parts[:-1]) or name in TEST_DIR_NAMES or name in TEST_SUPPORT_FILES
            or name in _TEST_MODULES or (name.startswith("test_") and name.endswith(".py"))
            or name.endswith("_test.py"))


def is_config(path: str) -> bool:
    """Files that steer the test run itself: every configuration file of pytest, ``conftest.py``,
    and ``.gitattributes`` (it decides how git writes files, the hidden test patch's included)."""
    name = posixpath.basename(path)
    return name in config_names() or name == ".gitattributes"


def is_protected(path: str, task: Task) -> bool:
    """Paths put back to pristine before grading, whatever the agent did to them.

    A file the gold patch edits is never put back (library code under a ``testing/`` directory,
    as in sympy or django, or a ``setup.cfg`` the fix changes, would revert the fix itself),
    unless the hidden tests live in it: those are always the pristine ones. A configuration file
    among them is graded in its gold version instead (:func:`gold_configs`).
    """
    if path in task.hidden_test_files:
        return True
    if path in task.gold_files:
        # setup.cfg, pyproject.toml or sympy/testing/runtests.py edited by the fix: reverting them
        # would undo part of the very change being graded (the official harness never does).
        return False
    return is_config(path) or is_test_path(path)


def is_shadow(path: str) -> bool:
    """Added paths that could take over the test run; removed before grading."""
    parts = path.split("/")
    return (any(p in SHADOW_NAMES or p.endswith((".dist-info", ".egg-info")) for p in parts)
            or parts[-1].endswith(".pth") or parts[-1] in config_names())


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


def prepare_grading_view(sb: Sandbox, task: Task, tree: Path, patch: str) -> list[str]:
    """Apply the agent's patch, restore protected paths, drop shadows, apply the hidden tests.

    What changed is what git itself read from the patch when it applied it (:func:`patch_writes`),
    not this module's reading of the patch text, so quoted or renamed paths in the diff cannot slip
    a file past these rules; and no diff of the view is built (the environment already built one
    for the step). Before the hidden tests, the gold version of each configuration file the gold
    patch edits is written (:func:`gold_config_paths`). Returns the paths the change still holds (neither
    restored nor removed) and those gold files, for test selection.
    """
    if patch.strip():
        sb.apply_patch(patch)  # ToolError when it does not apply: the candidate is unresolved
    in_pristine = pristine_files(tree)
    changed: set[str] = set()
    if patch.strip():
        written = patch_writes(tree, patch)
        changed = set(patch_paths(patch)) | (written if written is not None else set(sb.changed_files()))
    # Parents before children, so a directory replaced by a symlink is restored as a directory;
    # what lies under a path already restored (or removed) went with it.
    done: set[str] = set()  # asked of each path's parents: linear in the change, not in change × done
    for path in sorted(changed, key=lambda p: (p.count("/"), p)):
        if _under(path, done):
            continue
        if path in in_pristine and is_protected(path, task):
            _restore(sb, tree, path)
            done.add(path)
        elif path not in in_pristine and (is_protected(path, task) or is_shadow(path)):
            sb.remove(path)
            done.add(path)
    # Before the hidden tests: a gold .gitattributes decides how git writes them.
    gold = _write_gold_configs(sb, task, tree, in_place=chooses_config(task.test_cmd))
    if task.test_patch.strip():
        try:
            sb.apply_patch(task.test_patch)
        except ToolError as exc:
            if _view_disk_full(sb, len(task.test_patch)):  # the change filled the view: the agent's doing
                raise ToolError("the change leaves no room for the hidden tests in the sandbox's disk") from None
            if _applies_to_pristine(tree, task.test_patch):
                # A fact, not a message: the hidden tests fit the pristine tree, so it is the change
                # (a directory of tests turned into a link, say) that keeps them out.
                raise ToolError(f"the change keeps the hidden tests from being added: {exc}") from None
            raise InfrastructureError(f"hidden test patch does not apply: {exc}") from None
    return sorted({*gold, *(p for p in changed if p not in done and not _under(p, done))})


def _under(path: str, folders: set[str]) -> bool:
    """Whether a strict parent folder of ``path`` is one of ``folders``."""
    parts = path.split("/")
    return any("/".join(parts[:k]) in folders for k in range(1, len(parts)))


def gold_configs(task: Task, tree: Path) -> dict[str, bytes | None]:
    """The gold version of every configuration file (:func:`is_config`) the gold patch edits, made
    on the host from the pristine tree and the gold patch (None: the gold patch deletes it).

    Such a file is not put back to pristine, since that would undo part of the fix; nor may the
    agent's version steer the test run, since pytest is handed it with ``-c`` and a plugin it names
    (or a hook in a conftest) would count as the project's own. So the test run's configuration is
    the gold's, whether or not the change touched the file (:func:`gold_config_paths`).
    """
    paths = tuple(p for p in dict.fromkeys(task.gold_files) if is_config(p) and p not in task.hidden_test_files)
    return dict(_gold_versions(tree, task.patch, paths)) if paths else {}


def gold_config_paths(task: Task, tree: Path, in_place: bool = False) -> dict[str, str | None]:
    """Each configuration file the gold patch edits -> where a grading view holds its gold version
    (None: nowhere, the gold patch deletes it).

    A file that configures nothing but the test run (``conftest.py``, ``pytest.ini``) holds it in
    place: the agent's edits to it are lost in grading. One that configures more
    (:data:`SHARED_CONFIGS`: a package's metadata, other tools, a test that reads it) keeps the
    agent's version for whatever else reads it, and pytest is handed the gold version in a copy
    beside it, which it parses the same way (same suffix, same directory, so paths in it mean the
    same). ``in_place``: where pytest is not handed its configuration (the task's command chooses
    it, or no file names one) and would find the agent's version itself, every one is in place.
    """
    out: dict[str, str | None] = {}
    for path, data in gold_configs(task, tree).items():
        head, name = posixpath.split(path)
        copy = not in_place and name in SHARED_CONFIGS
        out[path] = None if data is None else posixpath.join(head, ".deepgym-gold-" + name) if copy else path
    return out


def _write_gold_configs(sb: Sandbox, task: Task, tree: Path, in_place: bool) -> list[str]:
    """Write each gold configuration file where :func:`gold_config_paths` says; returns the paths
    whose gold version the view now holds."""
    places = gold_config_paths(task, tree, in_place)
    for path, data in gold_configs(task, tree).items():
        where = places[path] or path
        sb.remove(where)
        if data is not None:
            sb.write_file(where, data)
    return sorted(places)


def grading_config_args(sb: Sandbox, task: Task, tree: Path, files: list[str]) -> list[str]:
    """The options naming pytest's configuration for a run of ``files`` in a grading view that
    :func:`prepare_grading_view` made: the pristine or gold configuration pytest would pick
    (:func:`~deepgym_envs.testrun.config.pristine_config_args`), none where the task's command
    chooses its own. Where pytest is left to find it itself, the gold versions are put in place."""
    if chooses_config(task.test_cmd):
        return []
    patched = set(patch_paths(task.test_patch))
    config = pristine_config_args(sb, files, lambda p: p in pristine_files(tree) or p in patched,
                                  gold_config_paths(task, tree))
    if not config:
        _write_gold_configs(sb, task, tree, in_place=True)
    return config


_GLOB_CHAR = re.compile(r"([][*?\\])")


@lru_cache(maxsize=256)
def _gold_versions(tree: Path, gold: str, paths: tuple[str, ...]) -> tuple[tuple[str, bytes | None], ...]:
    with tempfile.TemporaryDirectory(prefix="deepgym-gold-") as tmp:
        for path in paths:
            src = tree / path
            if src.is_file() and not src.is_symlink():
                (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / path).write_bytes(src.read_bytes())
        include = ["--include=" + _GLOB_CHAR.sub(r"\\\1", p) for p in paths]  # each a literal path, not a glob
        # No repository around the scratch directory: git applies the patch to these files alone.
        run_git(["apply", "--whitespace=nowarn", "--recount", *include, "-"], cwd=tmp, input=gold,
                env={"GIT_CEILING_DIRECTORIES": str(Path(tmp).parent)})
        out = []
        for path in paths:
            dst = Path(tmp) / path
            out.append((path, dst.read_bytes() if dst.is_file() and not dst.is_symlink() else None))
        return tuple(out)


def patch_writes(tree: Path, patch: str) -> set[str] | None:
    """Every path ``patch`` writes, as ``git apply`` parses them: the view was a fresh copy of the
    pristine tree and ``git apply`` (all or nothing) wrote these and nothing else, so this is the
    view's change, read without walking or diffing the tree. ``--numstat`` names a rename or copy
    by its destination; read in reverse it names the source: both runs give both sides. None when
    git cannot read it so (then the caller diffs the view: never a masked verdict for a patch that
    applied)."""
    paths: set[str] = set()
    for reverse in ([], ["-R"]):
        try:
            out = run_git(["apply", *reverse, "--numstat", "-z", "--recount", "-"], cwd=tree, input=patch)
        except GitError:
            return None
        for record in out.split("\0"):
            parts = record.split("\t", 2)  # ADDED, DELETED, PATH (a path may hold tabs)
            if len(parts) == 3 and parts[2]:
                paths.add(parts[2])
            elif record and len(parts) == 1:  # a git that names a rename's sides as fields of their own
                paths.add(record)
    return paths


def _applies_to_pristine(tree: Path, patch: str) -> bool:
    try:
        run_git(["apply", "--check", "--whitespace=nowarn", "--recount", "-"], cwd=tree, input=patch)
        return True
    except InfrastructureError:
        return False


def _view_disk_full(sb: Sandbox, need: int) -> bool:
    """Whether the view's own (size-capped) filesystem has less room than ``need`` and some slack."""
    if not isinstance(sb, HostPaths):
        return False
    try:
        st = os.statvfs(sb.host_root())
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 2 * need + (1 << 20)


def host_disk_short() -> bool:
    """Whether the host filesystem holding sandboxes (and git's scratch files) is nearly full."""
    try:
        return shutil.disk_usage(tempfile.gettempdir()).free < HOST_FREE_FLOOR
    except OSError:
        return True


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


def canary_pool(task: Task, *, backend: str | None = None, limits: SandboxLimits | None = None,
                timeout: float = GRADING_TIMEOUT) -> canary_tests.Pool:
    """The task's proven canary copies (:func:`deepgym_envs.canaries.proven_pool`), proven once by a
    run of the gold patch's grading view with every candidate planted."""
    ids = [t for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if t not in task.flaky]

    def run(task: Task, plant: Any) -> tuple[list[Any], Any, Any]:
        tree = pristine_tree(task)
        with make_sandbox(tree, backend, limits, spec=sandbox_spec(task, backend)) as sb:
            prepare_grading_view(sb, task, tree, task.patch)
            tried = plant(sb)
            if not tried:
                return tried, None, None
            files = graded_files(task, ids)
            args = [*task.pytest_args, *grading_config_args(sb, task, tree, files), "--maxfail=0", "--tb=no", "-rf",
                    "-vv", *files]
            report, result = run_pytest(sb, args, timeout)
            return tried, report, result

    return canary_tests.proven_pool(task, run)


def test_files(ids: list[str]) -> list[str]:
    """The files that hold these test ids, in first-seen order."""
    out: list[str] = []
    for test_id in ids:
        path = test_id.split("::", 1)[0]
        if path not in out:
            out.append(path)
    return out


def graded_files(task: Task, ids: list[str]) -> list[str]:
    """What the test run is handed: SWE-bench rows, the files of ``test_patch`` (as the official
    harness does); deepgym's own tasks, the files that hold their test ids."""
    if task.swebench_semantics and task.test_patch.strip():
        return files_of_test_patch(task.test_patch) or test_files(ids)
    return test_files(ids)


def _agents_failure_is_unresolved(grading):
    """The grading path's half of :func:`deepgym_envs.errors.agent_shaped`: an exception no part of
    grading raised on purpose, over a change the agent shaped, is that change's ``unresolved``."""

    @functools.wraps(grading)
    def graded(task: Task, patch: str, **kwargs: Any) -> Verdict:
        start = time.monotonic()
        try:
            with agent_shaped("grading"):
                return grading(task, patch, **kwargs)
        except ToolError as exc:
            return unresolved_all(task, str(exc), time.monotonic() - start)

    return graded


@_agents_failure_is_unresolved
def grade(task: Task, patch: str, *, backend: str | None = None, limits: SandboxLimits | None = None,
          timeout: float = GRADING_TIMEOUT, views: ViewPool | None = None, select: bool = False) -> Verdict:
    """Grade a unified diff against the task's pristine tree with its hidden tests.

    ``no_verdict`` (never a silent 0) when the harness fails: the sandbox cannot start or dies,
    or the host's disk fills up. Tests that outlive the task's deadline are ``unresolved``: only
    the change under test makes them hang. ``timeout`` is its ceiling; a task whose gold run was
    timed gets less (:func:`grading_deadline`), so a hanging change does not hold a grading for
    the ceiling when the gold run takes seconds.

    ``views``: take the grading view from this pool (renewed, never an agent's sandbox) and run
    the tests on its warm server; the same verdict, without interpreter start-up.

    ``select``: for the shaping reward only, never a final verdict. Where the task's test map
    (:mod:`deepgym_envs.selection`) is stored and current, run the FAIL_TO_PASS tests and only the
    PASS_TO_PASS tests the change can affect; the others keep their recorded outcome
    (``Verdict.selected`` counts the tests run).
    """
    start = time.monotonic()
    bounds = limits or SandboxLimits()
    most = 2 * bounds.change_bytes
    if most and len(patch) > most:  # what a workspace's diff may hold (SandboxLimits.change_bytes)
        return unresolved_all(task, f"the change's diff is {len(patch)} characters, more than the {most} a change's "
                                    "diff may hold")
    named = len(patch_paths(patch)) if bounds.change_files else 0
    if named > bounds.change_files:
        return unresolved_all(task, f"the change names {named} files, more than the {bounds.change_files} a change "
                                    "may hold")
    deadline = grading_deadline(task, timeout)
    tmap = load_map(task) if select else None
    if task.flaky:
        warnings.warn(f"{task.instance_id}: flaky tests excluded from grading: {', '.join(task.flaky)}",
                      FlakyTestWarning, stacklevel=2)
    try:
        tree = pristine_tree(task)
        spec = sandbox_spec(task, backend)
        pool = (canary_pool(task, backend=backend, limits=limits, timeout=timeout)
                if plants_canaries(task.test_cmd) else None)
        with (views.view(tree, backend, limits, spec) if views is not None
              else make_sandbox(tree, backend, limits, spec=spec)) as sb:
            ids = [t for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if t not in task.flaky]
            try:
                changed = prepare_grading_view(sb, task, tree, patch)
                run = _selection(task, tmap, tree, sb, changed, ids) if tmap is not None else None
                files = graded_files(task, ids)
                config = grading_config_args(sb, task, tree, files)
                xfailing = xfail_files(sb, test_files(ids)) if task.swebench_semantics else None
                planted = (canary_tests.plant(sb, ids if run is None else run, pristine=tree, pool=pool)
                           if pool is not None else [])
                if run is not None:  # node ids, and the canaries among them (not last: that told them apart)
                    files = interleave(run, [c.nodeid for c in planted])
            except ToolError as exc:
                # The agent's patch, or what it leaves of the disk. Only a host short of space (a
                # fact, not the message, which echoes the patch's file names) makes it the harness's.
                if host_disk_short():
                    raise SandboxError(f"the host is short of disk space: {exc}") from None
                return unresolved_all(task, f"patch does not apply: {exc}", time.monotonic() - start)
            # Every canary must run: a failing one must not stop the session (-x in a config's addopts).
            extra = ["--maxfail=0"] if planted else []
            report, result = run_pytest(sb, [*task.pytest_args, *config, *extra, "-rA", *files], deadline,
                                        warm=views is not None, seal=task.trust,
                                        not_tests=[p for p in task.gold_files if not is_protected(p, task)])
            report = own_xfails_only(report, xfailing)
        if task.swebench_semantics and patch.strip() != task.patch.strip():
            report = gold_skips_only(task, report, backend=backend, limits=limits, timeout=timeout)
    except (InfrastructureError, SandboxUnavailable, TaskFormatError) as exc:
        # A task whose tree cannot be built (its base commit missing from its repository, say) is
        # that task's failure, said per task: a run over many tasks goes on.
        return Verdict.no_verdict(str(exc), time.monotonic() - start)
    ran = {"deadline": deadline, "test_seconds": round(result.duration, 3)}
    if result.timed_out:
        # The harness did its part (the view started, the tests ran); what ran too long is the
        # change under test, so this counts against it, as in SWE-bench. Masking it would let a
        # policy turn any failure into a dropped rollout by making the tests hang.
        return dataclasses.replace(unresolved_all(task, deadline_reason(task, deadline, timeout),
                                                  time.monotonic() - start), **ran)
    if run is not None:
        return dataclasses.replace(_merge_selected(task, tmap, run, judge(
            _only(task, run), report, result, time.monotonic() - start, planted, sb.workdir)), **ran)
    verdict = dataclasses.replace(judge(task, report, result, time.monotonic() - start, planted, sb.workdir), **ran)
    if not verdict.tampered and (report is None or result.exit_code not in (0, 1)):
        return _blame_environment(task, patch, verdict, backend=backend, limits=limits, timeout=timeout)
    return verdict


#: Whether each task's gold patch gets a complete test run: (task, tree, spec) -> the failure, or "".
_GOLD_RUNS: dict[tuple[str, str, str], str] = {}
_GOLD_LOCK = threading.Lock()


_ENVIRONMENT_FAILS = "the environment cannot run this task's tests"
#: What the runner says (``in_sandbox/deepgym_pytest.py``) when the project under test is pytest
#: itself: no environment fixes that, so the advice is not "check python_env". (pytest missing
#: from the environment is not this: an image or python_env without it is fixed by installing it.)
_OWN_RUNNER = ("deepgym does not grade a project with its own test runner",)
_OWN_RUNNER_ADVICE = ("the project is the test runner itself (pytest-dev rows): deepgym grades no project with its "
                      "own runner, so leave these rows out of the task set (no python_env can fix them)")


def _blame_environment(task: Task, patch: str, verdict: Verdict, **kwargs: Any) -> Verdict:
    """A run that did not complete (no report; pytest stopped at collection, found no tests or
    could not start) is the environment's failure when the gold patch's run fails the same way:
    a missing package, pytest or interpreter, an import error of the project itself. That is a
    fact the agent cannot write (the gold patch and the pristine tree are not its), so the
    verdict becomes ``no_verdict``; otherwise the change under test broke the run: unresolved."""
    key = VerdictCache.key(task, task.patch)
    if patch.strip() == task.patch.strip():
        failure = verdict.reason
    else:
        with _GOLD_LOCK:
            known = _GOLD_RUNS.get(key)
        if known is None:
            gold = grade(task, task.patch, **kwargs)
            known = gold.reason if gold.status == "no_verdict" else ""
            if not known:  # a failure may be transient: asked again next time
                with _GOLD_LOCK:
                    _GOLD_RUNS[key] = known
        failure = known
    if not failure:
        return verdict
    if not failure.startswith(_ENVIRONMENT_FAILS):  # the gold run's own verdict says it already
        where = (f"the image {task.image}'s environment" if task.image and not task.python_env and not task.repo_path
                 else "python_env")
        advice = (_OWN_RUNNER_ADVICE if any(m in verdict.log or m in failure for m in _OWN_RUNNER)
                  else f"check {where}")
        failure = (f"{_ENVIRONMENT_FAILS} (the gold patch's run fails the same way): {failure}. See the log "
                   f"(deepgym tasks validate --show-log {task.instance_id}); {advice}")
    masked = Verdict.no_verdict(failure, verdict.duration)
    masked.log = verdict.log
    return masked


#: Options under which pytest may rightly not run (or not finish) a canary: then none is planted.
_SELECTING = ("-k", "-m", "--deselect", "--sw", "--stepwise", "--sw-skip", "--stepwise-skip", "--lf",
              "--last-failed", "--ff", "--failed-first", "--nf", "--new-first")


#: A mark expression every unmarked test (a canary) satisfies: ``not slow``, ``not a and not b``.
_UNMARKED_PASS = re.compile(r"not [A-Za-z_]\w*(?: and not [A-Za-z_]\w*)*")


def plants_canaries(test_cmd: list[str]) -> bool:
    """Whether canaries can go into a run of this command: it selects tests by no name, and by no
    mark but ``-m "not NAME..."`` (sympy's spec leaves its slow tests out so), which keeps every
    test without marks, canaries included."""
    args = list(test_cmd)
    for i, arg in enumerate(args):
        value = args[i + 1] if arg == "-m" and i + 1 < len(args) else arg[2:] if arg.startswith("-m") else None
        if value is not None and not arg.startswith("--") and _UNMARKED_PASS.fullmatch(value.strip()):
            args[i:i + 1 + (arg == "-m")] = [""] * (1 + (arg == "-m"))
    return not any(a in _SELECTING or a.startswith(tuple(f"{o}=" for o in _SELECTING))
                   or (a[:2] in ("-k", "-m") and not a.startswith("--")) for a in args)


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
        spec = json.dumps([tree_fingerprint(task), task.patch, task.test_patch, task.FAIL_TO_PASS, task.PASS_TO_PASS,
                           task.flaky, task.test_cmd, task.python_env, task.swebench_semantics, task.trust,
                           task.gold_seconds], sort_keys=True)
        return (task.instance_id, hashlib.sha256(spec.encode()).hexdigest(),
                hashlib.sha256(patch.encode("utf-8", "surrogateescape")).hexdigest())

    def grade(self, task: Task, patch: str, **kwargs: Any) -> Verdict:
        key = self.key(task, patch)
        if kwargs.get("select") and load_map(task) is None:
            kwargs["select"] = False  # no map: a full run, and cached as one
        if kwargs.get("select"):  # a selected verdict is for shaping only: never handed out as a full one
            key = (*key[:2], "select:" + key[2])
        # What bounds the run decides verdicts too: a slow change is unresolved under one deadline,
        # resolved under a longer one; a large one past one change bound, within another.
        limits = kwargs.get("limits")
        bounds = (kwargs.get("timeout", GRADING_TIMEOUT), limits.change_bytes if limits else None,
                  limits.timeout if limits else None)
        key = (*key[:2], f"{key[2]}:{bounds}")
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


def graded_alone(exc: Exception) -> Verdict:
    """The verdict of a candidate whose grading raised ``exc``: its own ``no_verdict``, so the
    others' verdicts (their gradings have run) are still returned. A configuration mistake (a
    :class:`DeepgymError` that is neither the harness's nor the agent's) is re-raised instead: it
    says nothing about this candidate and would fail every other one the same way."""
    if isinstance(exc, DeepgymError) and not isinstance(exc, (InfrastructureError, ToolError)):
        raise exc
    return Verdict.no_verdict(f"grading raised {type(exc).__name__}: {str(exc)[:500]}")


#: The process-wide cache that environments grade through.
VERDICTS = VerdictCache()


#: What pytest says of a fixture no plugin provides (validation names the package: ``mocker``).
_NO_FIXTURE = re.compile(r"fixture '\w+' not found")
LOG_TAIL = 8000


def log_tail(output: str) -> str:
    """The end of a run's output, for the verdict's log; led by the missing-fixture lines the cut
    left out (in a large suite, ``-rA``'s summary pushes the setup errors out of the tail)."""
    head, tail = output[:-LOG_TAIL], output[-LOG_TAIL:]
    missing = sorted(set(_NO_FIXTURE.findall(head)) - set(_NO_FIXTURE.findall(tail)))[:20]
    return "".join(f"E       {m}\n" for m in missing) + tail


def judge(task: Task, report: dict[str, Any] | None, result: Any, duration: float,
          planted: list[canary_tests.Canary] | tuple[()] = (), workdir: str = "/testbed") -> Verdict:
    """Turn a test report into a verdict, cross-checking it against the process's exit status
    and the canaries ``planted`` in the run (never listed in the verdict's tests)."""
    log = log_tail(result.output)
    flaky = set(task.flaky)
    f2p = [t for t in task.FAIL_TO_PASS if t not in flaky]
    p2p = [t for t in task.PASS_TO_PASS if t not in flaky]
    reported: dict[str, str] = (report or {}).get("tests", {}) if isinstance(report, dict) else {}
    tests = {t: str(outcome_of(t, reported)) for t in [*f2p, *p2p]}
    swe = task.swebench_semantics
    ok = {t: counts_as_passing(tests[t], t in set(f2p), swe) for t in tests}
    counts = {name: {"passed": sum(ok[t] for t in ids), "total": len(ids)}
              for name, ids in (("f2p", f2p), ("p2p", p2p))}
    tampered: list[str] = []
    if report is not None:
        # What the host establishes itself first (the reason names the first five): canaries'
        # outcomes and forged lines, then what the plugin saw from inside the test process.
        completed = bool(report.get("finished")) and report.get("exitstatus") in (0, 1)
        tampered += canary_tests.check(list(planted), reported, completed)
        if report.get("forged"):
            tampered.append(f"{report['forged']} forged report line(s)")
        tampered += list(report.get("tampered") or [])
        tampered += foreign_bodies([*f2p, *p2p, *(c.nodeid for c in planted)], report.get("bodies") or {}, workdir,
                                   task.hidden_test_files)
    reason = ""
    if tampered:
        reason = f"tampered: the test run was tampered with: {'; '.join(tampered[:5])}"
    elif report is None:
        reason = f"no test report (pytest exited {result.exit_code} before reporting)"
    elif report.get("exitstatus") != result.exit_code:
        reason = f"report says exit {report.get('exitstatus')} but the process exited {result.exit_code}"
    elif result.exit_code not in (0, 1):
        reason = f"pytest did not complete (exit {result.exit_code})"
    if tampered:
        # A caught forgery earns no progress either: the counts would feed the shaping reward.
        counts = {name: {"passed": 0, "total": c["total"]} for name, c in counts.items()}
    all_pass = all(ok.values())
    status: Status = "resolved" if all_pass and not reason else "unresolved"
    if not reason and not all_pass:
        bad = [f"{t} {v}" for t, v in tests.items() if not ok[t]]
        reason = f"{len(bad)} of {len(tests)} tests not passing: " + "; ".join(bad[:5])
    return Verdict(status, tests, counts["f2p"], counts["p2p"], reason, duration, log, bool(tampered))


def swebench_key(nodeid: str) -> str:
    """A node id as SWE-bench's log parsers key it: cut at its first space (a parametrised id
    ``test_x[not a]`` is published as ``test_x[not``), and a parameter that is an absolute path
    cut to its last component (``parse_log_pytest_options``, the parser of requests, pydicom and
    pylint: ``test_stdin[/testbed/tests/mymodule.py]`` is published as ``test_stdin[/mymodule.py]``)."""
    key = nodeid.split(" ", 1)[0]
    match = re.match(r"(.*?)\[(.*)\]", key)
    if match:
        main, option = match.groups()
        if option.startswith("/") and not option.startswith("//") and "*" not in option:
            key = f"{main}[/{option.split('/')[-1]}]"
    return key


def outcome_of(test_id: str, reported: dict[str, str]) -> str:
    """The reported outcome of an expected id: the node id itself, else as SWE-bench's log parser
    keys it (:func:`swebench_key`); the last such test reported wins, as in that parser's dict."""
    if test_id in reported:
        return reported[test_id]
    found = "missing"
    for nodeid, outcome in reported.items():
        if swebench_key(nodeid) == test_id:
            found = outcome
    return found


def xfail_files(sb: Sandbox, files: list[str]) -> set[str]:
    """The graded test files whose tests can xfail by the hidden tests' own doing: ``xfail`` in the
    file or in a ``conftest.py`` above it (any case: sympy's tests say ``@XFAIL``), all pristine in
    a grading view."""
    out = set()
    for path in files:
        parts = path.split("/")
        for candidate in [path, *("/".join([*parts[:i], "conftest.py"]) for i in range(len(parts) - 1, -1, -1))]:
            try:
                if b"xfail" in sb.read_file(candidate).lower():
                    out.add(path)
                    break
            except ToolError:
                continue
    return out


def own_xfails_only(report: dict[str, Any] | None, xfailing: set[str] | None) -> dict[str, Any] | None:
    """``report`` with an ``xfailed`` graded test read as ``failed`` unless the test item itself
    carried an xfail mark before it ran (the report's ``marked``: its own decorators, parametrize
    marks, module ``pytestmark``, a pristine conftest marking it, unittest's ``expectedFailure``)
    and its file can xfail it (:func:`xfail_files`; None: every file can). SWE-bench counts xfailed
    as passing, and code the change edits can call ``pytest.xfail()`` whenever a test is about to
    fail (an ``__eq__`` that does on a mismatch), which no canary sees: canaries never call the
    repository's code. Per test, not per file: one marked test does not excuse its neighbours. The
    file must still say xfail, since package code run at the file's import can set a mark's
    attribute on a test function."""
    if report is None or xfailing is None:
        return report
    marked = set(report.get("marked") or ())
    tests = {n: "failed" if o == "xfailed" and (n not in marked or n.split("::", 1)[0] not in xfailing) else o
             for n, o in report.get("tests", {}).items()}
    return {**report, "tests": tests}


#: The PASS_TO_PASS tests each task's gold patch skips: (task, tree, spec) -> their ids.
_GOLD_SKIPS: dict[tuple[str, str, str], frozenset[str]] = {}


def gold_skips_only(task: Task, report: dict[str, Any] | None, **kwargs: Any) -> dict[str, Any] | None:
    """``report`` with a skipped PASS_TO_PASS test read as ``failed`` unless the gold patch's run
    skips it too. SWE-bench counts a skipped PASS_TO_PASS test as no failure, and code the change
    edits can call ``pytest.skip()`` in exactly the tests it breaks; the gold patch's run (neither
    it nor the pristine tree is the agent's) says which skips are the environment's own."""
    if report is None:
        return report
    p2p = set(task.PASS_TO_PASS) - set(task.flaky)
    reported = report.get("tests", {})
    skipped = {t for t in p2p if outcome_of(t, reported) == "skipped"}
    if not skipped:
        return report
    key = VerdictCache.key(task, task.patch)
    with _GOLD_LOCK:
        allowed = _GOLD_SKIPS.get(key)
    if allowed is None:
        gold = grade(task, task.patch, **kwargs)
        if gold.status == "no_verdict":  # cannot tell: the harness's failure, not the change's
            raise InfrastructureError(f"the gold patch's run, which tells which skips are the environment's, "
                                      f"got no verdict: {gold.reason}")
        allowed = frozenset(t for t, o in gold.tests.items() if o == "skipped")
        with _GOLD_LOCK:
            _GOLD_SKIPS[key] = allowed
    forced = {t for t in skipped if t not in allowed}
    return _failed_where(report, "skipped", forced) if forced else report


def _failed_where(report: dict[str, Any], outcome: str, ids: set[str]) -> dict[str, Any]:
    """``report`` with each test of ``outcome`` that stands for one of ``ids`` (its node id, or the
    id SWE-bench publishes for it, as :func:`outcome_of` reads them) read as ``failed``."""
    tests = {n: "failed" if o == outcome and (n in ids or swebench_key(n) in ids) else o
             for n, o in report.get("tests", {}).items()}
    return {**report, "tests": tests}


def interleave(run: list[str], canary_ids: list[str]) -> list[str]:
    """``run``'s node ids in their order, each canary put at a random place among its own file's."""
    rng = secrets.SystemRandom()
    out = list(run)
    for nodeid in canary_ids:
        file = nodeid.split("::", 1)[0]
        at = [i for i, t in enumerate(out) if t.split("::", 1)[0] == file]
        out.insert(rng.randint(at[0], at[-1] + 1) if at else rng.randint(0, len(out)), nodeid)
    return out


def counts_as_passing(outcome: str, fail_to_pass: bool, swebench: bool) -> bool:
    """Whether an outcome counts toward resolving. deepgym's tasks: only ``passed``. SWE-bench
    rows, as its harness counts: ``xfailed`` passes; a skipped PASS_TO_PASS test is no failure.
    A skipped FAIL_TO_PASS test fails here (the harness would leave it out of the count): else a
    change that makes the deciding tests skip themselves would resolve the task."""
    if outcome == "passed":
        return True
    if not swebench:
        return False
    return outcome == "xfailed" or (outcome == "skipped" and not fail_to_pass)


def foreign_bodies(ids: list[str], bodies: dict[str, list[Any]], workdir: str,
                   hidden_test_files: Sequence[str] = ()) -> list[str]:
    """Graded tests whose call ran code from a file the change could edit, in place of a test's.

    Test files (the hidden ones whatever their name) and conftests are restored to pristine
    before grading, and installed code is out of the change's reach; anything else (the package
    under test, /tmp, code with no file) running as a test's body means the body was swapped (a
    test function hollowed out as its module loaded).
    """
    out = []
    for test_id in ids:
        body = bodies.get(test_id)
        if not body:
            continue
        filename, _, installed = body
        rel = filename[len(workdir) + 1:] if filename.startswith(workdir.rstrip("/") + "/") else None
        if rel is not None and (is_test_path(rel) or rel in hidden_test_files) \
                or posixpath.basename(filename) == "conftest.py" and rel:
            continue
        if rel is None and installed:
            continue
        out.append(f"the body run for {test_id} is code from {rel or filename}")
    return out[:3]


def unresolved_all(task: Task, reason: str, duration: float = 0.0) -> Verdict:
    """Every graded test missing: what a change the hidden tests never ran against earns."""
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return Verdict("unresolved", {t: "missing" for t in ids},
                   {"passed": 0, "total": len(task.FAIL_TO_PASS)}, {"passed": 0, "total": len(task.PASS_TO_PASS)},
                   reason, duration)


def _selection(task: Task, tmap: TestMap, tree: Path, sb: Sandbox, changed: list[str], ids: list[str]
               ) -> list[str] | None:
    """The hidden test ids to run in this view for its change (FAIL_TO_PASS always), or None for all."""
    root = sb.host_root() if isinstance(sb, HostPaths) else None
    if root is None:
        return None  # regular files are told from links by their host path

    def regular(base: str, path: str) -> bytes | None:
        full = os.path.join(base, path)
        if os.path.islink(full) or not os.path.isfile(full) or os.path.realpath(full) != os.path.join(
                os.path.realpath(base), path):
            return None  # a link anywhere on the way: not the file the map knows
        try:  # never blocking on a FIFO, never following a link swapped in since the checks above
            with open_regular(full, os.O_RDONLY, path) as fh:
                return fh.read(MAX_SOURCE_BYTES + 1)  # the agent's file may be a 1 GiB sparse one
        except (ToolError, OSError):
            return None

    chosen = select_tests(tmap, changed, lambda p: regular(str(tree), p), lambda p: regular(root, p))
    if chosen is None:
        return None
    f2p = set(task.FAIL_TO_PASS)
    return [t for t in ids if t in f2p or t in chosen or t not in tmap.tests]


def _only(task: Task, run: list[str]) -> Task:
    """The task as the selected run sees it: its PASS_TO_PASS cut to the tests that ran."""
    ran = set(run)
    return dataclasses.replace(task, PASS_TO_PASS=[t for t in task.PASS_TO_PASS if t in ran])


def _merge_selected(task: Task, tmap: TestMap, run: list[str], verdict: Verdict) -> Verdict:
    """A selected run's verdict with every test not run at the outcome its map records."""
    flaky = set(task.flaky)
    f2p = [t for t in task.FAIL_TO_PASS if t not in flaky]
    p2p = [t for t in task.PASS_TO_PASS if t not in flaky]
    tests = {t: verdict.tests.get(t) or (tmap.tests[t].outcome if t in tmap.tests else "missing")
             for t in [*f2p, *p2p]}
    kept = [t for t in p2p if t not in verdict.tests]
    passed = verdict.pass_to_pass["passed"] + (0 if verdict.tampered else sum(tests[t] == "passed" for t in kept))
    resolved = verdict.resolved and all(tests[t] == "passed" for t in kept)
    return dataclasses.replace(verdict, status="resolved" if resolved else "unresolved", tests=tests,
                               pass_to_pass={"passed": passed, "total": len(p2p)}, selected=len(run))


def workspace_patch(task: Task, sb: Sandbox) -> str | Verdict:
    """The agent's change as a diff, or the verdict its workspace earns without a grading: the
    harness's failure to read it (``no_verdict``), or a change past the host's bounds or one that
    crashes the diff (the agent's: ``unresolved``)."""
    try:
        with agent_shaped("diffing the workspace"):
            return sb.diff()
    except InfrastructureError as exc:
        return Verdict.no_verdict(f"could not read the agent's workspace: {exc}")
    except ToolError as exc:
        return unresolved_all(task, str(exc))


def grade_sandbox(task: Task, sb: Sandbox, *, cache: VerdictCache | None = None, **kwargs: Any) -> Verdict:
    """Grade the current state of an agent's sandbox (through its diff; the sandbox is untouched)."""
    patch = workspace_patch(task, sb)
    if isinstance(patch, Verdict):
        return patch
    return cache.grade(task, patch, **kwargs) if cache is not None else grade(task, patch, **kwargs)
