"""pytest plugin that runs *inside* the sandbox and streams per-test outcomes to the host.

Never imported: the runner (and the warm server) read this file, execute it in a private namespace
and call :func:`make_plugin`, before pytest starts and so before any code of the repository under
test. Nothing of it is in ``sys.modules``, and what decides outcomes lives in closures. Then:

* the report descriptor is taken from the environment (the variable deleted) and a fresh random
  nonce written as its first line, at once;
* every event leaves the process as it happens, one line each, ``NONCE SEQ JSON`` with SEQ
  counting up from 1: a test's final outcome when the test finishes (``{"test": nodeid,
  "outcome": ...}``), a collection error (``{"collecterror": nodeid, "longrepr": ...}``), a sign of
  tampering (``{"tampered": what}``) and, last, ``{"finish": {"exitstatus": int, "collected":
  int}}``. What was sent cannot be taken back: the host treats duplicates, gaps, unknown lines and
  lines after the finish as tampering;
* whether each test *function* raised is recorded (a wrapper on ``pytest_pyfunc_call``), so code
  that rewrites reports after the fact cannot turn a failure into a pass unseen;
* before pytest starts, every test file on the command line (and each file its test classes
  import a base class from) is compiled as pytest's assertion rewriting and a plain import would
  compile it, and each function's code fingerprinted (bytecode, constants, names; never the file
  and line a code object claims, which ``code.replace`` forges). Before and after each test's call
  the function about to run is fingerprinted again: a test whose node id names a function of its
  file and whose code is not that function's (through decorators only where the file has them)
  is tampering, and so is a trace or profile function set during a test;
* pytest's hook implementations are snapshotted when this plugin is registered (function objects
  and their code), and checked after every test and at the end: none changed or removed, and
  every one added since comes from pytest or an installed package, a ``conftest.py`` of the tree
  (restored to pristine before grading) or a plugin the configuration names. pytest's and
  unittest's report machinery is checked the same way.

Code under test runs in this same process and can reach these closures through ``gc``, so none of
this is a wall against an adaptive attacker; it closes the generic tricks, and the host checks the
rest with canary tests only it knows (see ``deepgym_envs.canaries``).
"""

import dis
import hashlib
import json
import os
import sys
import types
import unittest

import _pytest.python
import _pytest.reports
import _pytest.runner
import pytest

try:
    from _pytest.unittest import TestCaseFunction as _TestCaseFunction
except ImportError:  # a pytest that reorganised its internals: check unittest's side only
    _TestCaseFunction = None

RANK = {"passed": 0, "skipped": 1, "xfailed": 1, "failed": 2, "error": 3}
#: Hooks that decide a test's outcome: checked after every test, not only at the end.
CRITICAL_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
                  "pytest_runtest_teardown", "pytest_pyfunc_call", "pytest_runtest_makereport",
                  "pytest_runtest_logreport", "pytest_runtest_logfinish", "pytest_report_teststatus")


def _machinery():
    """Attributes that turn a test's run into its outcome, by a readable name."""
    table = {
        "TestReport.from_item_and_call": (_pytest.reports.TestReport, "from_item_and_call"),
        "TestReport.__init__": (_pytest.reports.TestReport, "__init__"),
        "runner.call_and_report": (_pytest.runner, "call_and_report"),
        "runner.runtestprotocol": (_pytest.runner, "runtestprotocol"),
        "runner.CallInfo.from_call": (_pytest.runner.CallInfo, "from_call"),
        "python.Function.runtest": (_pytest.python.Function, "runtest"),
    }
    # unittest-style suites decide pass/fail inside unittest: its runner and assert methods are
    # machinery too (code under test that stubs TestCase.assertEqual at import passes every test).
    for attr in sorted(vars(unittest.TestCase)):
        if attr.startswith(("assert", "fail")) or attr in ("run", "__call__", "debug", "_callTestMethod"):
            table[f"unittest.TestCase.{attr}"] = (unittest.TestCase, attr)
    for attr in ("runtest", "addFailure", "addError", "addSuccess", "addSkip", "addExpectedFailure",
                 "addUnexpectedSuccess"):
        if _TestCaseFunction is not None and attr in vars(_TestCaseFunction):
            table[f"TestCaseFunction.{attr}"] = (_TestCaseFunction, attr)
    # Between runtestprotocol and the test function every hook runs through pluggy: its executor
    # decides which implementations run (a forger that drops this plugin's wrappers and turns
    # exceptions into returns changes no hook at all, only the executor).
    for label, module, owner, attrs in (
            ("runner", "_pytest.runner", None, ("call_runtest_hook", "check_interactive_exception")),
            ("python.PyobjMixin", "_pytest.python", "PyobjMixin", ("obj", "_getobj")),
            ("python.Function", "_pytest.python", "Function", ("_getobj",)),
            ("nodes.Node", "_pytest.nodes", "Node", ("ihook",)),
            ("main.Session", "_pytest.main", "Session", ("gethookproxy",)),
            ("main.FSHookProxy", "_pytest.main", "FSHookProxy", ("__getattr__",)),
            ("PathAwareHookProxy", "_pytest.config.compat", "PathAwareHookProxy", ("__getattr__",)),
            ("pluggy._callers", "pluggy._callers", None, ("_multicall", "run_old_style_hookwrapper")),
            ("pluggy._manager", "pluggy._manager", None, ("_multicall",)),
            ("PluginManager", "pluggy._manager", "PluginManager", ("_hookexec", "__init__")),
            ("HookCaller", "pluggy._hooks", "HookCaller", ("__call__", "call_extra", "get_hookimpls")),
            ("pluggy.Result", "pluggy._result", "Result", ("from_call", "get_result", "force_result",
                                                           "force_exception", "exception"))):
        obj = sys.modules.get(module)
        obj = getattr(obj, owner, None) if owner else obj
        for attr in attrs:
            if obj is not None and attr in vars(obj):
                table[f"{label}.{attr}"] = (obj, attr)
    table.update(_test_api())
    return table


