"""The test process's seal: what the code under test may not see or hold while it is graded.

Never imported: the runner (and the warm server's child) execute this file into a private namespace
and call :func:`seal` after the report plugin has read the hidden test files and before pytest
starts, so before any code of the repository runs. From then on:

* **The hidden test files are gone from disk.** Their compiled code is kept where only the import of
  the test module can reach it (the closure of an audit hook, which nothing references), and each
  file is overwritten with as many empty lines: no process the project starts, and no read of the
  file, ``linecache`` or ``__loader__.get_source`` in this one, finds the source. Their code objects
  are refused too (``__code__`` of a function of a hidden test file).
* **A PEP 578 audit hook refuses, to the code under test, what a forger needs and an honest project
  does not**: frames of other code (``sys._getframe``, ``sys._current_frames``, ``tb_frame``,
  ``gi_frame`` / ``cr_frame`` / ``ag_frame``, ``f_code``), code objects of the tests and of the harness,
  forging where code claims to come from (``compile`` or ``code.replace`` naming a file that is not the
  project's, ``marshal.loads`` of code outside the import of a source file), ``gc``'s walks of the heap,
  trace and profile functions (``sys.settrace``, ``sys.setprofile``, ``sys.monitoring``), new audit
  hooks, ``ctypes`` / ``cffi`` and CPython's test modules (raw memory: refused to the tests' side
  too, since a module once loaded is everyone's), and ``/proc/*/mem``. The process is not dumpable,
  so nothing it starts can read its memory either; ``deepgym_stage.py`` arranges that and Landlock
  before this process starts, so it never loads ``ctypes`` itself.

*Who asks* is read from the stack: from the frame that raised the event outwards, code of the
interpreter's installation (the standard library, installed packages) acts for whoever called it and
is skipped; the first frame that is not decides. The hidden tests' own code objects (known by
identity: a file written at run time is none of them, whatever its name) and the harness's files
decide "the tests"; anything else, the workspace (``conftest.py`` files included) and generated code,
decides "the project". A few standard-library
functions that take a frame only to turn it into text (logging's caller lookup, ``warnings``,
``traceback``'s formatting, ``typing`` / ``enum`` / ``namedtuple`` reading the caller's module name)
are allowed to whoever calls them, while what they call by name is as installed (``deepgym_reach.py``:
they would hand the frame to a helper the project rebound in place). A refused frame request raises ``ValueError`` (what those
functions already expect where frames are missing), a refused import ``ImportError``, anything else
``PermissionError``; each refusal is written to the run's stderr, so a gold run shows what its
tests needed. A task whose pristine tests need a capability gets exactly that one
(``DEEPGYM_ALLOW``: ``frames``, ``code``, ``gc``, ``trace``, ``ctypes``), recorded in its trust tier.

What it cannot take away is what the tests hand the project: arguments, and the operands of a
comparison (an ``__eq__`` that agrees with anything). Canaries that are perturbed copies of the
graded tests catch that (``deepgym_envs.canaries``).
"""

import os
import sys

CAPABILITIES = ("frames", "code", "gc", "trace", "ctypes", "source")
#: Imports that give raw memory (``ctypes``, ``cffi``) or CPython's internals (its test modules).
_RAW_MODULES = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend", "_testcapi", "_testinternalcapi",
                          "_testbuffer", "_testmultiphase", "_testsinglephase", "_testclinic",
                          "_xxsubinterpreters", "_xxinterpchannels", "_interpreters"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_code", "gi_code", "cr_code",
                          "ag_code"})
_CTYPES_EVENTS = ("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.cdata", "ctypes.cdata/buffer",
                  "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at", "ctypes.create_string_buffer",
                  "ctypes.create_unicode_buffer", "ctypes.call_function")
LIBRARY, PROJECT, TESTS = 0, 1, 2
_IMPORTERS = _RAW_MODULES | {"importlib", "_frozen_importlib", "_frozen_importlib_external"}
_CO_ITERABLE_COROUTINE = 0x100  # inspect.CO_ITERABLE_COROUTINE: what types.coroutine sets
#: Functions of installed packages that read the caller's frame only to decide something small
#: (a module name, whether to use real time, a warning's stack level) and hand no frame back (it
#: stays in a plain local: no cell, no attribute, not returned): function name -> the ends of the
#: paths of the files that define it. Allowed to everyone, as the stdlib's consumers are. Each was
#: read in the releases the spec table installs; the code must be what the installed file compiles to.
_INSTALLED_CONSUMERS = {
    "_should_use_real_time": ("/freezegun/api.py",),   # is the caller in an ignored module?
    "_importer_stacklevel": ("/dateutil/zoneinfo/__init__.py",),  # a warning's stack level
    "make_sentinel": ("/boltons/typeutils.py",),         # the calling module's name, for pickling
    "__init__": ("/dill/_dill.py",),                     # Sentinel: the calling module's name, for pickling
    "version_option": ("/click/decorators.py",),         # the calling module's name: whose version to show
    "update": ("/site-packages/decorator.py", "/scipy/_lib/decorator.py"),  # FunctionMaker: the new function's module
    "warn_external": ("/matplotlib/_api/__init__.py",),  # a warning's stack level: the first frame outside matplotlib
    "_warn_external": ("/matplotlib/cbook/__init__.py",),  # the same, matplotlib < 3.4
    "find_stack_level": ("/pandas/util/_exceptions.py",),  # a warning's stack level: the first frame outside pandas
}
#: The same for the heap: installed functions that ask ``gc`` about an object only for a yes or no.
_INSTALLED_HEAP_READERS = {
    "_check_setitem_copy": ("/pandas/core/generic.py",),  # is the parent of a copy still referred to?
}
_PLACEHOLDER_LIMIT = 1 << 22


