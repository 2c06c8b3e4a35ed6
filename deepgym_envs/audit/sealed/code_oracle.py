"""The answer oracle without a line of source (class A): the test's code object, run forward
symbolically from the call to the comparison its result meets.
"""

from __future__ import annotations

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
