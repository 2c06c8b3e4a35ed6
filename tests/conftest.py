"""Shared fixtures: a small self-contained task, and the sandbox backends to run against."""

from __future__ import annotations

import functools
import glob
import json
import os
import warnings
from pathlib import Path

import pytest

from deepgym_envs.sandbox.namespace import available
from deepgym_envs.tasks import Task, task_from_row

NAMESPACE_OK, NAMESPACE_WHY = available()
requires_namespace = pytest.mark.skipif(not NAMESPACE_OK, reason=f"namespace sandbox unavailable: {NAMESPACE_WHY}")

TOY_FILES = {
    "pyproject.toml": '[project]\nname = "calc"\nversion = "0.1.0"\n\n[tool.pytest.ini_options]\n'
                      'pythonpath = ["src"]\ntestpaths = ["tests"]\n',
    "src/calc/__init__.py": "from calc.ops import clamp, mean\n",
    "src/calc/ops.py": 'def clamp(x, lo, hi):\n    """Limit x to [lo, hi]."""\n    return max(lo, min(x, hi))\n\n\n'
                       'def mean(values):\n    return sum(values) / len(values)\n',
    "tests/test_ops.py": "from calc import clamp, mean\n\n\ndef test_clamp_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
                         "def test_mean():\n    assert mean([1, 2, 3]) == 2\n",
}
#: The bug: clamp ignores the upper bound. The gold patch below fixes it.
GOLD_PATCH = """diff --git a/src/calc/ops.py b/src/calc/ops.py
--- a/src/calc/ops.py
+++ b/src/calc/ops.py
@@ -1,6 +1,6 @@
 def clamp(x, lo, hi):
     \"\"\"Limit x to [lo, hi].\"\"\"
-    return max(lo, x)
+    return max(lo, min(x, hi))
 
 
 def mean(values):
"""
TEST_PATCH = """diff --git a/tests/test_ops.py b/tests/test_ops.py
--- a/tests/test_ops.py
+++ b/tests/test_ops.py
@@ -7,3 +7,7 @@ def test_clamp_inside():
 
 def test_mean():
     assert mean([1, 2, 3]) == 2
+
+
+def test_clamp_above():
+    assert clamp(50, 0, 10) + 0 == 10  # a number, not just something that compares equal
"""


def write_toy_repo(root: Path) -> Path:
    """The *fixed* toy library (the task's base state is it with GOLD_PATCH reversed)."""
    for rel, text in TOY_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def toy_row(repo: Path, **overrides: object) -> dict:
    row = {"instance_id": "toy__calc-001", "repo": "toy/calc", "repo_path": str(repo), "base_commit": "",
           "gold_reverse_base": True, "problem_statement": "clamp(50, 0, 10) returns 50; expected 10.",
           "patch": GOLD_PATCH, "test_patch": TEST_PATCH,
           "FAIL_TO_PASS": ["tests/test_ops.py::test_clamp_above"],
           "PASS_TO_PASS": ["tests/test_ops.py::test_clamp_inside", "tests/test_ops.py::test_mean"]}
    row.update(overrides)
    return row


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pristine trees go to a per-session cache, never the user's."""
    monkeypatch.setenv("DEEPGYM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def toy_task(tmp_path: Path) -> Task:
    return task_from_row(toy_row(write_toy_repo(tmp_path / "calc")))


@pytest.fixture
def toy_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "toy.jsonl"
    path.write_text(json.dumps(toy_row(write_toy_repo(tmp_path / "calc"))) + "\n")
    return path


@functools.lru_cache(maxsize=1)
def _docker_status() -> tuple[bool, str]:
    from deepgym_envs.docker_engine import docker_status

    return docker_status()


def require_docker() -> None:
    """Skip without an engine and image, unless DEEPGYM_REQUIRE_DOCKER=1 (CI), where it is a failure."""
    ok, why = _docker_status()
    if not ok:
        if os.environ.get("DEEPGYM_REQUIRE_DOCKER") == "1":
            pytest.fail(f"DEEPGYM_REQUIRE_DOCKER=1 but the docker backend cannot run: {why}")
        pytest.skip(f"docker backend unavailable: {why}")


BACKENDS = [pytest.param("namespace", marks=requires_namespace), "local",
            pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "local":
        warnings.filterwarnings("ignore", message="sandbox='local'")
    if request.param == "docker":
        require_docker()
    return request.param


def processes_named(fragment: str) -> list[int]:
    """Pids whose command line contains ``fragment`` (read from /proc: ps truncates long lines)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fragment.encode() in fh.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def leftovers() -> dict[str, int]:
    """This process's sandbox resources (others may run sandboxes on the same machine)."""
    me = os.getpid()
    mounts = open("/proc/self/mountinfo").read().count("deepgym")
    holders = [pid for pid in processes_named("deepgym-holder") if _parent(pid) == me]
    return {"holders": len(holders), "tmpdirs": len(glob.glob(f"/tmp/deepgym-ns-{me}-*")),
            "cgroups": len(glob.glob(f"/sys/fs/cgroup/pids/deepgym-{me}-*")), "mounts": mounts}


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1
