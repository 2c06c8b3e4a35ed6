"""The host holds (classes 2 and 3): what the agent writes never crashes, stalls or bloats the host.

The host diffs the agent's workspace after every step that may change it (the process reward) and
at submit (the outcome). Before the fix, a directory nested 1,100 deep made the host's own walk of
the workspace raise ``RecursionError`` out of ``env.step``; a 300 MB random file cost the host's
``git diff --binary`` ~1.5 GB of memory per step; 200,000 empty files cost every later step over a
minute. A change past the bounds is the agent's outcome: an ``unresolved`` verdict that says
which bound, never an exception and never ``no_verdict``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import warnings

import gymnasium as gym
import pytest

import deepgym_envs  # noqa: F401  (registers the environments)
from deepgym_envs import SandboxConfig, grade, load_tasks
from deepgym_envs.grading import grade_sandbox
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.trees import pristine_tree
from tests.conftest import requires_namespace

pytestmark = requires_namespace

DEEP = "d=/testbed/deep; mkdir -p $d; cd $d; for i in $(seq 1100); do mkdir a; cd a; done; echo x > f"


def _env(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make("deepgym/SWE-v0", **kwargs)


def _bash(env, command: str):
    return env.step({"name": "bash", "arguments": {"command": command, "timeout": 110}})


def test_a_directory_nested_past_the_recursion_limit_is_walked_not_a_crash():
    env = _env(reward="process")
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = _bash(env, DEEP)
        assert not terminated and "infrastructure_error" not in info, obs
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
        assert terminated and info["masked"] is False
        assert info["verdict"]["status"] == "unresolved", info["verdict"]
    finally:
        env.close()


def _grading_limits(changed_bytes: int = 1 << 20, changed_files: int = 200) -> SandboxLimits:
    return SandboxLimits(change_bytes=changed_bytes, change_files=changed_files)


def test_a_change_over_the_byte_bound_is_unresolved_and_named_before_git_reads_it():
    task = load_tasks("builtin")[0]
    limits = _grading_limits()
    with make_sandbox(pristine_tree(task), "namespace", limits) as sb:
        sb.exec("head -c 3000000 /dev/urandom > /testbed/blob.bin")
        with pytest.raises(deepgym_envs.errors.ChangeTooLarge, match="bytes"):
            sb.diff()
        # A large file that .gitignore hides (a build output) is not the agent's change.
        sb.exec("rm /testbed/blob.bin; mkdir -p /testbed/build; head -c 3000000 /dev/zero > /testbed/build/out.bin;"
                " echo build/ >> /testbed/.gitignore")
        assert "out.bin" not in sb.diff()


def test_a_change_over_the_file_bound_is_unresolved():
    task = load_tasks("builtin")[0]
    with make_sandbox(pristine_tree(task), "namespace", _grading_limits()) as sb:
        sb.exec("mkdir /testbed/many && cd /testbed/many && touch $(seq 1000)")
        with pytest.raises(deepgym_envs.errors.ChangeTooLarge, match="files"):
            sb.diff()


def test_a_diff_over_the_byte_bound_is_cut_off_while_streamed():
    """Deleting files writes nothing, yet the diff holds every deleted line: git's output is read
    up to the bound and no further."""
    task = load_tasks("builtin")[0]
    with make_sandbox(pristine_tree(task), "namespace", _grading_limits(changed_bytes=2000)) as sb:
        sb.exec("git ls-files | grep '\\.py$' | xargs rm -f")
        with pytest.raises(deepgym_envs.errors.ChangeTooLarge, match="diff"):
            sb.diff()


def test_an_oversized_change_ends_the_episode_unresolved_not_masked():
    env = _env(reward="process", sandbox=SandboxConfig(limits=_grading_limits()))
    try:
        env.reset(seed=0)
        obs, reward, terminated, truncated, info = _bash(env, "head -c 3000000 /dev/urandom > /testbed/blob.bin")
        assert not terminated and "infrastructure_error" not in info, obs
        assert "progress_no_verdict" not in info
        obs, reward, terminated, truncated, info = env.step({"name": "submit", "arguments": {}})
        assert terminated and info["masked"] is False
        assert info["verdict"]["status"] == "unresolved" and "bytes" in info["verdict"]["reason"]
    finally:
        env.close()


def test_a_patch_over_the_byte_bound_is_unresolved_at_grade():
    task = load_tasks("builtin")[0]
    huge = task.patch + "diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n" \
        "@@ -0,0 +1,200000 @@\n" + "+0123456789abcdef0123456789abcdef\n" * 200_000
    verdict = grade(task, huge, limits=_grading_limits())
    assert verdict.status == "unresolved" and "more than the" in verdict.reason, verdict.reason


def _children_peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


@pytest.mark.slow
def test_host_memory_per_diff_stays_bounded_at_the_default_bounds():
    """A 300 MB random file at the default bounds: the host refuses it by its size, so neither this
    process nor git (its children) grows with it."""
    task = load_tasks("builtin")[0]
    with make_sandbox(pristine_tree(task), "namespace", SandboxLimits()) as sb:
        sb.exec("head -c 300000000 /dev/urandom > /testbed/blob.bin", timeout=110)
        before = subprocess.run(["true"]) and _children_peak_rss_mib()
        with pytest.raises(deepgym_envs.errors.ChangeTooLarge):
            sb.diff()
        assert _children_peak_rss_mib() - before < 200


def test_a_copied_workspace_nested_past_the_recursion_limit_is_removed_on_close():
    """The local backend's workspace is a host folder: shutil.rmtree recursed into it and gave up,
    leaving what the agent wrote on the host's disk."""
    task = load_tasks("builtin")[0]
    sb = make_sandbox(pristine_tree(task), "local", SandboxLimits())
    root = sb.host_root()
    sb.exec("mkdir -p deep && cd deep && for i in $(seq 1100); do mkdir a && cd a; done")
    sb.close()
    assert not os.path.exists(root)


