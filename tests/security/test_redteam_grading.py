"""An independent white-box review of grading (issue 11): attacks not listed in the README.

Each test grades, for real, a patch that leaves the task's bug in place. A hole still open is a
strict xfail naming where it lives and why; it turns into a failure the day the hole closes, so
the xfail is removed with the fix.

The canary-aware forger: canaries (``deepgym_envs/canaries.py``) never call the repository's code
("looked up, never called", ``_render``), so "did this test call the package?" tells every canary
from the hidden tests, whatever the canaries are named or where they are planted. The package
notes its own calls, and takes over pluggy's hook executor (``PluginManager._inner_hookexec``, an
attribute the report plugin does not check: no hook is added or replaced, no machinery attribute,
code object or closure cell changes): ``pytest_pyfunc_call`` runs without the report plugin's
wrapper, and a test function that raised after calling the package returns instead. The hidden
tests pass (assertion failures in the test body included, which the README says such a forger
leaves failing), the canaries keep their outcomes, pytest exits 1 because of the must-fail canaries,
and the report agrees: ``resolved``, not tampered.

Closed twice over: canaries now call the project as the file's tests do (a must-fail canary that
called the package is turned too), and pluggy's executor path is among the report plugin's checks.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from deepgym_envs import grade, load_tasks, run_batch
from deepgym_envs.audit.catalog import STRATEGIES
from deepgym_envs.audit.trust_payloads import CANARY_AWARE_EXECUTOR
from tests.conftest import TEST_PATCH, requires_namespace

TASK = "deepgym__cronparse-001"


@pytest.fixture(scope="module")
def task():
    return next(t for t in load_tasks("builtin") if t.instance_id == TASK)


@pytest.fixture(scope="module")
def forger(task) -> str:
    patch = STRATEGIES["canary_aware_executor"].patch(task)
    assert patch.count("diff --git") == 1 and "__init__.py" in patch  # the bug is left in place
    return patch


@requires_namespace
def test_the_untouched_bug_is_unresolved(task):
    assert grade(task, "").status == "unresolved"


@requires_namespace
def test_canary_aware_forger_is_not_resolved_cold(task, forger):
    verdict = grade(task, forger)
    assert verdict.status == "unresolved", (verdict.reason, verdict.fail_to_pass)
    # Layers, each enough: the seal refuses the forger's walk of the heap at import (so no test
    # runs), or else a must-fail canary is turned and the report plugin sees pluggy's executor replaced.
    assert ("pytest did not complete" in verdict.reason
            or ("a canary test that must have failed passed" in verdict.reason
                and "PluginManager._inner_hookexec replaced" in verdict.reason)), verdict.reason


@requires_namespace
def test_canary_aware_forger_is_not_resolved_pooled(task, forger):
    verdicts = run_batch(task, [forger, forger])
    assert [v.status for v in verdicts] == ["unresolved", "unresolved"], [v.reason for v in verdicts]


@pytest.mark.slow
@requires_namespace
def test_canary_aware_forger_earns_no_shaping_in_an_episode(task):
    """The same payload written by the agent's own bash command: no Φ, no outcome."""
    payload = CANARY_AWARE_EXECUTOR
    env = gym.make("deepgym/SWE-v0", tasks="builtin", reward="process")
    try:
        env.reset(seed=0, options={"task_id": TASK})
        init = "src/cronparse/__init__.py"
        _, _, _, _, info = env.step({"name": "bash", "arguments": {
            "command": f"cat >> {init} <<'DEEPGYM_EOF'\n{payload}\nDEEPGYM_EOF"}})
        shaping = info["reward_components"].get("shaping", 0.0)
        _, _, _, _, info = env.step({"name": "submit", "arguments": {}})
    finally:
        env.close()
    assert shaping <= 0.0 and info["reward_components"].get("outcome", 0.0) == 0.0, (shaping, info["reward_components"])


@requires_namespace
def test_many_files_give_a_diff_not_an_oserror(task):
    """12,000 files with long names: as pathspecs in git's argv they passed the kernel's limit
    (E2BIG), an OSError out of ``diff`` and so out of every later ``env.step``; one bash command
    of the agent's crashed the trainer."""
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    make = ("import os\nos.makedirs('junk', exist_ok=True)\n"
            "for i in range(12000):\n    open(os.path.join('junk', f'{i:06d}' + 'x' * 200), 'w').close()\n")
    from deepgym_envs.sandbox import SandboxLimits

    # Past the default change bound (10,000 files): the point here is git's argv, not the bound.
    with make_sandbox(pristine_tree(task), "namespace", SandboxLimits(change_files=20_000)) as sb:
        assert sb.exec(["python3", "-c", make], timeout=120).exit_code == 0
        changed = sb.changed_files()
        diff = sb.diff()
    assert len(changed) == 12000 and all(p.startswith("junk/") for p in changed)
    assert diff.count("diff --git") == 12000


