"""Ray: run_batch(executor="ray") and the EnvPool, on a small local Ray instance."""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import pytest

from deepgym_agents.baselines import OracleAgent
from conftest import _parent as _ppid
from conftest import processes_named, requires_namespace, toy_row, write_toy_repo
from deepgym_envs import DeepgymError, UnknownTaskError, grade, run_batch
from deepgym_envs._ray import INSTALL_HINT, localise, pack_repos
from deepgym_envs.env import ResetNeeded
from deepgym_envs.tasks import task_from_row

try:
    import ray
except ImportError:  # the install-hint tests still run
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="ray is not installed (pip install 'deepgym-envs[ray]')")


def on_ray(test):
    """A test that runs on the module's local Ray instance (starting one takes ~15 s: slow)."""
    for mark in (needs_ray, requires_namespace, pytest.mark.slow, pytest.mark.usefixtures("local_ray")):
        test = mark(test)
    return test


CANDIDATES = ["gold", "", "not a diff", "gold", "broken"]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory):
    """A 2-CPU Ray instance with a small object store; its workers share the tests' tree cache."""
    if ray.is_initialized():
        ray.shutdown()
    cache = str(tmp_path_factory.getbasetemp() / "cache")
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024, log_to_driver=False,
             runtime_env={"env_vars": {"DEEPGYM_CACHE": cache}})
    yield
    ray.shutdown()


def candidates(task) -> list[str]:
    broken = task.patch.replace("+    return max(lo, min(x, hi))", "+    return min(lo, max(x, hi))")
    return [{"gold": task.patch, "broken": broken}.get(c, c) for c in CANDIDATES]


def play(env, task) -> tuple[list[float], dict]:
    """The oracle agent through any Gymnasium-shaped environment; its rewards and last info."""
    agent = OracleAgent(task)
    obs, info = env.reset(seed=0, options={"task_id": task.instance_id})
    agent.reset(obs, info)
    rewards, done = [], False
    while not done:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info


def sandbox_leftovers(pids: list[int]) -> dict[str, int]:
    """Sandbox holders, temp dirs and cgroups owned by the given (worker) processes."""
    holders = [h for h in processes_named("deepgym-holder") if _ppid(h) in pids]
    return {"holders": len(holders),
            "tmpdirs": sum(len(glob.glob(f"/tmp/deepgym-ns-{p}-*")) for p in pids),
            "cgroups": sum(len(glob.glob(f"/sys/fs/cgroup/pids/deepgym-{p}-*")) for p in pids)}


def wait_until_gone(pids: list[int], seconds: float = 60.0) -> list[int]:
    """The pids still alive after waiting (up to ``seconds``) for them to exit."""
    deadline = time.monotonic() + seconds
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if os.path.exists(f"/proc/{p}") and _ppid(p) != -1 and not _zombie(p)]
        time.sleep(0.2)
    return alive


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# -- without a cluster -------------------------------------------------------------------------

def test_missing_ray_says_how_to_install(toy_task, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes ``import ray`` fail as if not installed
    with pytest.raises(DeepgymError, match=r"pip install 'deepgym-envs\[ray\]'"):
        run_batch(toy_task, [toy_task.patch], executor="ray")
    from deepgym_envs.ray_pool import EnvPool  # importing the module needs no Ray

    with pytest.raises(DeepgymError) as err:
        EnvPool(2)
    assert str(err.value) == INSTALL_HINT


def test_unknown_executor_names_the_choices(toy_task):
    with pytest.raises(DeepgymError, match="'thread' or 'ray'"):
        run_batch(toy_task, [toy_task.patch], executor="dask")


@requires_namespace
def test_shipped_repository_grades_where_the_original_is_gone(tmp_path, monkeypatch):
    """What a node without the driver's files sees: the bundle alone rebuilds the task."""
    task = task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))
    (tmp_path / "calc" / "src" / "calc" / "__pycache__").mkdir()
    (tmp_path / "calc" / "src" / "calc" / "__pycache__" / "ops.cpython-311.pyc").write_bytes(b"junk")
    bundles = pack_repos([task])
    assert pack_repos([task]) == bundles  # same content, same digest: each node unpacks it once
    shutil.rmtree(tmp_path / "calc")
    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path / "node-cache"))
    [remote] = localise([task], bundles)
    assert remote.repo_path.startswith(str(tmp_path / "node-cache"))
    assert not list((tmp_path / "node-cache").rglob("__pycache__"))
    assert grade(remote, task.patch).status == "resolved"
    assert grade(remote, "").status == "unresolved"