# --- the independent review of the host side (after the bounds above landed) -------------------

def test_a_name_git_refuses_among_many_changed_files_is_left_out_not_a_masked_episode():
    """Past 2,000 changed paths the workspace is staged whole: git refused '.git ' (and the check
    made that a GitError, the harness's), so one bash step turned any episode into no_verdict."""
    task = load_tasks("builtin")[0]
    with make_sandbox(pristine_tree(task), "namespace", SandboxLimits()) as sb:
        sb.exec("cd /testbed && for i in $(seq 2001); do : > pad_$i; done; echo x > '.git '; echo y > kept.txt")
        patch = sb.diff()
        assert "kept.txt" in patch and "b/.git " not in patch
        verdict = grade_sandbox(task, sb)
        assert verdict.status == "unresolved", verdict.reason


@pytest.mark.parametrize("files", [1, 300], ids=["bytes", "files"])
def test_a_name_that_reads_as_a_pathspec_is_measured_as_the_file_it_is(files):
    """':(top)junk' is a file; `git check-ignore` read it as the pattern 'junk', which .gitignore
    hides, so the measure dropped it and git then staged 900 MB (or any number of files)."""
    task = load_tasks("builtin")[0]
    with make_sandbox(pristine_tree(task), "namespace", _grading_limits()) as sb:
        if files == 1:
            sb.exec("cd /testbed && printf '/junk\\n' >> .gitignore && head -c 3000000 /dev/zero > ':(top)junk'")
        else:
            sb.exec("cd /testbed && printf '/x*\\n' >> .gitignore && for i in $(seq 300); do : > \":(top)x$i\"; done")
        with pytest.raises(deepgym_envs.errors.ChangeTooLarge):
            sb.diff()


