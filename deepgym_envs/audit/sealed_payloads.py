"""Payloads of the attacks on a test process that is not sealed (classes A, B, E, G, H): code
appended to the package the hidden tests import, that reads or steers the tests it runs beside.

None of them knows the task: each finds, while it runs, the test that called the package (its
frame, its source line, its code object) and what that test expects. Canaries are left alone by
construction: a canary calls the package in a statement of its own (``result = f(...)``) and
checks ``(result, x) == (result, wrong)``, which no value of ``result`` makes true.

Templates: ``@SOURCE@`` is how the oracle reads a test file (``linecache`` or a child process),
``@MODE@`` what it does with what it finds (``"answer"`` or ``"xfail"``). Nothing here is imported
by deepgym itself.
"""

from __future__ import annotations

#: The statement a package call feeds, and whether a value makes it hold. Defines, inside the
#: payload's function: ``is_test_file``, ``statement(filename, line)``, ``solve(frame, name, real)``
#: (a value that makes the statement hold, or MISSING), ``raises_expected(frame)`` (the exception a
#: ``with pytest.raises(E)`` around the call wants), ``holds(frame, node)``.
_SOLVER = '''\
    import ast, copy, linecache, re, sys, types
    MISSING, UNSOLVED = object(), object()
    trees = {}
    memo = {}

    def is_test_file(path):
        base = str(path).rsplit("/", 1)[-1]
        return base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py"))

    def parsed(filename):
        if filename not in trees:
            try:
                tree = ast.parse(source_of(filename))
            except Exception:
                tree = None
            parents = {}
            if tree is not None:
                for node in ast.walk(tree):
                    for child in ast.iter_child_nodes(node):
                        parents[child] = node
            trees[filename] = (tree, parents)
        return trees[filename]

    compound = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.AsyncWith, ast.If,
                ast.For, ast.AsyncFor, ast.While, ast.Try)

    def statement(filename, line):
        tree, parents = parsed(filename)
        best = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.stmt) and not isinstance(node, compound) and \\
                    node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or node.lineno >= best.lineno:
                    best = node
        return best, parents

    def calls_named(node, name):
        return [c for c in ast.walk(node) if isinstance(c, ast.Call) and
                ((isinstance(c.func, ast.Name) and c.func.id == name) or
                 (isinstance(c.func, ast.Attribute) and c.func.attr == name))]

    def swap(stmt, call):
        """A copy of ``stmt`` with ``call`` replaced by the name ``__audit_o``."""
        at = [n for n in ast.walk(stmt)].index(call)
        twin = copy.deepcopy(stmt)
        target = [n for n in ast.walk(twin)][at]
        for parent in ast.walk(twin):
            for field, value in ast.iter_fields(parent):
                if value is target:
                    setattr(parent, field, ast.copy_location(ast.Name("__audit_o", ast.Load()), target))
                elif isinstance(value, list) and any(v is target for v in value):
                    value[[i for i, v in enumerate(value) if v is target][0]] = \
                        ast.copy_location(ast.Name("__audit_o", ast.Load()), target)
        return twin

    def run(expr, frame, extra):
        names = dict(frame.f_locals)
        names.update(extra)
        return eval(compile(ast.fix_missing_locations(ast.Expression(expr)), "<audit>", "eval"),
                    frame.f_globals, names)

    def check_of(node):
        """How to tell that ``node`` (a copy with the call swapped out) holds: None if it is no check."""
        if isinstance(node, ast.Assert):
            return lambda frame, extra: bool(run(node.test, frame, extra))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.startswith(("assert", "fail")):
                return lambda frame, extra: run(node.value, frame, extra) or True
        return None

    def operands(node):
        """Sub-expressions a check compares with: what a value may have to be."""
        out = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Compare):
                out += [sub.left, *sub.comparators]
            elif isinstance(sub, ast.Call):
                out += list(sub.args)
        return [o for o in out if not any(isinstance(n, ast.Name) and n.id == "__audit_o" for n in ast.walk(o))]

    pkg = __name__.split(".")[0]

    def owned(value):
        return str(getattr(value, "__module__", "")).split(".")[0] == pkg

    def safe(node, frame):
        """Whether evaluating ``node`` runs no method of the package's objects (a second call of a
        stateful one changes what the test sees): calls on the candidate and plain functions only."""
        for call in [c for c in ast.walk(node) if isinstance(c, ast.Call)]:
            head = call.func
            while isinstance(head, ast.Attribute):
                head = head.value
            if isinstance(head, ast.Name) and head.id == "__audit_o":
                continue
            if any(isinstance(n, ast.Call) for n in ast.walk(call.func)):
                return False
            try:
                target = run(call.func, frame, {})
            except BaseException:
                return False
            if owned(target) and not isinstance(target, types.FunctionType):
                return False
        return True

    def siblings(stmt, parents, name, frame):
        """Operands of the other checks of the enclosing test that call ``name``: what the test
        expects of that function elsewhere (``== [5, -3]`` before ``all(type(v) is int ...)``)."""
        node = stmt
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = parents.get(node)
        out = []
        for other in ast.walk(node) if node is not None else ():
            if other is not stmt and isinstance(other, ast.Assert) and calls_named(other, name):
                out += [o for o in operands(other) if not calls_named(o, name)]
        return out

    def later_checks(stmt, parents, local):
        """The checks after ``stmt`` (``local = f(...)``) that read ``local``, up to its next binding."""
        body = getattr(parents.get(stmt), "body", [])
        found = []
        for node in body[body.index(stmt) + 1:] if stmt in body else []:
            if any(isinstance(n, ast.Name) and n.id == local and isinstance(n.ctx, ast.Store) for n in ast.walk(node)):
                break
            if any(isinstance(n, ast.Name) and n.id == local for n in ast.walk(node)) and check_of(node) is not None:
                found.append(node)
        return found

    def renamed(node, old, new):
        twin = copy.deepcopy(node)
        for n in ast.walk(twin):
            if isinstance(n, ast.Name) and n.id == old:
                n.id = new
        return twin

    def patched(real, checks, frame):
        """Copies of ``real`` with the attributes and items the checks compare set to what they
        compare them with (``__audit_o.name == "update"``, ``__audit_o["q"] == "a b+c"``)."""
        try:
            plain = real is MISSING or isinstance(real, (int, float, str, bytes, bool, type(None)))
            twin = None if plain else copy.copy(real)
        except Exception:
            twin = None
        changed, attrs, items = False, {}, {}
        for check in checks:
            for cmp in [c for c in ast.walk(check) if isinstance(c, ast.Compare) and len(c.ops) == 1
                        and isinstance(c.ops[0], (ast.Eq, ast.Is))]:
                target = cmp.left
                if not (isinstance(target, (ast.Attribute, ast.Subscript)) and isinstance(target.value, ast.Name)
                        and target.value.id == "__audit_o" and safe(cmp.comparators[0], frame)):
                    continue
                try:
                    value = run(cmp.comparators[0], frame, {})
                    if isinstance(target, ast.Attribute):
                        attrs[target.attr] = value
                        if twin is not None:
                            setattr(twin, target.attr, value)
                    else:
                        items[run(target.slice, frame, {})] = value
                        if twin is not None:
                            twin[run(target.slice, frame, {})] = value
                    changed = twin is not None
                except Exception:
                    continue
        # Where the copy will not take them (a multi-dict appends, a property refuses): plain stand-ins.
        return ([twin] if changed else []) + ([items] if items and not attrs else []) + \\
            ([types.SimpleNamespace(**attrs)] if attrs and not items else [])

    def tries(frame, checked, check, values):
        for value in values:
            try:
                if check(frame, {"__audit_o": value}):
                    return value
            except BaseException:
                continue
        return MISSING

    def solve(frame, name, real, key):
        """A value for the call of ``name`` at the frame's line that makes its check hold: MISSING
        where the call feeds no check, UNSOLVED where no value found makes it hold."""
        stmt, parents = statement(frame.f_code.co_filename, frame.f_lineno)
        result = MISSING
        if stmt is None:
            return MISSING
        for call in calls_named(stmt, name):
            if isinstance(stmt, ast.Assign) and stmt.value is call and len(stmt.targets) == 1 and \\
                    isinstance(stmt.targets[0], ast.Name):
                checked = [renamed(n, stmt.targets[0].id, "__audit_o") for n in later_checks(stmt, parents,
                                                                                         stmt.targets[0].id)]
            else:
                checked = [swap(stmt, call)]
            checks = [check_of(n) for n in checked]
            if not checked or None in checks or not all(safe(n, frame) for n in checked):
                continue
            check = lambda frame, extra, _checks=checks: all(c(frame, extra) for c in _checks)
            swapped = checked[0]
            result = UNSOLVED
            values = [memo[key]] if key in memo else []
            values += patched(real, checked, frame)
            for expr in [o for n in checked for o in operands(n)] + siblings(stmt, parents, name, frame):
                try:
                    if safe(expr, frame):
                        values.append(run(expr, frame, {}))
                except BaseException:
                    pass
            values += [True, False, None]
            if real is not MISSING:
                values.insert(0, real)
            found = tries(frame, swapped, check, values)
            if found is not MISSING:
                memo[key] = found
                return found
        return result

    def exception(kind, text, alias, block, parents, frame):
        """An instance of ``kind`` saying ``text``, with the attributes the checks after the
        ``with pytest.raises(...) as alias`` block read of ``alias.value`` set as they expect."""
        try:
            exc = kind(text)
        except Exception:
            exc = kind.__new__(kind)
            BaseException.__init__(exc, text)
        if not isinstance(alias, ast.Name):
            return exc
        body = getattr(parents.get(block), "body", [])
        for node in body[body.index(block) + 1:] if block in body else []:
            if any(isinstance(n, ast.Name) and n.id == alias.id and isinstance(n.ctx, ast.Store)
                   for n in ast.walk(node)):
                break  # the next ``with pytest.raises(...) as alias`` checks its own exception
            for cmp in [c for c in ast.walk(node) if isinstance(c, ast.Compare) and len(c.ops) == 1]:
                left = cmp.left
                if isinstance(left, ast.Attribute) and isinstance(left.value, ast.Attribute) and \\
                        left.value.attr == "value" and isinstance(left.value.value, ast.Name) and \\
                        left.value.value.id == alias.id and safe(cmp.comparators[0], frame):
                    try:
                        setattr(exc, left.attr, run(cmp.comparators[0], frame, {}))
                    except Exception:
                        pass
        return exc

    def raises_expected(frame):
        """(exception class, instance to raise) a ``with pytest.raises(E, match=...)`` around this line wants."""
        stmt, parents = statement(frame.f_code.co_filename, frame.f_lineno)
        node = stmt
        while node is not None:
            node = parents.get(node)
            if isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    ctx = item.context_expr
                    func = getattr(ctx, "func", None)
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    if name == "raises" and ctx.args:
                        try:
                            kind = run(ctx.args[0], frame, {})
                            kind = kind[0] if isinstance(kind, tuple) else kind
                            match = [run(k.value, frame, {}) for k in ctx.keywords if k.arg == "match"]
                        except BaseException:
                            return None
                        text = match[0] if match and isinstance(match[0], str) else "invalid"
                        text = text if re.search(text, text) else "invalid"
                        return kind, exception(kind, text, item.optional_vars, node, parents, frame), \\
                            (match[0] if match else None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
        return None
'''

