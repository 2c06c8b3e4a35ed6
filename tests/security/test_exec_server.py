"""The command server (``sandbox/execserver.py``): the agent's ``bash`` steps without a bubblewrap
start each, and nothing an agent could not do cold.

Every property is checked against the cold path in the same sandbox: what a command sees (ids,
capabilities, seccomp, rlimits, environment, descriptors, signal dispositions), what it leaves
behind (nothing, seen from the host and from the next command), and what happens when it attacks
the server that runs it (its own step loses its exit status; the next step gets a new server).
"""

from __future__ import annotations

import os
import time

import pytest

from deepgym_envs.env import SWEEnv
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.sandbox.execserver import LOST, ExecServer, agent_exec, exec_server
from deepgym_envs.tools import Tools
from deepgym_envs.trees import pristine_tree
from tests.conftest import processes_named, requires_namespace

pytestmark = requires_namespace

#: Commands whose ExecResult must be the same, field for field, cold and through the server.
PARITY = [
    "true",
    "exit 3",
    "echo out; echo err >&2; false",
    "pwd; cd /tmp && pwd",
    "printf 'h\\xc3\\xa9llo \\xe2\\x9c\\x93 \\xff\\n'",  # unicode, and a byte that is not UTF-8
    "head -c 300000 /dev/zero | tr '\\0' x",  # past the output cap
    "head -c 300000 /dev/zero | tr '\\0' y >&2; echo small",
    "kill -9 $$",
    "kill -TERM $$",
    "id; umask; hostname",
    "grep -E '^(Cap|NoNewPrivs|Seccomp|SigBlk|SigIgn|SigCgt)' /proc/self/status",
    "ulimit -a",
    "env | sort",
    "ls /proc/self/fd",
    "cat /proc/self/cgroup",
    "cut -d: -f1 /proc/net/dev",
    "cat; read x; echo read=$?",  # stdin is /dev/null
    "yes | head -c 10",  # SIGPIPE's default action, as the interpreter would not leave it
    "stat -f -c %T /tmp /testbed /dev/shm",
    "nosuchcommand",
    "echo x > /usr/x",
    "(sleep 0.5; echo late) & echo early",  # what outlives the command never writes again
    "exec >&- 2>&-; sleep 1; exit 4",  # output closed, then a status
]


@pytest.fixture
def sb(toy_task):
    with make_sandbox(pristine_tree(toy_task), "namespace", SandboxLimits(timeout=60, output_bytes=100_000)) as box:
        yield box


def gone(find, wait: float = 5.0) -> bool:
    """Whether ``find()`` comes back empty within ``wait`` seconds (a killed namespace dies a
    moment after the process that held it)."""
    deadline = time.monotonic() + wait
    while find():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def fields(result):
    return result.exit_code, result.stdout, result.stderr, result.truncated, result.timed_out


@pytest.mark.parametrize("cmd", PARITY)
def test_a_command_gives_the_same_result_cold_and_served(sb, cmd):
    served = agent_exec(sb, cmd)
    assert exec_server(sb).runs == 1 and exec_server(sb).fallbacks == 0
    assert fields(served) == fields(sb.exec(cmd))


@pytest.mark.parametrize("argv", [["nosuch"], ["/testbed"], ["bash", "-c", "echo $0 $1", "zero", "one"]])
def test_an_argv_gives_the_same_result_cold_and_served(sb, argv):
    """Bubblewrap's own failures (no such program, not executable) read the same."""
    assert fields(exec_server(sb).exec(argv)) == fields(sb.exec(argv))


def test_a_workspace_made_unenterable_fails_alike(sb):
    assert agent_exec(sb, "chmod 000 /testbed").exit_code == 0
    served = agent_exec(sb, "pwd")
    assert fields(served) == fields(sb.exec("pwd")) and served.exit_code == 1


def test_steps_go_through_the_server_and_it_stays_up(sb):
    first = None
    for i in range(5):
        assert agent_exec(sb, f"echo {i}").stdout == f"{i}\n"
        pid = exec_server(sb)._server
        first = first or pid
        assert pid == first
    assert exec_server(sb).runs == 5


