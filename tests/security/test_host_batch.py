"""Class 4 (one sample's crash loses another's step): batch calls answer per item.

Before the fix, ``EnvPool.step_many`` ran every step and then raised the first error: an innocent
environment's step had happened (its side effects, its step count) but its observation and reward
never reached the caller, and a step cannot be re-run. ``run_batch`` and the direct collector did
the same with one candidate's grading error or one episode's step error. Now the failing item gets
its own result (an error step, a ``no_verdict``, a masked trajectory) and the others keep theirs.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import pytest

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs import run_batch
from deepgym_envs.errors import DeepgymError
from deepgym_envs.grading import Verdict
from deepgym_envs.ray_worker import EnvWorker

try:
    import ray
except ImportError:
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="ray is not installed (pip install 'deepgym-envs[ray]')")
GRID = "deepgym/GridNav-v0"  # no sandbox: the batching alone is under test


def test_worker_step_many_returns_the_innocent_step_beside_a_failing_one():
    worker = EnvWorker(GRID, {}, [0, 1], {})
    try:
        worker.reset(0, 0, None)  # environment 1 is never reset: its step raises ResetNeeded
        innocent, failed = worker.step_many([(0, "right"), (1, "right")])
        _, reward, terminated, _, info = innocent
        assert info["step"] == 1 and not terminated and isinstance(reward, float)
        obs, reward, terminated, truncated, info = failed
        assert terminated and not truncated and reward == 0.0
        assert info["masked"] is True and info["verdict"]["status"] == "no_verdict"
        assert "ResetNeeded" in info["error"] and "ResetNeeded" in obs
        # The innocent environment's episode goes on from where the batch left it.
        assert worker.step(0, "right")[4]["step"] == 2
    finally:
        worker.close()


def test_run_batch_keeps_every_verdict_when_one_grading_raises(monkeypatch):
    import deepgym_envs.batch as batch

    def grade(task: Any, patch: str, **kwargs: Any) -> Verdict:
        if patch == "boom":  # what a host-side walk of an agent-shaped tree once raised
            raise RecursionError("maximum recursion depth exceeded")
        return Verdict(status="resolved" if patch == "gold" else "unresolved")

    monkeypatch.setattr(batch, "grade", grade)
    verdicts = run_batch(SimpleNamespace(imported=False), ["gold", "boom", ""], workers=2, warm=False)
    assert [v.status for v in verdicts] == ["resolved", "no_verdict", "unresolved"]
    assert verdicts[1].masked and "RecursionError" in verdicts[1].reason


def test_run_batch_still_fails_fast_on_a_configuration_mistake(monkeypatch):
    import deepgym_envs.batch as batch

    def grade(task: Any, patch: str, **kwargs: Any) -> Verdict:
        raise DeepgymError("unknown sandbox backend 'nope'")

    monkeypatch.setattr(batch, "grade", grade)
    with pytest.raises(DeepgymError, match="unknown sandbox backend"):
        run_batch(SimpleNamespace(imported=False), ["gold", ""], warm=False)


class _Env(gym.Env):
    """A two-step episode whose step raises when told to: a harness bug in one environment."""

    observation_space = gym.spaces.Text(100)
    action_space = gym.spaces.Text(100)

    def __init__(self, explode: bool) -> None:
        self.explode, self.steps = explode, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        self.steps = 0
        return "start", {}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        self.steps += 1
        if self.explode:
            raise RecursionError("maximum recursion depth exceeded")
        done = self.steps == 2
        return "next", 1.0, done, False, {"verdict": {"status": "resolved"}, "masked": False} if done else {}


def test_direct_collector_keeps_the_other_episodes_when_one_env_raises(monkeypatch):
    pytest.importorskip("torch")  # the trainer's collector (CI's wheel-only run has no torch)
    from deepgym_agents.rloo.collect import DirectCollector

    tokenizer = SimpleNamespace(bos_token_id=0, eos_token_id=1, pad_token_id=1,
                                decode=lambda ids, **_: "go")
    model = SimpleNamespace(training=False, eval=lambda: None, train=lambda mode: None)
    collector = DirectCollector(model=model, tokenizer=tokenizer, env_id="unused")
    collector._envs = [_Env(explode=False), _Env(explode=True), _Env(explode=False)]
    monkeypatch.setattr(collector, "_encode", lambda text: [5])
    monkeypatch.setattr(collector, "_sample", lambda contexts, generator: ([1] * len(contexts), [-0.5] * len(contexts)))
    trajs = collector.collect(["t"], 3)
    assert [t.verdict["status"] for t in trajs] == ["resolved", "no_verdict", "resolved"]
    assert [len(t.turns) for t in trajs] == [2, 0, 2]
    bad = trajs[1]
    assert bad.masked and bad.stop_reason.startswith("error: RecursionError")
    assert not trajs[0].masked and not trajs[2].masked


class _Pool:
    """The agent loop's pool protocol over :class:`_Env`s; the episode of task ``boom`` raises."""

    def __init__(self) -> None:
        self.envs: list[_Env] = []

    def acquire(self, task_id: str | None = None) -> _Env:
        self.envs.append(_Env(explode=task_id == "boom"))
        return self.envs[-1]

    def release(self, env: _Env, task_id: str | None = None) -> None:
        pass

    def final_patch(self, env: _Env) -> str:
        return ""

    def close(self) -> None:
        pass