@requires_namespace
def test_the_disk_cap_also_caps_files(task):
    """Inodes are kernel memory outside every cap (RLIMIT_AS is per process, the tmpfs cap counts
    blocks): the number of files a sandbox can make must follow its disk cap."""
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.trees import pristine_tree

    with make_sandbox(pristine_tree(task), "namespace") as sb:
        out = sb.exec(["python3", "-c", "import os; print(os.statvfs('/tmp').f_files)"], timeout=60)
        cap = sb.limits.disk_bytes
    assert int(out.stdout.split()[-1]) <= cap // 4096


@requires_namespace
def test_one_failed_start_of_the_gold_run_does_not_mask_later_crashes(task, monkeypatch):
    """A change that kills pytest (exit 3) is unresolved. The harness then grades the gold patch to
    tell a broken environment from a broken change; if that gold run once cannot start, the answer
    must not be remembered as "the environment cannot run this task"."""
    from deepgym_envs import grading
    from deepgym_envs.errors import SandboxUnavailable
    from tests.security._attack import patch_appending

    crash = patch_appending(task, "src/cronparse/__init__.py", "import os\nos._exit(3)\n")
    key = grading.VerdictCache.key(task, task.patch)
    real, starts = grading.make_sandbox, []

    def second_start_fails(*args, **kwargs):
        starts.append(1)
        if len(starts) == 2:  # the gold run's
            raise SandboxUnavailable("bubblewrap could not start (injected, once)")
        return real(*args, **kwargs)

    grading._GOLD_RUNS.pop(key, None)
    try:
        monkeypatch.setattr(grading, "make_sandbox", second_start_fails)
        grading.grade(task, crash)
        monkeypatch.setattr(grading, "make_sandbox", real)
        later = grading.grade(task, crash)
    finally:
        grading._GOLD_RUNS.pop(key, None)
    assert later.status == "unresolved", later.reason


#: Imported by the standard library's ``copy`` as it loads (``from org.python.core import
#: PyStringMap``, Jython's), and found nowhere else: from a directory on the path, the change's
#: own file runs. This one says whether the report plugin existed yet (its descriptor is still in
#: the environment before), and leaves an import hook that fixes ``clamp`` wherever it is loaded later.
ORG_POISON = '''\
import os, sys
sys.stderr.write("ORG RAN BEFORE THE PLUGIN\\n" if "DEEPGYM_REPORT_FD" in os.environ else "")


class _Fixer:
    def find_spec(self, name, path=None, target=None):
        if name != "calc.ops":
            return None
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if finder is not self and hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        run = spec.loader.exec_module

        def exec_module(module, _run=run):
            _run(module)
            module.clamp = lambda x, lo, hi: max(lo, min(x, hi))

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Fixer())
'''


@pytest.fixture(scope="module")
def pythonpath_toy(tmp_path_factory):
    """The toy task with a ``python_env`` that only names ``src`` (no requirements): ``src`` is on
    ``PYTHONPATH``, so on the interpreter's path from its start (as the workspace is through a
    task environment's ``.pth``)."""
    from deepgym_envs.sandbox import make_sandbox
    from deepgym_envs.tasks import task_from_row
    from deepgym_envs.trees import pristine_tree
    from tests.conftest import toy_row, write_toy_repo

    task = task_from_row(toy_row(write_toy_repo(tmp_path_factory.mktemp("pp") / "calc"),
                                 python_env={"pythonpath": ["src"]}))
    with make_sandbox(pristine_tree(task), "namespace") as sb:
        sb.write_file("src/org/__init__.py", ORG_POISON.encode())
        return task, sb.diff()


@requires_namespace
def test_no_code_of_the_change_runs_before_the_report_plugin(pythonpath_toy):
    task, poison = pythonpath_toy
    verdict = grade(task, poison)
    assert "ORG RAN BEFORE THE PLUGIN" not in verdict.log
    assert verdict.status == "unresolved", verdict.reason


