"""The system calls sandboxed code may not make, as a seccomp filter for every backend.

Least privilege comes first (a non-zero uid, no capabilities, ``no_new_privs``); this filter is the
layer that does not depend on it. It refuses what a test suite never needs and an attacker would
use to get out or to reach another process: mounting, new namespaces (``unshare``, ``setns``,
``clone`` with a namespace flag), tracing or reading another process's memory, kernel keyrings,
BPF, perf, io_uring (its operations bypass seccomp), module loading, clocks and reboots, and IPC
objects that would outlive a run.

One list, two encodings: a classic BPF program for bubblewrap's ``--seccomp FD`` (compiled by
libseccomp, so syscall numbers are right on every architecture) and a Docker seccomp profile.
Refused calls fail with ``EPERM`` rather than killing the process, so a test that probes for a
feature sees an ordinary error. ``clone3`` fails with ``ENOSYS``: its flags sit in memory the
filter cannot read, and the C library then falls back to ``clone``, whose flags it can.

>>> "mount" in DENIED_SYSCALLS
True
"""

from __future__ import annotations

import errno
import functools
import json
import os

from deepgym_envs.errors import SandboxUnavailable

DENIED_SYSCALLS: tuple[str, ...] = (
    # file systems and namespaces
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "open_by_handle_at", "name_to_handle_at",
    "quotactl", "quotactl_fd", "swapon", "swapoff", "fanotify_init",
    # other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise",
    # the kernel
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "syslog", "acct",
    "lookup_dcookie", "vhangup", "iopl", "ioperm", "uselib", "nfsservctl", "_sysctl",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # the machine's clocks
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime",
    # System V and POSIX message-queue IPC objects: they outlive the process that made them (a
    # channel from one candidate to the next in a pooled view) and their memory counts against no
    # cap of the sandbox. Python's multiprocessing uses neither (its semaphores live in /dev/shm).
    "shmget", "semget", "msgget", "mq_open",
)
#: ``clone`` flags that create namespaces (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
#: NEWPID, NEWNET): each one alone is refused.
NAMESPACE_FLAGS: tuple[int, ...] = (0x80, 0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000,
                                    0x20000000, 0x40000000)


def _filter():
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:  # the bindings load libseccomp at import
        raise SandboxUnavailable(
            f"cannot build the sandbox's seccomp filter: {exc}. Install libseccomp "
            "(Debian/Ubuntu: apt-get install libseccomp2) and `pip install pyseccomp`.") from None
    filt = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    deny = seccomp.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            filt.add_rule(deny, name)
        except (ValueError, RuntimeError, OSError):
            pass  # not a system call on this architecture (iopl on arm64, say)
    for flag in NAMESPACE_FLAGS:
        filt.add_rule(deny, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    filt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    return filt


@functools.lru_cache(maxsize=1)
def bpf_program() -> bytes:
    """The filter as a classic BPF program (what ``bwrap --seccomp`` reads), built once per process."""
    filt = _filter()
    fd = os.memfd_create("deepgym-seccomp", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        program = fh.read()
    if not program or len(program) % 8:
        raise SandboxUnavailable("libseccomp exported an empty or malformed seccomp program")
    return program


def program_fd() -> int:
    """A fresh, inheritable descriptor holding the program, positioned at its start.

    Each command needs its own: bubblewrap reads the descriptor to its end. The caller closes it
    once the command has started.
    """
    fd = os.memfd_create("deepgym-seccomp", 0)
    program = bpf_program()
    view = memoryview(program)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@functools.lru_cache(maxsize=1)
def docker_profile() -> str:
    """The same filter as a Docker seccomp profile (JSON text for ``security_opt=["seccomp=..."]``)."""
    eperm = {"action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM}
    rules: list[dict] = [{"names": list(DENIED_SYSCALLS), **eperm}]
    for flag in NAMESPACE_FLAGS:
        rules.append({"names": ["clone"], **eperm,
                      "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]})
    rules.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS})
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules})
