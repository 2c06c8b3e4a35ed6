"""Classes D and E: one candidate cannot change another's verdict, in a pooled view or the cache.

A pooled grading view keeps its holder and warm test server between candidates (that is what
makes process rewards cheap), so whatever a candidate's code can leave behind there reaches the
next candidate. Before the fix, a candidate bind-mounted its own report plugin over deepgym's
inside the server's mount namespace, and every later candidate in that view came out as the
planted plugin said: ``[poison, empty]`` both resolved, ``[poison, gold]`` gold unresolved; the
process-wide verdict cache then served the wrong verdict to every later episode.

Now a candidate cannot mount (no capabilities, seccomp), cannot reach the server's memory, and
whatever it can write is renewed; renewal checks from the host that no process outlived the run.
"""

from __future__ import annotations

import pytest

from deepgym_envs import run_batch
from deepgym_envs.grading import VerdictCache
from deepgym_envs.sandbox.pool import ViewPool
from tests.conftest import requires_namespace
from tests.security._attack import patch_appending

pytestmark = [requires_namespace, pytest.mark.slow]

#: Code that runs when the tests import the package: plant a plugin over deepgym's own (by a bind
#: mount, which outlives the process in the server's mount namespace), leave files where a next
#: run could read them, and a process that outlives the run.
POISON = '''
def _poison(mode):
    import ctypes, os, subprocess
    force = ("\\nimport pytest\\n@pytest.hookimpl(tryfirst=True)\\ndef pytest_pyfunc_call(pyfuncitem):\\n"
             + ("    return True\\n" if mode == "pass" else "    raise AssertionError('poisoned')\\n"))
    try:
        src = open("/deepgym/deepgym_report.py").read()
        with open("/tmp/.planted.py", "w") as fh:
            fh.write(src + force)
        ctypes.CDLL(None, use_errno=True).mount(b"/tmp/.planted.py", b"/deepgym/deepgym_report.py",
                                                None, 4096, None)  # MS_BIND
    except OSError:
        pass
    for where in ("/dev/shm/planted", "/tmp/planted", "/planted"):
        try:
            open(where, "w").write(mode)
        except OSError:
            pass
    try:
        subprocess.Popen(["setsid", "sleep", "600"])
    except OSError:
        pass


_poison("{mode}")
'''


def _module_under_test(task) -> str:
    from deepgym_envs.tasks import patch_paths

    return next(p for p in patch_paths(task.patch) if p.endswith(".py"))


@pytest.fixture
def task():
    from deepgym_envs import load_tasks

    return load_tasks("builtin")[0]


def test_a_candidate_cannot_make_the_next_ones_pass(task):
    poison = patch_appending(task, _module_under_test(task), POISON.format(mode="pass"))
    verdicts = run_batch(task, [poison, "", ""], workers=1, warm=True)
    assert [v.status for v in verdicts] == ["unresolved"] * 3, [v.reason for v in verdicts]


def test_a_candidate_cannot_make_the_next_gold_fail(task):
    poison = patch_appending(task, _module_under_test(task), POISON.format(mode="fail"))
    verdicts = run_batch(task, [poison, task.patch, task.patch], workers=1, warm=True)
    assert [v.status for v in verdicts[1:]] == ["resolved", "resolved"], [v.reason for v in verdicts]


def test_the_verdict_cache_never_holds_a_verdict_a_candidate_influenced(task):
    poison = patch_appending(task, _module_under_test(task), POISON.format(mode="pass"))
    cache = VerdictCache()
    with ViewPool(max_idle=1) as views:
        cache.grade(task, poison, views=views)
        first = cache.grade(task, "", views=views)
    assert first.status == "unresolved", first.reason
    # Another episode reaching the empty diff gets the cached verdict: it must be the honest one.
    assert cache.grade(task, "").status == "unresolved"
    assert cache.hits == 1
