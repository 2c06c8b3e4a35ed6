"""The warm test runner: the same results as a cold pytest run, no state carried between runs,
and nothing in the sandbox can reach or outlive it."""

from __future__ import annotations

import re
import warnings

import pytest

from conftest import processes_named, requires_namespace
from deepgym_envs import grading
from deepgym_envs.grading import prepare_grading_view
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.tasks import load_tasks
from deepgym_envs.testrun import run_pytest
from deepgym_envs.testrun.warm import warm_server
from deepgym_envs.trees import pristine_tree

pytestmark = requires_namespace

ARGS = ["-q", "-rA", "tests"]


def normalised(text: str) -> str:
    """Output without what differs between any two runs, cold or warm: durations, object addresses."""
    return re.sub(r"0x[0-9a-f]+", "0xADDR", re.sub(r"\d+\.\d+s", "N.NNs", text))


def cold_and_warm(sb, args: list[str], timeout: float = 60):
    cold = run_pytest(sb, args, timeout, warm=False)
    warm = run_pytest(sb, args, timeout, warm=True)
    return cold, warm


def assert_same(cold, warm) -> None:
    (c_report, c_res), (w_report, w_res) = cold, warm
    assert w_res.exit_code == c_res.exit_code
    assert (c_report is None) == (w_report is None)
    if c_report is not None:
        for key in ("tests", "exitstatus", "collected", "tampered", "forged"):
            assert w_report[key] == c_report[key], key
        assert [e["nodeid"] for e in w_report["errors"]] == [e["nodeid"] for e in c_report["errors"]]
    assert normalised(w_res.stdout) == normalised(c_res.stdout)
    assert normalised(w_res.stderr) == normalised(c_res.stderr)


@pytest.fixture
def sb(toy_task):
    with make_sandbox(pristine_tree(toy_task), "namespace", SandboxLimits(timeout=60)) as box:
        yield box


def test_same_results_as_cold_and_served_warm(sb):
    sb.write_file("tests/test_more.py", b"import pytest\n\ndef test_fails():\n    assert 1 + 1 == 3\n\n"
                  b"@pytest.mark.skip(reason='later')\ndef test_skipped():\n    pass\n\n"
                  b"def test_prints():\n    print('hello from the test')\n    assert False\n")
    assert_same(*cold_and_warm(sb, ARGS))
    assert warm_server(sb).runs == 1 and warm_server(sb).fallbacks == 0


@pytest.mark.parametrize("setup, args", [
    ({"tests/test_broken.py": b"import not_a_module\n"}, ARGS),                 # collection error
    ({}, ["-q", "tests/test_nothing_here.py"]),                                # usage error (exit 4)
    ({}, ["-q", "tests/test_ops.py::test_mean"]),                              # one test
    ({"tests/test_exit.py": b"import os\n\ndef test_dies():\n    os._exit(7)\n"}, ARGS),  # no report
    ({"tests/test_kill.py": b"import os, signal\n\ndef test_dies():\n    os.kill(os.getpid(), signal.SIGKILL)\n"},
     ARGS),                                                                    # killed by a signal
    ({"tests/test_exit_hooks.py": b"import atexit, threading, time\n\n"
      b"def test_hooks():\n    atexit.register(print, 'atexit ran')\n"
      b"    threading.Thread(target=lambda: (time.sleep(0.5), print('thread finished'))).start()\n"},
     ["-q", "-s", "tests/test_exit_hooks.py"]),                                # what an exit waits for
])
def test_edge_cases_match_cold(sb, setup, args):
    for path, data in setup.items():
        sb.write_file(path, data)
    assert_same(*cold_and_warm(sb, args))


def test_a_test_file_compiled_by_the_server_is_its_bytes_of_this_run(sb):
    """The server keeps the compiles of test files it made for earlier runs (same path, same bytes):
    a file changed since then, or its helpers around it, is this run's, never the last one's."""
    sb.write_file("tests/test_kept.py", b"def test_kept():\n    assert 1 + 1 == 2\n")
    first = cold_and_warm(sb, ["-q", "tests/test_kept.py"])
    assert_same(*first)
    assert first[1][0]["tests"] == {"tests/test_kept.py::test_kept": "passed"}
    again = cold_and_warm(sb, ["-q", "tests/test_kept.py"])  # the server's kept compile: same result
    assert_same(*again)
    # Same length, one byte different: a different file.
    sb.write_file("tests/test_kept.py", b"def test_kept():\n    assert 1 + 1 == 3\n")
    changed = cold_and_warm(sb, ["-q", "tests/test_kept.py"])
    assert_same(*changed)
    assert changed[1][0]["tests"] == {"tests/test_kept.py::test_kept": "failed"}
    assert warm_server(sb).fallbacks == 0