# -- run_batch on Ray ---------------------------------------------------------------------------

@on_ray
@pytest.mark.parametrize("workers", [None, 1])
def test_ray_verdicts_equal_the_thread_executor(toy_task, workers):
    patches = candidates(toy_task)
    on_cluster = run_batch(toy_task, patches, workers=workers, executor="ray")
    local = run_batch(toy_task, patches, workers=2)
    assert [v.status for v in on_cluster] == ["resolved", "unresolved", "unresolved", "resolved", "unresolved"]
    assert [(v.status, v.tests, v.fail_to_pass, v.pass_to_pass) for v in on_cluster] == \
           [(v.status, v.tests, v.fail_to_pass, v.pass_to_pass) for v in local]


@on_ray
def test_ray_batch_with_shipped_repository(toy_task, tmp_path_factory):
    from deepgym_envs.ray_batch import run_batch_ray

    verdicts = run_batch_ray(toy_task, candidates(toy_task), ship_repos=True)
    assert [v.status for v in verdicts] == ["resolved", "unresolved", "unresolved", "resolved", "unresolved"]
    assert list((tmp_path_factory.getbasetemp() / "cache" / "ray-repos").iterdir())  # built from the bundle


@on_ray
def test_dead_grading_worker_is_no_verdict_not_a_crash(toy_task, monkeypatch):
    """A worker that dies on every attempt (Ray's retries included) leaves that candidate masked."""
    import deepgym_envs.ray_batch as ray_batch

    @ray.remote(num_cpus=1, max_retries=0)
    def dies(task, bundles, patch, *rest):
        if patch == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        return ray_batch.grade_on_node(task, bundles, patch, *rest)

    monkeypatch.setattr(ray_batch, "_remote_grade", lambda: dies)
    verdicts = run_batch(toy_task, [toy_task.patch, "die", ""], executor="ray")
    assert [v.status for v in verdicts] == ["resolved", "no_verdict", "unresolved"]
    assert verdicts[1].masked and "ray" in verdicts[1].reason


@on_ray
def test_batch_cli_on_ray(toy_jsonl, toy_task, tmp_path):
    from deepgym_envs.cli import main

    patches = tmp_path / "candidates.jsonl"
    patches.write_text(json.dumps({"patch": toy_task.patch}) + "\n" + json.dumps("") + "\n")
    out = tmp_path / "verdicts.jsonl"
    assert main(["batch", toy_task.instance_id, "--tasks", str(toy_jsonl), "--patches", str(patches),
                 "--executor", "ray", "--out", str(out)]) == 0
    assert [json.loads(line)["status"] for line in out.read_text().splitlines()] == ["resolved", "unresolved"]


# -- EnvPool --------------------------------------------------------------------------------------

@on_ray
def test_pool_runs_oracle_episodes_like_local_envs_and_leaves_nothing(toy_task):
    from deepgym_envs.ray_pool import EnvPool

    mine = f"/tmp/deepgym-ns-{os.getpid()}-*"
    before = len(glob.glob(mine))
    local = gym.make("deepgym/SWE-v0", tasks=[toy_task], max_steps=20)
    try:
        local_rewards, local_info = play(local, toy_task)
        kept_per_env = len(glob.glob(mine)) - before  # its sandbox, and its pooled grading view
    finally:
        local.close()
    pool = EnvPool(3, env_kwargs={"tasks": [toy_task], "max_steps": 20})
    try:
        assert sorted(i for w in pool.workers for i in w.envs) == [0, 1, 2]
        with ThreadPoolExecutor(3) as threads:  # as an agent loop drives them: concurrently
            results = list(threads.map(lambda i: play(pool.env(i), toy_task), range(3)))
        pids = [w.pid for w in pool.workers]
        # each environment keeps its sandboxes between episodes, as a local one does
        assert kept_per_env >= 1 and sandbox_leftovers(pids)["tmpdirs"] == 3 * kept_per_env
    finally:
        pool.close()
    for rewards, info in results:
        assert info["verdict"]["status"] == "resolved" and info["masked"] is False
        assert rewards == local_rewards and info["reward_components"] == local_info["reward_components"]
    assert wait_until_gone(pids) == []
    assert sandbox_leftovers(pids) == {"holders": 0, "tmpdirs": 0, "cgroups": 0}
    pool.close()  # idempotent