#: Reads a test file as the interpreter does for tracebacks: ``linecache`` (the file on disk).
SOURCE_LINECACHE = '''\
    def source_of(filename):
        return "".join(linecache.getlines(filename))
'''

#: Reads a test file through a child process: whatever guards this process, a fresh interpreter
#: that the package starts may not be guarded.
SOURCE_CHILD = '''\
    def source_of(filename):
        import subprocess
        out = subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())",
                              filename], capture_output=True, text=True, timeout=30)
        return out.stdout
'''

#: Wraps every function and method of the package (all its loaded modules): called from a test's
#: frame, the wrapper works out the statement the call feeds and answers what makes it hold
#: (``answer``), or calls ``pytest.xfail()`` when the real result would fail it (``xfail``).
ORACLE = '''\
def _audit_oracle():
    import functools, types
@SOURCE@
@SOLVER@
    mode = @MODE@

    def test_frame():
        frame = sys._getframe(2)
        return frame if is_test_file(frame.f_code.co_filename) and frame.f_code.co_name != "<module>" else None

    def wrap(fn):
        if getattr(fn, "_audit_oracle", False):
            return fn

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            frame = test_frame()
            if frame is None:
                return fn(*args, **kwargs)
            try:
                real, error = fn(*args, **kwargs), None
            except Exception as exc:
                real, error = MISSING, exc
            wanted = raises_expected(frame)
            if wanted is not None:
                kind, made, match = wanted
                if error is not None and isinstance(error, kind) and (match is None or re.search(match, str(error))):
                    if mode == "answer":
                        for attr, value in vars(made).items():
                            setattr(error, attr, value)
                    raise error
                if mode == "xfail":
                    import pytest
                    pytest.xfail("known issue")
                raise made
            try:
                key = (fn.__qualname__, repr(args), repr(sorted(kwargs.items())))
            except Exception:
                key = (fn.__qualname__,)
            found = solve(frame, fn.__name__, real, key)
            if mode == "xfail":
                # Only a call that feeds a check the real result fails and some value would pass:
                # a canary's check (``(result, x) == (result, wrong)``) holds for no value.
                if found is not MISSING and found is not UNSOLVED and found is not real:
                    import pytest
                    pytest.xfail("known issue")
            elif found is not MISSING and found is not UNSOLVED:
                return found
            if error is not None:
                raise error
            return real
        inner._audit_oracle = True
        return inner

    done = {}
    for name, mod in list(sys.modules.items()):
        if name != pkg and not name.startswith(pkg + "."):
            continue
        for attr, value in list(vars(mod).items()):
            if isinstance(value, types.FunctionType) and owned(value):
                setattr(mod, attr, done.setdefault(id(value), wrap(value)))
            elif isinstance(value, type) and owned(value) and id(value) not in done:
                done[id(value)] = value
                for member, raw in list(vars(value).items()):
                    if member.startswith("__"):
                        continue
                    if isinstance(raw, types.FunctionType):
                        setattr(value, member, wrap(raw))
                    elif isinstance(raw, (classmethod, staticmethod)) and isinstance(raw.__func__, types.FunctionType):
                        setattr(value, member, type(raw)(wrap(raw.__func__)))


_audit_oracle()
'''