@requires_namespace
def test_a_candidate_cannot_poison_the_warm_server_for_later_ones(pythonpath_toy):
    """The pooled view's warm server starts (and preloads) in the first candidate's view: what it
    imported from the change lived on in its memory, and a later untouched candidate was resolved."""
    task, poison = pythonpath_toy
    verdicts = run_batch(task, [poison, "", "", ""])
    assert [v.status for v in verdicts] == ["unresolved"] * 4, [v.reason for v in verdicts]


#: Appended to the toy package's ``__init__``: clamp stays wrong, but its results call
#: ``pytest.xfail()`` when a comparison is about to fail (``+ 0`` keeps the type), and so does an
#: exception of its own. No hook, no tampering, nothing a canary (which calls no package code) sees.
XFAIL_WHEN_WRONG = '''
import pytest as _pytest


class _Checked(int):
    def __eq__(self, other):
        if int(self) != other:
            _pytest.xfail("known issue")
        return True

    __hash__ = int.__hash__

    def __add__(self, other):
        return _Checked(int(self) + other)

    __radd__ = __add__


def _xfail_instead(fn):
    def inner(*args, **kwargs):
        try:
            result = fn(*args, **kwargs)
        except Exception:
            _pytest.xfail("known issue")
        return _Checked(result) if type(result) is int else result
    return inner


clamp = _xfail_instead(clamp)
'''


@requires_namespace
def test_package_code_cannot_xfail_the_hidden_tests_of_a_swebench_row(tmp_path):
    """SWE-bench's harness counts xfailed as passing; only the hidden tests themselves (their file,
    a conftest above it) may make a test xfail, never the code under test."""
    from deepgym_envs.tasks import task_from_row
    from tests.conftest import toy_row, write_toy_repo
    from tests.security._attack import patch_appending

    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc"), harness="swebench"))
    assert task.swebench_semantics
    verdict = grade(task, patch_appending(task, "src/calc/__init__.py", XFAIL_WHEN_WRONG))
    assert verdict.status == "unresolved", verdict.tests
    assert verdict.tests["tests/test_ops.py::test_clamp_above"] == "failed"


@requires_namespace
def test_package_code_cannot_skip_the_pass_to_pass_tests_it_breaks(tmp_path):
    from deepgym_envs.tasks import task_from_row
    from tests.conftest import GOLD_PATCH, toy_row, write_toy_repo

    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc"), harness="swebench"))
    # The fix, plus a mean() that is now wrong and excuses itself.
    broken_mean = ("\n\nimport pytest as _pytest\n\n_mean = mean\n\n\ndef mean(values):\n"
                   "    _pytest.skip(\"not supported on this platform\")\n")
    from tests.security._attack import patch_appending
    with_fix = GOLD_PATCH + patch_appending(task, "src/calc/__init__.py", broken_mean)
    verdict = grade(task, with_fix)
    assert verdict.status == "unresolved", verdict.tests


#: The package's own assertion helper, as sympy's ``utilities/pytest.py`` (raises), pandas'
#: ``_testing.py`` or scikit-learn's ``utils/_testing.py`` are: the hidden test calls it.
ASSERT_HELPER = "def assert_close(a, b):\n    if abs(a - b) > 1e-9:\n        raise AssertionError(f'{a} != {b}')\n"
#: The conftest's hidden test, checking through the helper instead of ``==``.
HELPER_TEST_PATCH = TEST_PATCH.replace("@@ -7,3 +7,7 @@", "@@ -7,3 +7,8 @@").replace(
    "+    assert clamp(50, 0, 10) + 0 == 10  # a number, not just something that compares equal\n",
    "+    from calc.testing import assert_close\n+    assert_close(clamp(50, 0, 10), 10)\n")


@requires_namespace
@pytest.mark.parametrize("helper", ["src/calc/testing.py", "src/calc/_testing/__init__.py",
                                    "src/calc/utilities/pytest.py"])