@on_ray
def test_step_many_steps_every_env_in_one_call(toy_task):
    from deepgym_envs.ray_pool import EnvPool

    with EnvPool(4, env_kwargs={"tasks": [toy_task]}, actors_per_node=2) as pool:
        assert len(pool.workers) == 2 and {len(w.envs) for w in pool.workers} == {2}
        resets = pool.reset_many([(i, i, None) for i in range(4)])
        assert all("clamp(50, 0, 10)" in obs for obs, _ in resets)
        actions = [(3, {"name": "submit", "arguments": {}}), (0, "no tool call here"),
                   (2, '<tool_call>{"name": "view", "arguments": {"path": "src/calc/ops.py"}}</tool_call>')]
        (obs3, r3, done3, _, info3), (obs0, r0, done0, _, info0), (obs2, _, done2, _, _) = pool.step_many(actions)
        assert done3 and info3["verdict"]["status"] == "unresolved"
        assert not done0 and info0["invalid_action"] and r0 < 0
        assert not done2 and "def clamp" in obs2
        with pytest.raises(ResetNeeded):  # environment 3's episode is over, as it would be locally
            pool.step(3, {"name": "submit", "arguments": {}})
        with pytest.raises(DeepgymError, match="only once"):
            pool.step_many([(1, "x"), (1, "y")])
        with pytest.raises(DeepgymError, match="no environment 4"):
            pool.env(4)


@on_ray
def test_pool_hands_out_environments_like_the_agent_loops_local_pool(toy_task):
    """acquire / release / final_patch: the protocol deepgym_agents.loop.collect(pool=...) drives."""
    from deepgym_envs.ray_pool import EnvPool

    with EnvPool(2, env_kwargs={"tasks": [toy_task], "max_steps": 20}) as pool:
        first = pool.acquire(toy_task.instance_id)
        play(first, toy_task)
        assert "+    return max(lo, min(x, hi))" in pool.final_patch(first)
        second = pool.acquire(toy_task.instance_id)
        assert second is not first
        got = []
        waiter = threading.Thread(target=lambda: got.append(pool.acquire(toy_task.instance_id)))
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive()  # both environments are in use: acquire waits for a release
        pool.release(first, toy_task.instance_id)
        waiter.join()
        assert got == [first]
        pool.release(second, "another-task")
        pool.release(first, toy_task.instance_id)
        assert pool.acquire(toy_task.instance_id) is first  # the one whose sandbox ran this task
        first.reset(options={"task_id": toy_task.instance_id})
        assert pool.final_patch(first) == ""  # reset restored the pristine tree


@on_ray
def test_pooled_env_passes_gymnasiums_checker(toy_task):
    from gymnasium.utils.env_checker import check_env

    from deepgym_envs.ray_pool import EnvPool, PooledEnv

    with EnvPool(1, env_kwargs={"tasks": [toy_task]}) as pool:
        env = pool.env(0)
        assert isinstance(env, PooledEnv) and isinstance(env, gym.Env)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(env, skip_render_check=True)
        assert not [str(w.message) for w in caught if "gymnasium" in w.filename.replace("\\", "/")]


@on_ray
def test_killed_worker_ends_its_episodes_masked(toy_task):
    from deepgym_envs.ray_pool import EnvPool
    from deepgym_envs.sandbox.reap import reap

    with EnvPool(2, env_kwargs={"tasks": [toy_task]}) as pool:
        pool.reset(0)
        [pid] = [w.pid for w in pool.workers]
        os.kill(pid, signal.SIGKILL)
        assert wait_until_gone([pid]) == []
        obs, reward, terminated, truncated, info = pool.step(0, {"name": "view", "arguments": {"path": "."}})
        assert terminated and info["masked"] is True and info["verdict"]["status"] == "no_verdict"
        assert reward == 0.0 and "sandbox failed" in obs
        [(_, _, terminated, _, info)] = pool.step_many([(1, "anything")])
        assert terminated and info["masked"] is True
        # the pool replaced the worker: a reset opens a new episode there
        obs, _ = pool.reset(1)
        assert "clamp(50, 0, 10)" in obs and [w.pid for w in pool.workers] != [pid]
        assert not pool.step(1, {"name": "view", "arguments": {"path": "."}})[4].get("masked")
    reap()  # a killed worker cannot remove its sandbox's temp dir; the reaper can
    assert sandbox_leftovers([pid]) == {"holders": 0, "tmpdirs": 0, "cgroups": 0}


@on_ray
def test_bad_env_kwargs_fail_at_construction(toy_task):
    from deepgym_envs.ray_pool import EnvPool

    with pytest.raises(UnknownTaskError, match="No task 'nope'"):  # what gym.make raises locally
        EnvPool(2, env_kwargs={"tasks": [toy_task], "task_id": "nope"})