class Refused(PermissionError):
    """A capability the code under test does not get during grading."""


class RefusedFrame(ValueError):
    """A frame the code under test does not get (``ValueError``: what frame lookups raise)."""


class RefusedImport(ImportError):
    """A module the code under test does not get."""


def _under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _library_roots(workspace, support):
    """Directories whose files are the interpreter's installation: its prefixes and the entries of
    ``sys.path`` that neither lie in the workspace nor hold it."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    roots.update(os.path.realpath(p) for p in sys.path if p and os.path.isabs(p))
    return tuple(sorted(r for r in roots if r != "/" and not _under(r, workspace) and not _under(workspace, r)
                        and not _under(r, support)))


def _installed_code():
    """``genuine(code)``, ``genuine_scope(globals)`` and ``adopt(code, globals)``: the code objects the
    interpreter's installation really loaded, and the module namespaces they run in.

    A file name proves nothing: ``compile(source, "/usr/lib/python3/os.py")`` gives code that claims
    to be the standard library's. So installed code is known by identity: every code object alive
    when the seal is made (before anything of the repository has run: the functions, generators and
    frames found then, and the code nested in theirs, which is looked through on first need) and,
    after it, what a genuine import of an installed file executes (``adopt``). Namespaces likewise:
    the modules loaded then, and each module a genuine import fills. Installed code running in a
    namespace the project made (``types.FunctionType(code, {...})`` rebinds every global it calls)
    is not installed code acting."""
    import gc
    import types

    function, suspended = types.FunctionType, {types.GeneratorType: "gi_code", types.CoroutineType: "cr_code",
                                               types.AsyncGeneratorType: "ag_code"}
    codes, scopes, roots, frame = {}, {}, [], sys._getframe()
    frozen = gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else 0
    if frozen:  # a warm server's fork: what it loaded is in gc's permanent generation, which get_objects skips
        gc.unfreeze()
    objects = gc.get_objects()
    if frozen:
        gc.freeze()
    for obj in objects:
        kind = type(obj)
        if kind is function:
            roots.append(obj.__code__)
            scope = obj.__globals__
            scopes[id(scope)] = scope
        elif kind in suspended:
            roots.append(getattr(obj, suspended[kind]))
    del objects
    while frame is not None:
        roots.append(frame.f_code)
        frame = frame.f_back
    for module in list(sys.modules.values()):
        scope = getattr(module, "__dict__", None)
        if type(scope) is dict:
            scopes[id(scope)] = scope
    for code in roots:
        codes[id(code)] = code
    expanded = [False]

    def genuine(code):
        if codes.get(id(code)) is code:
            return True
        if expanded[0]:
            return False
        expanded[0] = True
        for inner in _all_codes(roots):
            codes[id(inner)] = inner
        return codes.get(id(code)) is code

    def genuine_scope(scope):
        return scopes.get(id(scope)) is scope

    def adopt(code, scope=None):
        for inner in _all_codes([code]):
            codes[id(inner)] = inner
        if type(scope) is dict:
            scopes[id(scope)] = scope

    return genuine, genuine_scope, adopt


def _classifier(workspace, support, codes, sealed=frozenset(), installed=None):
    """``kind(code)``: TESTS for the hidden tests' own code objects (by identity: a file the project
    writes at run time, whatever its name, is not one of them) and the harness's files; PROJECT for
    the workspace, generated code and anything else nothing vouches for; LIBRARY for the
    interpreter's installation, code that is what an installed file loaded (``installed``: see
    :func:`_installed_code`; code that only claims an installed file's name is the project's). File
    names are classified once each."""
    realpath, isabs = os.path.realpath, os.path.isabs
    libraries = _library_roots(workspace, support)
    own = {id(code): code for code in codes}
    cache = {}
    genuine, genuine_scope = installed[:2] if installed is not None else ((lambda code: True), (lambda scope: True))

    def judge(name):
        if not isinstance(name, str) or not name:
            return PROJECT
        if name.startswith("<frozen "):
            return LIBRARY
        if not isabs(name):
            return PROJECT  # "<string>", generated code, relative names: nothing vouches for them
        path = realpath(name)
        if _under(path, support) or path in sealed:
            # The harness's files (read-only in every sandbox) and the hidden test files, whose code
            # a library may compile for the tests (hypothesis's @given wrapper claims the test's
            # file): the project may not compile or make code claiming either (see on_compile).
            return TESTS
        if _under(path, workspace):
            return PROJECT
        return LIBRARY if any(_under(path, root) for root in libraries) else PROJECT

    def by_name(name):
        found = cache.get(name)
        if found is None:
            found = cache[name] = judge(name)
        return found

    def kind(code):
        if own.get(id(code)) is code:
            return TESTS
        found = by_name(code.co_filename)
        return PROJECT if found == LIBRARY and not genuine(code) else found

    def at(frame):
        """``kind`` of the code a frame runs; installed code counts as installed only where it runs
        in an installed module's namespace."""
        found = kind(frame.f_code)
        return PROJECT if found == LIBRARY and not genuine_scope(frame.f_globals) else found

    def register(code):
        for inner in _all_codes([code]):
            own[id(inner)] = inner

    return kind, at, by_name, register