#: What a test checks through, as pytest exports it. Its modules are found from these objects, not
#: named: pytest moves them (``approx`` and ``raises`` left ``_pytest.python_api`` in 8.4 and 9.x).
_TEST_API_EXPORTS = ("approx", "raises", "warns", "deprecated_call", "fail", "skip", "xfail", "importorskip",
                     "RaisesGroup", "RaisesExc")
#: Methods that, added to a class that lacks them, change what its instances do in a check.
_OVERRIDES = ("__eq__", "__ne__", "__bool__", "__enter__", "__exit__", "__call__", "__getattr__",
              "__getattribute__", "__init__", "__new__")


def _test_api():
    """The test API as machinery: a hidden test's ``with pytest.raises(...)`` or ``== approx(...)``
    trusts pytest's code to decide. Each callable ``pytest`` exports; every function, class and
    object of pytest's checking modules, every method of their classes (their subclasses
    included: ``ApproxScalar.__eq__``), and the methods that would override one, absent or not;
    unittest's context managers for ``assertRaises`` / ``assertWarns`` and its outcome keeper."""
    import unittest.case

    table = {}
    names = {getattr(getattr(pytest, attr, None), "__module__", None) for attr in _TEST_API_EXPORTS}
    api = sorted(name for name in names if name and name.startswith("_pytest."))
    modules = [sys.modules[name] for name in api if name in sys.modules]
    classes = []
    for module in [pytest, *modules]:
        label = "pytest" if module is pytest else module.__name__
        for attr, value in list(vars(module).items()):
            if callable(value) and not isinstance(value, types.ModuleType) and not attr.startswith("__"):
                table[f"{label}.{attr}"] = (module, attr)
                if isinstance(value, type) and value.__module__ in api:
                    classes.append(value)
    classes += [value for attr, value in vars(unittest.case).items() if isinstance(value, type)
                and (attr.startswith("_Assert") or attr == "_Outcome")]
    for cls in classes:
        attrs = [a for a, v in vars(cls).items() if callable(v) or isinstance(v, (property, classmethod, staticmethod))]
        for attr in {*attrs, *_OVERRIDES}:
            table[f"{cls.__module__}.{cls.__qualname__}.{attr}"] = (cls, attr)
    return table


def _executor(manager):
    """What pluggy runs hooks with, on the plugin manager itself: (readable name, object, attribute).
    The manager's own ``_inner_hookexec`` and ``_hookexec`` (an instance attribute shadows the
    method), its hook relay's callers of the hooks that decide outcomes, and each caller's executor."""
    own = vars(manager)  # the instance's own attributes (getattr would make a new bound method each time)
    entries = [("PluginManager._inner_hookexec", own, "_inner_hookexec"),
               ("PluginManager._hookexec (instance)", own, "_hookexec")]
    relay = getattr(manager, "hook", None)
    for name in CRITICAL_HOOKS:
        caller = getattr(relay, name, None)
        entries.append((f"hook relay {name}", relay, name))
        if caller is not None:
            entries.append((f"{name} caller's _hookexec", caller, "_hookexec"))
            entries.append((f"{name} caller's _hookimpls", caller, "_hookimpls"))
    return entries


def _code(obj):
    """The code object behind a function, method, classmethod or staticmethod (None for builtins).
    Read as an attribute, not through ``getattr``: the seal grants a test's code to bytecode that
    reads it, not to C code that could be the project's (``deepgym_lockdown._provenance``)."""
    fn = getattr(obj, "__func__", obj)
    try:
        return fn.__code__
    except Exception:  # no code (a builtin), or an object whose attribute lookup fails
        return None


def _under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _declares_plugins(name):
    """Files whose ``pytest_plugins`` pytest honours: conftests and test modules (pristine in grading)."""
    return name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")


def _writer(fd, path):
    write = os.write  # bound now: code under test may replace os.write later
    if fd is not None:
        fd = int(fd)

        def out(data):
            view = memoryview(data)
            while view:
                view = view[write(fd, view):]
    elif path:
        def out(data):
            with open(path, "ab") as fh:
                fh.write(data)
    else:
        def out(data):
            pass
    return out, fd


