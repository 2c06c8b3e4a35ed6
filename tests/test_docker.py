"""The docker backend: isolation, labels and reaping, reset, and SWE-bench-format rows in their own image.

The conformance tests in ``test_sandbox.py`` and ``test_grading.py`` also run against this backend.
Everything here skips without an engine and image, except under ``DEEPGYM_REQUIRE_DOCKER=1`` (CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import GOLD_PATCH, TEST_PATCH, TOY_FILES, require_docker
from deepgym_envs.errors import SandboxError, SandboxUnavailable
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.trees import pristine_tree

pytestmark = pytest.mark.docker


@pytest.fixture(autouse=True)
def _engine() -> None:
    require_docker()


@pytest.fixture
def tree(toy_task):
    return pristine_tree(toy_task)


@pytest.fixture
def box(tree):
    limits = SandboxLimits(timeout=30, memory_bytes=256 << 20, max_processes=64, disk_bytes=32 << 20, cpus=1.0)
    with make_sandbox(tree, "docker", limits) as sb:
        yield sb


def engine():
    from deepgym_envs.docker_engine import engine as get

    return get()


def my_containers() -> list:
    return engine().containers.list(all=True, filters={"label": f"deepgym.owner-pid={os.getpid()}"})


# -- isolation ---------------------------------------------------------------------------------
def test_container_is_labelled_and_locked_down(box):
    attrs = engine().api.inspect_container(box._container.id)  # noqa: SLF001
    labels, host = attrs["Config"]["Labels"], attrs["HostConfig"]
    assert labels["deepgym.sandbox"] == "1" and labels["deepgym.owner-pid"] == str(os.getpid())
    assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"]
    from deepgym_envs.sandbox.seccomp import docker_profile

    assert host["SecurityOpt"] == ["no-new-privileges", f"seccomp={docker_profile()}"]
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == 256 << 20 and host["PidsLimit"] == 64 and host["NanoCpus"] == 10**9


def test_no_network_and_no_capabilities(box):
    code = ("import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n    print('connected')\n"
            "except OSError as e:\n    print('blocked', e.errno)")
    assert box.exec(["python", "-c", code]).stdout.startswith("blocked")
    assert "eth0" not in box.exec(["cat", "/proc/net/dev"]).stdout
    status = box.exec(["cat", "/proc/self/status"]).stdout
    caps = dict(line.split(":\t") for line in status.splitlines() if line.startswith("Cap"))
    assert int(caps["CapEff"], 16) == 0 and int(caps["CapBnd"], 16) == 0
    assert "NoNewPrivs:\t1" in status


def test_system_is_read_only_and_tmp_is_capped(box):
    res = box.exec("touch /usr/deepgym_probe; echo $?; touch /etc/deepgym_probe; echo $?")
    assert res.stdout.split() == ["1", "1"]
    res = box.exec(["sh", "-c", "dd if=/dev/zero of=/tmp/big bs=1M count=100 2>&1; echo rc=$?"])
    assert "rc=0" not in res.stdout
    res = box.exec(["sh", "-c", "dd if=/dev/zero of=big bs=1M count=100 2>&1; echo rc=$?"])
    assert "rc=0" not in res.stdout  # the file-size cap also holds in the workspace


def test_memory_cap(box):
    res = box.exec(["python", "-c", "x = bytearray(1 << 30); print('allocated')"])
    assert res.exit_code != 0 and "allocated" not in res.stdout


def test_process_cap_stops_a_fork_bomb(box):
    code = ("import os, time\nn = 0\ntry:\n    for _ in range(5000):\n        if os.fork() == 0:\n"
            "            time.sleep(5); os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)")
    res = box.exec(["python", "-c", code], timeout=20)
    assert res.exit_code == 0, res.stderr
    assert int(res.stdout.strip().splitlines()[-1]) < 64
    assert box.exec(["true"]).exit_code == 0  # the forks died with their command


def test_background_processes_do_not_outlive_their_command(box):
    box.exec("(sleep 1; touch late) & setsid sh -c 'sleep 1; touch late2' & echo started")
    time.sleep(2)
    assert not box.exists("late") and not box.exists("late2")
    procs = box.exec(["sh", "-c", "ls /proc | grep -c '^[0-9]'"]).stdout.strip()
    assert int(procs) <= 6  # PID 1, its stdin watcher, and this command's own few


def test_a_command_cannot_kill_the_container(box):
    """Killing PID 1 would end the episode as a no_verdict (masked): it must not be possible."""
    box.exec("for s in $(seq 1 31); do kill -$s 1 2>/dev/null; done; kill -KILL -1")
    time.sleep(0.3)
    assert box.exec(["echo", "alive"]).stdout == "alive\n"


# -- lifecycle ----------------------------------------------------------------------------------
def test_reset_keeps_the_container_and_restores_everything(box):
    cid = box._container.id  # noqa: SLF001
    box.write_file("src/calc/ops.py", b"broken")
    box.exec("echo x > /tmp/scratch && rm -rf tests && git add -A")
    box.reset()
    assert box._container.id == cid  # noqa: SLF001 - no new container
    assert box.diff() == "" and box.exists("tests/test_ops.py")
    assert box.exec(["ls", "-A", "/tmp"]).stdout == ""
    assert box.exec(["git", "status", "--porcelain"]).stdout == ""


def test_reset_never_writes_through_a_symlink_the_agent_planted(box, tmp_path):
    """Reset runs on the host (as the owner, maybe root): a directory swapped for a link to a host
    directory must be restored, not written through."""
    target = tmp_path / "host-dir"
    target.mkdir()
    box.exec(["sh", "-c", f"rm -rf src && ln -s {target} src"])
    box.reset()
    assert list(target.iterdir()) == []
    assert box.exists("src/calc/ops.py") and box.diff() == ""


def test_close_removes_container_and_files(tree):
    box = make_sandbox(tree, "docker")
    tmp = box._tmp  # noqa: SLF001
    assert len(my_containers()) == 1
    box.close()
    box.close()
    assert my_containers() == [] and not os.path.exists(tmp)
    with pytest.raises(SandboxError):
        box.exec(["true"])


def test_container_dies_with_its_owner_and_reap_removes_the_rest(tree):
    script = textwrap.dedent(f"""
        import os
        from pathlib import Path
        from deepgym_envs.sandbox import make_sandbox
        b = make_sandbox(Path({str(tree)!r}), "docker")
        print(b._container.id, b._tmp, flush=True)
        os.kill(os.getpid(), 9)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    cid, tmp = out.stdout.split()
    deadline = time.monotonic() + 20
    while engine().containers.list(all=True, filters={"id": cid}) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert engine().containers.list(all=True, filters={"id": cid}) == []  # stopped and auto-removed
    # A container the engine kept (say, across a restart) with a dead owner: reap removes it.
    from deepgym_envs.docker_engine import default_image, owner_labels
    from deepgym_envs.sandbox.reap import reap

    dead_pid = _dead_pid()
    dead_labels = {**owner_labels(), "deepgym.owner-pid": str(dead_pid)}
    stale = engine().containers.create(default_image(), ["true"], entrypoint=[], labels=dead_labels)
    volume = engine().volumes.create(labels=dead_labels)
    with make_sandbox(tree, "docker") as live:
        removed = reap()
        assert f"container {stale.name}" in removed and f"volume {volume.name}" in removed and tmp in removed
        assert not os.path.exists(tmp)
        assert live.exec(["true"]).exit_code == 0  # a live owner's sandbox is left alone


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_engine_unavailable_says_how_to_start_it(tree, monkeypatch):
    from deepgym_envs import docker_engine

    monkeypatch.setattr(docker_engine, "_CLIENT", None)  # the engine client is cached where it is made
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(SandboxUnavailable) as err:
        make_sandbox(tree, "docker")
    assert "dockerd" in str(err.value) and "sandbox='namespace'" in str(err.value)


