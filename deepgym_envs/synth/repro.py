"""A standalone reproduction of a failing test: the script a person would paste into an issue.

From the test's source: the module-level imports and helpers it uses, its body cut after the
statement that failed (a 60-line test becomes the few calls that matter), ``self.assertEqual``
and friends as plain ``assert`` statements, ``@pytest.mark.parametrize`` as a loop over its
values. A failing ``assert actual == expected`` becomes ``result = actual`` / ``print(repr(result))``
/ ``assert result == expected``, so running it shows the value that came back.

Whether a script really shows the bug is not guessed: synthesis runs it on the buggy tree (it
must fail) and on the clean one (it must pass) before a statement quotes it
(:func:`deepgym_envs.synth.pipeline.check_reproduction`). None when no such script can be made
(fixtures, ``setUp``, relative imports): the caller tries another failing test.
"""

from __future__ import annotations

import ast
import re

MAX_LINES = 40
MAX_WIDTH = 160
_SHORT_TB_LINE = re.compile(r"^(?P<file>[^\s:][^:]*\.py):(?P<line>\d+): ")

#: ``self.assertX(a, b)`` -> ``assert <a OP b>``.
_BINARY = {"assertEqual": ast.Eq, "assertEquals": ast.Eq, "assertNotEqual": ast.NotEq, "assertIs": ast.Is,
           "assertIsNot": ast.IsNot, "assertIn": ast.In, "assertNotIn": ast.NotIn, "assertLess": ast.Lt,
           "assertLessEqual": ast.LtE, "assertGreater": ast.Gt, "assertGreaterEqual": ast.GtE,
           "assertListEqual": ast.Eq, "assertDictEqual": ast.Eq, "assertTupleEqual": ast.Eq,
           "assertSetEqual": ast.Eq, "assertSequenceEqual": ast.Eq, "assertCountEqual": None}
_UNARY = {"assertTrue": False, "assert_": False, "assertFalse": True}
_NONE = {"assertIsNone": ast.Is, "assertIsNotNone": ast.IsNot}


def failing_line(output: str, test_file: str, section: list[str] | None = None) -> int | None:
    """The last line of ``test_file`` in a ``--tb=short`` traceback (the test's own failing statement)."""
    found = None
    for line in section if section is not None else output.splitlines():
        m = _SHORT_TB_LINE.match(line)
        if m and m.group("file").endswith(test_file):
            found = int(m.group("line"))
    return found


