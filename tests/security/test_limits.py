"""Class H (limits with holes): every writable place is size-capped; processes and memory hold.

Before the fix the tmpfs bubblewrap builds ``/`` and ``/dev`` on was writable and uncapped (half
of RAM), and the process cap was never shown to hold. Each limit is exercised for real, with a
bound of its own so that a broken limit fails the test instead of hanging the machine.
"""

from __future__ import annotations

import pytest

from deepgym_envs.sandbox import SandboxLimits, make_sandbox
from deepgym_envs.sandbox.base import user_process_baseline
from deepgym_envs.trees import pristine_tree
from tests.conftest import requires_namespace

pytestmark = requires_namespace

DISK = 16 << 20


@pytest.fixture
def sb(toy_task):
    limits = SandboxLimits(timeout=60, disk_bytes=DISK, max_processes=24, memory_bytes=512 << 20)
    with make_sandbox(pristine_tree(toy_task), "namespace", limits) as box:
        yield box


@pytest.mark.parametrize("where", ["/testbed", "/tmp", "/dev/shm"])
def test_writable_places_hold_no_more_than_the_disk_cap(sb, where):
    # Many files of 1 MiB each: the per-file size rlimit alone would let them all through.
    res = sb.exec(["python3", "-c", (
        "import os, sys\n"
        "n = 0\n"
        "try:\n"
        "    for i in range(64):\n"
        f"        with open(os.path.join({where!r}, f'fill{{i}}'), 'wb') as fh:\n"
        "            fh.write(b'x' * (1 << 20))\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print('stopped', n, exc.errno)\n"
        "    sys.exit(0)\n"
        "print('wrote', n)\n")])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("stopped"), f"{where}: {res.stdout}"
    assert int(res.stdout.split()[1]) <= DISK >> 20


@pytest.mark.parametrize("where", ["/", "/dev", "/usr", "/etc"])
def test_everything_else_is_read_only(sb, where):
    res = sb.exec(["sh", "-c", f"echo x > {where.rstrip('/')}/deepgym-fill"])
    assert res.exit_code != 0
    assert "Read-only file system" in res.stderr or "Permission denied" in res.stderr


def test_a_fork_bomb_is_stopped_by_the_process_cap(sb):
    """Forking until refused ends by itself, well short of the bomb's own bound of 4096."""
    res = sb.exec(["python3", "-c", (
        "import os, signal, time\n"
        "kids = []\n"
        "try:\n"
        "    for _ in range(4096):\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        kids.append(pid)\n"
        "except OSError as exc:\n"
        "    print('refused after', len(kids), exc.errno)\n"
        "for pid in kids:\n"
        "    os.kill(pid, signal.SIGKILL)\n"
        "print('forked', len(kids))\n")], timeout=120)
    assert "refused after" in res.stdout, res.output
    forked = int(res.stdout.split("refused after")[1].split()[0])
    # With a pids cgroup (root) the cap is exact; an ordinary user's rlimit counts its own
    # processes too, so the headroom it leaves is the bound there.
    assert forked <= 24 + user_process_baseline()


def test_a_memory_hog_is_stopped(sb):
    res = sb.exec(["python3", "-c", (
        "try:\n"
        "    blob = bytearray(1 << 30)\n"
        "    print('allocated')\n"
        "except MemoryError:\n"
        "    print('refused')\n")])
    assert res.stdout.strip() == "refused", res.output
