"""Helpers for the security tests: run attacker code inside a sandbox, and build attacking patches."""

from __future__ import annotations

import json
import textwrap

from deepgym_envs.sandbox import Sandbox, make_sandbox
from deepgym_envs.tasks import Task
from deepgym_envs.trees import pristine_tree

#: Prints a JSON object of what sandboxed code can do: identity, capabilities, and the result of
#: each privileged call it tries (0 = it worked, else the errno).
PROBE = textwrap.dedent(r'''
    import ctypes, errno, json, os
    libc = ctypes.CDLL(None, use_errno=True)

    def call(fn, *args):
        r = fn(*args)
        return 0 if r == 0 else ctypes.get_errno() or -1

    status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
    out = {k: status[k].strip() for k in ("Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                                          "NoNewPrivs", "Seccomp")}
    os.makedirs("/tmp/mnt-target", exist_ok=True)
    out["mount"] = call(libc.mount, b"none", b"/tmp/mnt-target", b"tmpfs", 0, None)
    out["remount_usr_rw"] = call(libc.mount, None, b"/usr", None, 32 | 4096, None)  # MS_REMOUNT|MS_BIND
    out["unshare_user"] = call(libc.unshare, 0x10000000)
    out["unshare_mount"] = call(libc.unshare, 0x00020000)
    fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
    out["setns"] = call(libc.setns, fd, 0)
    pid = os.fork()
    if pid == 0:
        import time
        time.sleep(30)
        os._exit(0)
    out["ptrace_attach_child"] = call(libc.ptrace, 16, pid, None, None)  # PTRACE_ATTACH
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    try:
        open("/proc/1/mem", "rb").read(1)
        out["proc_1_mem"] = 0
    except OSError as exc:
        out["proc_1_mem"] = exc.errno
    print(json.dumps(out))
''')


def probe(sb: Sandbox) -> dict:
    res = sb.exec(["python3", "-c", PROBE], timeout=60)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def patch_appending(task: Task, path: str, text: str) -> str:
    """A git diff that appends ``text`` to ``path`` of the task's pristine tree."""
    with make_sandbox(pristine_tree(task), "namespace") as sb:
        sb.write_file(path, sb.read_file(path) + b"\n" + text.encode())
        return sb.diff()