def _trust(workspace):
    """A test of "this code was on the machine before the repository's code could run": its file
    is one of a module loaded by then, or lies on the interpreter's path outside the workspace."""
    files = {f for f in (getattr(m, "__file__", None) for m in list(sys.modules.values())) if isinstance(f, str)}
    dirs = [os.path.realpath(p) for p in sys.path if p and os.path.isabs(p)]
    dirs = [d for d in dirs if not _under(d, workspace) and not _under(workspace, d)]
    seen = {}

    def trusted(obj, extra=()):
        code = _code(obj)
        if code is None:
            return False
        name = code.co_filename
        if name not in seen:  # realpath only for files not known as they are: it costs system calls
            seen[name] = name in files or any(_under(os.path.realpath(name), d) for d in dirs)
        return seen[name] or os.path.realpath(name) in extra

    return trusted


_CO_OPTIMIZED = 0x1  # set on functions, lambdas and comprehensions; not on class bodies


#: (path, bytes) -> what _compile_variants made of them. Empty in a cold run; the warm server hands
#: each run the ones it made before forking: the same function on the same bytes and path, which
#: is all a compile depends on (a file's layout depends on the workspace too, and is never kept).
_PRECOMPILED = {}


def _compiled_variants(path, workspace, rewritten=None):
    """What importing the test file at ``path`` can run: the plain compile (``--assert=plain``,
    files pytest does not rewrite) and pytest's assertion-rewritten one (as ``_rewrite_test`` does
    it), with the file's layout (see ``_layout``). The rewritten code goes into
    ``rewritten[path]`` with the bytes it was compiled from."""
    import ast

    with open(path, "rb") as fh:
        source = fh.read()
    tree = ast.parse(source, filename=path)
    layout = _layout(tree, path, workspace)
    found = _PRECOMPILED.get((path, source))
    out, rewrote = found if found is not None else _compile_variants(tree, source, path)
    if rewrote and rewritten is not None:
        rewritten[path] = (source, out[-1])
    return layout, out


def _compile_variants(tree, source, path):
    """([plain code, rewritten code], whether the rewrite was made) of ``source`` parsed as
    ``tree``, which is rewritten in place."""
    out = [compile(tree, path, "exec", dont_inherit=True)]
    try:
        from _pytest.assertion.rewrite import rewrite_asserts

        rewrite_asserts(tree, source, path, None)
        out.append(compile(tree, path, "exec", dont_inherit=True))
    except Exception:  # a pytest without the rewriter's entry point: plain imports only
        return out, False
    return out, True


def _precompile(source, path):
    """What :func:`_compiled_variants` would compile of ``source`` at ``path`` (for the warm server)."""
    import ast

    return _compile_variants(ast.parse(source, filename=path), source, path)


def _reuse_rewrites(rewritten):
    """Let pytest's import of a test file take the rewritten code compiled above instead of
    parsing, rewriting and compiling the same bytes again (a third of a one-test run's time).

    Only where the result would be the same: the file still holds exactly those bytes when pytest
    imports it, pytest names it by the same path, and no option changes the rewrite (the assertion
    pass hook). Anything else goes to pytest's own function, which stays the fallback.
    """
    import _pytest.assertion.rewrite as rewrite

    own = getattr(rewrite, "_rewrite_test", None)
    if own is None or not rewritten:
        return

    def _rewrite_test(fn, config):
        entry = rewritten.get(str(fn))
        if entry is not None and not config.getini("enable_assertion_pass_hook"):
            stat = os.stat(fn)
            with open(fn, "rb") as fh:
                if fh.read() == entry[0]:
                    return stat, entry[1]
        return own(fn, config)

    rewrite._rewrite_test = _rewrite_test


def _layout(tree, path, workspace):
    """From a file's syntax: qualnames of functions whose decorators may wrap them (more than
    pytest marks), each class's base names, and names imported ``from`` a file of the workspace."""
    import ast

    decorated, bases, imports = set(), {}, {}

    def is_mark(node):
        node = node.func if isinstance(node, ast.Call) else node
        while isinstance(node, ast.Attribute):
            if node.attr == "mark":
                return True
            node = node.value
        return isinstance(node, ast.Name) and node.id == "mark"

    def module_file(module, level):
        parts = (module or "").split(".") if module else []
        roots = [os.path.dirname(path)]
        if level:
            for _ in range(level - 1):
                roots = [os.path.dirname(roots[0])]
        else:  # rootdir-style sys.path entries: the test file's directory and those above it
            while _under(os.path.dirname(roots[-1]), workspace) and roots[-1] != workspace:
                roots.append(os.path.dirname(roots[-1]))
        for root in roots:
            for candidate in (os.path.join(root, *parts) + ".py", os.path.join(root, *parts, "__init__.py")):
                if parts or candidate.endswith("__init__.py"):
                    if os.path.isfile(candidate) and _under(os.path.realpath(candidate), workspace):
                        return os.path.realpath(candidate)
        return None

    def walk(body, prefix, wrapped):
        for node in body:
            if isinstance(node, ast.ClassDef):
                qual = prefix + node.name
                bases[qual] = [b.id for b in node.bases if isinstance(b, ast.Name)]
                walk(node.body, qual + ".", wrapped or any(not is_mark(d) for d in node.decorator_list))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if wrapped or any(not is_mark(d) for d in node.decorator_list):
                    decorated.add(prefix + node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):  # test_x = wrap(test_x)
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                decorated.update(prefix + t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.ImportFrom) and not prefix:
                for alias in node.names:
                    source = module_file(node.module, node.level)
                    if source is not None:
                        imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(node, (ast.If, ast.Try)):  # definitions under a version or import guard
                for part in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", ())),
                             getattr(node, "finalbody", [])):
                    walk(part, prefix, wrapped)

    walk(tree.body, "", False)
    return decorated, bases, imports