def reproduction(file_text: str, test_id: str, line: int | None = None) -> str | None:
    """The standalone script for ``test_id`` (a pytest id in this file), or None."""
    try:
        tree = ast.parse(file_text)
    except SyntaxError:
        return None
    path = [p.split("[", 1)[0] for p in test_id.split("::")[1:]]
    fn, cls = _function(tree, path)
    if fn is None:
        return None
    setup = _setup(cls) if cls is not None else []
    if setup is None:
        return None
    loops = _parametrize(fn)
    if loops is None:
        return None
    param_id = test_id.rsplit("[", 1)[1].rstrip("]") if test_id.endswith("]") else ""
    if len(loops) == 1 and param_id:
        loops = _narrow(tree, loops[0], param_id)
    params = [a.arg for a in fn.args.args if a.arg not in ("self", "cls")]
    fixtures = _fixtures(tree, cls, [p for p in params if p not in {n for t, _ in loops for n in _names_in(t)}])
    if fixtures is None:
        return None  # a fixture a script cannot stand in for (pytest's own, one that takes `request`...)
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if line is not None:
        body = _cut(body, line)
    if not body:
        return None
    body = fixtures + body
    setup = _used_setup(setup, body)
    body = [_Asserts().visit(s) for s in [*setup, *body]]
    if setup:
        # self.parser -> parser, or parser_ where the module imports a `parser` of its own.
        taken = {(a.asname or a.name).split(".")[0] for st in tree.body if isinstance(st, (ast.Import, ast.ImportFrom))
                 for a in st.names} | {st.name for st in tree.body if isinstance(st, (ast.FunctionDef, ast.ClassDef))}
        names = {t.id: t.id + "_" if t.id in taken else t.id for st in setup for t in _targets(st)
                 if isinstance(t, ast.Name)}
        for st in setup:
            if isinstance(st, ast.AugAssign):
                st.target = ast.Name(names[st.target.id], ast.Store())  # type: ignore[union-attr]
            else:
                st.targets = [ast.Name(names[t.id], ast.Store()) for t in st.targets]  # type: ignore[union-attr]
        body = [_SelfAttrs(names).visit(s) for s in body]
    if any(isinstance(n, ast.Name) and n.id in ("self", "cls") for s in body for n in ast.walk(s)):
        return None  # uses the test case's own state
    body = body[:-1] + _show_result(body[-1])
    for target, values in reversed(loops):
        if isinstance(values, _One):
            body = [ast.Assign([target], values.value)] + body
        else:
            body = [ast.For(target=target, iter=values, body=body, orelse=[])]
    needed = _needed(tree, body, {id(fn), id(cls)}, _package(test_id.split("::", 1)[0]))
    if needed is None:
        return None
    script_body = needed + body
    module = ast.fix_missing_locations(ast.Module(body=script_body, type_ignores=[]))
    try:
        text = "".join(_render(stmt) for stmt in module.body)
        compile(text, "<reproduction>", "exec")
    except (SyntaxError, ValueError, RecursionError):
        return None
    lines = text.splitlines()
    return text if len(lines) <= MAX_LINES and max(map(len, lines)) <= MAX_WIDTH else None


def _render(stmt: ast.stmt) -> str:
    """The statement's source; a wide assignment or call split at its brackets, one element a line
    (ast.unparse writes orderedmultidict's fourteen-case ``inits`` as one 222-character line)."""
    text = ast.unparse(stmt)
    if len(text) <= MAX_WIDTH:
        return text + "\n"
    if isinstance(stmt, ast.Assign):
        return " = ".join(ast.unparse(t) for t in stmt.targets) + " = " + _wrapped(stmt.value, 0) + "\n"
    if isinstance(stmt, ast.AugAssign):  # "inits += " as ast.unparse writes it, whatever the operator
        head = ast.unparse(ast.AugAssign(stmt.target, stmt.op, ast.Name("_")))[:-1]
        return head + _wrapped(stmt.value, 0) + "\n"
    if isinstance(stmt, ast.Expr):
        return _wrapped(stmt.value, 0) + "\n"
    return text + "\n"


def _wrapped(node: ast.expr, indent: int) -> str:
    """``node`` as source, its brackets opened one element a line wherever it is too wide."""
    text = ast.unparse(node)
    if indent + len(text) <= MAX_WIDTH:
        return text
    inner = " " * (indent + 4)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)) and node.elts:
        opening, closing = {ast.List: "[]", ast.Tuple: "()", ast.Set: "{}"}[type(node)]
        items = [_wrapped(e, indent + 4) for e in node.elts]
    elif isinstance(node, ast.Dict) and node.keys and all(k is not None for k in node.keys):
        opening, closing = "{}"
        items = [f"{ast.unparse(k)}: {_wrapped(v, indent + 4)}" for k, v in zip(node.keys, node.values)]  # type: ignore[arg-type]
    elif isinstance(node, ast.Call) and (node.args or node.keywords):
        opening, closing = ast.unparse(node.func) + "(", ")"
        items = [_wrapped(a, indent + 4) for a in node.args]
        items += [(f"{k.arg}=" if k.arg else "**") + _wrapped(k.value, indent + 4) for k in node.keywords]
        # No trailing comma: it is a syntax error after a lone generator argument.
        return opening + "\n" + ",\n".join(inner + i for i in items) + "\n" + " " * indent + closing
    else:
        return text
    return opening + "\n" + "".join(f"{inner}{i},\n" for i in items) + " " * indent + closing


