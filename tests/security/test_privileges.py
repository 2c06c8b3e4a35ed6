"""Class A (privileges inside the namespace sandbox): least privilege, proved from inside and outside.

Before the fix, run as root, sandboxed code was uid 0 with every capability (CapEff
000001ffffffffff): it could remount the read-only system binds, write host files and ptrace the
warm test server. Each test here runs as root in CI and again as an ordinary user.
(The docker backend proves the same properties in ``test_docker_privileges.py``.)
"""

from __future__ import annotations

import os

import pytest

from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.sandbox.identity import service_uid
from deepgym_envs.testrun.warm import warm_runner
from deepgym_envs.trees import pristine_tree
from tests.conftest import requires_namespace
from tests.security._attack import probe

pytestmark = requires_namespace


@pytest.fixture
def sb(toy_task):
    with make_sandbox(pristine_tree(toy_task), "namespace", SandboxLimits(timeout=60)) as box:
        yield box


def test_sandboxed_code_has_no_uid_0_no_capabilities_and_a_seccomp_filter(sb):
    seen = probe(sb)
    assert seen["Uid"].split()[0] != "0" and seen["Gid"].split()[0] != "0"
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(seen[caps], 16) == 0, (caps, seen[caps])
    assert seen["NoNewPrivs"] == "1"
    assert seen["Seccomp"] == "2"  # a filter is loaded


def test_mount_unshare_setns_and_ptrace_are_refused(sb):
    seen = probe(sb)
    for call in ("mount", "remount_usr_rw", "unshare_user", "unshare_mount", "setns", "ptrace_attach_child",
                 "proc_1_mem"):
        assert seen[call] != 0, f"{call} succeeded inside the sandbox"


def test_what_sandboxed_code_writes_is_not_owned_by_the_hosts_root(sb):
    """Seen from the host: the files sandboxed code creates belong to an unprivileged uid."""
    assert sb.exec("echo x > /testbed/made-inside && echo y > /tmp/made-inside").exit_code == 0
    owner = os.stat(sb.resolve("made-inside")).st_uid
    assert owner != 0
    assert owner == (service_uid() if os.geteuid() == 0 else os.geteuid())


def test_read_only_binds_stay_read_only(sb):
    """The system, the interpreter, deepgym's support files, and / and /dev themselves."""
    import sys

    targets = ["/usr/deepgym-probe", "/etc/deepgym-probe", "/deepgym/deepgym_report.py", "/deepgym-probe",
               "/dev/deepgym-probe", os.path.join(os.path.realpath(sys.prefix), "deepgym-probe")]
    for target in targets:
        res = sb.exec(["sh", "-c", f"echo pwned >> {target}"])
        assert res.exit_code != 0, f"wrote {target}"
    assert "pwned" not in sb.exec(["cat", "/deepgym/deepgym_report.py"]).stdout


def test_root_only_host_files_are_unreadable(sb):
    """/etc is bound (read-only); a file only root may read stays unreadable inside."""
    st = os.stat("/etc/shadow") if os.path.exists("/etc/shadow") else None
    if st is None or st.st_mode & 0o004:
        pytest.skip("no root-only /etc/shadow on this machine")
    res = sb.exec(["cat", "/etc/shadow"])
    assert res.exit_code != 0 and "Permission denied" in res.stderr


def test_the_warm_server_is_out_of_reach_of_the_runs_it_serves(sb):
    """A test run (a child of the warm server) can neither trace nor read the server's memory."""
    sb.write_file("tests/test_reach.py", (
        "import ctypes, os\n"
        "def test_reach():\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    server = os.getppid()\n"
        "    assert libc.ptrace(16, server, None, None) != 0\n"
        "    try:\n"
        "        open(f'/proc/{server}/mem', 'rb').read(1)\n"
        "        raise AssertionError('read the server memory')\n"
        "    except OSError:\n"
        "        pass\n"
        "    buf = ctypes.create_string_buffer(8)\n"
        "    class IoVec(ctypes.Structure):\n"
        "        _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "    local = IoVec(ctypes.addressof(buf), 8)\n"
        "    remote = IoVec(0x400000, 8)\n"
        "    assert libc.process_vm_readv(server, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == -1\n"
    ).encode())
    env = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    res = warm_runner(sb, env).run(["-p", "no:cacheprovider", "-q", "tests/test_reach.py"], 60, env, sb.workdir)
    assert res is not None, "the warm server did not serve the run"
    assert res.exit_code == 0, res.output


def test_no_ipc_object_can_outlive_a_run(sb):
    """System V segments and POSIX message queues survive their process (a channel between
    candidates in a pooled view, and memory no cap counts): creating them is refused."""
    res = sb.exec(["python3", "-c", (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.shmget(0, 1 << 20, 0o1000 | 0o600), libc.semget(0, 1, 0o1000 | 0o600),\n"
        "      libc.msgget(0, 0o1000 | 0o600))\n"
        "rt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
        "print(rt.mq_open(b'/deepgym-probe', 0o100 | 2, 0o600, None))\n")])
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == ["-1", "-1", "-1", "-1"], res.stdout


def test_the_report_channel_cannot_be_reopened_for_reading(sb):
    """Code under test holds the report channel's write end; reopening it through /proc to read
    what the plugin writes (the nonce, the outcomes) must fail, as an ordinary user too (a pipe
    there belongs to the sandboxed code's own uid)."""
    res = sb.exec(["python3", "-c", (
        "import os\n"
        "fd = os.environ['DEEPGYM_REPORT_FD']\n"
        "try:\n"
        "    open(f'/proc/self/fd/{fd}', 'rb')\n"
        "    print('reopened')\n"
        "except OSError as exc:\n"
        "    print('refused', exc.errno)\n")], report=True)
    assert res.stdout.startswith("refused"), res.output