@pytest.mark.parametrize("spawn", [
    "sleep {t} &",
    "setsid nohup sleep {t} >/dev/null 2>&1 &",
    "(sleep {t} &) &",  # a double fork: the sleeper is orphaned at once
    "bash -c \"trap '' TERM HUP INT; exec -a sleep sleep {t}\" >/dev/null 2>&1 & disown",
])
def test_nothing_a_step_starts_survives_into_the_next(sb, spawn):
    marker = f"1000.{os.getpid()}"  # this test's sleepers, not another's on the machine
    assert agent_exec(sb, spawn.format(t=marker) + "\necho started").exit_code == 0
    server = exec_server(sb)
    assert server.started and server.leftovers() == []  # seen from the host
    assert not [p for p in processes_named(f"sleep\0{marker}")]
    seen = agent_exec(sb, "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done")
    assert "sleep" not in seen.stdout  # seen from the next command


def test_a_command_cannot_reach_the_servers_channel_or_memory(sb):
    out = agent_exec(sb, "ls /proc/self/fd; echo ---; ls /proc/$PPID/fd; echo ---; cat /proc/$PPID/environ;"
                         " echo ---; head -c 1 /proc/$PPID/mem; echo ---; cat /proc/$PPID/cmdline | tr '\\0' ' '")
    own, server_fds, environ, mem, cmdline = out.stdout.split("---\n")
    assert "deepgym_exec.py" in cmdline  # $PPID is the server
    assert set(own.split()) <= {"0", "1", "2", "3"}  # 3: ls's own directory
    assert server_fds.strip() == environ.strip() == mem.strip() == ""
    assert out.stderr.count("Permission denied") >= 3
    # Nor through any socket in the sandbox: the channel has no name.
    assert "deepgym" not in agent_exec(sb, "cat /proc/net/unix").stdout