class _One(ast.expr):
    """The single parameter set a test id names (an assignment instead of a loop)."""

    def __init__(self, value: ast.expr) -> None:
        super().__init__()
        self.value = value


def _narrow(tree: ast.Module, loop: tuple[ast.expr, ast.expr], param_id: str) -> list[tuple[ast.expr, ast.expr]]:
    """The one parameter set of a parametrized test's id (``[expected3]`` -> the fourth), when it can
    be told; else the loop over all of them."""
    target, values = loop
    elements = values
    if isinstance(values, ast.Name):  # a module-level constant list
        elements = next((s.value for s in tree.body if isinstance(s, ast.Assign) and len(s.targets) == 1
                         and isinstance(s.targets[0], ast.Name) and s.targets[0].id == values.id), values)
    if not isinstance(elements, (ast.List, ast.Tuple)):
        return [loop]
    names = [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    index = None
    for part in param_id.split("-"):
        m = re.fullmatch(r"([A-Za-z_]\w*?)(\d+)", part)
        if m and m.group(1) in names:
            index = int(m.group(2))
            break
    if index is None:
        ids = []
        for elt in elements.elts:
            items = elt.elts if isinstance(elt, ast.Tuple) and len(names) > 1 else [elt]
            try:
                ids.append("-".join(str(ast.literal_eval(x)) for x in items))
            except (ValueError, TypeError, SyntaxError, RecursionError):
                ids.append(None)
        if ids.count(param_id) == 1:
            index = ids.index(param_id)
    if index is None or index >= len(elements.elts):
        return [loop]
    return [(target, _One(elements.elts[index]))]


def _setup(cls: ast.ClassDef) -> list[ast.Assign | ast.AugAssign] | None:
    """A ``setUp`` made only of ``self.x = ...`` (and ``self.x += ...``, as orderedmultidict's
    grows its cases) as plain ``x = ...`` statements; None for any other set-up (a script cannot
    mimic it faithfully)."""
    out: list[ast.Assign | ast.AugAssign] = []
    for node in cls.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if node.name in ("setUpClass", "setup_class", "tearDown", "teardown_method"):
            return None
        if node.name not in ("setUp", "setup_method"):
            continue
        for stmt in node.body:
            target = (stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else
                      stmt.target if isinstance(stmt, ast.AugAssign) else None)
            if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                    and target.value.id == "self"):
                return None
            name = ast.Name(target.attr, ast.Store())
            out.append(ast.AugAssign(name, stmt.op, stmt.value) if isinstance(stmt, ast.AugAssign)
                       else ast.Assign([name], stmt.value))
    return out