def _quadratic_apply(n: int) -> str:
    """A file of ``n`` lines, then n/4 hunks that all claim line 2 while their context sits far below:
    git apply searches the file for each one."""
    out = [f"diff --git a/zz_big b/zz_big\nnew file mode 100644\n--- /dev/null\n+++ b/zz_big\n@@ -0,0 +1,{n} @@\n",
           "".join(f"+{i:07d}\n" for i in range(n)), "diff --git a/zz_big b/zz_big\n--- a/zz_big\n+++ b/zz_big\n"]
    out += [f"@@ -2,3 +2,3 @@\n {i - 1:07d}\n-{i:07d}\n+{i:07d}X\n {i + 1:07d}\n" for i in range(n - 2, 2, -4)]
    return "".join(out)


def test_a_patch_that_makes_git_apply_search_is_cut_off_at_the_command_deadline():
    """grade() ran git apply on the agent's patch with no deadline: hunks placed to make git search
    the file for each one cost it minutes per candidate, growing with the square of the patch."""
    task = load_tasks("builtin")[0]
    verdict = grade(task, task.patch + _quadratic_apply(96_000), limits=SandboxLimits(timeout=1))
    assert verdict.status == "unresolved" and "took longer than" in verdict.reason, verdict.reason


# --- the second review ---------------------------------------------------------------------------

def test_a_plain_text_search_reads_a_hard_linked_file_once_and_stops_at_its_deadline(monkeypatch):
    """The literal search runs on the host: a thousand hard links to one 2 MiB file cost a thousand
    reads (0.34 s of host CPU each, the interpreter lock held), with no deadline."""
    import deepgym_envs.tools as tools

    env = _env(reward="outcome")
    try:
        env.reset(seed=0)
        _bash(env, "mkdir -p h && python3 -c \"open('h/f0','w').write('a\\n' * 1000)\" && cd h && "
                   "for i in $(seq 200); do ln f0 f$i; done")
        obs, *_ = env.step({"name": "search", "arguments": {"pattern": "a", "path": "h"}})
        assert {line.split(":", 1)[0] for line in obs.splitlines() if ":" in line and not line.startswith("[")} \
            == {"h/f0"}, obs[:500]
        monkeypatch.setattr(tools, "SEARCH_TIMEOUT", 0.0)
        obs, reward, terminated, truncated, info = env.step({"name": "search", "arguments": {"pattern": "a"}})
        assert "the search stopped after" in obs and not info["invalid_action"], obs[:500]
    finally:
        env.close()


def test_a_patch_naming_more_files_than_a_change_may_hold_is_unresolved_unread():
    """grade() bounded a patch by bytes only: 20,000 new .pth files (2 MB) cost 41 s of host CPU,
    growing with the square of their number, as each was checked against every one removed."""
    task = load_tasks("builtin")[0]
    patch = "".join(f"diff --git a/p{i}.pth b/p{i}.pth\nnew file mode 100644\n--- /dev/null\n+++ b/p{i}.pth\n"
                    f"@@ -0,0 +1 @@\n+x\n" for i in range(10_001))
    verdict = grade(task, patch)
    assert verdict.status == "unresolved" and "names 10001 files" in verdict.reason, verdict.reason


def test_an_expression_nested_past_the_parser_is_a_full_run_not_a_crash():
    from deepgym_envs.selection import _analyse

    assert _analyse(b"Z = " + b"+".join([b"1"] * 100_000) + b"\n") is None


def test_a_local_workspace_whose_process_died_is_reaped():
    """The local backend's workspace copies carried no owner pid, so `deepgym reap` (and Ray's
    reaper) never removed one a killed process left: each stayed on the host's disk."""
    import tempfile

    from deepgym_envs.sandbox.reap import reap

    task = load_tasks("builtin")[0]
    sb = make_sandbox(pristine_tree(task), "local", SandboxLimits())
    try:
        assert os.path.basename(sb._tmp).startswith(f"deepgym-local-{os.getpid()}-")
    finally:
        sb.close()
    dead = tempfile.mkdtemp(prefix="deepgym-local-4194303-")
    assert dead in reap() and not os.path.exists(dead)