def _all_codes(codes):
    """Every code object inside ``codes`` (functions, classes, lambdas, comprehensions)."""
    found, todo = [], list(codes)
    while todo:
        code = todo.pop()
        found.append(code)
        todo.extend(c for c in code.co_consts if type(c) is type(code))
    return found


def _consumers():
    """Code of the standard-library functions that read a frame (or a traceback's frames) only to
    turn it into text or a module name, and hand no frame back: code -> the globals it runs in."""
    import collections
    import enum
    import logging
    import traceback
    import typing
    import warnings

    found = {}
    for owner, names in ((logging.Logger, ("findCaller",)), (logging.Formatter, ("formatException",)),
                         (warnings, ("warn", "_next_external_frame")), (collections, ("namedtuple",)),
                         (traceback, ("extract_stack", "format_stack", "print_stack", "format_exception",
                                      "print_exception", "format_exc", "print_exc", "format_tb", "print_tb",
                                      "extract_tb", "print_last")),
                         (enum.EnumMeta, ("_create_", "_create_pseudo_member_"))):
        for name in names:
            fn = getattr(owner, name, None)
            fn = getattr(fn, "__func__", fn)
            code = getattr(fn, "__code__", None)
            if code is not None:
                found[code] = fn.__globals__
    found.update((code, vars(typing)) for code in _frame_readers(typing))
    return found


def _frame_readers(module):
    """The code of ``module``'s functions and methods that call ``sys._getframe``: in ``typing`` each
    reads its caller's module name for pickling (``NamedTuple``, ``TypedDict``, ``TypeVar``, ``_caller``
    and their older spellings) or whether ``abc``/``functools`` is asking, in every Python version."""
    owners, seen, found = [vars(module)], set(), []
    while owners:
        for value in list(owners.pop().values()):
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, type) and getattr(value, "__module__", None) == module.__name__ \
                    and id(value) not in seen:
                seen.add(id(value))
                owners.append(vars(value))
                continue
            code = getattr(value, "__code__", None)
            if code is not None and getattr(value, "__module__", None) == module.__name__:
                found.extend(c for c in _all_codes([code]) if "_getframe" in c.co_names)
    return found


def _read_sealed(paths, compiled):
    """path -> (plain code, rewritten code or None) for each hidden test file; ``compiled`` holds
    what the report plugin made of them (path -> (source, rewritten code))."""
    store = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                source = fh.read()
            plain = compile(source, path, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError):
            continue  # pytest reports it as a collection error, from what is on disk
        entry = compiled.get(path)
        store[path] = (plain, entry[1] if entry is not None and entry[0] == source else None, source.count(b"\n"))
    compiled.clear()
    return store


#: What each line of a sealed file reads: a statement, so pytest's traceback formatting (which
#: parses the file around a failing line) still works; its line numbers stay right.
_PLACEHOLDER_LINE = b"pass  # sealed while graded\n"


class NotSealed(RuntimeError):
    """A hidden test file could not be blanked: nothing is graded (the project could read it)."""


def _blank(store):
    """Overwrite each sealed file with placeholder lines, as many as it had; a file that cannot be
    overwritten ends the run before anything of the repository runs (a warm server whose Landlock
    rules held an older workspace mount once went on with the tests readable)."""
    for path in list(store):
        text = _PLACEHOLDER_LINE * min(store[path][2] + 1, _PLACEHOLDER_LIMIT)
        try:
            with open(path, "r+b") as fh:
                fh.truncate(0)
                fh.write(text)
        except OSError:
            try:
                os.unlink(path)
                with open(path, "wb") as fh:
                    fh.write(text)
            except OSError as exc:
                message = f"deepgym: could not seal {path} ({exc}); nothing is graded"
                os.write(2, (message + "\n").encode())
                raise NotSealed(message) from None


def _purge_raw_modules(holders):
    """Forget the raw-memory modules the harness itself used (``prctl`` goes through ctypes):
    from ``sys.modules`` and from the namespaces that hold them, so the project cannot reach them."""
    for name in [n for n in sys.modules if n.split(".")[0] in _RAW_MODULES]:
        del sys.modules[name]
    for namespace in holders:
        for key in [k for k, v in namespace.items() if type(v) is type(sys) and v.__name__.split(".")[0] in _RAW_MODULES]:
            del namespace[key]


def _not_dumpable():
    """Whether this process is not dumpable already: its ``/proc`` files then belong to root."""
    try:
        return os.geteuid() != 0 and os.stat("/proc/self/mem").st_uid != os.geteuid()
    except OSError:
        return False