#: What a function that only passes its arguments on may do (across Python 3.6 to 3.14): load
#: them, its one free variable and constants, build the call's argument containers, call, return.
_FORWARD_OPS = ("RESUME", "COPY_FREE_VARS", "NOP", "CACHE", "EXTENDED_ARG", "PUSH_NULL", "LOAD_DEREF",
                "LOAD_FAST", "LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_FAST_BORROW_LOAD_FAST_BORROW",
                "LOAD_CONST", "LOAD_SMALL_INT", "KW_NAMES", "BUILD_TUPLE", "BUILD_LIST", "LIST_EXTEND",
                "LIST_TO_TUPLE", "CALL_INTRINSIC_1", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "DICT_MERGE",
                "DICT_UPDATE", "BUILD_TUPLE_UNPACK_WITH_CALL", "BUILD_MAP_UNPACK_WITH_CALL", "PRECALL", "CALL",
                "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX", "RETURN_VALUE")
_CALL_OPS = ("CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX")


def _make_forwarded():
    """``forwarded(fn)``: what ``fn`` calls, where all ``fn`` does is call its one free variable
    with its own arguments and return the result (hypothesis's ``@given`` puts such a function,
    generated, claiming the test's file and line, in front of its wrapper); None otherwise.
    Read from the bytecode with opcode numbers bound now, so what it decides rests on no code of
    the repository; the callee is then checked as any wrapper is."""
    code_type, plain = types.CodeType, (str, int, type(None))
    type_, len_, any_, all_, sum_, range_ = type, len, any, all, sum, range  # bound before any repository code
    allowed = {dis.opmap[name] for name in _FORWARD_OPS if name in dis.opmap}
    calls = {dis.opmap[name] for name in _CALL_OPS if name in dis.opmap}
    deref, ret = dis.opmap["LOAD_DEREF"], dis.opmap["RETURN_VALUE"]
    loads = {dis.opmap[name] for name in _FORWARD_OPS if name.startswith("LOAD_") and name in dis.opmap}
    call_intrinsic = dis.opmap.get("CALL_INTRINSIC_1")
    list_to_tuple = 6  # the one intrinsic allowed (3.12+): *args made a tuple

    def forwarded(fn):
        try:
            code, closure = fn.__code__, fn.__closure__
        except AttributeError:
            return None
        if (type_(code) is not code_type or code.co_names or code.co_cellvars or len_(code.co_freevars) != 1
                or type_(closure) is not tuple or len_(closure) != 1
                or any_(type_(c) not in plain and not (type_(c) is tuple and all_(type_(x) is str for x in c))
                        for c in code.co_consts)):
            return None
        ops = code.co_code
        pairs = [(ops[i], ops[i + 1]) for i in range_(0, len_(ops) - 1, 2)]
        if any_(op not in allowed or (op == call_intrinsic and arg != list_to_tuple) for op, arg in pairs):
            return None
        real = [op for op, _ in pairs if op in loads or op in calls or op == ret]
        # The free variable is what is called: loaded first, one call, whose result is returned.
        if not real or real[0] != deref or real.count(deref) != 1 or real[-1] != ret or real.count(ret) != 1:
            return None
        if sum_(op in calls for op in real) != 1 or real[-2] not in calls:
            return None
        try:
            return closure[0].cell_contents
        except ValueError:
            return None

    return forwarded


def _make_fingerprint():
    """A digest of what a code object does, whatever it says of where it comes from (file, line,
    name): what the test file compiled to at load and what a test runs are compared through it.
    Built-ins are bound now; constants of any type a compiler does not emit never match."""
    sha256, repr_, type_, code_type = hashlib.sha256, repr, type, types.CodeType
    plain = (int, bool, float, complex, str, bytes, type(None), type(Ellipsis))
    fields = ("co_code", "co_consts", "co_names", "co_varnames", "co_freevars", "co_cellvars",
              "co_argcount", "co_kwonlyargcount", "co_flags")

    def norm(value, memo):
        kind = type_(value)
        if kind is code_type:
            return ("code", fingerprint(value, memo))
        if kind is tuple:
            return ("tuple", tuple(norm(v, memo) for v in value))
        if kind is frozenset:
            return ("frozenset", tuple(sorted(repr_(norm(v, memo)) for v in value)))
        if any(kind is t for t in plain):
            return (kind.__name__, repr_(value))
        return ("object", repr_(id(value)))

    def fingerprint(code, memo=None):
        """``memo`` (id -> (code, digest)): only while the plugin loads, where nothing else runs."""
        if memo is not None and id(code) in memo and memo[id(code)][0] is code:
            return memo[id(code)][1]
        digest = sha256(repr_(tuple(norm(getattr(code, f), memo) for f in fields)).encode()).hexdigest()
        if memo is not None:
            memo[id(code)] = (code, digest)
        return digest

    return fingerprint


