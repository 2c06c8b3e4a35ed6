"""Class A and H on the docker backend: least privilege inside the container, and limits that hold.

Everything is probed from inside a real container, as the agent would: who it runs as, what the
kernel lets it do, where it can write and how much. These skip without an engine and image,
except under ``DEEPGYM_REQUIRE_DOCKER=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from conftest import require_docker
from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.trees import pristine_tree

pytestmark = pytest.mark.docker

DISK = 32 << 20
MAX_PROCS = 64
LIMITS = SandboxLimits(timeout=60, memory_bytes=384 << 20, max_processes=MAX_PROCS, disk_bytes=DISK, cpus=1.0)


@pytest.fixture
def box(toy_task):
    require_docker()
    with make_sandbox(pristine_tree(toy_task), "docker", LIMITS) as sb:
        yield sb


def python(box, code: str, timeout: float = 60):
    return box.exec(["python3", "-c", textwrap.dedent(code)], timeout=timeout)


def status_fields(box) -> dict[str, str]:
    out = box.exec(["cat", "/proc/self/status"]).stdout
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)


# -- A: least privilege ------------------------------------------------------------------------
def test_commands_and_pid_1_never_run_as_root(box):
    """As root on the host, commands used to run as uid 0 (the host user's uid)."""
    ids = box.exec("id -u; id -g; id -G").stdout.split()
    assert ids and "0" not in ids, ids
    if os.getuid() != 0:
        assert ids[0] == str(os.getuid())  # an ordinary user keeps its own uid: its files stay its own
    uids = box.exec(["sh", "-c", "grep -h '^[UG]id:' /proc/[0-9]*/status"]).stdout.split()
    assert uids and "0" not in {u for u in uids if u.isdigit()}, uids


SYSCALL_PROBE = r"""
import ctypes, errno, json, os, platform, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def err(ret):
    return 0 if ret != -1 else ctypes.get_errno()
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
out = {}
out["ptrace_attach"] = err(libc.ptrace(16, child, None, None))  # PTRACE_ATTACH
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local, remote = iovec(ctypes.addressof(buf), 8), iovec(ctypes.addressof(buf), 8)
out["process_vm_readv"] = err(libc.process_vm_readv(child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
out["unshare_user"] = err(libc.unshare(0x10000000))  # CLONE_NEWUSER
out["unshare_mount"] = err(libc.unshare(0x00020000))  # CLONE_NEWNS
out["mount"] = err(libc.mount(b"x", b"/tmp", b"tmpfs", 0, None))
fd = os.open("/proc/1/ns/uts", os.O_RDONLY)
out["setns"] = err(libc.setns(fd, 0))
numbers = {"x86_64": {"keyctl": 250, "bpf": 321, "perf_event_open": 298, "io_uring_setup": 425},
           "aarch64": {"keyctl": 219, "bpf": 280, "perf_event_open": 241, "io_uring_setup": 425}}
attr = ctypes.create_string_buffer(128)
params = ctypes.create_string_buffer(120)
for name, nr in numbers.get(platform.machine(), {}).items():
    args = {"keyctl": (0, 0, 0, 0), "bpf": (0, attr, 128), "perf_event_open": (attr, 0, -1, -1, 0),
            "io_uring_setup": (4, params)}[name]
    out[name] = err(libc.syscall(nr, *args))
os.kill(child, signal.SIGKILL)
print(json.dumps(out))
"""


def test_no_capabilities_and_mount_namespaces_ptrace_are_refused(box):
    """No capability, no_new_privs, and deepgym's seccomp filter. Tracing a process of one's own
    uid and io_uring (whose operations bypass seccomp) were allowed by docker's default profile."""
    fields = status_fields(box)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[cap], 16) == 0, (cap, fields[cap])
    assert fields["NoNewPrivs"] == "1" and fields["Seccomp"] == "2"
    res = python(box, SYSCALL_PROBE)
    assert res.exit_code == 0, res.output
    errnos = json.loads(res.stdout.strip().splitlines()[-1])
    refused = {name: code for name, code in errnos.items() if code != 0}
    assert refused == errnos, f"allowed: {sorted(set(errnos) - set(refused))}"
    for tool in ("unshare -U true", "unshare -r true", "mount -t tmpfs x /mnt"):
        assert box.exec(tool).exit_code != 0, tool


# -- A/H: what can be written, and how much -------------------------------------------------
WRITABLE_PROBE = "find / \\( -path /proc -o -path /sys \\) -prune -o -writable ! -type c ! -type l -print 2>/dev/null"