STEAL = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pidfd = libc.syscall(434, os.getppid(), 0)  # pidfd_open
got = [libc.syscall(438, pidfd, fd, 0) for fd in range(3, 64)] if pidfd >= 0 else []  # pidfd_getfd
print(pidfd, sorted(set(got)))
"""


def test_a_command_cannot_take_the_servers_descriptors(sb):
    """pidfd_getfd would hand over the control socket: refused (seccomp; and the server is not dumpable)."""
    out = agent_exec(sb, f"python3 -c '{STEAL}'").stdout.split(maxsplit=1)
    assert out[1].strip() == "[-1]"  # every descriptor number refused


@pytest.mark.parametrize("attack", ["kill -9 $PPID", "kill -STOP $PPID", "kill -TERM $PPID", "kill -INT $PPID",
                                    "kill -9 -1"])
def test_a_command_that_attacks_its_server_loses_its_own_status_only(sb, attack):
    agent_exec(sb, "true")
    before = exec_server(sb)._server
    hit = agent_exec(sb, f"echo once >> /testbed/count; {attack}; sleep 0.5; echo after")
    assert hit.exit_code == -9 and not hit.timed_out and hit.stderr.endswith(LOST)
    assert not exec_server(sb).started and exec_server(sb).lost == 1
    after = agent_exec(sb, "cat /testbed/count")
    assert (after.exit_code, after.stdout) == (0, "once\n")  # it ran once, never again cold
    assert exec_server(sb)._server != before and gone(lambda: os.path.exists(f"/proc/{before}"))


def test_timeout_kills_the_command_tree_as_cold(sb):
    cmd = f"sleep 900.{os.getpid()} & echo started; sleep 900"
    cold, served = sb.exec(cmd, 1), agent_exec(sb, cmd, 1)
    assert fields(served) == fields(cold) == (-9, "started\n", "", False, True)
    assert not exec_server(sb).started
    assert gone(lambda: processes_named(f"sleep\0{900}.{os.getpid()}"))  # both trees die with their namespaces
    assert agent_exec(sb, "echo next").stdout == "next\n"


def test_a_command_that_closes_its_output_and_runs_on_times_out_as_cold(sb):
    """Cold, bubblewrap holds the pipes until the command ends: closing them changes nothing."""
    cmd = "echo bye; exec >&- 2>&-; sleep 60"
    served, cold = agent_exec(sb, cmd, 2), sb.exec(cmd, 2)
    assert fields(served) == fields(cold) == (-9, "bye\n", "", False, True)
    assert exec_server(sb).lost == 0 and not exec_server(sb).started


def test_reset_stops_the_server_and_the_next_one_sees_the_new_workspace(sb):
    assert agent_exec(sb, "echo x > /testbed/new.txt && echo y > /tmp/new.txt").exit_code == 0
    before = exec_server(sb)._server
    sb.reset()
    assert gone(lambda: os.path.exists(f"/proc/{before}"))
    seen = agent_exec(sb, "ls /testbed/new.txt /tmp/new.txt")
    assert seen.exit_code != 0 and exec_server(sb)._server != before


def test_the_first_command_after_a_reset_finds_a_server_started_ahead(sb):
    """A reset used to start the command server again, and the first command after it waited for
    an interpreter to start (~70-160 ms). Now one is started in the next reset's holder ahead of
    need: it was running before the reset, sees only the new, pristine workspace, and serves."""
    assert agent_exec(sb, "echo x > /testbed/new.txt && echo y > /tmp/new.txt").exit_code == 0
    sb.reset()  # the first reset finds no server started ahead; it starts one for the next
    filler = getattr(sb, "_filler", None)  # the spares are started a moment after a reset, in a thread
    if filler is not None:
        filler.join()
    assert agent_exec(sb, "echo x > /testbed/new.txt && echo y > /tmp/new.txt").exit_code == 0
    # Read from the spares, not from /proc: a server started ahead may not have exec'd its script
    # yet on a loaded machine (its command line is still the launcher's).
    ahead = {resident.host_pid for spare in getattr(sb, "_spares", ()) for resident in spare.residents.values()}
    sb.reset()
    server = exec_server(sb)
    assert server.host_pid in ahead and server.started
    seen = agent_exec(sb, "ls /testbed/new.txt /tmp/new.txt; echo done")
    assert seen.exit_code == 0 and "No such file" in seen.stderr and seen.stdout.endswith("done\n"), seen
    assert server.runs == 1 and server.fallbacks == 0


def test_a_command_too_large_for_one_message_runs_cold(sb):
    result = agent_exec(sb, "echo " + "a" * 120_000)
    assert result.exit_code == 0 and result.truncated and result.stdout == "a" * 100_000
    assert exec_server(sb).runs == 0 and not exec_server(sb).started


def test_without_warm_helpers_or_on_another_backend_commands_run_cold(toy_task):
    import warnings

    warnings.filterwarnings("ignore", message="sandbox='local'")
    with make_sandbox(pristine_tree(toy_task), "namespace", SandboxLimits(timeout=60), warm_tests=False) as cold:
        assert agent_exec(cold, "echo hi").stdout == "hi\n" and exec_server(cold) is None
    with make_sandbox(pristine_tree(toy_task), "local", SandboxLimits(timeout=60)) as local:
        assert agent_exec(local, "echo hi").stdout == "hi\n" and exec_server(local) is None


def test_tools_bash_uses_the_server_only_with_warm_helpers(sb):
    Tools(sb, warm_tests=False).bash("true")
    assert exec_server(sb) is None or exec_server(sb).runs == 0
    Tools(sb).bash("true")
    assert exec_server(sb).runs == 1


def test_grading_never_goes_through_the_command_server(toy_task, monkeypatch):
    """Only the agent's own bash steps are served: the hidden tests and the shaping runs are not."""
    served: list[object] = []
    real = ExecServer.exec

    def spy(self, cmd, timeout=None):
        served.append(cmd)
        return real(self, cmd, timeout)

    monkeypatch.setattr(ExecServer, "exec", spy)
    env = SWEEnv([toy_task], max_steps=0)  # process shaping: a grading after each workspace change
    try:
        env.reset(options={"task_id": toy_task.instance_id})
        env.step({"name": "bash", "arguments": {"command": "echo agent"}})
        env.step({"name": "run_tests", "arguments": {}})
        _, _, terminated, _, info = env.step({"name": "submit", "arguments": {}})
    finally:
        env.close()
    assert terminated and info["verdict"]["status"] in ("resolved", "unresolved")
    assert served == ["echo agent"]


def test_the_server_refuses_a_pid_namespace_it_shares(tmp_path):
    """kill(-1) outside a private PID namespace would reach every process of the user."""
    import socket
    import subprocess
    import sys

    from deepgym_envs.sandbox.support import HELPERS

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    proc = subprocess.run([sys.executable, "-I", "-S", str(HELPERS / "deepgym_exec.py"), str(b.fileno())],
                          pass_fds=(b.fileno(),), capture_output=True, text=True, timeout=60)
    a.close()
    b.close()
    assert proc.returncode != 0 and "refusing" in proc.stderr
    assert os.getpid()  # still here
