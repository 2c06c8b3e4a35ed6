"""What a frame reader the seal allows reaches by name, and whether it is still what was installed.

Executed by the seal (``deepgym_lockdown.py``) into a private namespace, never imported.

The seal lets a few installed functions read a frame (``traceback.extract_stack``, logging's caller
lookup, ``typing``'s module-name lookups, pandas' warning stack level...) because they only turn it
into text and hand no frame back. That holds for the code as installed, not for what it calls: those
functions find their helpers by name, in module globals (``traceback.walk_stack``), module
attributes (``linecache.lazycache``), class attributes (``StackSummary.extract``) and builtins, and
the project can rebind any of them in place, so that the helper the reader hands its frame to is the
project's. So a reader is allowed only while everything it reaches by name is intact:

* a binding the seal found (it walks the standard library's readers before any code of the
  repository runs) must hold the very object it held then, a function of the tests' own (a test
  monkeypatching ``os.path.exists``: the tests may see frames), or an installed function of that
  name (``typing_extensions`` replaces ``typing._collect_type_vars`` when it is imported);
* a binding found later (an installed package imported since, a name the seal's walk did not reach)
  must hold installed code under its own name: a function the installation loaded, in its module's
  namespace, a module, a class, or C code of a module;
* plain data (numbers, strings, containers, and objects of installed classes such as pytest's
  capture of ``sys.stderr``) is what the reader writes text to or compares strings with, and may
  change.

What is reached is found from the code's names (``co_names`` of the function and all code nested
in it), followed through modules, classes (all of their methods and those of their bases, which
may be called without being named), functions and their wrappers. Anything else a reader calls
comes from its arguments, which its caller chose.
"""

import builtins
import sys
import types

_ABSENT = object()
_SIZE = object()  # a namespace's length: a name added since is walked again
_HEAPTYPE, _IMMUTABLE = 1 << 9, 1 << 8  # Py_TPFLAGS_HEAPTYPE, Py_TPFLAGS_IMMUTABLETYPE (3.10+)
_DATA = (int, float, complex, str, bytes, bool, type(None), tuple, list, dict, set, frozenset)
#: Modules the readers hand only text to (file names, source lines, patterns), never a frame: a
#: binding of theirs that a reader names is checked, but what their own code calls is not walked
#: (``linecache`` reads a file through ``tokenize``, which compiles patterns with ``re``, which is
#: built on ``enum``: thousands of bindings that never see a frame).
_TEXT_ONLY = frozenset({"re", "sre_compile", "sre_parse", "sre_constants", "enum", "tokenize", "token", "os",
                        "posixpath", "ntpath", "genericpath", "stat", "io", "_pyio", "codecs", "encodings",
                        "fnmatch", "textwrap", "keyword", "string", "locale", "abc", "_collections_abc",
                        "collections.abc"})


