"""The host holds, as a property: no workspace the agent shapes and no action it sends makes
``env.step`` or ``submit`` raise, mask the episode, or grow the host's memory with what it wrote.

Hypothesis draws hostile workspaces (deep, wide, huge, sparse, special files, odd names, links
that loop or leave) and hostile actions on them; every example runs a real episode on a real
sandbox, so the example count is small and fixed (``DEEPGYM_PROPERTY_EXAMPLES`` raises it).
"""

from __future__ import annotations

import os
import warnings

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import deepgym_envs  # noqa: F401  (registers the environments)
from tests.conftest import requires_namespace

pytestmark = requires_namespace

#: Shell that shapes the workspace; each is something an agent can do in one bash step.
SHAPES = {
    "deep": "cd /testbed && mkdir -p deep && cd deep && for i in $(seq 1200); do mkdir a && cd a; done; echo x > f",
    "wide": "mkdir -p /testbed/wide && cd /testbed/wide && seq 15000 | xargs touch",
    "huge": "head -c 40000000 /dev/urandom > /testbed/huge.bin",
    "sparse": "truncate -s 900M /testbed/sparse.bin",
    "long_lines": "python3 -c \"import sys; sys.stdout.write('x' * 20000000)\" > /testbed/one_line.txt",
    "short_lines": "yes a | head -c 16000000 > /testbed/short_lines.txt",
    "fifo": "mkfifo /testbed/pipe",
    "socket": "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('/testbed/sock')\"",
    "odd_names": ("cd /testbed && touch -- '-rf' '*' \"$(printf 'new\\nline')\" \"$(printf '\\xff\\xfe')\" "
                  "\"$(printf 'x%.0s' $(seq 255))\" ' ' '\\\\'"),
    "loops": "cd /testbed && ln -s loop loop && ln -s /etc/passwd passwd && ln -s / root && ln -s .. up",
    "unreadable": "mkdir -p /testbed/locked/inner && echo x > /testbed/locked/inner/f && chmod 000 /testbed/locked",
    "fake_json": "printf 'import sys\\nsys.setrecursionlimit(10)\\n' > /testbed/json.py && cp /testbed/json.py /testbed/re.py",
    "git_games": "cd /testbed && rm -rf .git && mkdir .git && echo 'ref: refs/heads/../../..' > .git/HEAD",
    "deletions": "cd /testbed && git ls-files | head -200 | xargs rm -f",
}
PATHS = ["deep", "wide", "huge.bin", "sparse.bin", "one_line.txt", "short_lines.txt", "pipe", "sock", "-rf", "*",
         "loop", "passwd", "root/etc/shadow", "up/up", "locked/inner/f", "json.py", "./" * 3000 + "README.md",
         "a" * 5000, "."]


def _action(draw_path: str, kind: str) -> dict:
    if kind == "view":
        return {"name": "view", "arguments": {"path": draw_path}}
    if kind == "search":
        return {"name": "search", "arguments": {"pattern": "(a|aa)*x", "path": draw_path, "regex": True}}
    if kind == "edit":
        return {"name": "edit", "arguments": {"command": "insert", "path": draw_path, "insert_line": 1,
                                              "new_str": "y\n" * 1000}}
    return {"name": "edit", "arguments": {"command": "str_replace", "path": draw_path, "old_str": "a",
                                          "new_str": "b" * 100_000}}


actions = st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(["view", "search", "edit", "replace"])),
                   min_size=1, max_size=3)


@pytest.fixture(scope="module")
def env():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = gym.make("deepgym/SWE-v0", reward="process", max_steps=200)
    yield made
    made.close()


def _rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@settings(max_examples=int(os.environ.get("DEEPGYM_PROPERTY_EXAMPLES", "6")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(shapes=st.lists(st.sampled_from(sorted(SHAPES)), min_size=1, max_size=3, unique=True), acts=actions)
def test_no_hostile_workspace_or_action_crashes_masks_or_bloats_the_host(env, shapes, acts):
    env.reset(seed=0)
    rss = _rss_mib()
    for name in shapes:
        obs, reward, terminated, truncated, info = env.step(
            {"name": "bash", "arguments": {"command": SHAPES[name], "timeout": 110}})
        assert "infrastructure_error" not in info, (name, obs)
        assert "progress_no_verdict" not in info, (name, info["progress_no_verdict"])
    for path, kind in acts:
        obs, reward, terminated, truncated, info = env.step(_action(path, kind))
        assert "infrastructure_error" not in info, (path, kind, obs)
        assert "progress_no_verdict" not in info, (path, kind, info["progress_no_verdict"])
    obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
    assert terminated and info["masked"] is False, info["verdict"]
    assert info["verdict"]["status"] == "unresolved", info["verdict"]
    # What the agent wrote (up to 40 MB, a 900 MB sparse file) is never held by the host whole.
    assert _rss_mib() - rss < 150



#: What fits the change bounds: the grading runs on a change that holds these.
WITHIN_BOUNDS = ["deep", "sparse", "fifo", "socket", "odd_names", "loops", "unreadable", "fake_json", "git_games",
                 "deletions"]


@pytest.mark.parametrize("shapes", [sorted(SHAPES), WITHIN_BOUNDS], ids=["past_the_bounds", "within_the_bounds"])
def test_every_shape_at_once_under_every_action(env, shapes):
    """Each shape and each action, deterministically (the property above draws combinations)."""
    env.reset(seed=0)
    rss = _rss_mib()
    for name in shapes:
        obs, reward, terminated, truncated, info = env.step(
            {"name": "bash", "arguments": {"command": SHAPES[name], "timeout": 110}})
        assert "infrastructure_error" not in info and "progress_no_verdict" not in info, (name, obs, info)
    for path in PATHS:
        for kind in ("view", "search", "edit", "replace"):
            obs, reward, terminated, truncated, info = env.step(_action(path, kind))
            assert not terminated, (path, kind, obs)
            assert "infrastructure_error" not in info and "progress_no_verdict" not in info, (path, kind, obs, info)
    obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
    assert terminated and info["masked"] is False, info["verdict"]
    assert info["verdict"]["status"] == "unresolved", info["verdict"]
    assert _rss_mib() - rss < 150