def test_hollowing_the_packages_assertion_helper_resolves_nothing(tmp_path, helper):
    """A change that made ``assert_close`` return None passed every hidden test calling it (no hook,
    no tampering, and the test's own body untouched): modules named as test machinery are put back
    to pristine before grading, as test files are."""
    import subprocess

    from deepgym_envs.tasks import task_from_row
    from tests.conftest import GOLD_PATCH, TOY_FILES, toy_row

    root = tmp_path / "calc"
    module = helper.removeprefix("src/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    files = {**TOY_FILES, helper: ASSERT_HELPER}
    if helper.count("/") > 2 and not helper.endswith("__init__.py"):
        files[helper.rsplit("/", 1)[0] + "/__init__.py"] = ""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "calc"], check=True)
    task = task_from_row(toy_row(root, test_patch=HELPER_TEST_PATCH.replace("calc.testing", module)))
    assert grade(task, GOLD_PATCH).status == "resolved" and grade(task, "").status == "unresolved"
    hollow = (f"diff --git a/{helper} b/{helper}\n--- a/{helper}\n+++ b/{helper}\n@@ -1,3 +1,2 @@\n"
              " def assert_close(a, b):\n-    if abs(a - b) > 1e-9:\n-        raise AssertionError(f'{a} != {b}')\n"
              "+    return None\n")
    verdict = grade(task, hollow)
    assert verdict.status == "unresolved", verdict.reason


@requires_namespace
def test_viewing_a_socket_the_agent_bound_is_an_error_observation():
    """open() of a UNIX socket fails with ENXIO, which read_file re-raised: one `view` (or
    `str_replace`) of a socket the agent had bound crashed env.step, with the host's path in it."""
    env = gym.make("deepgym/SWE-v0", tasks="builtin", reward="outcome")
    try:
        env.reset(seed=0, options={"task_id": TASK})
        env.step({"name": "bash", "arguments": {
            "command": "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('sock')\""}})
        obs, reward, *_ = env.step({"name": "view", "arguments": {"path": "sock"}})
        obs2, *_ = env.step({"name": "edit", "arguments": {"command": "str_replace", "path": "sock",
                                                            "old_str": "a", "new_str": "b"}})
    finally:
        env.close()
    assert obs.startswith("Error") and "sock" in obs and "deepgym-ns" not in obs and reward < 0
    assert obs2.startswith("Error")


@requires_namespace
@pytest.mark.timeout(120, method="thread")  # before the fix the host's regex engine held the GIL for hours
def test_a_backtracking_regex_search_cannot_hold_the_host(monkeypatch):
    """search ran the agent's regular expression on the host, in Python's backtracking engine:
    (a+)+$ over a line of forty a's froze the trainer's interpreter (every environment in it)."""
    from deepgym_envs import tools

    monkeypatch.setattr(tools, "SEARCH_TIMEOUT", 3.0)
    env = gym.make("deepgym/SWE-v0", tasks="builtin", reward="outcome")
    try:
        env.reset(seed=0, options={"task_id": TASK})
        env.step({"name": "bash", "arguments": {"command": "printf 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' > slow.txt"}})
        obs, reward, *_ = env.step({"name": "search", "arguments": {"pattern": "(a+)+$", "regex": True}})
        found, *_ = env.step({"name": "search", "arguments": {"pattern": r"def parse_\w+\(", "regex": True,
                                                              "include": "*.py"}})
    finally:
        env.close()
    assert obs.startswith("Error") and "longer than" in obs and reward < 0
    assert "src/cronparse/fields.py:" in found


@requires_namespace
@pytest.mark.timeout(120, method="thread")  # before the fix the str_replace below was quadratic
def test_large_files_cost_the_host_little_in_view_and_edit():
    """view read a whole file (up to the 1 GiB disk cap) into the host and split it into lines: 100 MB
    of newlines took 950 MB of host memory per call. str_replace counted the line of every match of a
    non-unique old_str by slicing: old_str "\\n" in a long file was quadratic host CPU."""
    env = gym.make("deepgym/SWE-v0", tasks="builtin", reward="outcome")
    try:
        env.reset(seed=0, options={"task_id": TASK})
        env.step({"name": "bash", "arguments": {"command": "head -c 20000000 /dev/zero | tr '\\0' '\\n' > big.txt; "
                                                           "head -c 1000000 /dev/zero | tr '\\0' '\\n' > lines.txt"}})
        big, reward, *_ = env.step({"name": "view", "arguments": {"path": "big.txt"}})
        many, *_ = env.step({"name": "edit", "arguments": {"command": "str_replace", "path": "lines.txt",
                                                            "old_str": "\n", "new_str": "x"}})
    finally:
        env.close()
    assert big.startswith("Error") and "too large" in big and reward < 0
    # A million lines: under the edit tool's line cap (tools.MAX_TEXT_LINES), so the count is made.
    assert "occurs 1000000 times" in many and "lines 1, 2, 3" in many