def checker(genuine, genuine_scope, by_tests, all_codes):
    """``(record, intact)``.

    ``record(roots)``: walk ``roots`` (code -> the globals it runs in) as the seal finds them and
    take every binding reached as the installation's. ``intact(code, scope)``: ``None`` while what
    ``code`` (running in ``scope``) reaches is intact, else a sentence naming what is not.
    ``genuine(code)`` / ``genuine_scope(globals)``: the installation's code and module namespaces;
    ``by_tests(code)``: the hidden tests' own code; ``all_codes(codes)``: those and every code nested in them.

    A binding is ``(holder, name, value)``: ``holder`` a module's globals (or builtins) or a class,
    whose attributes are read from its own ``__dict__`` each time."""
    function, method, module = types.FunctionType, types.MethodType, types.ModuleType
    c_function = types.BuiltinFunctionType
    builtin_scope = vars(builtins)
    class_dict = type.__dict__["__dict__"].__get__
    modules = {}  # id(globals) -> (globals, a copy) of every module loaded when the seal was made
    reached = {}  # (id(holder), name) -> (holder, value): the other holders the readers reach (classes, the
    # namespace namedtuple compiles its __new__ in), as the seal found them
    passed = {}  # (id(code), id(scope)) -> (code, scope, bindings) last found intact
    names_cache = {}

    def attrs_of(holder):
        return holder if type(holder) is dict else class_dict(holder)

    def names_of(code):
        found = names_cache.get(id(code))
        if found is None or found[0] is not code:
            found = names_cache[id(code)] = (code, frozenset(n for c in all_codes([code]) for n in c.co_names))
        return found[1]

    def installed_function(fn):
        return type(fn) is function and genuine(fn.__code__) and genuine_scope(fn.__globals__)

    def installed_class(kind):
        return all(not _settable(klass)
                   or all(type(v) is not function or installed_function(v) for v in class_dict(klass).values())
                   for klass in kind.__mro__)

    def fits(name, value, in_class=False):
        """Whether ``value`` is installed code under the name ``name`` (a binding the seal did not see).
        C code must go by its own name in a module (``sys.displayhook`` under another name would keep
        what it is given in ``builtins._``); a class's own C plumbing need not (``__call__ = dict``)."""
        kind = type(value)
        if kind is function:  # under any name: ``from gettext import gettext as _``
            return by_tests(value.__code__) or installed_function(value)
        if kind is module:
            return genuine_scope(vars(value))
        if kind in (staticmethod, classmethod):
            return fits(name, value.__func__, in_class)
        if kind is property:  # a getter sees only the object it is read from
            return all(part is None or installed_function(part) or not _settable(type(part))
                       for part in (value.fget, value.fset, value.fdel))
        if kind is c_function:
            owner = value.__self__
            if owner is not None and type(owner) is not module and not (in_class and isinstance(owner, type)):
                return False  # a method of an object: it may keep what it is given there
            if owner is not None and type(owner) is module and not genuine_scope(vars(owner)):
                return False
            return in_class or value.__name__ == name
        if isinstance(value, type):  # under another name only if none of its methods is the project's
            return value.__name__ == name or (in_class and not _settable(value)) or installed_class(value)
        if kind in _DATA or not (_settable(kind) or callable(value)):
            return True  # data, or a C descriptor (a slot, ``__dict__``): nothing of the project's runs
        if not _settable(kind) and in_class:
            return True  # a C method of the class's (``object.__init__``)
        return not callable(value) and installed_class(kind)

    def sealed_module(value):
        """Whether ``value`` (a function, module or class) belongs to a module loaded before the seal.
        What came later is reached only through a binding installed code replaced (typing_extensions
        patching typing), judged there: the standard library's readers hand it no frame."""
        scope = _scope_of(value)
        return scope is not None and id(scope) in modules and modules[id(scope)][0] is scope

    def at_seal(holder, name):
        """What ``holder.name`` held when the seal was made (``_ABSENT`` if nothing), or ``None``
        where the seal did not know the holder (a module imported since, a class it did not walk)."""
        if type(holder) is dict:
            snapshot = modules.get(id(holder))
            if snapshot is not None and snapshot[0] is holder:
                return snapshot[1].get(name, _ABSENT)
        seen = reached.get((id(holder), name))
        return seen[1] if seen is not None and seen[0] is holder else None

    def judge(holder, name, value):
        before = at_seal(holder, name)
        if before is None or before is _ABSENT:  # new since the seal: installed code under its own name
            in_class = type(holder) is not dict
            return None if fits(name, value, in_class) else f"{_where(holder)}.{name} is not installed code"
        if before is value or (type(value) is function and by_tests(value.__code__)):
            return None
        inner = value.__func__ if type(value) in (staticmethod, classmethod) else value
        if type(inner) is function and installed_function(inner) and inner.__name__ == name:
            return None  # installed code patching the standard library: typing_extensions' _collect_type_vars
        if type(holder) is dict and not callable(before) and not callable(value) \
                and (type(value) in _DATA or installed_class(type(value))):
            return None  # a module's data swapped for data: sys.stderr under pytest's capture
        return f"{_where(holder)}.{name} was replaced since the seal"

    def walk(roots, decide, deep=True):
        """Every binding the code of ``roots`` (``[(code, globals)]``) reaches by name, with the sizes
        of the namespaces walked and the names that fell through to builtins (``deep``: also through
        the functions and classes it reaches, else only its own names and module attributes).
        ``decide`` says of each binding whether it may be followed (``None``) or why not, which ends
        the walk: ``(bindings, why)``."""
        found, seen, todo = [], set(), list(roots)

        def follow(holder, name, value, names):
            if (id(holder), name) not in seen:
                why = decide(holder, name, value)
                if why is not None:
                    return why
                seen.add((id(holder), name))
                found.append((holder, name, value))
            if type(value) in (staticmethod, classmethod, method):
                value = value.__func__
            if type(value) in _DATA or _text_only(value) or (modules and not sealed_module(value)):
                return None
            if type(value) is module:  # the attributes this code names (``os.path.normcase``): per code
                if (id(value), id(names)) in seen:
                    return None
                seen.add((id(value), id(names)))
                return members(vars(value), [a for a in names if a in vars(value)], names)
            if id(value) in seen or not deep:
                return None
            seen.add(id(value))
            kind = type(value)
            if kind is property:
                todo.extend((part.__code__, part.__globals__) for part in (value.fget, value.fset, value.fdel)
                            if type(part) is function)
            elif kind is function:
                todo.append((value.__code__, value.__globals__))
            elif isinstance(value, type):
                for klass in (*value.__mro__, type(value)):  # methods run unnamed: bases', the metaclass's
                    if _settable(klass) and (klass is value or id(klass) not in seen):
                        seen.add(id(klass))
                        why = members(klass, list(class_dict(klass)), names)
                        if why is not None:
                            return why
            else:  # functools.lru_cache's wrapper, a partial: the function inside
                inner = getattr(value, "__wrapped__", None) or getattr(value, "func", None)
                if type(inner) is function:
                    todo.append((inner.__code__, inner.__globals__))
            return None

        def members(holder, attrs, names):
            table = attrs_of(holder)
            if (id(holder), _SIZE) not in seen:
                seen.add((id(holder), _SIZE))
                found.append((holder, _SIZE, len(table)))
            for attr in attrs:
                why = follow(holder, attr, table.get(attr, _ABSENT), names)
                if why is not None:
                    return why
            return None

        while todo:
            code, scope = todo.pop()
            if (id(code), id(scope)) in seen:
                continue
            seen.add((id(code), id(scope)))
            names = names_of(code)
            for name in names:
                holder = scope
                if name not in scope:
                    if (id(scope), name) not in seen:  # a global that shadows the builtin later is new
                        seen.add((id(scope), name))
                        found.append((scope, name, _ABSENT))
                    holder = builtin_scope
                    if name not in holder:
                        continue
                why = follow(holder, name, holder[name], names)
                if why is not None:
                    return found, why
        return found, None

    def record(roots):
        for loaded in list(sys.modules.values()):
            scope = getattr(loaded, "__dict__", None)
            if type(scope) is dict:
                modules[id(scope)] = (scope, scope.copy())
        for holder, name, value in walk(list(roots.items()), lambda *binding: None)[0]:
            if name is not _SIZE and value is not _ABSENT and id(holder) not in modules:
                reached.setdefault((id(holder), name), (holder, value))

    def still(bindings):
        for holder, name, value in bindings:
            table = attrs_of(holder)
            if name is _SIZE:
                if len(table) != value:
                    return False
            elif table.get(name, _ABSENT) is not value:
                return False
        return True

    def intact(code, scope, deep=True):
        key = (id(code), id(scope))
        last = passed.get(key)
        if last is not None and last[0] is code and last[1] is scope and still(last[2]):
            return None
        bindings, why = walk([(code, scope)], judge, deep)
        if why is None:
            passed[key] = (code, scope, bindings)
        else:
            passed.pop(key, None)
        return why

    return record, intact