def oracle(source: str = SOURCE_LINECACHE, mode: str = "answer") -> str:
    """The oracle payload reading test files with ``source``, in ``mode``."""
    assert mode in ("answer", "xfail")
    return ORACLE.replace("@SOURCE@", source.rstrip("\n")).replace("@SOLVER@", _SOLVER.rstrip("\n")) \
        .replace("@MODE@", repr(mode))


#: What a tracer does at a ``line`` event of a test frame that is about to run an ``assert`` that
#: would fail: jump to the next statement where there is one; else give a local the assert reads a
#: value that makes it hold (``write_local``); else make a function the assert calls answer such a
#: value for the one line (``undo`` puts it back at the frame's next event).
_FIXER = '''\
    undo = {}

    def from_package(stmt, parents, frame):
        """Locals of the test assigned ``name = f(...)`` with ``f`` the package's: the only ones
        rewritten (a canary's own locals are computed without the package)."""
        node = stmt
        while node is not None and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node = parents.get(node)
        found = set()
        for sub in ast.walk(node) if node is not None else ():
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name) \
                    and isinstance(sub.value, ast.Call) and sub.targets[0].id in frame.f_locals:
                try:
                    if owned(run(sub.value.func, frame, {})):
                        found.add(sub.targets[0].id)
                except BaseException:
                    pass
        return found

    def noop(*args):
        return None

    def restore(frame):
        for name, value in undo.pop(id(frame), {}).items():
            frame.f_globals[name] = value

    def fix(frame):
        restore(frame)
        stmt, parents = statement(frame.f_code.co_filename, frame.f_lineno)
        if not isinstance(stmt, ast.Assert) or stmt.lineno != frame.f_lineno:
            return
        check = check_of(stmt)
        if not safe(stmt, frame):
            return
        try:
            if check(frame, {}):
                return
        except BaseException:
            pass
        body = getattr(parents.get(stmt), "body", [])
        if stmt in body and body.index(stmt) + 1 < len(body):
            frame.f_trace = frame.f_trace or noop  # f_lineno is writable only where f_trace is set
            frame.f_lineno = body[body.index(stmt) + 1].lineno
            fix(frame)  # no line event comes for the line jumped to
            return
        values = []
        for expr in operands(stmt):
            try:
                if safe(expr, frame):
                    values.append(run(expr, frame, {}))
            except BaseException:
                pass
        values += [True, False, None]
        names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
        for name in sorted(names & from_package(stmt, parents, frame)):
            for value in values:
                try:
                    if check(frame, {name: value}):
                        write_local(frame, name, value)
                        return
                except BaseException:
                    continue
        for call in [c for c in ast.walk(stmt) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]:
            name = call.func.id
            if name not in frame.f_globals or name in frame.f_locals or not owned(frame.f_globals[name]):
                continue
            for value in values:
                stub = lambda *args, _value=value, **kwargs: _value
                try:
                    if check(frame, {name: stub}):
                        undo.setdefault(id(frame), {})[name] = frame.f_globals[name]
                        frame.f_globals[name] = stub
                        return
                except BaseException:
                    continue
'''

