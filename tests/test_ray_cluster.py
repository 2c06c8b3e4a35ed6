"""Ray on a simulated multi-node cluster (``ray.cluster_utils.Cluster``, several raylets on one host).

Each simulated node has its own deepgym cache and its own temp root (``DEEPGYM_CACHE`` and
``TMPDIR`` set for that node's raylet, which its workers inherit): the nodes share this host's
filesystem, so a per-node cache is what shows that a node built its trees from the data it was
shipped, and a per-node temp root is where that node's sandboxes, and anything they leak, live.

Faults are injected at a point the test observes (an environment that has been reset, a grading
that has reported its sandbox open through a signal actor), never after a sleep.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal as signal_module
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import _parent, processes_named, requires_namespace, toy_row, write_toy_repo
from deepgym_envs.tasks import task_from_row

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:
    ray = None

needs_ray = pytest.mark.skipif(ray is None, reason="ray is not installed (pip install 'deepgym-envs[ray]')")
# Starting simulated nodes takes tens of seconds on a loaded 2-core machine: more than the default.
pytestmark = [needs_ray, requires_namespace, pytest.mark.timeout(900)]

MiB = 1024 * 1024
VIEW = {"name": "view", "arguments": {"path": "src/calc/ops.py"}}
WAIT = 240  # seconds: generous, for a loaded 2-core machine; a hang fails instead of blocking CI


class SimNode:
    """One simulated node: its Ray node, and the cache and temp root only its workers use."""

    def __init__(self, cluster: Cluster, name: str) -> None:
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix=f"dg-{name}-tmp-")  # short: Ray puts sockets near TMPDIR
        os.chmod(self.tmp, 0o1777)  # as /tmp: as root, sandboxes mount their workspace as another uid
        self.cache = tempfile.mkdtemp(prefix=f"dg-{name}-cache-")
        self.node = cluster.add_node(num_cpus=1, resources={name: 1}, object_store_memory=80 * MiB,
                                     env_vars={"DEEPGYM_CACHE": self.cache, "TMPDIR": self.tmp})
        self.node_id = self.node.node_id
        self.alive = True

    def sandbox_dirs(self, pids: list[int] | None = None, kind: str = "*") -> list[str]:
        """deepgym's temp dirs under this node's temp root (only those of ``pids``, if given):
        ``kind`` ns for sandboxes; stage and support are kept per process while it lives."""
        dirs = glob.glob(os.path.join(self.tmp, f"deepgym-{kind}"))
        if pids is not None:
            dirs = [d for d in dirs if any(f"-{p}-" in os.path.basename(d) for p in pids)]
        return dirs

    def leaked(self) -> list[str]:
        """Sandbox temp dirs whose owner process is gone: what a crash left and nobody reaped."""
        owners = {d: re.match(r"deepgym-\w+-(\d+)-", os.path.basename(d)) for d in self.sandbox_dirs()}
        return [d for d, m in owners.items() if m is None or not _running(int(m.group(1)))]

    def shipped_repos(self) -> list[Path]:
        return sorted((Path(self.cache) / "ray-repos").glob("*"))


class SimCluster:
    def __init__(self) -> None:
        # The head offers no CPU, so no grading or worker lands on it and any node may be removed.
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "resources": {"head": 1}, "include_dashboard": False, "object_store_memory": 80 * MiB})
        self.nodes: list[SimNode] = []
        self._count = 0

    def ensure(self, n: int) -> list[SimNode]:
        """At least ``n`` alive worker nodes (adding nodes after a test removed some)."""
        while len(self.alive()) < n:
            self._count += 1
            self.nodes.append(SimNode(self.cluster, f"node{self._count}"))
        self.cluster.wait_for_nodes()
        return self.alive()

    def alive(self) -> list[SimNode]:
        return [n for n in self.nodes if n.alive]

    def by_id(self, node_id: str) -> SimNode:
        [node] = [n for n in self.nodes if n.node_id == node_id]
        return node

    def remove(self, node: SimNode) -> None:
        self.cluster.remove_node(node.node, allow_graceful=False)
        node.alive = False

    def shutdown(self) -> None:
        self.cluster.shutdown()
        for node in self.nodes:
            shutil.rmtree(node.tmp, ignore_errors=True)
            shutil.rmtree(node.cache, ignore_errors=True)


@pytest.fixture(scope="module")
def sim():
    if ray.is_initialized():
        ray.shutdown()
    sim = SimCluster()
    try:
        sim.ensure(2)
        ray.init(address=sim.cluster.address, log_to_driver=False)
        yield sim
    finally:
        ray.shutdown()
        sim.shutdown()


@pytest.fixture
def two(sim) -> list[SimNode]:
    return sim.ensure(2)


@pytest.fixture
def task(tmp_path):
    """The toy task, from a repository only the driver has (the test removes it once packed)."""
    return task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))


def _signal_actor():
    """A queue the tests and the graded candidates share, on the head node (never removed)."""

    @ray.remote(num_cpus=0, resources={"head": 0.001})
    class Signal:
        def __init__(self) -> None:
            self.events: list[dict] = []
            self.first: set[str] = set()
            self.cond = threading.Condition()

        def first_attempt(self, key: str) -> bool:
            with self.cond:
                new = key not in self.first
                self.first.add(key)
                return new

        def report(self, event: dict) -> None:
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()

        def wait_for(self, kind: str, timeout: float) -> dict | None:
            with self.cond:
                self.cond.wait_for(lambda: any(e["kind"] == kind for e in self.events), timeout=timeout)
                return next((e for e in self.events if e["kind"] == kind), None)

        def all(self) -> list[dict]:
            return list(self.events)

    return Signal.options(max_concurrency=16).remote()


def _gated_grading(signal, hold: str, die: str = "die"):
    """Grading as ray_batch runs it, except that the first attempt of patch ``hold`` opens a real
    sandbox, reports it and then blocks (a node about to be lost, or a straggler), and patch
    ``die`` kills its worker on every attempt."""
    import deepgym_envs.ray_batch as ray_batch

    @ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")
    def gated(task, bundles, patch, *rest):
        from deepgym_envs.sandbox import make_sandbox
        from deepgym_envs.trees import pristine_tree

        if patch == die:
            os.kill(os.getpid(), signal_module.SIGKILL)
        if patch == hold and ray.get(signal.first_attempt.remote(hold)):
            [local] = ray_batch.localise([task], bundles)
            with make_sandbox(pristine_tree(local)) as sandbox:
                sandbox.exec(["true"])
                ray.get(signal.report.remote({"kind": "holding", "pid": os.getpid(),
                                              "node": ray.get_runtime_context().get_node_id()}))
                try:
                    for _ in range(6000):  # blocks until killed or cancelled (or 10 min: a test bug)
                        time.sleep(0.1)
                except KeyboardInterrupt:  # ray.cancel: the with-block closes the sandbox on the way out
                    ray.get(signal.report.remote({"kind": "cancelled", "pid": os.getpid()}))
                    raise
        return ray_batch.grade_on_node(task, bundles, patch, *rest)

    return gated



def _play_oracle(env, task) -> dict:
    from deepgym_agents.baselines import OracleAgent

    agent = OracleAgent(task)
    obs, info = env.reset(options={"task_id": task.instance_id})
    agent.reset(obs, info)
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        done = terminated or truncated
    return info


def _wait_gone(pids: list[int], seconds: float = WAIT) -> list[int]:
    deadline = time.monotonic() + seconds
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _running(p)]
        time.sleep(0.2)
    return alive


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _holders(pids: list[int]) -> int:
    return len([h for h in processes_named("deepgym-holder") if _parent(h) in pids])


def _eventually(check, seconds: float = WAIT) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


# -- EnvPool --------------------------------------------------------------------------------------

def test_pool_spreads_ships_and_replaces_a_killed_worker(two, task):
    """Workers land one per node; a node builds its trees from the shipped repository alone; a
    worker killed mid-episode ends that episode masked and is replaced, and its sandbox is reaped."""
    from deepgym_envs.ray_pool import EnvPool

    with EnvPool(2, env_kwargs={"tasks": [task], "max_steps": 20}) as pool:
        shutil.rmtree(task.repo_path)  # the nodes must now do with what they were shipped
        assert {w.node_id for w in pool.workers} == {n.node_id for n in two}
        obs = pool.reset_many([(0, 0, None), (1, 0, None)])
        assert all("clamp(50, 0, 10)" in o for o, _ in obs)
        for node in two:
            assert node.shipped_repos() and node.sandbox_dirs()  # each node unpacked and opened its own
        victim = pool._slots[pool._owner[0]]
        dead_pid, node = victim.info.pid, two[0] if victim.info.node_id == two[0].node_id else two[1]
        ray.kill(victim.actor)  # mid-episode: environment 0 was reset, not finished
        # ray.kill only asks: a step sent before the actor's process is gone can still be served by it
        assert _wait_gone([dead_pid]) == []

        obs, reward, terminated, truncated, info = pool.step(0, VIEW)
        assert terminated and info["masked"] is True and info["verdict"]["status"] == "no_verdict"
        assert reward == 0.0 and "sandbox failed" in obs
        assert pool.step(0, VIEW)[4]["masked"] is True  # stays over until reset
        other = pool.step(1, VIEW)  # the other node's episode goes on
        assert not other[2] and "def clamp" in other[0] and not other[4].get("masked")

        replacement = [w for w in pool.workers if 0 in w.envs][0]
        assert replacement.pid != dead_pid and replacement.node_id == node.node_id  # same, alive node
        assert _wait_gone([dead_pid]) == []
        assert _eventually(lambda: not node.sandbox_dirs([dead_pid])), node.sandbox_dirs()  # the replacement reaped them
        assert _holders([dead_pid]) == 0
        info = _play_oracle(pool.env(0), task)  # a new episode on the replacement, from the shipped repo
        assert info["verdict"]["status"] == "resolved" and info["masked"] is False
        pids = [w.pid for w in pool.workers]
    assert _wait_gone(pids) == []
    assert [n.sandbox_dirs(pids + [dead_pid]) for n in two] == [[], []]  # closed workers removed theirs
    assert [n.leaked() for n in two] == [[], []]


def test_node_lost_mid_episode_and_mid_batch(sim, two, task):
    """A node removed under an EnvPool and under run_batch: masked episodes, workers replaced on the
    surviving node, the lost candidate re-run, verdicts in order, nothing left on the survivor."""
    from deepgym_envs import run_batch
    from deepgym_envs.ray_pool import EnvPool
    import deepgym_envs.ray_batch as ray_batch

    broken = task.patch.replace("+    return max(lo, min(x, hi))", "+    return min(lo, max(x, hi))")
    with EnvPool(2, env_kwargs={"tasks": [task], "max_steps": 20}) as pool:
        pool.reset_many([(0, 0, None), (1, 0, None)])
        lost = sim.by_id([w for w in pool.workers if 1 in w.envs][0].node_id)
        survivor = [n for n in two if n is not lost][0]
        doomed = [w.pid for w in pool.workers if w.node_id == lost.node_id]
        sim.remove(lost)
        assert _wait_gone(doomed) == []  # its worker dies with its raylet; only then is it lost
        terminated, info = pool.step(1, VIEW)[2], pool.step(1, VIEW)[4]
        assert terminated and info["masked"] is True and info["verdict"]["status"] == "no_verdict"
        assert {w.node_id for w in pool.workers} == {survivor.node_id}  # replaced on the survivor
        assert _play_oracle(pool.env(1), task)["verdict"]["status"] == "resolved"
        assert _play_oracle(pool.env(0), task)["verdict"]["status"] == "resolved"
        pids = [w.pid for w in pool.workers]
    assert _wait_gone(pids) == []
    assert survivor.sandbox_dirs(pids) == [] and survivor.leaked() == []

    replacement = sim.ensure(2)
    signal = _signal_actor()
    gated = _gated_grading(signal, hold=broken)
    patches = [task.patch, broken, "", task.patch]
    original = ray_batch._remote_grade
    ray_batch._remote_grade = lambda: gated
    try:
        with ThreadPoolExecutor(1) as thread:
            batch = thread.submit(run_batch, task, patches, executor="ray")
            holding = ray.get(signal.wait_for.remote("holding", WAIT))
            assert holding is not None, "the held candidate never started"
            lost = sim.by_id(holding["node"])
            sim.remove(lost)  # mid-grading: its sandbox is open
            verdicts = batch.result(timeout=WAIT)
    finally:
        ray_batch._remote_grade = original
    assert [v.status for v in verdicts] == ["resolved", "unresolved", "unresolved", "resolved"]
    assert not any(v.masked for v in verdicts)
    survivor = [n for n in replacement if n is not lost][0]
    assert survivor.leaked() == [] and _holders([holding["pid"]]) == 0


def test_killed_grading_worker_is_rerun_and_bounded(sim, two, task):
    """A worker killed mid-grading: the candidate is re-run and graded; one that kills every worker
    it runs on is a no_verdict saying so once the retries are spent; the node is reaped."""
    from deepgym_envs import run_batch
    import deepgym_envs.ray_batch as ray_batch

    signal = _signal_actor()
    gated = _gated_grading(signal, hold="")
    original = ray_batch._remote_grade
    ray_batch._remote_grade = lambda: gated
    try:
        with ThreadPoolExecutor(1) as thread:
            batch = thread.submit(run_batch, task, [task.patch, "", "die"], executor="ray", retries=1)
            holding = ray.get(signal.wait_for.remote("holding", WAIT))
            assert holding is not None, "the held candidate never started"
            os.kill(holding["pid"], signal_module.SIGKILL)
            verdicts = batch.result(timeout=WAIT)
    finally:
        ray_batch._remote_grade = original
    assert [v.status for v in verdicts] == ["resolved", "unresolved", "no_verdict"]
    assert verdicts[2].masked and "lost on all 2 attempts" in verdicts[2].reason
    node = sim.by_id(holding["node"])
    assert _wait_gone([holding["pid"]]) == [] and _holders([holding["pid"]]) == 0
    assert node.sandbox_dirs([holding["pid"]]) == [] and node.leaked() == []  # reaped after the loss


DRIVER = textwrap.dedent("""
    import json, sys, time
    import ray
    from deepgym_envs.ray_pool import EnvPool
    from deepgym_envs.tasks import task_from_row
    ray.init(address=sys.argv[1], log_to_driver=False)
    task = task_from_row(json.loads(sys.argv[2]))
    pool = EnvPool(2, env_kwargs={"tasks": [task]})
    pool.reset_many([(0, 0, None), (1, 0, None)])
    print(json.dumps([w.pid for w in pool.workers]), flush=True)
    time.sleep(600)