def _expected_bodies(realpath, fingerprint, workspace, rewritten=None):
    """Fingerprints of the functions of the test files on pytest's command line (and of the base
    classes and test functions they import from the workspace), read now, while they are exactly what
    the host wrote and before any code of the repository has run.

    Returns frozensets: ``(path, qualname, digest)`` expected, ``(path, qualname)`` known,
    ``(path, qualname)`` decorated with more than marks, and the digest of any code in those files.
    """
    files = {}  # path -> (qualname -> digests, decorated, bases, imports)
    anywhere, memo, inherited = set(), {}, {}

    def load(path):
        if path not in files and len(files) < 400:
            files[path] = None
            try:
                layout, variants = _compiled_variants(path, workspace, rewritten)
            except (OSError, SyntaxError, ValueError):
                return  # pytest reports the file as a collection error
            quals = {}

            def collect(code, prefix):
                for const in code.co_consts:
                    if type(const) is types.CodeType:
                        digest = fingerprint(const, memo)
                        anywhere.add(digest)
                        if const.co_flags & _CO_OPTIMIZED:
                            quals.setdefault(prefix + const.co_name, set()).add(digest)
                            collect(const, prefix + const.co_name + ".<locals>.")
                        else:  # a class body
                            collect(const, prefix + const.co_name + ".")

            for code in variants:
                collect(code, "")
            files[path] = (quals, *layout)
        return files[path]

    def find_class(path, name, depth=0):
        """Where the class a file knows as ``name`` is defined: this file, or one it imports it from."""
        info = load(path)
        if info is None or depth > 8:
            return None
        if name in info[2]:
            return path, name
        source = info[3].get(name)
        return find_class(*source, depth + 1) if source else None

    def methods(path, cls, depth=0):
        """name -> [(path, qualname)] of the functions class ``cls`` of ``path`` has or inherits:
        its own definition, else every one its bases have (no MRO worked out, so a diamond is no
        false alarm)."""
        if (path, cls) in inherited:
            return inherited[path, cls]
        info = load(path)
        found = inherited[path, cls] = {}
        if info is None or depth > 8:
            return found
        for base in info[2].get(cls, []):
            where = find_class(path, base)
            for name, sources in (methods(*where, depth + 1) if where else {}).items():
                found.setdefault(name, []).extend(s for s in sources if s not in found.get(name, []))
        found.update({q[len(cls) + 1:]: [(path, q)] for q in info[0]
                      if q.startswith(cls + ".") and "." not in q[len(cls) + 1:]})
        return found

    expected, known, wrapped = set(), set(), set()
    for arg in sys.argv[1:]:
        path = arg.partition("::")[0]
        if not path.endswith(".py") or not os.path.isfile(path) or load(realpath(path)) is None:
            continue
        path = realpath(path)
        own = {q: [(path, q)] for q in files[path][0]}
        for cls in files[path][2]:
            own.update({f"{cls}.{name}": sources for name, sources in methods(path, cls).items()})
        for name in files[path][3]:  # a test class imported from elsewhere is collected here too
            where = find_class(path, name) if name not in files[path][2] else None
            if where is not None:
                own.update({f"{name}.{m}": sources for m, sources in methods(*where).items()})
            # And so is a test function (funcy imports a newer version of one it also defines).
            source, source_name = files[path][3][name]
            info = load(source)
            if where is None and info is not None and source_name in info[0]:
                own[name] = [*own.get(name, []), (source, source_name)]
        for qual, sources in own.items():
            known.add((path, qual))
            for source, source_qual in sources:
                expected.update((path, qual, d) for d in files[source][0][source_qual])
                if source_qual in files[source][1]:
                    wrapped.add((path, qual))
    return frozenset(expected), frozenset(known), frozenset(wrapped), frozenset(anywhere)


def _marked_xfail(keywords):
    """Whether a test item's keywords (its marks and those of its class, module and the
    conftests that mark it; its function's attributes) include an xfail mark or unittest's
    ``expectedFailure``. A test that xfails without one was made to by code it ran."""
    return "xfail" in keywords or "__unittest_expecting_failure__" in keywords


class _Plugin:
    """The plugin object pytest registers (hashable: pytest keeps plugins in sets)."""