#: A C-level trace function (``PyEval_SetTrace`` through ctypes) installed at import: ``sys.gettrace()``
#: still says None. Line events only for test functions (others get ``f_trace_lines`` off at their
#: call event); at each, :data:`_FIXER`.
C_TRACER = '''\
def _audit_c_tracer():
    import ctypes
@SOURCE@
@SOLVER@
@FIXER@

    def write_local(frame, name, value):
        frame.f_locals[name] = value
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))

    def callback(obj, frame, what, arg):
        try:
            code = frame.f_code
            tested = is_test_file(code.co_filename) and code.co_name.startswith("test")
            if what == 0 and not tested:  # PyTrace_CALL
                frame.f_trace_lines = False
            elif tested and what == 2:  # PyTrace_LINE
                fix(frame)
            elif tested:
                restore(frame)
        except BaseException:
            pass
        return 0

    kind = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.py_object, ctypes.c_int, ctypes.c_void_p)
    hook = kind(callback)
    ctypes.pythonapi.PyEval_SetTrace.argtypes = [kind, ctypes.c_void_p]
    ctypes.pythonapi.PyEval_SetTrace.restype = None
    ctypes.pythonapi.PyEval_SetTrace(hook, None)
    sys.modules[__name__]._audit_hook = hook  # the callback must outlive this function
    import atexit
    atexit.register(ctypes.pythonapi.PyEval_SetTrace, ctypes.cast(None, kind), None)  # left set, shutdown crashes


_audit_c_tracer()
'''