def test_missing_image_says_how_to_build_it(tree, monkeypatch):
    monkeypatch.setenv("DEEPGYM_DOCKER_IMAGE", f"deepgym/nonexistent-{os.getpid()}:latest")
    with pytest.raises(SandboxUnavailable, match="deepgym images build --offline"):
        make_sandbox(tree, "docker")
    with pytest.raises(SandboxUnavailable, match="docker pull"):
        make_sandbox(tree, "docker", image=f"deepgym/other-{os.getpid()}:latest")


# -- SWE-bench-format rows, run in their own image ---------------------------------------------
INSTANCE_ID = "toyorg__calc-4242"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                           env=env).stdout.strip()


@pytest.fixture(scope="module")
def swebench_image(tmp_path_factory):
    """A SWE-bench-style instance image: the repository at /testbed, at base_commit, the fix in its history."""
    require_docker()
    from deepgym_envs.docker_engine import default_image
    from deepgym_envs.image_trees import swebench_image_names

    ctx = tmp_path_factory.mktemp("swebench-image")
    repo = ctx / "testbed"
    for rel, text in TOY_FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / ".gitignore").write_text("build/\n")
    _git(repo, "init", "-q", "-b", "main")
    subprocess.run(["git", "-C", str(repo), "apply", "-R"], input=GOLD_PATCH, text=True, check=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    base = _git(repo, "rev-parse", "HEAD")
    subprocess.run(["git", "-C", str(repo), "apply"], input=GOLD_PATCH, text=True, check=True)
    _git(repo, "commit", "-qam", "THE FIX")
    _git(repo, "checkout", "-q", "--detach", base)
    (repo / "build").mkdir()
    (repo / "build" / "artifact.txt").write_text("built in the image\n")  # ignored, but part of the base state
    (ctx / "Dockerfile").write_text(f"FROM {default_image()}\nCOPY testbed /testbed\n")
    name = swebench_image_names(INSTANCE_ID)[0]
    engine().images.build(path=str(ctx), tag=name, rm=True, pull=False)
    yield name, base
    engine().images.remove(name, force=True)


@pytest.fixture
def swebench_task(swebench_image):
    """A row in exactly the SWE-bench schema (test lists as JSON-encoded strings), no repo_path or image."""
    from deepgym_envs.tasks import task_from_row

    _, base = swebench_image
    row = {"repo": "toyorg/calc", "instance_id": INSTANCE_ID, "base_commit": base, "patch": GOLD_PATCH,
           "test_patch": TEST_PATCH, "problem_statement": "clamp(50, 0, 10) returns 50; expected 10.",
           "hints_text": "", "created_at": "2024-01-01T00:00:00Z", "version": "0.1",
           "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp_above"]),
           "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp_inside", "tests/test_ops.py::test_mean"]),
           "environment_setup_commit": base}
    return task_from_row(row)