def test_repository_modules_are_imported_fresh_every_run(sb):
    # A test that mutates module state passes only if it sees a fresh module each run.
    sb.write_file("src/calc/state.py", b"COUNT = 0\n")
    sb.write_file("tests/test_state.py", b"from calc import state\n\ndef test_once():\n"
                  b"    state.COUNT += 1\n    assert state.COUNT == 1\n")
    for _ in range(3):
        report, res = run_pytest(sb, ["-q", "tests/test_state.py"], 60, warm=True)
        assert report["tests"] == {"tests/test_state.py::test_once": "passed"}, res.output
    # An edit between runs is seen, and so is a conftest.py that appears between runs.
    sb.write_file("src/calc/state.py", b"COUNT = 5\n")
    report, _ = run_pytest(sb, ["-q", "tests/test_state.py"], 60, warm=True)
    assert report["tests"]["tests/test_state.py::test_once"] == "failed"
    sb.write_file("tests/conftest.py", b"import pytest\n\n@pytest.fixture(autouse=True)\ndef reset():\n"
                  b"    from calc import state\n    state.COUNT = 0\n")
    report, _ = run_pytest(sb, ["-q", "tests/test_state.py"], 60, warm=True)
    assert report["tests"]["tests/test_state.py::test_once"] == "passed"
    assert warm_server(sb).fallbacks == 0


def test_a_run_sees_only_its_own_descriptors_and_cannot_touch_the_server(sb):
    sb.write_file("tests/test_probe.py", b"import os\n\n"
                  b"def test_no_socket_to_the_server():\n"
                  b"    links = {f: os.readlink(f'/proc/self/fd/{f}') for f in os.listdir('/proc/self/fd')\n"
                  b"             if os.path.lexists(f'/proc/self/fd/{f}')}  # not listdir's own, closed by now\n"
                  b"    sockets = sorted(f for f, link in links.items() if link.startswith('socket:'))\n"
                  # The report channel is a socket pair (a pipe's write end can be reopened for
                  # reading through /proc): that one, on the report descriptor, and no other.
                  b"    assert sockets == ['3'], links\n\n"
                  b"def test_server_memory_is_closed():\n"
                  b"    try:\n        open(f'/proc/{os.getppid()}/mem', 'rb').read(1)\n    except OSError:\n        return\n"
                  b"    raise AssertionError('read the server memory')\n")
    report, res = run_pytest(sb, ["-q", "tests/test_probe.py"], 60, warm=True)
    assert set(report["tests"].values()) == {"passed"}, res.output
    # The agent's own commands run in other PID namespaces: the server is not even visible.
    assert "deepgym_warm" not in sb.exec("cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '").stdout


def test_processes_a_run_leaves_behind_are_killed(sb):
    sb.write_file("tests/test_daemon.py", b"import subprocess\n\ndef test_spawn():\n"
                  b"    subprocess.Popen(['sleep', '1000'], start_new_session=True,\n"
                  b"                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")
    sb.write_file("tests/test_look.py", b"import os\n\ndef test_no_sleep():\n"
                  b"    cmds = [open(f'/proc/{p}/cmdline', 'rb').read() for p in os.listdir('/proc') if p.isdigit()]\n"
                  b"    assert not [c for c in cmds if c.startswith(b'sleep')]\n")
    run_pytest(sb, ["-q", "tests/test_daemon.py"], 60, warm=True)
    report, res = run_pytest(sb, ["-q", "tests/test_look.py"], 60, warm=True)
    assert report["tests"] == {"tests/test_look.py::test_no_sleep": "passed"}, res.output


def test_timeout_kills_the_run_and_the_next_run_gets_a_new_server(sb):
    sb.write_file("tests/test_slow.py", b"import time\n\ndef test_slow():\n    time.sleep(60)\n")
    _, res = run_pytest(sb, ["-q", "tests/test_slow.py"], 3, warm=True)
    assert res.timed_out and res.exit_code < 0
    report, _ = run_pytest(sb, ["-q", "tests/test_ops.py"], 60, warm=True)
    assert report["tests"]["tests/test_ops.py::test_mean"] == "passed"
    assert warm_server(sb).runs == 2


def test_a_run_that_kills_the_server_falls_back_to_a_cold_run(sb):
    sb.write_file("tests/test_parricide.py", b"import os, signal\n\ndef test_kill_parent():\n"
                  b"    os.kill(os.getppid(), signal.SIGKILL)\n")
    cold, warm = cold_and_warm(sb, ["-q", "tests/test_parricide.py"])
    assert_same(cold, warm)
    assert warm_server(sb).fallbacks == 1