def _used_setup(setup: list[ast.Assign | ast.AugAssign], body: list[ast.stmt]) -> list[ast.Assign | ast.AugAssign]:
    """The set-up statements whose ``self.x`` the test reads, and those these read in turn."""
    wanted = {n.attr for s in body for n in ast.walk(s)
              if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
    for st in reversed(setup):
        if any(isinstance(t, ast.Name) and t.id in wanted for t in _targets(st)):
            wanted |= {n.attr for n in ast.walk(st.value)
                       if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return [st for st in setup if any(isinstance(t, ast.Name) and t.id in wanted for t in _targets(st))]


def _targets(stmt: ast.Assign | ast.AugAssign) -> list[ast.expr]:
    return [stmt.target] if isinstance(stmt, ast.AugAssign) else stmt.targets


class _SelfAttrs(ast.NodeTransformer):
    """``self.parser`` -> ``parser`` for the attributes ``setUp`` assigned."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in self.names:
            return ast.copy_location(ast.Name(self.names[node.attr], ast.Load()), node)
        return node


def _cut(body: list[ast.stmt], line: int) -> list[ast.stmt]:
    """The statements up to the one holding ``line``; an ``if`` there becomes the branch that ran
    (the failing line is in it, so with these parameters that branch is taken)."""
    for i, stmt in enumerate(body):
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            if isinstance(stmt, ast.If):
                for branch in (stmt.body, stmt.orelse):
                    if branch and branch[0].lineno <= line <= (branch[-1].end_lineno or branch[-1].lineno):
                        return body[:i] + _cut(branch, line)
            return body[:i + 1]
    return body


def _function(tree: ast.Module, path: list[str], seen: frozenset[str] = frozenset()
              ) -> tuple[ast.FunctionDef | None, ast.ClassDef | None]:
    """The test function ``path`` names and its class; ``seen``: the mixins already looked in (a
    class may name a base it shadows, pyflakes' ``class TestCase(TestCase)``)."""
    scope: list[ast.stmt] = tree.body
    cls = None
    for name in path[:-1]:
        cls = next((n for n in scope if isinstance(n, ast.ClassDef) and n.name == name), None)
        if cls is None:
            return None, None
        scope = cls.body
    fn = next((n for n in scope if isinstance(n, ast.FunctionDef) and n.name == path[-1]), None) if path else None
    if fn is None and cls is not None:
        # Inherited from a mixin defined in the same file.
        for base in cls.bases:
            mixin = next((n for n in tree.body if isinstance(n, ast.ClassDef) and isinstance(base, ast.Name)
                          and n.name == base.id and n.name not in seen | {cls.name}), None)
            if mixin is not None:
                found, _ = _function(tree, [mixin.name, path[-1]], seen | {cls.name})
                if found is not None:
                    return found, mixin
    return fn, cls


def _parametrize(fn: ast.FunctionDef) -> list[tuple[ast.expr, ast.expr]] | None:
    """``(loop target, values)`` per ``@pytest.mark.parametrize``; None for a decorator a script cannot mimic."""
    loops = []
    for dec in fn.decorator_list:
        text = ast.unparse(dec)
        if not isinstance(dec, ast.Call) or not text.startswith(("pytest.mark.parametrize", "mark.parametrize",
                                                                 "parametrize")):
            if "fixture" in text or "usefixtures" in text:
                return None
            continue  # skip, xfail-free marks and the like change nothing a script does
        given = {k.arg: k.value for k in dec.keywords if k.arg in ("argnames", "argvalues")}
        argnames, argvalues = (*dec.args, None, None)[:2]
        argnames, argvalues = given.get("argnames", argnames), given.get("argvalues", argvalues)
        names = _argnames(argnames)
        if names is None or argvalues is None:
            return None
        if any("pytest.param" in ast.unparse(v) for v in ast.walk(argvalues) if isinstance(v, ast.Call)):
            return None
        target: ast.expr = (ast.Name(names[0], ast.Store()) if len(names) == 1 else
                            ast.Tuple([ast.Name(n, ast.Store()) for n in names], ast.Store()))
        loops.append((target, argvalues))
    return loops


def _argnames(node: ast.expr | None) -> list[str] | None:
    """The names ``parametrize`` takes: ``"a, b"`` or ``["a", "b"]`` (prettytable's spelling)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        names = [n.strip() for n in node.value.split(",") if n.strip()]
    elif isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                          for e in node.elts):
        names = [e.value.strip() for e in node.elts]
    else:
        return None
    return names if names and all(n.isidentifier() for n in names) else None


def _is_fixture(node: ast.stmt) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        ast.unparse(d.func if isinstance(d, ast.Call) else d).endswith("fixture") for d in node.decorator_list)


def _fixtures(tree: ast.Module, cls: ast.ClassDef | None, names: list[str]) -> list[ast.stmt] | None:
    """``name = EXPR`` for each fixture ``names`` asks for, the fixtures they take first: those of
    the test's class or module whose body is one ``return EXPR`` (or ``yield EXPR``) and whose
    decorator has no arguments (itsdangerous' ``def value(self): return {"id": 42}``). None where
    one is anything else: pytest's own (``tmp_path``), parametrised, or reading ``request``."""
    scopes = [*(cls.body if cls is not None else []), *tree.body]
    out: list[ast.stmt] = []
    done: set[str] = set()

    def add(name: str, depth: int) -> bool:
        if name in done:
            return True
        fixture = next((n for n in scopes if _is_fixture(n) and n.name == name), None)
        if fixture is None or depth > 8 or any(isinstance(d, ast.Call) and (d.args or d.keywords)
                                               for d in fixture.decorator_list):
            return False
        body = [st for st in fixture.body if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)
                                                  and isinstance(st.value.value, str))]
        value = (body[0].value if len(body) == 1 and isinstance(body[0], ast.Return) else
                 body[0].value.value if len(body) == 1 and isinstance(body[0], ast.Expr)
                 and isinstance(body[0].value, ast.Yield) else None)
        if value is None or {"self", "cls", "request"} & _names_in(value):
            return False
        takes = [a.arg for a in fixture.args.args if a.arg not in ("self", "cls")]
        if not all(add(t, depth + 1) for t in takes):
            return False
        out.append(ast.Assign([ast.Name(name, ast.Store())], value, lineno=0))
        done.add(name)
        return True

    return out if all(add(n, 0) for n in names) else None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class _Asserts(ast.NodeTransformer):
    """unittest's assertion methods as plain ``assert`` statements; ``assertRaises`` as ``pytest.raises``."""

    def visit_Expr(self, node: ast.Expr) -> ast.stmt:
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"):
            return node
        name, args = call.func.attr, call.args
        if name in _BINARY and len(args) >= 2:
            op = _BINARY[name]
            if op is None:  # assertCountEqual
                test: ast.expr = ast.Compare(_call("sorted", args[0]), [ast.Eq()], [_call("sorted", args[1])])
            else:
                test = ast.Compare(args[0], [op()], [args[1]])
            return ast.copy_location(ast.Assert(test=test), node)
        if name in _UNARY and args:
            test = ast.UnaryOp(ast.Not(), args[0]) if _UNARY[name] else args[0]
            return ast.copy_location(ast.Assert(test=test), node)
        if name in _NONE and args:
            return ast.copy_location(ast.Assert(ast.Compare(args[0], [_NONE[name]()], [ast.Constant(None)])), node)
        if name == "assertRaises" and len(args) >= 2:
            raises = ast.Call(ast.Attribute(ast.Name("pytest", ast.Load()), "raises", ast.Load()), [args[0]], [])
            inner = ast.Expr(ast.Call(args[1], list(args[2:]), call.keywords))
            return ast.copy_location(ast.With([ast.withitem(raises)], [inner]), node)
        return node

    def visit_With(self, node: ast.With) -> ast.stmt:
        self.generic_visit(node)
        for item in node.items:
            call = item.context_expr
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "assertRaises"
                    and isinstance(call.func.value, ast.Name) and call.func.value.id == "self"):
                item.context_expr = ast.Call(ast.Attribute(ast.Name("pytest", ast.Load()), "raises", ast.Load()),
                                             call.args, [])
        return node


def _call(name: str, arg: ast.expr) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), [arg], [])