def test_swebench_row_takes_its_tree_from_the_image(swebench_task, swebench_image):
    tree = pristine_tree(swebench_task)
    assert Path(f"{tree}.image").read_text().strip() == swebench_image[0]
    with make_sandbox(tree, "docker") as sb:
        assert "return max(lo, x)" in sb.read_file("src/calc/ops.py").decode()
        assert sb.exists("build/artifact.txt")
        history = sb.exec(["git", "log", "--all", "--oneline"]).stdout
        assert "THE FIX" not in history and len(history.splitlines()) == 1
        sb.write_file("build/artifact.txt", b"changed")
        sb.reset()
        assert sb.read_file("build/artifact.txt") == b"built in the image\n"


def test_swebench_row_grades_through_the_same_anti_cheat(swebench_task):
    from deepgym_envs import run_batch

    cheat = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
             "@@ -0,0 +1,2 @@\n+import calc, calc.ops\n"
             "+calc.ops.clamp = calc.clamp = lambda x, lo, hi: max(lo, min(x, hi))\n")
    gold, empty, cheated = run_batch(swebench_task, [swebench_task.patch, "", cheat], workers=2, backend="docker")
    assert gold.status == "resolved", gold.reason
    assert gold.fail_to_pass == {"passed": 1, "total": 1} and gold.pass_to_pass == {"passed": 2, "total": 2}
    assert empty.status == "unresolved" and empty.tests["tests/test_ops.py::test_clamp_above"] == "failed"
    assert cheated.status == "unresolved", cheated.reason


def test_swebench_row_runs_in_its_image_by_default(swebench_task):
    from deepgym_envs import grade
    from deepgym_envs.sandbox.docker import DockerSandbox

    with make_sandbox(pristine_tree(swebench_task)) as sb:
        assert isinstance(sb, DockerSandbox) and sb.image.startswith("sweb.eval.x86_64.")
    assert grade(swebench_task, swebench_task.patch).status == "resolved"


def test_swebench_row_as_an_environment(swebench_task):
    import gymnasium as gym

    import deepgym_envs  # noqa: F401 - registers the environments

    env = gym.make("deepgym/SWE-v0", tasks=[swebench_task], sandbox="docker", reward="outcome")
    try:
        obs, info = env.reset(seed=0)
        assert info["workdir"] == "/testbed"
        action = {"name": "bash", "arguments": {"command": "sed -i 's/max(lo, x)/max(lo, min(x, hi))/' src/calc/ops.py"}}
        env.step(action)
        _, reward, terminated, _, info = env.step({"name": "submit", "arguments": {}})
        assert terminated and reward == 1.0 and info["verdict"]["status"] == "resolved"
    finally:
        env.close()


def test_row_whose_image_is_at_another_commit_is_refused(swebench_task):
    import dataclasses

    from deepgym_envs.errors import TaskFormatError

    task = dataclasses.replace(swebench_task, base_commit="0" * 40)
    with pytest.raises(TaskFormatError, match="base_commit"):
        pristine_tree(task)


def test_known_exploits_do_not_resolve_on_docker(toy_task):
    """The anti-cheat rules of test_grading, graded in containers: every exploit stays unresolved."""
    from deepgym_envs import run_batch
    from test_grading import EXPLOITS

    verdicts = run_batch(toy_task, [toy_task.patch, *EXPLOITS.values()], workers=2, backend="docker")
    assert verdicts[0].status == "resolved", verdicts[0].reason
    for name, verdict in zip(EXPLOITS, verdicts[1:]):
        assert verdict.status == "unresolved", f"{name}: {verdict.reason}"


def test_images_build_offline_is_idempotent():
    """A second `deepgym images build --offline` reuses the base and the build cache."""
    import docker.errors

    from deepgym_envs.cli import main
    from deepgym_envs.images import OFFLINE_BASE
    from deepgym_envs.docker_engine import default_image

    try:
        engine().images.get(OFFLINE_BASE)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{default_image()} was not built offline here")
    before = engine().images.get(default_image()).id
    assert main(["images", "build", "--offline"]) == 0
    assert engine().images.get(default_image()).id == before
