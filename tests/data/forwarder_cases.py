"""Run by tests/security/test_forgery.py under each Python found: which functions the report
plugin's forwarder check takes for "only calls its one free variable with its own arguments".
Python 3.6+ syntax only; prints the version, whether all cases held, and those that did not."""
import ast, dis, sys, types
src = open(sys.argv[1]).read()
tree = ast.parse(src)
keep = [n for n in tree.body if (isinstance(n, ast.Assign) and any(getattr(t, "id", "") in ("_FORWARD_OPS", "_CALL_OPS") for t in n.targets))
        or (isinstance(n, ast.FunctionDef) and n.name == "_make_forwarded")]
ns = {"dis": dis, "types": types}
m = ast.parse(""); m.body = keep
exec(compile(m, "plugin", "exec"), ns)
forwarded = ns["_make_forwarded"]()
def target(*a, **k): return (a, k)
cases = {
 "positional": "def accept(f):\n    def t(a, b):\n        return f(a, b)\n    return t\n",
 "none": "def accept(f):\n    def t():\n        return f()\n    return t\n",
 "kw": "def accept(f):\n    def t(a, *, k=1):\n        return f(a, k=k)\n    return t\n",
 "star": "def accept(f):\n    def t(*args, **kwargs):\n        return f(*args, **kwargs)\n    return t\n",
 "mixed": "def accept(f):\n    def t(a, *rest, k, **kw):\n        return f(a, *rest, k=k, **kw)\n    return t\n",
}
bad = {
 "calls arg": "def accept(f):\n    def t(a):\n        return a(f)\n    return t\n",
 "two calls": "def accept(f):\n    def t(a):\n        return f(f(a))\n    return t\n",
 "global": "def accept(f):\n    def t(a):\n        return g(a)\n    return t\n",
 "attr": "def accept(f):\n    def t(a):\n        return f.x(a)\n    return t\n",
 "drops": "def accept(f):\n    def t(a):\n        f(a)\n        return None\n    return t\n",
}
res = []
for name, text in cases.items():
    ns2 = {}; exec(text, ns2); fn = ns2["accept"](target)
    res.append((name, forwarded(fn) is target))
for name, text in bad.items():
    ns2 = {"g": target}; exec(text, ns2); fn = ns2["accept"](target)
    res.append((name, forwarded(fn) is None))
print(sys.version.split()[0], all(ok for _, ok in res), [n for n, ok in res if not ok])
