"""The warm test server: runs *inside* a sandbox, ``python /deepgym/deepgym_warm.py CONTROL_FD``.

Copied into the sandbox's support directory (never imported by deepgym on the host). It imports
pytest and its built-in plugins once, then forks one child per test run, so a run skips the
interpreter's and pytest's start-up. The child turns itself into exactly what the cold runner
(``deepgym_pytest.py``) would be: same argv, environment, working directory, ``sys.path`` and
descriptors, the report plugin imported fresh (a new nonce), and then ``pytest.main``. Nothing
of the repository under test is ever imported here, so each child imports it afresh.

The only way in is the control descriptor inherited from the host: one end of a socketpair, no
path and no name, so nothing else in the sandbox can connect. The server is not dumpable, so a
test cannot ptrace it or write its memory (bubblewrap leaves it no capability to override that);
after each run it kills every process the run left behind.

Protocol (SOCK_SEQPACKET, one message per datagram): the server sends ``{"ready": pid}``; the
host sends ``{"args": [...], "cwd": str}`` with three descriptors attached (stdout, stderr and
the report pipe); the server answers ``{"exit": code}`` once the run and all it started are gone.
"""

import gc
import json
import os
import select
import signal
import socket
import stat
import sys

_SUPPORT = os.path.dirname(os.path.abspath(__file__))
_RUNNER = os.path.join(_SUPPORT, "deepgym_pytest.py")
_PLUGIN = os.path.join(_SUPPORT, "deepgym_report.py")
_PLUGIN_CODE = []  # the report plugin, compiled once at start
#: Plugins shipped beside the runner that a run's arguments may enable with ``-p NAME`` (as
#: ``deepgym_pytest.py``): name -> code, compiled once at start.
_SHIPPED = {"deepgym_django": None}
_REPORT_FD = 3
_PR_SET_DUMPABLE = 4
#: Standard-library modules that test suites commonly import (most come with pytest anyway).
_STDLIB = ("doctest", "unittest", "unittest.mock", "pdb", "json", "tempfile", "shlex", "fnmatch", "inspect",
           "dataclasses", "decimal", "fractions", "datetime", "textwrap", "difflib", "pprint", "csv",
           "statistics", "typing", "enum", "functools", "itertools", "collections", "string", "copy",
           "operator", "html", "urllib.parse", "logging", "argparse", "uuid", "hashlib", "base64",
           "subprocess", "threading", "queue", "heapq", "bisect", "numbers", "calendar", "locale", "gettext",
           # what every pytest run imports late (its configuration's parser, faulthandler's plugin)
           "tomllib", "faulthandler", "_pytest._argcomplete")

# Exactly what the cold runner does to sys.path before pytest loads: drop the script's directory.
sys.path[:] = [p for p in sys.path if p != sys.path[0]] if sys.path else sys.path
sys.dont_write_bytecode = True
_ENV = dict(os.environ)
_SAFE_TO_KILL_ALL = False  # set by main() once it has seen that this PID namespace is ours alone  # the environment the sandbox gave us: every run starts from it


#: The cold runner's helpers this server shares (``sealed_files``, ``lock``), from its file.
_RUNNER_NS = {}


def _preload():
    """pytest, its built-in plugins and the stdlib they pull in; nothing from the repository."""
    import importlib

    import pytest  # noqa: F401
    from _pytest.config import default_plugins

    for name in default_plugins:
        importlib.import_module("_pytest." + name)
    with open(_PLUGIN) as fh:
        _PLUGIN_CODE.append(compile(fh.read(), _PLUGIN, "exec"))
    with open(_RUNNER) as fh:
        _RUNNER_NS.update(__name__="deepgym_runner", __file__=_RUNNER)
        exec(compile(fh.read(), _RUNNER, "exec"), _RUNNER_NS)
    helpers = {"__name__": "deepgym_report_precompile", "__file__": _PLUGIN}
    exec(_PLUGIN_CODE[0], helpers)
    _PRE.append(helpers["_precompile"])
    for name in _SHIPPED:
        path = os.path.join(_SUPPORT, name + ".py")
        with open(path) as fh:
            _SHIPPED[name] = compile(fh.read(), path, "exec")
    for name in _STDLIB:
        try:
            importlib.import_module(name)
        except ImportError:  # a trimmed-down Python: that module is simply imported cold
            pass