def _undumpable():
    """Not dumpable: no other process (one the project starts) may open this one's memory."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except (ImportError, OSError, AttributeError):
        pass


_LANDLOCK_CREATE, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT = 444, 445, 446  # the same on every architecture
_LANDLOCK_WRITE_FILE = 1 << 1


def _no_proc_writes():
    """With Landlock (Linux 5.13+), no file under ``/proc`` may be opened for writing by this process
    or any it starts: ``/proc/self/mem`` is how a process writes its own memory without ctypes,
    whatever path, symlink or directory descriptor names it. Everywhere else stays writable (the
    sandbox decides that). Returns whether the kernel took the rule."""
    try:
        import ctypes
        import struct

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


def seal(workspace, support, test_files, compiled, allow=(), holders=(), not_tests=()):
    """Install the seal (see the module's docstring) in this process; nothing undoes it.

    ``test_files``: the hidden test files (real paths); ``compiled``: the report plugin's assertion-
    rewritten compiles of them (emptied here); ``allow``: capabilities the task's tests need;
    ``holders``: namespaces of the harness that may hold a module to forget; ``not_tests``: paths
    (relative to the workspace) that look like test code but are the change's (the gold patch edits them).
    """
    support = os.path.realpath(support)
    store = _read_sealed(sorted(set(test_files)), compiled)
    if "source" not in allow:  # tests that print their own source (in tracebacks they compare) keep it
        _blank(store)  # before the clock mark: blanking may re-create a file, which changes its folder
    # Done by the first stage (deepgym_stage.py) where it could: ctypes here would leave _ctypes's
    # types in this process for the code under test to find.
    staged = os.environ.pop("DEEPGYM_STAGED", "").split(",")
    if "undumpable" not in staged or not _not_dumpable():
        _undumpable()
    if "landlock" not in staged:
        _no_proc_writes()
    consumers = _consumers()
    _purge_raw_modules(holders)
    import importlib.util  # what the vetting below uses: loaded before installed code is taken stock of
    import tempfile  # noqa: F401

    import _pytest.assertion.rewrite as rewrite

    installed = _installed_code()  # nothing is imported after this before the hook is in place
    kind, at, by_name, register = _classifier(workspace, support, _all_codes(
        [c for entry in store.values() for c in entry[:2] if c is not None]), frozenset(store), installed)
    vet, by_import = _vetting(workspace, not_tests, rewrite, kind, at)
    record, intact = _load(support, "deepgym_reach.py")["checker"](*installed[:2], lambda code: kind(code) == TESTS,
                                                                   _all_codes)
    record(consumers)  # what the readers reach, as installed: nothing of the repository has run yet
    state = _make_hook((kind, at, by_name), consumers, store, frozenset(allow), (vet, register, by_import, installed[2]),
                       workspace, intact)
    _route_imports(rewrite, store, state)
    sys.addaudithook(state.pop("hook"))  # from here on it lives in the interpreter's list alone


def _load(support, name):
    """Execute a helper file of the harness's into a private namespace (as this file is)."""
    path = os.path.join(support, name)
    with open(path) as fh:
        namespace = {"__name__": name[:-3], "__file__": path}
        exec(compile(fh.read(), path, "exec"), namespace)
    return namespace


#: What the host restores to pristine before a grading (``grading.is_test_path``, and conftest files).
TEST_DIR_NAMES = frozenset({"tests", "test", "testing", "_testing", "testutils"})
TEST_FILE_NAMES = frozenset({"testing.py", "_testing.py", "testutils.py", "_testutils.py", "pytest.py", "randtest.py",
                             "runtests.py", "tests.py", "test.py", "conftest.py"})


def is_test_path(rel):
    """Whether the host puts ``rel`` (relative to the workspace) back to pristine before grading."""
    parts = rel.split("/")
    name = parts[-1]
    return (any(p in TEST_DIR_NAMES for p in parts[:-1]) or name in TEST_FILE_NAMES
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))


