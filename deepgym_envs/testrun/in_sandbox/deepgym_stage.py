"""First stage of a sealed test process: ``python -S -I deepgym_stage.py SCRIPT ARGS`` (never imported).

The seal needs two things of the kernel that Python's standard library cannot ask for without
``ctypes``: no file under ``/proc`` opened for writing (Landlock), and the process not dumpable (so
nothing it starts opens its memory). Loading ``ctypes`` in the graded process itself would leave
``_ctypes``'s types there for the code under test to find (``type.__subclasses__`` raises no audit
event) and read or write memory with. So this small first stage, which runs no code of the
repository, does both for the process that follows and then executes it:

* **Landlock** rules survive ``execve``: set here, they hold for the runner and all it starts.
* **Not dumpable** does not survive ``execve``, but the kernel makes a process whose executable it
  may not read not dumpable from the start. The interpreter is executed through its ELF loader
  (``ld.so PYTHON ARGS``, which runs it as if executed directly: same ``sys.executable``, prefix and
  virtual environment), from an execute-only copy of the loader in a private ``memfd``.

Either step that cannot be done (no Landlock in the kernel, a static or non-ELF interpreter, a Python
before 3.8, running as root) is left to the runner, which then does it with ``ctypes`` as before.
``DEEPGYM_STAGED`` tells the runner which steps were done here.
"""

import os
import struct
import sys

_LANDLOCK_CREATE, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT = 444, 445, 446  # the same on every architecture
_LANDLOCK_WRITE_FILE = 1 << 1
_PT_INTERP = 3


def no_proc_writes():
    """No file under ``/proc`` may be opened for writing by this process or any it starts (Linux 5.13+).
    Returns whether the kernel took the rule."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        attr = ctypes.create_string_buffer(struct.pack("=Q", _LANDLOCK_WRITE_FILE))
        ruleset = libc.syscall(_LANDLOCK_CREATE, attr, ctypes.c_size_t(8), ctypes.c_uint32(0))
        if ruleset < 0:
            return False
        try:
            for name in os.listdir("/"):
                if name == "proc":
                    continue
                try:
                    fd = os.open("/" + name, os.O_PATH | os.O_NOFOLLOW)
                except OSError:
                    continue
                try:
                    rule = ctypes.create_string_buffer(struct.pack("=Qi", _LANDLOCK_WRITE_FILE, fd))
                    libc.syscall(_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0))
                finally:
                    os.close(fd)
            return libc.syscall(_LANDLOCK_RESTRICT, ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0
        finally:
            os.close(ruleset)
    except (ImportError, OSError, AttributeError):
        return False


def elf_loader(path):
    """The ELF interpreter (``PT_INTERP``) a 64-bit little-endian executable names, or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff, = struct.unpack_from("<Q", head, 0x20)
            size, count = struct.unpack_from("<HH", head, 0x36)
            for i in range(min(count, 64)):
                fh.seek(phoff + i * size)
                kind, _, offset, _, _, length = struct.unpack("<IIQQQQ", fh.read(40))
                if kind == _PT_INTERP and 0 < length < 4096:
                    fh.seek(offset)
                    return os.fsdecode(fh.read(length).rstrip(b"\0"))
    except (OSError, struct.error):
        return None
    return None


def unreadable_loader():
    """A descriptor of an execute-only copy of the interpreter's ELF loader, or None."""
    if not hasattr(os, "memfd_create") or os.execve not in os.supports_fd or os.geteuid() == 0:
        return None
    loader = elf_loader(os.path.realpath(sys.executable))
    if loader is None:
        return None
    try:
        with open(loader, "rb") as src:
            data = src.read()
        fd = os.memfd_create("deepgym-loader", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, 0o111)
        return fd, loader
    except OSError:
        os.close(fd)
        return None


def main():
    if not sys.executable:  # nothing to execute by path: the runner does it all, as before this stage
        os.execvp("python", ["python", *sys.argv[1:]])
    done = ["landlock"] if no_proc_writes() else []
    through = unreadable_loader()
    env = dict(os.environ)
    args = [sys.executable, *sys.argv[1:]]
    if through is not None:
        env["DEEPGYM_STAGED"] = ",".join([*done, "undumpable"])
        try:
            os.execve(through[0], [through[1], *args], env)
        except OSError:
            pass
    env["DEEPGYM_STAGED"] = ",".join(done)
    os.execve(sys.executable, args, env)


if __name__ == "__main__":
    main()