def _installed(path):
    """The entries of ``path`` inside the interpreter's own installation (as ``deepgym_pytest.py``)."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    return [p for p in path if p and os.path.isabs(p)
            and any(os.path.realpath(p) == r or os.path.realpath(p).startswith(r.rstrip(os.sep) + os.sep) for r in roots)]


def _dumpable(flag):
    # Imported here, never in a sealed run: _ctypes's types would stay in the process for the code
    # under test to find. A server started through deepgym_stage.py is not dumpable from the start.
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, flag, 0, 0, 0)


def _alone_in_pid_namespace():
    """True only where kill(-1) is safe: a PID namespace of our own, in which we are bubblewrap's
    one command (pid 2, child of its init, pid 1) and nothing else runs. Anywhere else kill(-1)
    would reach every process this user may signal, on the whole machine."""
    try:
        pids = {int(p) for p in os.listdir("/proc") if p.isdigit()}
    except OSError:
        return False
    return os.getpid() == 2 and os.getppid() == 1 and pids == {1, 2}


def _kill_leftovers():
    """Everything in this PID namespace but its init and us: what the last run left running."""
    if not _SAFE_TO_KILL_ALL or os.getpid() != 2:  # never signal what is not ours
        return
    for _ in range(3):  # a process forking while the signal goes round may leave one child
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return


def _wait(pid, ctrl):
    """The child's wait status, or None if the host hung up first (nobody is left to read it).

    The server is not killed with its owner (a parent-death signal would fire when the owner's
    *thread* ends, and environments live in worker threads), so this is how it notices."""
    with select.epoll() as ep:
        pidfd = os.pidfd_open(pid)
        ep.register(pidfd, select.EPOLLIN)
        ep.register(ctrl.fileno(), select.EPOLLIN | select.EPOLLHUP)
        try:
            while True:
                for fd, _ in ep.poll():
                    if fd == pidfd:
                        return os.waitpid(pid, 0)[1]
                    return None  # the host sends nothing during a run: this is its hang-up
        finally:
            os.close(pidfd)


def _serve(ctrl):
    """Answer requests until the host hangs up. Returns only in a forked child: its request."""
    while True:
        msg, fds, _, _ = socket.recv_fds(ctrl, 1 << 20, 3)
        if not msg:
            sys.exit(0)
        request = json.loads(msg)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            ctrl.send(json.dumps({"error": "expected 3 descriptors"}).encode())
            continue
        _precompile(request)  # for this run's child, which inherits it, and for later runs
        pid = os.fork()
        if pid == 0:
            ctrl.close()
            request["fds"] = fds
            return request
        for fd in fds:
            os.close(fd)
        status = _wait(pid, ctrl)
        _kill_leftovers()
        if status is None:  # the host is gone: so is everything here
            sys.exit(0)
        # bubblewrap reports a command killed by signal N as 128 + N: so do we.
        code = os.waitstatus_to_exitcode(status)
        ctrl.send(json.dumps({"exit": 128 - code if code < 0 else code}).encode())


#: The report plugin's compiles of test files, made here before each fork and kept: (path, bytes)
#: -> (code objects, rewritten?). The plugin's own function on the same bytes and path, so a run
#: finds what it would have made; nothing a run does reaches this process, and a key holds every
#: input of the compile (nothing of the workspace around the file).
_PRECOMPILED = {}
#: What it keeps: files up to 1 MiB, 32 MiB of them in all (the oldest go first). Memory the
#: workspace's files could otherwise grow without bound in a server that lives for an episode.
_PRECOMPILED_FILE = 1 << 20
_PRECOMPILED_BYTES = 32 << 20


def _precompile(request):
    """Compile the test files a run names, as its plugin will, into ``_PRECOMPILED``: a run of the
    same files again (every shaping step, every grading of a task) then skips ~9 ms of rewriting
    and compiling them."""
    cwd = request.get("cwd")
    if not isinstance(cwd, str) or not _PRE:
        return
    paths = {arg.partition("::")[0] for arg in request.get("args", []) if isinstance(arg, str)}
    for path in sorted(p for p in paths if p.endswith(".py")):
        path = os.path.realpath(os.path.join(cwd, path))
        try:
            # Never blocks on what the workspace put there (a FIFO): a regular file or nothing.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with open(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                source = fh.read(_PRECOMPILED_FILE + 1)
            key = (path, source)
            if len(source) > _PRECOMPILED_FILE or key in _PRECOMPILED:
                continue
            while _PRECOMPILED and sum(len(k[1]) for k in _PRECOMPILED) + len(source) > _PRECOMPILED_BYTES:
                _PRECOMPILED.pop(next(iter(_PRECOMPILED)))
            _PRECOMPILED[key] = _PRE[0](source, path)
        except Exception:  # unreadable or unparsable: the run reports it as it would anyway
            continue


_PRE = []  # the report plugin's _precompile, from a namespace of its own made at start


def _become_run(request):
    """Turn this forked child into the cold runner's process, then run pytest like it does."""
    os.setsid()
    gc.enable()
    out, err, report = request["fds"]
    null = os.open("/dev/null", os.O_RDONLY)
    for src, dst in ((null, 0), (out, 1), (err, 2), (report, _REPORT_FD)):
        os.dup2(src, dst)
    os.closerange(_REPORT_FD + 1, os.sysconf("SC_OPEN_MAX"))
    os.environ.clear()
    os.environ.update(_ENV)
    os.environ["DEEPGYM_REPORT_FD"] = str(_REPORT_FD)
    os.chdir(request["cwd"])
    sys.argv[:] = [_RUNNER, *request["args"]]
    if "random" in sys.modules:  # every run draws its own random numbers, as a new process would
        sys.modules["random"].seed()
    # Made here, not in the server: a fresh nonce and fresh state every run, from the code compiled
    # before anything of the repository ran, into a namespace that is in no sys.modules.
    sealed = _RUNNER_NS["sealed_files"](request["args"])
    if sealed is None:  # the agent's own run: an ordinary process (a sealed one stays not dumpable)
        _dumpable(1)
    namespace = {"__name__": "deepgym_report", "__file__": _PLUGIN}
    exec(_PLUGIN_CODE[0], namespace)
    namespace["_PRECOMPILED"] = _PRECOMPILED
    compiled = {}
    plugin = namespace["make_plugin"](compiled, sealed is not None)
    import pytest

    _load_shipped(request["args"])
    if sealed is not None and hasattr(sys, "addaudithook"):
        # What this server compiled of earlier runs' test files (their sources among the keys) is
        # this process's copy only: dropped before anything of the repository runs.
        _forget_precompiled(namespace)
        _RUNNER_NS["lock"](_SUPPORT, sealed, compiled, [globals(), namespace, _RUNNER_NS])
    try:
        code = pytest.main(request["args"], plugins=[plugin])
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # what the interpreter would do with an exception nobody caught
        import traceback

        traceback.print_exc()
        code = 1
    _exit(code)