def test_a_run_that_stops_the_server_falls_back_without_waiting_out_its_timeout(sb):
    """A stopped server never answers: the host sees it stopped, kills it and runs cold, instead
    of holding the step (or the grading) to its deadline and reporting a timeout."""
    sb.write_file("tests/test_freeze.py", b"import os, signal\n\ndef test_stop_parent():\n"
                  b"    os.kill(os.getppid(), signal.SIGSTOP)\n")
    cold, warm = cold_and_warm(sb, ["-q", "tests/test_freeze.py"], timeout=120)
    assert not warm[1].timed_out
    assert_same(cold, warm)
    assert warm_server(sb).fallbacks == 1


def test_reset_replaces_the_server_and_close_stops_it(toy_task):
    sb = make_sandbox(pristine_tree(toy_task), "namespace")
    with sb:
        sb.write_file("src/calc/ops.py", b"raise ImportError('edited')\n")
        report, _ = run_pytest(sb, ["-q", "tests"], 60, warm=True)
        assert report["errors"] and not report["tests"]  # the edit broke collection
        first = warm_server(sb).host_pid
        sb.reset()
        assert warm_server(sb).started and warm_server(sb).host_pid != first  # restarted, in the background
        report, _ = run_pytest(sb, ["-q", "tests"], 60, warm=True)
        assert report["tests"]["tests/test_ops.py::test_mean"] == "passed"
        server = warm_server(sb).host_pid
    assert server not in processes_named("deepgym_warm")


def test_off_switch_runs_cold(toy_task):
    with make_sandbox(pristine_tree(toy_task), "namespace", warm_tests=False) as sb:
        report, _ = run_pytest(sb, ["-q", "tests"], 60, warm=True)
        assert report["tests"]["tests/test_ops.py::test_mean"] == "passed"
        assert warm_server(sb) is None


@pytest.mark.slow
@pytest.mark.parametrize("task", load_tasks("builtin"), ids=lambda t: t.instance_id)
def test_builtin_tasks_same_results_as_cold(task):
    """Over the whole built-in set: the hidden tests on the base state and on the gold patch."""
    warnings.simplefilter("ignore")
    tree = pristine_tree(task)
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    for patch in ("", task.patch):
        with make_sandbox(tree, "namespace") as sb:
            prepare_grading_view(sb, task, tree, patch)
            assert_same(*cold_and_warm(sb, [*task.test_cmd, "-rA", *grading.test_files(ids)], 300))
            assert warm_server(sb).fallbacks == 0


# -- pooled grading views ---------------------------------------------------------------------
def test_pooled_views_grade_like_fresh_sandboxes_and_forget_the_last_candidate(toy_task):
    from deepgym_envs.grading import grade
    from deepgym_envs.sandbox.pool import ViewPool

    # A candidate that leaves files in /tmp and in the workspace, and a process running.
    sneaky = toy_task.patch + (
        "diff --git a/src/calc/leave.py b/src/calc/leave.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/src/calc/leave.py\n@@ -0,0 +1,3 @@\n+import subprocess\n"
        "+open('/tmp/planted', 'w').write('x')\n+subprocess.Popen(['sleep', '1000'], start_new_session=True)\n")
    sneaky = sneaky.replace("+    return max(lo, min(x, hi))", "+    import calc.leave\n+    return max(lo, min(x, hi))")
    probe = toy_task.patch.replace("+    return max(lo, min(x, hi))",
                                   "+    import os\n+    assert not os.path.exists('/tmp/planted')\n"
                                   "+    assert not os.path.exists('/testbed/src/calc/leave.py')\n"
                                   "+    assert not [p for p in os.listdir('/proc') if p.isdigit() and\n"
                                   "+                open(f'/proc/{p}/cmdline', 'rb').read().startswith(b'sleep')]\n"
                                   "+    return max(lo, min(x, hi))")
    with ViewPool() as pool:
        for patch in ("", toy_task.patch, sneaky, probe, ""):
            pooled, fresh = grade(toy_task, patch, views=pool), grade(toy_task, patch)
            assert (pooled.status, pooled.tests) == (fresh.status, fresh.tests), (pooled.reason, fresh.reason)
        assert grade(toy_task, probe, views=pool).status == "resolved"  # nothing of `sneaky` was left
        assert pool.created == 1 and pool.lent == 6 and pool.idle == 1
        (sb,) = [entry[1] for entry in pool._idle.values()]
        assert warm_server(sb).runs == 6 and warm_server(sb).fallbacks == 0
    assert sb._closed