def _clock_mark():
    """A file-change time later than every file the host wrote and earlier than any change made
    from now on: what 'this file is as the host left it' is checked against."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="deepgym-mark-")
    try:
        first = os.fstat(fd).st_ctime_ns
        while True:
            os.write(fd, b".")
            now = os.fstat(fd).st_ctime_ns
            if now > first:
                return now
    finally:
        os.close(fd)
        os.unlink(path)


def _vetting(workspace, not_tests, rewrite, kind, at):
    """``vet(code, frame)``: the module's globals when module code about to run is the tests' own: the import system
    (or pytest's assertion-rewriting import) executing a test-side file of the workspace that no
    one has changed, renamed or linked since the host restored it (its change time and its
    directories' are older than the seal; no link in its path; no bytecode cache newer).
    ``by_import(frame)`` says the same of any module: the namespace a genuine import fills."""
    import importlib.util

    mark, not_tests = _clock_mark(), frozenset(not_tests)
    realpath, lstat, dirname = os.path.realpath, os.lstat, os.path.dirname
    prefix = workspace.rstrip("/") + "/"
    pytest_exec = rewrite.AssertionRewritingHook.exec_module.__code__
    cache_from_source = importlib.util.cache_from_source
    pytest_parts = (rewrite._rewrite_test, getattr(rewrite, "_read_pyc", None))

    def untouched(path):
        try:
            if lstat(path).st_ctime_ns >= mark:
                return False
            folder = dirname(path)
            while folder.startswith(prefix):
                if lstat(folder).st_ctime_ns >= mark:
                    return False
                folder = dirname(folder)
        except OSError:
            return False
        return True

    def genuine_loader(loader):
        for attr in ("exec_module", "get_code", "get_data", "get_filename", "source_to_code", "path_stats"):
            fn = getattr(type(loader), attr, None)
            code = getattr(getattr(fn, "__func__", fn), "__code__", None)
            if code is not None and kind(code) != LIBRARY:
                return False
        return True

    def by_import(frame):
        """The globals the import system (or pytest's) is executing a module's code into, or None."""
        if frame.f_code is pytest_exec:
            pyc = frame.f_locals.get("pyc")
            fresh = pyc is not None and os.path.exists(pyc) and not untouched(str(pyc))
            same = (rewrite._rewrite_test, getattr(rewrite, "_read_pyc", None)) == pytest_parts
            return getattr(frame.f_locals.get("module"), "__dict__", None) if same and not fresh else None
        outer = frame.f_back
        if (frame.f_code.co_name == "_call_with_frames_removed" and at(frame) == LIBRARY
                and outer is not None and outer.f_code.co_name == "exec_module" and at(outer) == LIBRARY
                and genuine_loader(outer.f_locals.get("self"))):
            module = outer.f_locals.get("module")
            return getattr(module, "__dict__", None) if not cached_since(module) else None
        return None

    def cached_since(module):
        """Whether the module's code may come from bytecode written since the seal (or from a cache
        outside the source's folder): nothing of the harness or the installation writes any then."""
        if getattr(sys, "pycache_prefix", None):
            return True
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not isinstance(origin, str) or not origin.endswith(".py"):
            return False
        try:
            pyc = cache_from_source(origin)
        except (NotImplementedError, ValueError):
            return False
        return os.path.exists(pyc) and not untouched(pyc)

    def vet(code, frame):
        name = code.co_filename
        if not isinstance(name, str) or not name.startswith(prefix) or realpath(name) != name:
            return None
        rel = name[len(prefix):]
        if not is_test_path(rel) or rel in not_tests or not untouched(name):
            return None
        return by_import(frame)

    return vet, by_import


def _route_imports(rewrite, store, state):
    """Imports of a sealed file take its code from the hook: pytest's assertion-rewriting loader,
    and for files it does not rewrite, a finder ahead of the path's own."""
    import importlib.machinery

    own = rewrite.AssertionRewritingHook.exec_module
    audit, exec_, realpath = sys.audit, exec, os.path.realpath
    sealed = frozenset(store)
    stems = frozenset(os.path.basename(p)[:-3] for p in sealed)

    def take(module, rewritten):
        box = []
        audit("deepgym.sealed", realpath(module.__spec__.origin), rewritten, box, module.__dict__)
        if not box:
            raise ImportError(f"deepgym: the sealed test module {module.__name__} was asked for by code under test")
        exec_(box.pop(), module.__dict__)

    def exec_module(self, module):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if isinstance(origin, str) and realpath(origin) in sealed:
            return take(module, True)
        return own(self, module)

    class SealedLoader:
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            take(module, False)

    class SealedFinder:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            if fullname.rpartition(".")[2] not in stems:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and isinstance(spec.origin, str) and realpath(spec.origin) in sealed:
                spec.loader = SealedLoader()
                return spec
            return None

    rewrite.AssertionRewritingHook.exec_module = exec_module
    sys.meta_path.insert(0, SealedFinder)
    state["handoff"] = (take.__code__, frozenset({exec_module.__code__, SealedLoader.exec_module.__code__}))


def _provenance():
    """``reads(frame, name)`` and ``calls(frame, event)``: whether the frame's *own bytecode* made
    the request, as its current instruction shows: a ``.name`` read (or ``getattr(x, "name")``),
    or a call of ``sys._getframe`` / ``gc.get_objects`` looked up from the real module. Otherwise C
    code the frame set off did it (a ``functools.partial`` the project made a dunder, a ``map``
    over ``getattr``), running under a frame that is not the project's: that is the project asking."""
    import builtins
    import dis
    import gc

    attr_ops, call_ops = {"LOAD_ATTR", "LOAD_METHOD"}, {"CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW",
                                                        "CALL_FUNCTION_EX", "CALL_METHOD", "PRECALL"}
    wanted = {"sys._getframe": (sys, "_getframe"), "sys._getframemodulename": (sys, "_getframemodulename"),
              "sys._current_frames": (sys, "_current_frames"), "sys._current_exceptions": (sys, "_current_exceptions"),
              "gc.get_objects": (gc, "get_objects"), "gc.get_referrers": (gc, "get_referrers"),
              "gc.get_referents": (gc, "get_referents")}
    originals = {event: vars(module).get(name) for event, (module, name) in wanted.items()}
    cache = {}

    def listing(code):
        found = cache.get(id(code))
        if found is None or found[0] is not code:
            instructions = list(dis.get_instructions(code))
            found = cache[id(code)] = (code, instructions, {ins.offset: i for i, ins in enumerate(instructions)})
        return found[1], found[2]

    def around(frame):
        instructions, where = listing(frame.f_code)
        i = where.get(frame.f_lasti)
        return (instructions, i) if i is not None else (instructions, None)

    def reads(frame, name):
        instructions, i = around(frame)
        if i is None:
            return False
        here = instructions[i]
        if here.opname in attr_ops:
            return here.argval == name
        if here.opname in call_ops:  # getattr(x, "name"[, default]), hasattr(x, "name")
            window = instructions[max(0, i - 6):i]
            return (any(ins.opname == "LOAD_CONST" and ins.argval == name for ins in window)
                    and any(ins.argval in ("getattr", "hasattr") and ins.opname.startswith("LOAD_") for ins in window))
        return False

    def calls(frame, event):
        module, name = wanted[event]
        if vars(module).get(name) is not originals[event]:
            return False  # the module's function was replaced: whatever is called, it is not ours
        instructions, i = around(frame)
        if i is None or instructions[i].opname not in call_ops:
            return False
        for j in range(i - 1, max(-1, i - 17), -1):
            ins = instructions[j]
            if not ins.opname.startswith("LOAD_"):
                continue
            if ins.argval != name:  # an alias: getframe = sys._getframe, from sys import _getframe as f
                if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and frame.f_globals.get(ins.argval) is originals[event]:
                    return True
                if ins.opname in ("LOAD_FAST", "LOAD_DEREF") and frame.f_locals.get(ins.argval) is originals[event]:
                    return True
                continue
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):  # from sys import _getframe
                return frame.f_globals.get(name) is originals[event]
            owner = instructions[j - 1] if j else None  # sys._getframe: the module it was read from
            if owner is not None and owner.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                return frame.f_globals.get(owner.argval, vars(builtins).get(owner.argval)) is module
            return True
        return False

    def direct_call(frame):
        """Whether the frame's current instruction is a call (not an operator, a truth test or an
        attribute lookup whose dunder is C code someone else chose)."""
        instructions, i = around(frame)
        return i is not None and instructions[i].opname in call_ops

    return reads, calls, direct_call


def _make_hook(classify, consumers, store, allow, vetting, workspace, intact):
    """The audit hook: a table from event to check; each check raises to refuse. ``intact(code,
    globals)``: whether what an allowed frame reader calls is as installed (``deepgym_reach.py``)."""
    import _thread

    kind, at, by_name = classify

    getframe, get_ident, realpath, basename = sys._getframe, _thread.get_ident, os.path.realpath, os.path.basename
    isabs, islink = os.path.isabs, os.path.islink
    write, isinstance_, str_, bytes_, fspath = os.write, isinstance, str, bytes, os.fspath
    function_type = type(_make_hook)
    busy = set()
    state = {}

    decided = [None]  # the frame that decided the last question: named in a refusal
    broken = [None]  # why an allowed reader that decided it was not allowed this time

    def in_workspace(name):
        return isinstance_(name, str_) and isabs(name) and _under(realpath(name), workspace)

    genuine = {}  # (file, function name) -> the function's code objects as that file compiles

    def installed_consumer(code, table=_INSTALLED_CONSUMERS):
        """An installed package's function that reads its caller's frame (or asks ``gc``) only for a
        name or a bool (``table``): installed, so not the change's; its file is not in the workspace.
        The code must be what the installed file compiles to (by value: bytecode, constants, names),
        not code the project compiled under that file's name and the function's."""
        suffixes = table.get(code.co_name)
        if suffixes is None or not code.co_filename.endswith(suffixes):
            return False
        key = (code.co_filename, code.co_name)
        found = genuine.get(key)
        if found is None:
            found = genuine[key] = compiled_from(*key)
        return code in found

    def compiled_from(path, name):
        try:
            with open(path, "rb") as fh:
                top = compile(fh.read(), path, "exec", dont_inherit=True)
        except (OSError, SyntaxError, ValueError):
            return ()
        return tuple(c for c in _all_codes([top]) if c.co_name == name)
    reads, calls, direct_call = _provenance()

    def asker(frame, allowed=frozenset(), table=None):
        """Who the event is for: TESTS, PROJECT, or LIBRARY (a consumer in ``allowed``, or an
        installed one in ``table``, said it).
        A stack that no frame decides (a thread whose target is C code, a callback from the
        interpreter) is the project's: only the main thread's stack ends in the harness."""
        while frame is not None:
            code = frame.f_code
            found = at(frame)
            if found != LIBRARY:
                decided[0] = frame
                return found
            if code in allowed or (table is not None and installed_consumer(code, table)):
                # It would hand what it reads to what it calls: only while that is as installed (the
                # installed table's were read to keep the frame in a local: their own names only).
                why = intact(code, frame.f_globals, code in allowed)
                if why is None:
                    return LIBRARY
                decided[0], broken[0] = frame, why
                return PROJECT
            frame = frame.f_back
        return PROJECT

    def genuine_import(frame):
        """Whether ``frame`` is the standard library's ``SourceLoader.get_code`` on a loader whose
        file and data come from the standard library's own methods (not a subclass's)."""
        if frame is None or frame.f_code.co_name != "get_code" or at(frame) != LIBRARY:
            return False
        loader = frame.f_locals.get("self")
        for attr in ("get_data", "get_filename", "source_to_code", "path_stats"):
            fn = getattr(type(loader), attr, None)
            code = getattr(getattr(fn, "__func__", fn), "__code__", None)
            if code is not None and kind(code) != LIBRARY:
                return False
        return True

    def refuse(what, capability, exc=Refused, advice=""):
        raise exc(say(what, capability, advice))

    def say(what, capability, advice=""):
        """Write (and return) the line that says ``what`` is refused, naming the frame that decided."""
        where, decided[0] = decided[0], None
        why, broken[0] = broken[0], None
        place = f", asked from {where.f_code.co_filename}:{where.f_lineno}" if where is not None else ""
        if why is not None:
            place += f" ({where.f_code.co_name} may read it only while what it calls is as installed: {why})"
        message = (f"deepgym: {what} is refused to the code under test during grading "
                   f"(capability '{capability}'{place})" + (f"; {advice}" if advice else ""))
        try:
            write(2, (message + "\n").encode())
        except OSError:
            pass
        return message

    def by_project(frame, capability, allowed=frozenset()):
        return capability not in allow and asker(frame, allowed) == PROJECT

    def on_getframe(event, args, frame):
        if "frames" not in allow and (not calls(frame, event)
                                      or asker(frame, consumers, _INSTALLED_CONSUMERS) == PROJECT):
            refuse(event, "frames", RefusedFrame)

    def on_current(event, args, frame):
        if "frames" not in allow and (not calls(frame, event) or asker(frame) == PROJECT):
            refuse(event, "frames", RefusedFrame)

    def on_getattr(event, args, frame):
        name = args[1]
        if name in _FRAME_ATTRS:
            if "frames" not in allow and (not reads(frame, name)
                                          or asker(frame, consumers, _INSTALLED_CONSUMERS) == PROJECT):
                refuse(f"reading {name}", "frames", RefusedFrame)
        elif isinstance_(args[0], function_type):  # __code__: only a test function's own is refused
            scope = args[0].__globals__
            if test_scopes.get(id(scope)) is scope and args[0].__code__.co_name.startswith("test") \
                    and "code" not in allow and (not reads(frame, name) or asker(frame) == PROJECT):
                refuse("the code object of a test", "code")

    def on_setattr(event, args, frame):
        if args[1] == "__code__" and not harmless_code_swap(args[0], args[2]) and by_project(frame, "code"):
            refuse("replacing a function's code", "code")

    def harmless_code_swap(fn, new):
        """Whether giving ``fn`` the code ``new`` hands no one anything: the project's own function
        (a file of the workspace, not a test-side module's) getting the project's code, which it
        could as well have written in that file; or any function's code marked as an iterable
        coroutine and otherwise the same object's twin (``types.coroutine``, which the standard
        library applies to its own generators when ``asyncio`` is first imported, maybe under
        the project's import)."""
        if not isinstance_(fn, function_type) or type(new) is not code_type:
            return False
        old = fn.__code__
        if old.co_flags ^ new.co_flags == _CO_ITERABLE_COROUTINE:
            twin = (new.co_filename == old.co_filename and new.co_name == old.co_name
                    and getattr(new, "co_qualname", None) == getattr(old, "co_qualname", None)
                    and len(new.co_consts) == len(old.co_consts)
                    and all(a is b for a, b in zip(new.co_consts, old.co_consts) if type(a) is code_type)
                    and new == old.replace(co_flags=new.co_flags))
            if twin and kind(old) == LIBRARY:
                adopt(new)  # the installed function's own code, flagged: still installed code
            return twin
        scope = fn.__globals__
        return (kind(old) == PROJECT and kind(new) == PROJECT and in_workspace(old.co_filename)
                and test_scopes.get(id(scope)) is not scope)

    def on_compile(event, args, frame):
        name = args[1] if len(args) > 1 else None
        if isinstance_(name, bytes_):
            name = name.decode(errors="replace")
        if isinstance_(name, str_) and by_name(name) == TESTS and "code" not in allow \
                and (not direct_call(frame) or asker(frame) == PROJECT):
            refuse(f"compiling code that claims to be {name}", "code")

    def on_code_new(event, args, frame):
        name = args[1] if len(args) > 1 else None
        if isinstance_(name, str_) and by_name(name) == TESTS and "code" not in allow \
                and (not direct_call(frame) or asker(frame) == PROJECT):
            refuse(f"making code that claims to be {name}", "code")

    def on_marshal(event, args, frame):
        # A source file's import fixes the file name of what it loads; anything else is refused.
        if frame.f_code.co_name == "_compile_bytecode" and frame.f_locals.get("source_path") is not None \
                and genuine_import(frame.f_back):
            return
        if by_project(frame, "code"):
            refuse("loading code with marshal", "code")

    def on_heap(event, args, frame):
        if "gc" not in allow and (not calls(frame, event)
                                  or asker(frame, table=_INSTALLED_HEAP_READERS) == PROJECT):
            refuse(event, "gc")

    def on_trace(event, args, frame):
        if "trace" not in allow and asker(frame) != TESTS:
            refuse(event, "trace")

    def on_raw(event, args, frame):
        if by_project(frame, "ctypes"):
            refuse(event, "ctypes")

    def on_import(event, args, frame):
        # Refused to whoever asks, the tests' side too: a module once imported is the project's as
        # well (importing a cached module raises no event, and its types outlive it). numpy's own
        # import of ctypes expects to fail; a library that needs it (pandas >= 2) needs the trust.
        module = args[0]
        if isinstance_(module, str_) and module.partition(".")[0] in _RAW_MODULES and "ctypes" not in allow:
            who = "the tests" if asker(frame) == TESTS else "the code under test"  # and names the frame
            by = importer(frame)
            if by is not None and kind(by.f_code) == LIBRARY:  # not the change's own import: say how to grant it
                refuse(f"importing {module} for {by.f_code.co_filename}:{by.f_lineno} (installed code {who} imported)",
                       "ctypes", RefusedImport, 'a task whose environment needs it keeps it with "trust": ["ctypes"]')
            refuse(f"importing {module}", "ctypes", RefusedImport)

    def importer(frame):
        """The frame whose code asked for the import: the first outside the import system and the
        raw modules themselves (``ctypes`` importing ``_ctypes``)."""
        while frame is not None and str_(frame.f_globals.get("__name__")).partition(".")[0] in _IMPORTERS:
            frame = frame.f_back
        return frame

    def on_open(event, args, frame):
        path = args[0]
        if isinstance_(path, int) or path is None:
            return
        try:
            path = fspath(path)
            if isinstance_(path, bytes_):
                path = path.decode(errors="replace")
        except TypeError:
            return
        if is_mem(path):
            refuse(f"opening {path}", "none")
        if "source" not in allow and basename(path) in sealed_names and path not in told:
            blanked_read(path, frame)

    sealed_names = frozenset(basename(path) for path in store)
    told = set()

    def blanked_read(path, frame):
        """Say once per file when the project reads a hidden test file, which it finds blanked: a
        row whose code reads the test patch's own modules (sphinx's autodoc reads the source of a
        target module the test patch adds) fails for that, and validation names the trust it needs."""
        real = realpath(path)
        if real not in store or real in told:
            told.add(path)  # another file of that name, or said already: not looked at again
        elif asker(frame) == PROJECT:
            told.update((path, real))
            say(f"the source of {real} (a hidden test file)", "source", "it reads as blank lines")

    handoff = state  # filled by _route_imports
    vet, register, by_import, adopt = vetting
    code_type = type(_make_hook.__code__)

    test_scopes = {}  # id -> the globals of each module of the tests' own (sealed or vetted)

    def on_exec(event, args, frame):
        code = args[0]
        if type(code) is not code_type:
            return
        if by_name(code.co_filename) == LIBRARY:
            scope = by_import(frame)  # an installed file's import: its code and namespace are installed
            if scope is not None and in_file(code, scope):
                adopt(code, scope)
        elif kind(code) != TESTS:
            scope = vet(code, frame)
            if scope is not None:  # a test-side module of the workspace, as the host restored it
                register(code)
                test_scopes[id(scope)] = scope

    def in_file(code, scope):
        """Whether module code is the file its module was loaded from (the loader names both)."""
        spec = scope.get("__spec__")
        origin = getattr(spec, "origin", None) if spec is not None else scope.get("__file__")
        return isinstance_(origin, str_) and realpath(origin) == realpath(code.co_filename)

    def is_mem(path):
        """A process's memory file, however named: relative (a directory descriptor may stand for
        ``/proc/self``), through ``/proc`` or through a link. Writing it is refused by the kernel too
        (see ``_no_proc_writes``); this refuses reading it in this process."""
        if basename(path) == "mem":
            return not isabs(path) or realpath(path).startswith("/proc/")
        if "proc" in path or islink(path):
            real = realpath(path)
            return real.startswith("/proc/") and basename(real) == "mem"
        return False

    def on_sealed(event, args, frame):
        path, rewritten, box, scope = args
        take, loaders = handoff["handoff"]
        if frame.f_code is not take or frame.f_back is None \
                or frame.f_back.f_code not in loaders:
            return
        frame = frame.f_back.f_back
        while frame is not None:  # the import is pytest's collection, with no project code under it
            if at(frame) == PROJECT:
                return
            frame = frame.f_back
        entry = store.get(path)
        if entry is not None:
            box.append(entry[1] if rewritten and entry[1] is not None else entry[0])
            test_scopes[id(scope)] = scope

    table = {"sys._getframe": on_getframe, "sys._getframemodulename": on_getframe,
             "sys._current_frames": on_current, "sys._current_exceptions": on_current,
             "object.__getattr__": on_getattr, "object.__setattr__": on_setattr, "compile": on_compile,
             "code.__new__": on_code_new, "marshal.loads": on_marshal, "marshal.load": on_marshal, "exec": on_exec, "gc.get_objects": on_heap,
             "gc.get_referrers": on_heap, "gc.get_referents": on_heap, "sys.settrace": on_trace,
             "sys.setprofile": on_trace, "sys.monitoring.register_callback": on_trace,
             "sys.addaudithook": on_trace, "import": on_import, "open": on_open, "deepgym.sealed": on_sealed}
    table.update((event, on_raw) for event in _CTYPES_EVENTS)

    watched = _FRAME_ATTRS | {"__code__"}

    def hook(event, args):
        check = table.get(event)
        if check is None or (check is on_getattr and args[1] not in watched):
            return
        me = get_ident()
        if me in busy:
            return
        busy.add(me)
        try:
            check(event, args, getframe(1))
        finally:
            busy.discard(me)

    state["hook"] = hook
    return state