def _forget_precompiled(namespace):
    global _PRECOMPILED
    _PRECOMPILED = {}
    namespace["_PRECOMPILED"] = {}
    del _PRE[:]


def _load_shipped(args):
    """The shipped plugins ``args`` enable, into ``sys.modules`` where ``-p`` finds them (as
    ``deepgym_pytest.shipped_plugins``), each a fresh module from the code compiled at start."""
    import types

    for name, code in _SHIPPED.items():
        if f"-p{name}" in args or any(a == "-p" and b == name for a, b in zip(args, args[1:])):
            module = types.ModuleType(name)
            module.__file__ = os.path.join(_SUPPORT, name + ".py")
            exec(code, module.__dict__)
            sys.modules[name] = module


def _exit(code):
    """Exit as ``sys.exit(code)`` would, minus tearing down the heap inherited from the server.

    A normal exit finalises every module and object, which in a forked child touches (and so
    copies) every page it shares with the server: ~100 ms. What a program can observe of an exit
    is kept: non-daemon threads are waited for, atexit handlers run, output is flushed, and the
    status follows SystemExit's rules.
    """
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    shutdown = getattr(sys.modules.get("threading"), "_shutdown", None)
    if shutdown is not None:
        shutdown()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status & 0xFF)


def main():
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    global _SAFE_TO_KILL_ALL
    _SAFE_TO_KILL_ALL = _alone_in_pid_namespace()
    if not _SAFE_TO_KILL_ALL:
        # Cleaning up after a run kills every other process in the PID namespace: outside a
        # sandbox's own namespace that would be the machine's. The host then runs tests cold.
        sys.exit("deepgym_warm: refusing to run outside a private PID namespace")
    gc.disable()
    # Only the interpreter's own installation while preloading: the server may start in a view
    # the first candidate's change is already applied to, and what it imports here (a module the
    # standard library looks for and lacks, or one shadowed from PYTHONPATH) would live on in the
    # server's memory and every later candidate's run.
    full = list(sys.path)
    sys.path[:] = _installed(full)
    try:
        _preload()
    except ImportError:  # pytest is the workspace's own (its own repository): cold runs only
        sys.exit("deepgym_warm: pytest is not importable from the interpreter's installation")
    sys.path[:] = full
    # Everything imported so far goes to the collector's permanent generation: a child's
    # collections (pytest runs five at the end of a session) then neither walk the preloaded heap
    # nor write to it, which would copy every page of it into the child.
    gc.freeze()
    if "undumpable" not in os.environ.get("DEEPGYM_STAGED", "").split(","):
        _dumpable(0)
    ctrl.send(json.dumps({"ready": os.getpid()}).encode())
    _become_run(_serve(ctrl))


if __name__ == "__main__":
    main()