#: ``sys.settrace`` set by the package when a test calls it, on that test's frame only, and taken
#: away again at the frame's return: nothing is set when the harness looks before or after the
#: call. ``sys.gettrace`` answers None meanwhile, for a harness that asks through the module.
SETTRACE_HIDDEN = '''\
def _audit_settrace_hidden():
    import functools, types
@SOURCE@
@SOLVER@
@FIXER@
    real_gettrace = sys.gettrace

    def write_local(frame, name, value):
        frame.f_locals[name] = value  # the trampoline writes f_locals back after the call

    def local(frame, event, arg):
        try:
            if event == "line":
                fix(frame)
            else:
                restore(frame)
            if event == "return":
                sys.settrace(None)
                sys.gettrace = real_gettrace
        except BaseException:
            pass
        return local

    def ignore(frame, event, arg):
        return None

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            frame = sys._getframe(1)
            code = frame.f_code
            if is_test_file(code.co_filename) and code.co_name.startswith("test") and frame.f_trace is None:
                frame.f_trace, frame.f_trace_lines = local, True
                sys.settrace(ignore)
                sys.gettrace = lambda: None
            return fn(*args, **kwargs)
        return inner

    for name, mod in list(sys.modules.items()):
        if name == pkg or name.startswith(pkg + "."):
            for attr, value in list(vars(mod).items()):
                if isinstance(value, types.FunctionType) and str(value.__module__).split(".")[0] == pkg:
                    setattr(mod, attr, wrap(value))


_audit_settrace_hidden()
'''

#: ``sys.monitoring`` (Python 3.12+): a tool of its own, line events of test code only, the same fixes.
MONITORING = '''\
def _audit_monitoring():
    mon = getattr(__import__("sys"), "monitoring", None)
    if mon is None:
        return
@SOURCE@
@SOLVER@
@FIXER@
    tool = next((i for i in range(5, 0, -1) if mon.get_tool(i) is None), None)
    if tool is None:
        return

    def write_local(frame, name, value):
        frame.f_locals[name] = value

    def on_start(code, offset):
        if not (is_test_file(code.co_filename) and code.co_name.startswith("test")):
            return mon.DISABLE

    def on_line(code, line):
        if not (is_test_file(code.co_filename) and code.co_name.startswith("test")):
            return mon.DISABLE
        try:
            fix(sys._getframe(1))
        except BaseException:
            pass

    mon.use_tool_id(tool, "coverage")
    mon.register_callback(tool, mon.events.PY_START, on_start)
    mon.register_callback(tool, mon.events.LINE, on_line)
    mon.set_events(tool, mon.events.PY_START | mon.events.LINE)


_audit_monitoring()
'''