#: A hidden test that writes a module into the workspace and removes it, as pylint's
#: ``test_parseable_file_path`` does (under ``tests/`` + the working directory).
WRITES_IN_WORKSPACE = (
    "\n\ndef test_writes_a_module_beside_itself():\n"
    "    import os\n"
    "    made = os.path.dirname(os.path.abspath(__file__)) + os.getcwd()\n"
    "    os.makedirs(made)\n"
    "    module = os.path.join(made, 'target.py')\n"
    "    with open(module, 'w') as fh:\n"
    "        fh.write('a, b = object()\\n')\n"
    "    os.remove(module)\n"
    "    os.removedirs(made)\n")


def test_a_renewed_view_lets_the_tests_write_in_the_workspace_and_is_sealed(tmp_path):
    """pylint-7080: its gold patch, resolved by validation (fresh sandboxes), was unresolved in an
    episode, whose final grading ran in a pooled view renewed after the shaping gradings. The warm
    server's Landlock rules (its first stage) name the workspace mount it started on; a renewal
    mounts a new one, so in every later run opening a workspace file for writing was refused: a test
    that writes there failed, and the seal could not blank the hidden tests."""
    from conftest import TEST_PATCH, toy_row, write_toy_repo
    from deepgym_envs.grading import grade
    from deepgym_envs.sandbox.pool import ViewPool
    from deepgym_envs.tasks import task_from_row

    lines = WRITES_IN_WORKSPACE.splitlines()
    test_patch = (TEST_PATCH.replace("@@ -7,3 +7,7 @@", f"@@ -7,3 +7,{7 + len(lines)} @@")
                  + "".join(f"+{line}\n" for line in lines))
    row = toy_row(write_toy_repo(tmp_path / "calc"), test_patch=test_patch)
    row["PASS_TO_PASS"] = [*row["PASS_TO_PASS"], "tests/test_ops.py::test_writes_a_module_beside_itself"]
    task = task_from_row(row)
    assert grade(task, task.patch).status == "resolved"  # as validation grades it
    with ViewPool() as pool:
        for _ in range(3):
            pooled = grade(task, task.patch, views=pool)
            assert pooled.status == "resolved", pooled.reason
            assert "could not seal" not in pooled.log
        assert pool.created == 1


def test_run_batch_warm_and_cold_agree(toy_task):
    from deepgym_envs.batch import run_batch

    patches = [toy_task.patch, "", toy_task.patch, "not a diff", toy_task.patch]
    warm, cold = run_batch(toy_task, patches, 2), run_batch(toy_task, patches, 2, warm=False)
    assert [(v.status, v.tests) for v in warm] == [(v.status, v.tests) for v in cold]
    assert [v.status for v in warm] == ["resolved", "unresolved", "resolved", "unresolved", "resolved"]


def test_a_view_that_cannot_be_renewed_is_replaced(toy_task):
    from deepgym_envs.grading import grade
    from deepgym_envs.sandbox.pool import ViewPool

    with ViewPool() as pool:
        assert grade(toy_task, toy_task.patch, views=pool).status == "resolved"
        (sb,) = [entry[1] for entry in pool._idle.values()]
        sb._stop_holder()  # the fault: the pooled view's sandbox died while idle
        assert grade(toy_task, toy_task.patch, views=pool).status == "resolved"
        assert pool.created == 2 and sb._closed


def test_server_refuses_to_start_outside_a_private_pid_namespace():
    """Its clean-up signals every process in its PID namespace: on the host that is the machine.

    Started here directly (no sandbox), it must exit before it serves anything; no request is
    ever sent, so even a broken guard could not reach its clean-up from this test.
    """
    import socket
    import subprocess
    import sys

    from deepgym_envs.sandbox.support import support_host_dir

    host_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with host_end, server_end:
        proc = subprocess.run([sys.executable, f"{support_host_dir()}/deepgym_warm.py", str(server_end.fileno())],
                              pass_fds=(server_end.fileno(),), capture_output=True, text=True, timeout=60)
        server_end.close()
        host_end.settimeout(5)
        assert proc.returncode != 0 and "private PID namespace" in proc.stderr
        assert host_end.recv(1024) == b""  # it never said ready


def test_warm_runner_is_only_for_the_namespace_backend(toy_task):
    import warnings as w

    from deepgym_envs.errors import SandboxError
    from deepgym_envs.testrun.warm import WarmRunner

    w.filterwarnings("ignore", message="sandbox='local'")
    with make_sandbox(pristine_tree(toy_task), "local") as sb:
        with pytest.raises(SandboxError, match="namespace backend"):
            WarmRunner(sb, {})  # type: ignore[arg-type]
        report, _ = run_pytest(sb, ["-q", "tests"], 60, warm=True)  # no warm server: runs cold
        assert report["tests"]["tests/test_ops.py::test_mean"] == "passed"