def test_only_the_workspace_and_scratch_are_writable(box):
    """As uid 0 the container's /dev (a tmpfs) was writable; nothing but these may be."""
    allowed = ("/testbed", "/tmp", "/dev/shm", "/dev/mqueue", "/deepgym-report")
    writable = box.exec(WRITABLE_PROBE).stdout.split()
    assert "/testbed" in writable and "/tmp" in writable
    outside = [p for p in writable if not any(p == a or p.startswith(a + "/") for a in allowed)]
    assert outside == []
    for path in ("/probe", "/usr/probe", "/etc/probe", "/dev/probe", "/var/tmp/probe", "/deepgym/probe",
                 "/root/probe", "/opt/probe", "/run/probe", "/proc/sys/kernel/hostname", "/sys/fs/cgroup/probe"):
        assert box.exec(["sh", "-c", f"echo x > {path}"]).exit_code != 0, path
    assert box.exec("echo x > /testbed/probe && echo x > /tmp/probe && echo x > /dev/shm/probe").exit_code == 0


FILL = """
import errno, os, sys
target, most = sys.argv[1], int(sys.argv[2])
chunk = b"\\0" * (1 << 20)
n = 0
code = 0
try:
    while n < most:  # many 1 MiB files: the per-file size cap alone does not bound them
        with open(os.path.join(target, f"fill{n}"), "wb") as fh:
            fh.write(chunk)
        n += 1
except OSError as exc:
    code = exc.errno
print(n, code)
for name in os.listdir(target):
    if name.startswith("fill"):
        os.unlink(os.path.join(target, name))
"""


#: Places with a size cap. An ordinary user cannot reach a tmpfs the engine mounts, so there the
#: workspace (and report directory) stay host directories, bounded per file by RLIMIT_FSIZE only.
CAPPED = ("/testbed", "/tmp", "/dev/shm") if os.geteuid() == 0 else ("/tmp", "/dev/shm")
HOST_DIRS = () if os.geteuid() == 0 else ("/testbed", "/deepgym-report")


@pytest.mark.slow
def test_every_writable_place_is_size_capped(box):
    """The workspace was a bind mount of a host directory: nothing bounded what it could hold
    (and /dev/shm had docker's 64 MiB, not the sandbox's cap).

    The most the fill may write is three times the cap; it must stop at the cap (the workspace:
    plus the small tree it starts from) with ENOSPC.
    """
    most = 3 * DISK >> 20
    for target in CAPPED:
        res = box.exec(["python3", "-c", FILL, target, str(most)], timeout=120)
        assert res.exit_code == 0, res.output
        written, code = map(int, res.stdout.split())
        assert code == 28 and written <= (DISK >> 20) + 1, (target, written, code)  # ENOSPC


def test_writable_mounts_are_capped_tmpfs(box):
    """Every mount the sandbox's uid can write to is a tmpfs with a size (mqueue: RLIMIT_MSGQUEUE is 0)."""
    mounts = box.exec(["cat", "/proc/mounts"]).stdout.splitlines()
    writable = set(box.exec(WRITABLE_PROBE).stdout.split())
    seen = {}
    for line in mounts:
        _, point, fstype, options = line.split()[:4]
        if point in writable:
            seen[point] = (fstype, options)
    assert {"/testbed", "/tmp", "/dev/shm"} <= set(seen), seen
    for point, (fstype, options) in seen.items():
        if fstype == "mqueue" or point in HOST_DIRS:
            continue
        size = dict(o.split("=", 1) for o in options.split(",") if "=" in o).get("size", "")
        assert fstype == "tmpfs" and size, (point, fstype, options)
        units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
        size_bytes = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
        assert size_bytes <= DISK + (1 << 20), (point, options)  # the workspace: plus its small tree


# -- H: processes and memory -------------------------------------------------------------------
FORK_BOMB = """
import errno, os, time
deadline = time.monotonic() + 4
capped = False
top = os.getpid()
while time.monotonic() < deadline:
    try:
        if os.fork() == 0:
            continue  # every child forks on too: the tree grows until the cap stops it
    except OSError as exc:
        capped = capped or exc.errno == errno.EAGAIN
    time.sleep(0.01)
if os.getpid() != top:
    os._exit(0)
print("capped" if capped else "uncapped")
"""