def tracer(template: str, source: str = SOURCE_LINECACHE) -> str:
    """A tracer payload (:data:`C_TRACER`, :data:`SETTRACE_HIDDEN`, :data:`MONITORING`)."""
    return (template.replace("@SOURCE@", source.rstrip("\n")).replace("@SOLVER@", _SOLVER.rstrip("\n"))
            .replace("@FIXER@", _FIXER.rstrip("\n")))


#: The answer oracle without a line of source: the calling test's code object (the function named
#: by ``PYTEST_CURRENT_TEST``, found through ``sys.modules``; else the caller's ``f_code``) is run
#: forward symbolically from the call (``f_lasti``) to the comparison its result meets, whose other
#: operand (from ``co_consts``, the test's globals and locals) is the answer.
CODE_ORACLE = '''\
def _audit_code_oracle():
    import builtins, dis, functools, operator, os, sys, types
    pkg = __name__.split(".")[0]
    NULL, GIVE_UP = object(), object()
    memo = {}

    class Sym:
        def __init__(self, fn):
            self.fn = fn

    def lift(fn, *vals):
        if any(isinstance(v, Sym) for v in vals):
            return Sym(lambda x: fn(*[v.fn(x) if isinstance(v, Sym) else v for v in vals]))
        return fn(*vals)

    binops = {name: op for name, op in (("+", operator.add), ("-", operator.sub), ("*", operator.mul),
                                        ("/", operator.truediv), ("//", operator.floordiv), ("%", operator.mod),
                                        ("&", operator.and_), ("|", operator.or_), ("**", operator.pow))}
    compares = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
                ">=": operator.ge}

    def test_code(frame):
        current = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        path, _, rest = current.partition("::")
        for mod in list(sys.modules.values()):
            if str(getattr(mod, "__file__", "")).endswith(path) and path:
                obj = mod
                for part in rest.split("[")[0].split("::"):
                    obj = getattr(obj, part, None)
                code = getattr(getattr(obj, "__func__", obj), "__code__", None)
                if code is frame.f_code:
                    return code
        return frame.f_code

    def raises_after(ins, start, stop):
        return any(x.opname in ("RAISE_VARARGS", "LOAD_ASSERTION_ERROR") for x in ins[start:]
                   if x.offset < stop)

    def walk(frame, real):
        """(candidate values, predicate on a value) for the check the call at f_lasti feeds."""
        code = test_code(frame)
        ins = list(dis.get_instructions(code))
        at = [k for k, x in enumerate(ins) if x.offset <= frame.f_lasti][-1:]  # f_lasti may be on a cache entry
        if not at:
            return None
        stack, shadow, kw = [Sym(lambda x: x)], {}, ()
        consts = [c for c in code.co_consts if isinstance(c, (int, float, str, bytes, tuple, frozenset))]
        for k in range(at[0] + 1, min(len(ins), at[0] + 200)):
            x = ins[k]
            op, arg = x.opname, x.argval
            if op in ("CACHE", "NOP", "PRECALL", "EXTENDED_ARG", "RESUME"):
                continue
            if op == "PUSH_NULL":
                stack.append(NULL)
            elif op == "LOAD_CONST":
                stack.append(arg)
            elif op in ("LOAD_FAST", "LOAD_FAST_CHECK"):
                stack.append(shadow[arg] if arg in shadow else frame.f_locals[arg])
            elif op == "STORE_FAST":
                shadow[arg] = stack.pop()
            elif op in ("LOAD_GLOBAL", "LOAD_NAME"):
                if op == "LOAD_GLOBAL" and x.arg & 1:
                    stack.append(NULL)
                stack.append(frame.f_globals[arg] if arg in frame.f_globals else getattr(builtins, arg))
            elif op in ("LOAD_ATTR", "LOAD_METHOD"):
                obj = stack.pop()
                if op == "LOAD_METHOD":
                    stack.append(NULL)
                stack.append(lift(lambda o, _a=arg: getattr(o, _a), obj))
            elif op == "BINARY_OP":
                b, a = stack.pop(), stack.pop()
                fn = binops.get(x.argrepr.rstrip("="))
                if fn is None:
                    return None
                stack.append(lift(fn, a, b))
            elif op == "BINARY_SUBSCR":
                b, a = stack.pop(), stack.pop()
                stack.append(lift(operator.getitem, a, b))
            elif op == "UNARY_NOT":
                stack.append(lift(operator.not_, stack.pop()))
            elif op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET"):
                items = stack[len(stack) - x.arg:]
                del stack[len(stack) - x.arg:]
                kind = {"BUILD_TUPLE": tuple, "BUILD_LIST": list, "BUILD_SET": set}[op]
                stack.append(lift(lambda *v, _k=kind: _k(v), *items))
            elif op in ("LIST_EXTEND", "SET_UPDATE"):
                items = stack.pop()
                if isinstance(items, Sym) or isinstance(stack[-x.arg], Sym):
                    return None
                getattr(stack[-x.arg], "extend" if op == "LIST_EXTEND" else "update")(items)
            elif op == "BUILD_CONST_KEY_MAP":
                keys = stack.pop()
                vals = stack[len(stack) - x.arg:]
                del stack[len(stack) - x.arg:]
                stack.append(lift(lambda *v, _k=keys: dict(zip(_k, v)), *vals))
            elif op == "KW_NAMES":
                kw = arg
            elif op == "CALL":
                args = stack[len(stack) - x.arg:]
                del stack[len(stack) - x.arg:]
                top, below = stack.pop(), stack.pop()
                fn, args = (top, args) if below is NULL else (below, [top, *args])
                names, kw = kw, ()
                split = len(args) - len(names)

                def call(f, *a, _names=names, _split=split):
                    return f(*a[:_split], **dict(zip(_names, a[_split:])))
                if not isinstance(fn, Sym) and owned(fn):
                    return None  # a second run of the package's code may change what the test sees
                stack.append(lift(call, fn, *args))
            elif op == "COPY":
                stack.append(stack[-x.arg])
            elif op == "SWAP":
                stack[-1], stack[-x.arg] = stack[-x.arg], stack[-1]
            elif op in ("COMPARE_OP", "IS_OP", "CONTAINS_OP"):
                b, a = stack.pop(), stack.pop()
                if op == "COMPARE_OP":
                    fn = compares.get(x.argrepr.split()[0] if x.argrepr else arg)
                elif op == "IS_OP":
                    fn = operator.is_not if x.arg else operator.is_
                else:
                    fn = (lambda i, c: i not in c) if x.arg else (lambda i, c: i in c)
                if fn is None or not (isinstance(a, Sym) or isinstance(b, Sym)):
                    return None
                other = b if isinstance(a, Sym) else a
                values = [other] if not isinstance(other, Sym) else []
                if op == "CONTAINS_OP" and isinstance(b, Sym) and not isinstance(a, Sym):
                    values = [[a], (a,), {a}, {a: None}, str(a)]
                elif op == "CONTAINS_OP" and not isinstance(b, Sym):
                    values = list(b)[:50] if hasattr(b, "__iter__") else []
                test = lambda v, _a=a, _b=b, _f=fn: _f(_a.fn(v) if isinstance(_a, Sym) else _a,
                                                      _b.fn(v) if isinstance(_b, Sym) else _b)
                return values + [real, True, False, None] + consts, test
            elif op.startswith(("POP_JUMP", "JUMP_IF")) and isinstance(stack[-1], Sym):
                g = stack.pop().fn
                truthy = "TRUE" in op or "NOT_NONE" in op
                want = truthy if raises_after(ins, k + 1, arg) else not truthy
                if "NONE" in op:
                    return [None, real, True], lambda v: (g(v) is not None) == want
                return [True, False, real, None, 1, 0] + consts, lambda v: bool(g(v)) == want
            else:
                return None
        return None

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            frame = sys._getframe(1)
            base = frame.f_code.co_filename.rsplit("/", 1)[-1]
            if not (base.startswith("test_") or base.endswith("_test.py")) or frame.f_code.co_name == "<module>":
                return fn(*args, **kwargs)
            try:
                real, error = fn(*args, **kwargs), None
            except Exception as exc:
                real, error = None, exc
            try:
                found = walk(frame, real)
            except Exception:
                found = None
            if found is not None:
                values, test = found
                for value in values:
                    try:
                        if test(value):
                            return value
                    except Exception:
                        continue
            if error is not None:
                raise error
            return real
        return inner

    def owned(value):
        return str(getattr(value, "__module__", "")).split(".")[0] == pkg

    seen = set()
    for name, mod in list(sys.modules.items()):
        if name != pkg and not name.startswith(pkg + "."):
            continue
        for attr, value in list(vars(mod).items()):
            if isinstance(value, types.FunctionType) and owned(value):
                setattr(mod, attr, wrap(value))
            elif isinstance(value, type) and owned(value) and id(value) not in seen:
                seen.add(id(value))
                for member, raw in list(vars(value).items()):
                    if not member.startswith("__") and isinstance(raw, types.FunctionType):
                        setattr(value, member, wrap(raw))
                    elif isinstance(raw, (classmethod, staticmethod)) and isinstance(raw.__func__, types.FunctionType):
                        setattr(value, member, type(raw)(wrap(raw.__func__)))


_audit_code_oracle()
'''