def _settable(kind):
    """Whether ``kind``'s attributes can be set: a class made by Python code, not a C type (static,
    or a heap type of an extension module, which 3.10+ marks immutable)."""
    flags = kind.__flags__
    return bool(flags & _HEAPTYPE) and not flags & _IMMUTABLE


def _module_name(value):
    if isinstance(value, type):
        return value.__module__
    if type(value) is types.ModuleType:
        return value.__name__
    scope = getattr(value, "__globals__", None)
    return scope.get("__name__") if type(scope) is dict else None


def _scope_of(value):
    """The globals of the module ``value`` (a function, module or class) belongs to, or None."""
    if type(value) is types.ModuleType:
        return vars(value)
    scope = getattr(value, "__globals__", None)
    if type(scope) is dict:
        return scope
    name = _module_name(value)
    module = sys.modules.get(name) if isinstance(name, str) else None
    return vars(module) if type(module) is types.ModuleType else None


def _text_only(value):
    """Whether ``value`` (a function, module or class) belongs to a module of ``_TEXT_ONLY``."""
    name = _module_name(value)
    if not isinstance(name, str):
        return False
    return name in _TEXT_ONLY or name.partition(".")[0] in _TEXT_ONLY


def _where(holder):
    if isinstance(holder, type):
        return f"{holder.__module__}.{holder.__qualname__}"
    name = holder.get("__name__")
    return name if isinstance(name, str) else "a module"
