"""Class 4 (one sample's crash loses another's step): batch calls answer per item.

Before the fix, ``EnvPool.step_many`` ran every step and then raised the first error: an innocent
environment's step had happened (its side effects, its step count) but its observation and reward
never reached the caller, and a step cannot be re-run. ``run_batch`` and the direct collector did
the same with one candidate's grading error or one episode's step error. Now the failing item gets
its own result (an error step, a ``no_verdict``, a masked trajectory) and the others keep theirs.
"""

from __future__ import annotations

import pytest

import deepgym_envs  # noqa: F401  (registers the environments)
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