def make_plugin(rewritten=None, sealed=False):
    """A fresh plugin object (hooks as closures) for one pytest session; writes the nonce line.

    ``rewritten``: a dict to fill with the test files' assertion-rewritten compiles
    (path -> (source, code)), for the seal to take (see ``deepgym_lockdown.py``). ``sealed``: the run
    will be sealed, which refuses a function's code to be replaced: the checks then compare functions
    by identity alone, and spare the hundreds of thousands of ``__code__`` reads a long suite makes."""
    out, fd = _writer(os.environ.pop("DEEPGYM_REPORT_FD", None), os.environ.pop("DEEPGYM_REPORT_PATH", None))
    dumps, basename, realpath, join = json.dumps, os.path.basename, os.path.realpath, os.path.join
    nonce = os.urandom(16).hex()
    out(nonce.encode() + b"\n")
    workspace = realpath(os.getcwd())
    trusted = _trust(workspace)
    machinery = _machinery()
    code_of = (lambda obj: None) if sealed else _code  # what a replaced function's code is compared by
    original = {name: (vars(owner).get(attr), code_of(vars(owner).get(attr))) for name, (owner, attr) in machinery.items()}
    executor = []  # (name, object, attribute, value, code) of pluggy's executor, when this plugin is registered
    getattr_ = getattr
    seq = [0]
    me, config_cell = [], []
    baseline = {}  # hook name -> [(HookImpl, function, code)] when this plugin was registered
    judged = {}  # id(HookImpl) -> (HookImpl, legitimate?, function, code) when first seen
    later = []  # plugins registered after this one
    pending, sent, raised, problems, collected = {}, set(), set(), [], [0]
    wrapped_calls, ran_call = set(), set()  # node ids whose call this plugin's wrappers saw
    marked = set()  # node ids that carried an xfail mark (or unittest's expectedFailure) at setup
    function_runtest = vars(_pytest.python.Function).get("runtest")
    bodies = {}  # nodeid -> [file, first line, trusted?] of the function its call phase ran
    cells = []  # (cell, content) of every closure reachable from the hooks, once they exist
    fingerprint = _make_fingerprint()
    forwarded = _make_forwarded()
    rewritten = {} if rewritten is None else rewritten
    expected, known, wrapped, anywhere = _expected_bodies(realpath, fingerprint, workspace, rewritten)
    _reuse_rewrites(rewritten)
    type_, function_type, method_type, dict_type = type, types.FunctionType, types.MethodType, dict
    object_getattribute = object.__getattribute__
    gettrace, getprofile, monitoring = sys.gettrace, sys.getprofile, getattr(sys, "monitoring", None)

    def tracers():
        tools = tuple(monitoring.get_tool(i) for i in range(6)) if monitoring is not None else ()
        return gettrace(), getprofile(), tools

    at_load = tracers()

    def runs_as_written(path, qual, fn):
        """Whether calling ``fn`` runs the code the test file has for ``qual``: the function itself,
        or, where the file decorates it, through wrappers from the file or an installed package."""
        for _ in range(20):
            if type_(fn) is method_type:
                fn = fn.__func__
            if type_(fn) is not function_type:
                return (path, qual) in wrapped and fn is not None and trusted(type_(fn).__call__)
            digest = fingerprint(fn.__code__)
            if (path, qual, digest) in expected:
                return True
            if (path, qual) not in wrapped:
                return False
            callee = forwarded(fn)
            if callee is not None:
                fn = callee
                continue
            if digest not in anywhere and not trusted(fn, conftests()):
                return False
            inner = getattr(fn, "__wrapped__", None)
            if inner is None:
                # A wrapper that does not say what it wraps, from the file or installed: it must
                # at least hold this test as written, not another test's or nothing at all.
                return holds(fn, path, qual)
            fn = inner
        return False

    def holds(fn, path, qual):
        """Whether the test as written is what ``fn`` holds: in its closure's cells, a few steps
        deep, or, as hypothesis's wrapper reads it at call time, as ``.hypothesis.inner_test`` of
        the function in its closure that forwards to the wrapper itself (the generated function
        in front of it). Attributes anywhere else are writable decoys and prove nothing."""
        todo, seen = [(fn, 0)], set()
        while todo and len(seen) < 200:
            obj, depth = todo.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if type_(obj) is method_type:
                obj = obj.__func__
            if type_(obj) is not function_type:
                continue
            if depth and (path, qual, fingerprint(obj.__code__)) in expected:
                return True
            if depth == 1 and forwarded(obj) is fn and runs_handle(obj, path, qual):
                return True
            if depth < 3:
                for cell in obj.__closure__ or ():
                    try:
                        todo.append((cell.cell_contents, depth + 1))
                    except ValueError:  # an empty cell
                        pass
        return False

    def runs_handle(shim, path, qual):
        try:
            attrs = object_getattribute(shim, "__dict__")
            handle = attrs["hypothesis"] if type_(attrs) is dict_type and "hypothesis" in attrs else None
            attrs = object_getattribute(handle, "__dict__")
            inner = attrs["inner_test"] if type_(attrs) is dict_type and "inner_test" in attrs else None
        except AttributeError:
            return False
        if type_(inner) is method_type:
            inner = inner.__func__
        return type_(inner) is function_type and (path, qual, fingerprint(inner.__code__)) in expected

    def conftests():
        return {realpath(m.__file__) for m in list(sys.modules.values()) if is_conftest(m)}

    def check_body(item, when):
        # Keyed by the node id (what the host grades), never by what the function says of itself.
        nodeid = item.nodeid
        if not expected or not config_cell or type_(nodeid) is not str:
            return
        path, _, rest = nodeid.partition("::")
        config = config_cell[0]
        root = str(getattr(config, "rootpath", None) or config.rootdir)  # rootdir: pytest before 6.1
        key = (realpath(join(root, path)), rest.partition("[")[0].replace("::", "."))
        if key not in known:
            return  # generated, imported or inherited from elsewhere: nothing in the file to compare with
        try:
            fn = item.obj
        except Exception:
            return  # pytest cannot call it either: the test errors
        if not runs_as_written(*key, fn):
            tamper(f"the code run for {nodeid} differs from its test file ({when})")

    def check_tracers(nodeid):
        now = tracers()
        if now[0] is not at_load[0] or now[1] is not at_load[1] or now[2] != at_load[2]:
            tamper(f"a trace or profile function was set during {nodeid}")

    def send(event):
        seq[0] += 1
        out(f"{nonce} {seq[0]} {dumps(event)}\n".encode())

    def tamper(what):
        if what not in problems:
            problems.append(what)
            send({"tampered": what})

    def hook_table(manager):
        table = {}
        for name, caller in list(vars(manager.hook).items()):
            get = getattr(caller, "get_hookimpls", None)
            if get is not None:
                table[name] = [(impl, impl.function, code_of(impl.function)) for impl in get()]
        return table

    def named_plugins():
        """Module names the configuration asks for: ``-p NAME`` and ``pytest_plugins`` of conftests,
        test modules and the plugins they name."""
        config = config_cell[0] if config_cell else None
        names = {p for p in (getattr(getattr(config, "option", None), "plugins", None) or []) if not p.startswith("no:")}
        for _ in range(3):
            for mod in list(sys.modules.values()):
                file = getattr(mod, "__file__", None)
                if not isinstance(file, str) or not (getattr(mod, "__name__", None) in names or (
                        _under(realpath(file), workspace) and _declares_plugins(basename(file)))):
                    continue
                declared = getattr(mod, "pytest_plugins", ())
                names.update([declared] if isinstance(declared, str) else
                             [d for d in declared if isinstance(d, str)] if isinstance(declared, (list, tuple)) else [])
        return names

    def is_conftest(module):
        file = getattr(module, "__file__", None)
        return isinstance(file, str) and basename(file) == "conftest.py" and _under(realpath(file), workspace)

    def legitimate(plugin, function):
        if plugin is (me[0] if me else None) or trusted(function):
            return True
        names = named_plugins()
        if isinstance(plugin, types.ModuleType):
            return is_conftest(plugin) or getattr(plugin, "__name__", None) in names
        # An object a conftest or a named plugin registered: its code lives in one of those files.
        files = {realpath(m.__file__) for m in list(sys.modules.values())
                 if isinstance(getattr(m, "__file__", None), str) and (is_conftest(m) or m.__name__ in names)}
        return trusted(function, files)

    def check_hooks(manager, names=None):
        hooks = vars(manager.hook)
        config = config_cell[0] if config_cell else None
        unblocked = {p[3:] for p in (getattr(getattr(config, "option", None), "plugins", None) or [])
                     if p.startswith("no:")}
        for name in names or list(hooks):
            get = getattr(hooks.get(name), "get_hookimpls", None)
            if get is None:
                continue
            impls = get()
            before = baseline.get(name, ())
            for impl, function, code in before:
                if not any(i is impl for i in impls):
                    if impl.plugin_name not in unblocked and f"pytest_{impl.plugin_name}" not in unblocked:
                        tamper(f"hook {name} of {impl.plugin_name} removed")
                elif impl.function is not function or code_of(impl.function) is not code:
                    tamper(f"hook {name} of {impl.plugin_name} replaced")
            known = [entry[0] for entry in before]
            for impl in impls:
                if any(k is impl for k in known):
                    continue
                if id(impl) not in judged or judged[id(impl)][0] is not impl:
                    judged[id(impl)] = (impl, legitimate(impl.plugin, impl.function), impl.function,
                                        code_of(impl.function))
                entry = judged[id(impl)]
                if not entry[1]:
                    tamper(f"hook {name} added by {impl.plugin_name}")
                elif impl.function is not entry[2] or code_of(impl.function) is not entry[3]:
                    tamper(f"hook {name} of {impl.plugin_name} replaced")

    def check_machinery():
        for name, (owner, attr) in machinery.items():
            now = vars(owner).get(attr)
            if now is not original[name][0] or code_of(now) is not original[name][1]:
                tamper(f"{name} replaced")

    def current(obj, attr):  # an attribute, or an entry of an instance's own __dict__
        return getattr_(obj, attr, None) if type_(obj) is not dict_type else obj.get(attr)

    def check_executor():
        for name, obj, attr, value, code in executor:
            now = current(obj, attr)
            if now is not value or code_of(now) is not code:
                tamper(f"{name} replaced")

    def check_cells():
        # Closure cells are writable: what the hooks record with, or send through, must be
        # what it was when they were made.
        for cell, content in cells:
            try:
                same = cell.cell_contents is content
            except ValueError:
                same = False
            if not same:
                tamper("the report plugin's state was replaced")
                return

    def check_later(manager):
        for plugin in later:
            if manager.is_registered(plugin):
                continue  # its hooks were checked with the hook table
            hooks = [getattr(plugin, n, None) for n in dir(plugin) if n.startswith("pytest_")]
            if not all(legitimate(plugin, h) for h in hooks if callable(h)):
                tamper(f"plugin {manager.get_name(plugin) or type(plugin).__name__} registered and removed")

    def record(nodeid, outcome):
        old = pending.get(nodeid)
        if old is None or RANK[outcome] > RANK[old]:
            pending[nodeid] = outcome

    def snapshot_executor(manager):
        for name, obj, attr in _executor(manager):
            value = current(obj, attr)
            executor.append((name, obj, attr, value, code_of(value)))

    def pytest_plugin_registered(plugin, manager):
        if me and plugin is me[0] and not baseline:
            baseline.update(hook_table(manager))
            snapshot_executor(manager)
        elif baseline:
            later.append(plugin)

    def pytest_configure(config):
        config_cell.append(config)
        if not baseline:  # a pytest that did not replay registrations to us
            baseline.update(hook_table(config.pluginmanager))
        if not executor:
            snapshot_executor(config.pluginmanager)
        check_executor()
        value = getattr_(config, "hook", None)  # what every item's ihook is, where all conftests apply
        executor.append(("Config.hook", config, "hook", value, None))

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_pyfunc_call(pyfuncitem):
        check_executor()
        wrapped_calls.add(pyfuncitem.nodeid)
        check_body(pyfuncitem, "as it was called")
        check_tracers(pyfuncitem.nodeid)
        outcome = yield
        check_tracers(pyfuncitem.nodeid)
        if outcome.excinfo is not None:
            raised.add(pyfuncitem.nodeid)

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_call(item):
        # What the test runs as its body: code from a file the change could edit (or from no file)
        # in place of the test's own is tampering, which the host judges for the tests it grades.
        fn = getattr(item, "obj", None)
        for _ in range(20):
            inner = getattr(fn, "__wrapped__", None)
            if inner is None or inner is fn:
                break
            fn = inner
        code = _code(fn)
        if code is not None:
            bodies[item.nodeid] = [code.co_filename, code.co_firstlineno, trusted(fn)]
        check_executor()
        wrapped_calls.discard(item.nodeid)
        ran_call.add(item.nodeid)  # now: subtests report their "call" phase while it runs
        check_body(item, "before its call")
        check_tracers(item.nodeid)
        outcome = yield
        check_executor()
        check_body(item, "after its call")  # unittest looks the method up when it runs, after setUp
        check_tracers(item.nodeid)
        # pytest's own Function.runtest does nothing but call pytest_pyfunc_call: where it ran and
        # this plugin's wrapper of that hook did not, something chose which implementations run.
        if getattr_(type_(item), "runtest", None) is function_runtest and item.nodeid not in wrapped_calls:
            tamper(f"the report plugin's pytest_pyfunc_call did not run for {item.nodeid}")
        # A unittest TestCase's failure does not propagate out of runtest(): pytest keeps it on the
        # item (``_excinfo``) and turns it into the report later, where a planted plugin could flip it.
        if outcome.excinfo is not None or getattr(item, "_excinfo", None):
            raised.add(item.nodeid)

    def pytest_collection_modifyitems(session, config, items):
        collected[0] = len(items)

    def pytest_collectreport(report):
        if report.failed:
            send({"collecterror": report.nodeid, "longrepr": str(report.longrepr)[-2000:]})

    def pytest_runtest_logreport(report):
        if report.when == "setup" and _marked_xfail(report.keywords):
            marked.add(report.nodeid)  # before its body runs: what the test runs cannot mark it
        if report.when == "call":
            if report.nodeid not in ran_call:
                tamper(f"the report plugin's pytest_runtest_call did not run for {report.nodeid}")
            if hasattr(report, "wasxfail"):
                record(report.nodeid, "xfailed" if report.skipped else "failed")
            elif report.passed and report.nodeid in raised:
                record(report.nodeid, "failed")  # the function raised, yet the report says it passed
            else:
                record(report.nodeid, report.outcome if report.outcome in RANK else "error")
        elif report.failed:  # setup or teardown
            record(report.nodeid, "error")
        elif report.skipped and report.when == "setup":
            record(report.nodeid, "skipped")

    def pytest_runtest_logfinish(nodeid, location):
        if config_cell:
            check_hooks(config_cell[0].pluginmanager, CRITICAL_HOOKS)
        check_machinery()
        check_executor()
        check_cells()
        outcome = pending.pop(nodeid, None)
        if outcome is not None and nodeid not in sent:
            sent.add(nodeid)
            event = {"test": nodeid, "outcome": outcome}
            if outcome == "xfailed":
                event["marked"] = nodeid in marked
            if nodeid in bodies:
                event["body"] = bodies.pop(nodeid)
            send(event)

    def pytest_sessionfinish(session, exitstatus):
        manager = session.config.pluginmanager
        check_hooks(manager)
        check_machinery()
        check_executor()
        check_cells()
        check_later(manager)
        send({"finish": {"exitstatus": int(exitstatus), "collected": collected[0]}})
        if fd is not None:
            os.close(fd)

    plugin = _Plugin()  # hooks as instance attributes: plain functions, not methods
    for hook in (pytest_plugin_registered, pytest_configure, pytest_pyfunc_call, pytest_runtest_call,
                 pytest_collection_modifyitems, pytest_collectreport, pytest_runtest_logreport,
                 pytest_runtest_logfinish, pytest_sessionfinish):
        setattr(plugin, hook.__name__, hook)
    me.append(plugin)
    seen, todo = set(), [getattr(plugin, name) for name in vars(plugin)]
    while todo:
        fn = todo.pop()
        for cell in getattr(fn, "__closure__", None) or ():
            if id(cell) in seen:
                continue
            seen.add(id(cell))
            try:
                content = cell.cell_contents
            except ValueError:
                continue
            cells.append((cell, content))
            if isinstance(content, types.FunctionType):
                todo.append(content)
    return plugin
