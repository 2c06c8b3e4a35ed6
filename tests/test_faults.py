"""Harness failures are no_verdict (never a silent 0), and leave nothing behind."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import leftovers, requires_namespace
from deepgym_envs import grade
from deepgym_envs.env import SWEEnv
from deepgym_envs.sandbox import SandboxLimits

pytestmark = requires_namespace


@pytest.fixture
def no_leaks():
    before = leftovers()
    yield
    assert leftovers() == before


def test_sandbox_killed_during_grading(toy_task, monkeypatch, no_leaks):
    import deepgym_envs.grading as grading

    real = grading.run_pytest

    def kill_then_run(sb, args, timeout, **kwargs):
        sb._stop_holder()  # noqa: SLF001 - the fault: the sandbox dies under the harness
        return real(sb, args, timeout, **kwargs)

    monkeypatch.setattr(grading, "run_pytest", kill_then_run)
    v = grade(toy_task, toy_task.patch)
    assert v.status == "no_verdict" and v.masked and "died" in v.reason


def test_grading_timeout(toy_task, no_leaks):
    """Tests that outlive the timeout count against the change (a task whose own tests hang with
    the gold patch fails `tasks validate`); masking them would let a policy hide any failure."""
    slow = toy_task.test_patch.replace("assert clamp(50, 0, 10) + 0 == 10", "import time; time.sleep(60)")
    v = grade(dataclasses.replace(toy_task, test_patch=slow), toy_task.patch, timeout=3)
    assert v.status == "unresolved" and not v.masked and "longer than 3s" in v.reason


def test_backend_unavailable(toy_task, monkeypatch, no_leaks):
    from deepgym_envs.sandbox import namespace

    monkeypatch.setattr(namespace, "_probe", lambda: (False, "no namespaces on this machine"))
    v = grade(toy_task, toy_task.patch)
    assert v.status == "no_verdict" and "no namespaces on this machine" in v.reason


def test_a_patch_larger_than_the_disk_cap_is_unresolved(toy_task, no_leaks):
    big = "".join(f"+{'x' * 99}\n" for _ in range(20_000))  # ~2 MB into a 512 kB sandbox
    patch = toy_task.patch + ("diff --git a/data.txt b/data.txt\nnew file mode 100644\n--- /dev/null\n"
                              f"+++ b/data.txt\n@@ -0,0 +1,20000 @@\n{big}")
    v = grade(toy_task, patch, limits=SandboxLimits(disk_bytes=512 * 1024))
    # The patch does not fit the sandbox's disk cap: the candidate's doing, not the harness's.
    assert v.status == "unresolved" and not v.masked and "does not apply" in v.reason


def test_episode_whose_sandbox_dies_is_masked(toy_task, no_leaks):
    env = SWEEnv([toy_task], max_steps=0)
    env.reset()
    env.sandbox._stop_holder()  # noqa: SLF001
    obs, reward, terminated, truncated, info = env.step({"name": "bash", "arguments": {"command": "ls"}})
    assert terminated and "sandbox failed" in obs
    assert info["verdict"]["status"] == "no_verdict" and info["masked"] is True
    assert "outcome" not in info["reward_components"] and reward == 0.0
    env.close()