""")


def test_driver_killed_its_sandboxes_are_reaped(sim, two, tmp_path):
    """A driver SIGKILLed with episodes open: Ray ends its workers, and ``deepgym sandbox reap``
    on each node removes what they left, once (a second reap finds nothing)."""
    row = toy_row(write_toy_repo(tmp_path / "calc"))
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, sim.cluster.address, json.dumps(row)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = driver.stdout.readline()
        assert line, "the driver did not start its pool"
        pids = json.loads(line)
        assert all(n.sandbox_dirs(pids) for n in two)  # episodes open on both nodes
    finally:
        driver.send_signal(signal_module.SIGKILL)
        driver.wait()
    assert _wait_gone(pids) == []  # the owner is gone: Ray ends its actors
    assert _holders(pids) == 0
    reap = [sys.executable, "-c", "from deepgym_envs.cli import main; raise SystemExit(main(['sandbox', 'reap']))"]
    for node in two:
        env = {**os.environ, "TMPDIR": node.tmp}
        first = subprocess.run(reap, env=env, capture_output=True, text=True, timeout=WAIT)
        assert first.returncode == 0, first.stderr
        assert node.sandbox_dirs(pids) == []
        again = subprocess.run(reap, env=env, capture_output=True, text=True, timeout=WAIT)
        assert again.returncode == 0 and node.tmp not in again.stdout  # idempotent: nothing left to remove


# -- slower: shipping and order for run_batch, stragglers, elasticity ---------------------------

@pytest.mark.slow
def test_batch_spreads_ships_and_keeps_order(two, task):
    from deepgym_envs import run_batch

    broken = task.patch.replace("+    return max(lo, min(x, hi))", "+    return min(lo, max(x, hi))")
    patches = [task.patch, "", broken, "not a diff", task.patch, broken]
    verdicts = run_batch(task, patches, executor="ray")
    assert [v.status for v in verdicts] == ["resolved", "unresolved", "unresolved", "unresolved", "resolved", "unresolved"]
    for node in two:  # SPREAD put gradings on both nodes, each building from its own unpacked copy
        built = [p for p in Path(node.cache).iterdir() if p.name != "ray-repos"]
        assert node.shipped_repos() and built


@pytest.mark.slow
def test_straggler_is_duplicated_and_the_loser_cancelled(two, task):
    from deepgym_envs import run_batch
    import deepgym_envs.ray_batch as ray_batch

    signal = _signal_actor()
    gated = _gated_grading(signal, hold=task.patch)
    original = ray_batch._remote_grade
    ray_batch._remote_grade = lambda: gated
    try:
        verdicts = run_batch(task, [task.patch, ""], executor="ray", straggler_after=1.0)
    finally:
        ray_batch._remote_grade = original
    assert [v.status for v in verdicts] == ["resolved", "unresolved"]  # the copy won
    held = ray.get(signal.wait_for.remote("holding", WAIT))
    assert ray.get(signal.wait_for.remote("cancelled", WAIT)) is not None  # the loser was stopped
    node = [n for n in two if n.node_id == held["node"]][0]
    assert _eventually(lambda: not node.sandbox_dirs([held["pid"]], kind="ns-*"))  # and closed its sandbox


@pytest.mark.slow
def test_pool_grows_and_shrinks_with_demand(sim, two, task):
    from deepgym_envs.ray_pool import EnvPool

    with EnvPool(1, env_kwargs={"tasks": [task]}, max_envs=3, idle_timeout=0) as pool:
        envs = [pool.acquire(task.instance_id) for _ in range(3)]
        assert len(pool) == 3 and {w.node_id for w in pool.workers} == {n.node_id for n in two}
        for env in envs:
            env.reset(options={"task_id": task.instance_id})
        got = []
        waiter = threading.Thread(target=lambda: got.append(pool.acquire(task.instance_id)))
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive()  # at max_envs: acquire waits (backpressure)
        pool.release(envs[2], task.instance_id)
        waiter.join(WAIT)
        assert got == [envs[2]]
        for env in (envs[0], envs[1], envs[2]):
            pool.release(env, task.instance_id)
        assert len(pool) == 1  # surplus environments closed once idle
        [kept] = pool.workers
        emptied = [n for n in two if n.node_id != kept.node_id]  # its worker held only surplus envs
        assert _eventually(lambda: all(not n.sandbox_dirs(kind="ns-*") for n in emptied))
        joined = sim.ensure(3)[-1]  # the cluster grows: new environments use the new node
        grown = [pool.acquire() for _ in range(3)]
        assert joined.node_id in {w.node_id for w in pool.workers} and len(pool) == 3
        for env in grown:
            pool.release(env)
