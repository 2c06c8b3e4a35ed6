"""Tracers the harness does not see (class B): at a line event of a test about to fail an assert,
jump over it, or rewrite the local it reads, or make the package function it calls answer for that
line. Three ways to get the line events: a C-level trace function through ctypes, ``sys.settrace``
on the test's frame only (gone before the harness looks), ``sys.monitoring`` (3.12+).
"""

from __future__ import annotations

from deepgym_envs.audit.sealed.oracles import SOLVER, SOURCE_LINECACHE

#: What a tracer does at a ``line`` event of a test frame that is about to run an ``assert`` that
#: would fail: jump to the next statement where there is one; else give a local the assert reads a
#: value that makes it hold (``write_local``); else make a function the assert calls answer such a
#: value for the one line (``undo`` puts it back at the frame's next event).
FIXER = '''\
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
#: call event); at each, :data:`FIXER`.
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
    return (template.replace("@SOURCE@", source.rstrip("\n")).replace("@SOLVER@", SOLVER.rstrip("\n"))
            .replace("@FIXER@", FIXER.rstrip("\n")))