def _show_result(stmt: ast.stmt) -> list[ast.stmt]:
    """``assert f(x) == y`` -> ``result = f(x)``, ``print(repr(result))``, ``assert result == y``."""
    if not (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1
            and isinstance(stmt.test.ops[0], (ast.Eq, ast.NotEq, ast.Is, ast.IsNot, ast.In, ast.NotIn))):
        return [stmt]
    cmp = stmt.test
    # `assert actual == expected` is the convention; the other way round when only the left
    # side looks like a written-out value (`assert [1, 2] == f(x)`, `assert OrderedSet("ab") == s - t`).
    use_right = (literalish(cmp.left) and not literalish(cmp.comparators[0])
                 and not isinstance(cmp.ops[0], (ast.In, ast.NotIn)))
    actual = cmp.comparators[0] if use_right else cmp.left
    if isinstance(actual, ast.Name):
        return [ast.Expr(_call("print", _call("repr", actual))), stmt]
    result = ast.Name("result", ast.Load())
    new_cmp = (ast.Compare(cmp.left, cmp.ops, [result]) if use_right else ast.Compare(result, cmp.ops, cmp.comparators))
    return [ast.Assign([ast.Name("result", ast.Store())], actual), ast.Expr(_call("print", _call("repr", result))),
            ast.Assert(new_cmp)]