@pytest.mark.slow
def test_a_fork_bomb_is_stopped_by_the_process_cap_and_ends(box):
    # Checked first: without the cap this would be a fork bomb on the host.
    pids_max = box.exec("cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max").stdout
    assert pids_max.strip() == str(MAX_PROCS)
    res = box.exec(["python3", "-c", FORK_BOMB], timeout=60)
    assert not res.timed_out and res.exit_code == 0, res.output
    assert res.stdout.split()[-1] == "capped"
    assert box.exec(["echo", "alive"]).stdout == "alive\n"
    assert int(box.exec(["sh", "-c", "ls /proc | grep -c '^[0-9]'"]).stdout) <= 6


@pytest.mark.slow
def test_a_memory_hog_is_stopped(box):
    hog = ("chunks = []\nfor i in range(1024):\n    chunks.append(bytearray(1 << 20))\n"
           "    chunks[-1][::4096] = b'x' * (1 << 8)\nprint('allocated', len(chunks))")
    res = box.exec(["python3", "-c", hog], timeout=60)
    assert res.exit_code != 0 and "allocated" not in res.stdout, res.output
    assert box.exec(["echo", "alive"]).stdout == "alive\n"


def test_grading_runs_the_tests_as_the_sandbox_user(toy_task):
    """Grading views are containers too: the code under test must not run as root either."""
    from deepgym_envs import grade

    require_docker()
    patch = toy_task.patch.replace("+    return max(lo, min(x, hi))",
                                   "+    import os\n+    assert os.getuid() != 0 and os.getgid() != 0\n"
                                   "+    return max(lo, min(x, hi))")
    patch = patch.replace("@@ -1,6 +1,6 @@", "@@ -1,6 +1,8 @@")
    verdict = grade(toy_task, patch, backend="docker")
    assert verdict.status == "resolved", verdict.reason


# -- the host side keeps working ---------------------------------------------------------------
def test_files_the_host_writes_are_the_sandbox_users(box):
    """write_file, apply_patch and reset write as the host user; the agent must still edit the result."""
    box.write_file("src/calc/new/deep.py", b"x = 1\n")
    box.apply_patch("diff --git a/added.txt b/added.txt\nnew file mode 100644\n--- /dev/null\n+++ b/added.txt\n"
                    "@@ -0,0 +1 @@\n+hello\n")
    script = ("echo y >> src/calc/new/deep.py && echo more >> added.txt && echo z >> src/calc/ops.py "
              "&& touch src/calc/new/other.py && git add -A && echo ok")
    res = box.exec(script)
    assert res.stdout.strip() == "ok", res.output
    box.reset()
    res = box.exec("echo z >> src/calc/ops.py && touch src/calc/fresh.py && git status --porcelain")
    assert res.exit_code == 0, res.output
    assert sorted(box.changed_files()) == ["src/calc/fresh.py", "src/calc/ops.py"]


SYSV_SEGMENT = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0, 1 << 20, 0o1600))  # IPC_PRIVATE, IPC_CREAT | 0600
"""


def test_reset_empties_shared_memory(box):
    """/dev/shm and System V segments outlived reset: one episode could leave state for the next.
    Files in /dev/shm are emptied by reset; System V segments cannot be made at all (the seccomp
    profile refuses shmget, semget and msgget), and none exists after a reset either."""
    box.exec("echo x > /dev/shm/left; echo y > /tmp/left")
    assert int(python(box, SYSV_SEGMENT).stdout) == -1
    segments = ["cat", "/proc/sysvipc/shm"]  # a header line, then one line per segment
    box.reset()
    assert box.exec(["ls", "-A", "/dev/shm", "/tmp"]).stdout.split() == ["/dev/shm:", "/tmp:"]
    assert len(box.exec(segments).stdout.splitlines()) == 1


MQUEUE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.mq_open(b"/probe", 0o102, 0o600, None), ctypes.get_errno())  # O_CREAT | O_RDWR
"""


def test_no_posix_message_queues(box):
    """/dev/mqueue is writable, and its bytes are counted per uid across every container: one
    sandbox could use up what every other one gets. None may be created."""
    fd, code = map(int, python(box, MQUEUE).stdout.split())
    assert fd == -1 and code != 0


def test_reset_restores_a_git_directory_swapped_for_a_link(box, tmp_path):
    """A .git replaced by a link (or a file) made reset fail: the next episode could not start."""
    outside = tmp_path / "outside"
    outside.mkdir()
    box.exec(["sh", "-c", f"rm -rf .git && ln -s {outside} .git"])
    box.reset()
    assert list(outside.iterdir()) == []
    assert box.exec(["git", "status", "--porcelain"]).stdout == ""
    box.exec("rm -rf .git && echo 'gitdir: /nowhere' > .git")
    box.reset()
    assert box.exec(["git", "rev-parse", "--is-inside-work-tree"]).stdout.strip() == "true"