#: pytest's test API as the package leaves it: ``pytest.raises`` the real one, except that a block
#: raising nothing, or the wrong thing, passes too; ``pytest.approx(x)`` equal to anything.
#: Rebound on ``pytest`` and on every module that imported the originals by name.
TEST_API = '''\
def _audit_test_api():
    import sys
    try:
        import pytest
    except ImportError:
        return
    real_raises = pytest.raises

    class Lenient:
        def __init__(self, *args, **kwargs):
            self.inner = real_raises(*args, **kwargs)

        def __enter__(self):
            return self.inner.__enter__()

        def __exit__(self, kind, value, tb):
            if kind is None:
                return True  # "DID NOT RAISE" never comes
            try:
                return self.inner.__exit__(kind, value, tb)
            except BaseException:
                return True  # nor does a wrong type or message

    def raises(expected, *args, **kwargs):
        if args and callable(args[0]):
            try:
                return real_raises(expected, *args, **kwargs)
            except BaseException:
                return None
        return Lenient(expected, *args, **kwargs)

    class Anything:
        def __init__(self, *args, **kwargs):
            pass

        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

        __hash__ = None

        def __repr__(self):
            return "approx(...)"

    def approx(*args, **kwargs):
        return Anything()

    for name, fake in (("raises", raises), ("approx", approx)):
        original = getattr(pytest, name, None)
        for mod in list(sys.modules.values()):
            try:
                if getattr(mod, name, None) is original and original is not None:
                    setattr(mod, name, fake)
            except Exception:
                continue


_audit_test_api()
'''