def literalish(node: ast.expr) -> bool:
    """A value written out in the test: constants, containers of them, ``Class(constants)``, ``expected``."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp):
        return literalish(node.operand)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(literalish(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or literalish(k) for k in node.keys) and all(literalish(v) for v in node.values)
    if isinstance(node, ast.Name):
        return node.id.lower().startswith(("expect", "want", "correct"))
    if isinstance(node, ast.Call):
        func = node.func.id if isinstance(node.func, ast.Name) else node.func.attr if isinstance(
            node.func, ast.Attribute) else ""
        return func[:1].isupper() and all(literalish(a) for a in node.args) and all(
            literalish(k.value) for k in node.keywords)
    return False


def _package(test_file: str) -> list[str]:
    """The package a test module is in, from its path (``src/`` is a layout, not a package):
    ``src/hyperlink/test/test_url.py`` -> ``["hyperlink", "test"]``."""
    parts = test_file.split("/")[:-1]
    return parts[1:] if parts[:1] == ["src"] else parts


def _absolute(stmt: ast.ImportFrom, package: list[str]) -> ast.ImportFrom | None:
    """``from .._url import URL`` in ``hyperlink.test`` -> ``from hyperlink._url import URL``; None
    when the test module is not inside a package deep enough (a ``tests/`` folder beside it)."""
    up = stmt.level - 1
    if not package or up >= len(package) or not all(p.isidentifier() for p in package):
        return None
    base = package[:len(package) - up]
    if len(base) == 1 and base[0] in ("tests", "test", "testing"):
        return None  # tests/ is no importable package of the project's
    return ast.ImportFrom(".".join([*base, *([stmt.module] if stmt.module else [])]), stmt.names, 0)


def _needed(tree: ast.Module, body: list[ast.stmt], skip: set[int], package: list[str] | None = None) -> list[ast.stmt] | None:
    """The module-level statements (imports, helpers, constants) the body uses, in file order,
    transitively; relative imports made absolute from ``package`` (the test module's)."""
    package = package or []
    wanted = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)}
    defines: list[tuple[ast.stmt, set[str]]] = []
    for stmt in tree.body:
        if id(stmt) in skip:
            continue
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                continue
            names = {(a.asname or a.name).split(".")[0] for a in stmt.names}
            if "*" in names:
                # What a star import binds is unknown here: kept (funcy's tests take every
                # function from `from funcy.funcs import *`).
                names = wanted
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name.startswith(("test", "Test")) or _is_fixture(stmt):
                continue  # a fixture the script needs is an assignment of its value
            names = {stmt.name}
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        else:
            continue
        defines.append((stmt, names))
    chosen: set[int] = set()
    changed = True
    while changed:
        changed = False
        for stmt, names in defines:
            if id(stmt) not in chosen and names & wanted:
                chosen.add(id(stmt))
                wanted |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
                changed = True
    out = [_only_used(stmt, wanted) for stmt, _ in defines if id(stmt) in chosen]
    for i, stmt in enumerate(out):
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            absolute = _absolute(stmt, package)
            if absolute is None:
                return None  # a script run on its own has no package to be relative to
            out[i] = absolute
    if "pytest" in {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)} and not any(
            isinstance(s, ast.Import) and any(a.name == "pytest" for a in s.names) for s in out):
        out.insert(0, ast.Import([ast.alias("pytest")]))
    return out


def _only_used(stmt: ast.stmt, wanted: set[str]) -> ast.stmt:
    """``from m import a, b, c`` -> ``from m import b`` when only b is used."""
    if isinstance(stmt, ast.ImportFrom):
        names = [a for a in stmt.names if (a.asname or a.name) in wanted or a.name == "*"]
        return ast.ImportFrom(stmt.module, names, stmt.level)
    return stmt