def test_agent_loop_keeps_the_other_episodes_when_one_env_raises():
    from deepgym_agents.config import CollectConfig
    from deepgym_agents.llm.scripted import ScriptedLLM
    from deepgym_agents.loop import collect

    trajs = collect(ScriptedLLM([]), ["a", "boom", "c"], CollectConfig(k=1, show_progress=False), pool=_Pool())
    assert [t.verdict["status"] for t in trajs] == ["resolved", "no_verdict", "resolved"]
    assert trajs[1].masked and trajs[1].stop_reason.startswith("error: RecursionError")


# -- on a real (local) Ray instance ------------------------------------------------------------

@pytest.fixture(scope="module")
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
             log_to_driver=False)
    yield
    ray.shutdown()


@needs_ray
@pytest.mark.slow
def test_pool_step_many_returns_the_innocent_step_beside_a_failing_one(local_ray):
    from deepgym_envs.ray_pool import EnvPool

    with EnvPool(2, GRID) as pool:
        pool.reset(0, seed=0)
        innocent, failed = pool.step_many([(0, "right"), (1, "right")])
        assert innocent[4]["step"] == 1 and not innocent[2]
        assert failed[2] and failed[4]["masked"] is True and "ResetNeeded" in failed[4]["error"]
        assert pool.step(0, "right")[4]["step"] == 2
        pool.reset(1, seed=0)  # the failed one is usable again after a reset, as locally
        assert pool.step(1, "right")[4]["step"] == 1


@needs_ray
@pytest.mark.slow
def test_ray_batch_keeps_every_verdict_when_one_grading_raises(local_ray, monkeypatch):
    import deepgym_envs.ray_batch as ray_batch

    @ray.remote(num_cpus=1, max_retries=0)
    def grade_or_raise(task, bundles, patch, *rest):
        if patch == "boom":
            raise RecursionError("maximum recursion depth exceeded")
        return Verdict(status="resolved" if patch == "gold" else "unresolved")

    monkeypatch.setattr(ray_batch, "_remote_grade", lambda: grade_or_raise)
    verdicts = ray_batch.run_batch_ray(SimpleNamespace(repo_path="", imported=False), ["gold", "boom", ""], ship_repos=False)
    assert [v.status for v in verdicts] == ["resolved", "no_verdict", "unresolved"]
    assert "RecursionError" in verdicts[1].reason