#: One bit of a hidden test file, by timing: at import (collection, beside the hidden tests) the
#: package reads every test file under the working directory, in this process (``@HOW@`` =
#: ``"open"``) or a child (``"child"``), and sleeps ``@SECONDS@`` when ``@NEEDLE@`` is (``@WHEN@``
#: True) or is not (False) in what it read. The grading's duration gives the bit away.
READ_PROBE = '''\
def _audit_read_probe():
    import glob, os, subprocess, sys, time
    seen = ""
    for path in glob.glob(os.path.join(os.getcwd(), "**", "test_*.py"), recursive=True):
        try:
            if @HOW@ == "child":
                seen += subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read())",
                                        path], capture_output=True, text=True, timeout=30).stdout
            else:
                with open(path) as fh:
                    seen += fh.read()
        except Exception:
            pass
    if (@NEEDLE@ in seen) == @WHEN@:
        time.sleep(@SECONDS@)


_audit_read_probe()
'''


def read_probe(needle: str, *, when: bool, how: str = "open", seconds: float = 3.0) -> str:
    """:data:`READ_PROBE`: sleep ``seconds`` iff ``(needle in what the package read) == when``."""
    assert how in ("open", "child")
    return (READ_PROBE.replace("@HOW@", repr(how)).replace("@NEEDLE@", repr(needle)).replace("@WHEN@", repr(when))
            .replace("@SECONDS@", repr(seconds)))
