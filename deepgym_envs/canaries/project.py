"""How the template canaries may call the project: the calls its test files make, and whether its
code keeps state between calls (read from the pristine source, never the candidate's)."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import keyword
import os
import random
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deepgym_envs.trees import cache_root

#: Calls left out of canaries: names that say they change state (a canary runs beside the graded
#: tests, which must come out as they would without it).
_MUTATES = re.compile(r"(^|_)(set|add|register|unregister|install|uninstall|configure|reset|clear|remove|delete|"
                      r"del|write|save|dump|update|patch|enable|disable|push|pop|insert|append|extend|put|post|"
                      r"send|close|open|start|stop|run|main|exit|kill|seed|cache|load_plugin|mkdir|rm)($|_)",
                      re.IGNORECASE)
_MAX_CALL = 120


def _calls(tree: ast.Module, source: str, subjects: set[str]) -> list[tuple[str, str]]:
    """Calls of the project's code (a name the file imports from outside the standard library and
    pytest, or an attribute path under one) the file's code makes for their value, whose arguments
    are literals, local names bound once to a literal, or names of the project; in the file's own
    spelling where it can.

    Calls that are statements of their own, awaited, or named for a change of state are left out.
    """
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def literals(scope: ast.AST) -> dict[str, ast.expr]:
        stores: dict[str, int] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, 0) + 1
        found = {}
        for node in ast.walk(scope):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and stores.get(node.targets[0].id) == 1 and _literal(node.value)):
                found[node.targets[0].id] = node.value
        return found

    def root(func: ast.expr) -> str | None:
        while isinstance(func, ast.Attribute):
            func = func.value
        return func.id if isinstance(func, ast.Name) else None

    def _of_subject(node: ast.expr) -> bool:  # the project's own constants: parse_field("5", MINUTE)
        return isinstance(node, (ast.Name, ast.Attribute)) and root(node) in subjects

    def last(func: ast.expr) -> str:
        return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""

    module_consts = literals(ast.Module(body=[n for n in tree.body if isinstance(n, ast.Assign)], type_ignores=[]))
    found: list[tuple[str, str]] = []
    for scope in ast.walk(tree):
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        consts = {**module_consts, **literals(scope)}
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call) or root(node.func) not in subjects or _MUTATES.search(last(node.func)):
                continue
            parent = parents.get(id(node))
            if isinstance(parent, (ast.Expr, ast.Await)):
                continue
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
                continue
            if not all(_literal(a) or (isinstance(a, ast.Name) and a.id in consts) or _of_subject(a) for a in args):
                continue
            names = {a.id for a in args if isinstance(a, ast.Name) and a.id in consts and a.id not in subjects}
            segment = ast.get_source_segment(source, node) if not names else None
            if segment is None or "\n" in segment:
                inlined = _Inline({n: consts[n] for n in names}).visit(ast.parse(ast.unparse(node), mode="eval"))
                segment = ast.unparse(inlined.body)
            if len(segment) <= _MAX_CALL and (last(node.func), segment) not in found:
                found.append((last(node.func), segment))
    return found


#: Methods that change the object they are called on.
_MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "remove",
                       "discard", "clear", "appendleft", "extendleft", "__setitem__"})
_MAX_SCAN = 400


@dataclass(frozen=True)
class _Project:
    """What the pristine project's source says about calling it from a canary."""

    stateless: bool  # no function keeps state between calls (see _project)
    signatures: dict[str, frozenset[str] | None]  # top-level function or class -> its parameters (None: **kwargs or unknown)

    def usable(self, calls: list[tuple[str, str]], words: list[str], rng: random.Random) -> list[tuple[str, str]]:
        """The calls a canary may make. A project that keeps state between calls could see a graded
        test's outcome change because a canary called it first (a cache, a counter, a mutable
        default argument): there a canary's call gets one keyword more than the callee takes, so it
        fails as Python binds its arguments, before any of the project's code runs."""
        if self.stateless:
            return calls
        out = []
        for name, call in calls:
            params = self.signatures.get(name)
            if params is None or not call.endswith(")"):
                continue
            word = rng.choice(words) + rng.choice(["", "_only", "_mode"])
            if word in params or keyword.iskeyword(word) or keyword.issoftkeyword(word) or not word.isidentifier():
                continue
            inner = call[call.index("(") + 1:-1].strip()
            extra = f"{word}={rng.choice(['True', 'False', 'None', '0', '1'])}"
            out.append((name, f"{call[:-1]}{', ' if inner else ''}{extra})"))
        return out


#: Bump when what :func:`_scan_project` finds changes: it names the scans stored on disk.
_SCAN_VERSION = 1


@functools.lru_cache(maxsize=256)
def _project(pristine: Path, roots: frozenset[str]) -> _Project:
    """:func:`_scan_project`, kept per tree in memory and on disk beside the tree cache: a
    pristine tree never changes, and the scan (up to a few hundred files: 10 s and more for
    sympy) would otherwise run in every process that grades the task, environments included."""
    key = hashlib.sha256(json.dumps([_SCAN_VERSION, str(pristine), sorted(roots)]).encode()).hexdigest()[:16]
    stored = cache_root() / "canary-scans" / f"{pristine.name}-{key}.json"
    try:
        data = json.loads(stored.read_text())
        return _Project(bool(data["stateless"]), {name: None if params is None else frozenset(params)
                                                  for name, params in data["signatures"].items()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    project = _scan_project(pristine, roots)
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=stored.parent, delete=False, suffix=".tmp") as fh:
            json.dump({"stateless": project.stateless,
                       "signatures": {name: None if params is None else sorted(params)
                                      for name, params in project.signatures.items()}}, fh)
        os.replace(fh.name, stored)
    except OSError:  # a read-only cache: the scan is simply done again next time
        pass
    return project


def _scan_project(pristine: Path, roots: frozenset[str]) -> _Project:
    """Scan the pristine source of the project's top-level modules ``roots`` (never the candidate's:
    a change must not choose how canaries call it). Stateful: a ``global`` or ``nonlocal``
    statement, a default argument that is not a constant, or a function that mutates a module-level
    name (``CACHE[k] = v``, ``SEEN.add(x)``); and a project whose source is not found. Once one
    file is stateful, the rest are read for their signatures only."""
    files: list[Path] = []
    for root in sorted(roots):
        for base in (pristine, pristine / "src", pristine / "lib"):
            if (base / root).is_dir():
                files += sorted((base / root).rglob("*.py"))[:_MAX_SCAN]
                break
            if (base / f"{root}.py").is_file():
                files.append(base / f"{root}.py")
                break
        else:
            return _Project(False, {})
    stateless, signatures = True, {}
    for file in files[:_MAX_SCAN]:
        try:
            tree = ast.parse(file.read_bytes())
        except (OSError, SyntaxError, ValueError):
            return _Project(False, {})
        module_names = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                        if isinstance(t, ast.Name)}
        for node in tree.body:
            function = node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
            if isinstance(node, ast.ClassDef) and not node.bases and not node.decorator_list:
                function = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # the same name defined twice (a version guard, a re-export): unknown
                known = function is not None and function.args.kwarg is None and node.name not in signatures
                signatures[node.name] = frozenset(a.arg for a in (*function.args.posonlyargs, *function.args.args,
                                                                  *function.args.kwonlyargs)) if known else None
        if not stateless:
            continue  # what is left to learn of this file is its signatures (above)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                stateless = False
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
                if not all(isinstance(d, (ast.Constant, ast.Name, ast.Attribute)) or
                           (isinstance(d, ast.Tuple) and _literal(d)) or
                           (isinstance(d, ast.UnaryOp) and _literal(d)) for d in defaults):
                    stateless = False
                if not isinstance(node, ast.Lambda):
                    local = {a.arg for a in (*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs)}
                    local |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                    for inner in ast.walk(node):
                        target = None
                        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                                and inner.func.attr in _MUTATORS:
                            target = inner.func.value
                        elif isinstance(inner, (ast.Subscript, ast.Attribute)) and isinstance(inner.ctx, ast.Store):
                            target = inner.value
                        if isinstance(target, ast.Name) and target.id in module_names and target.id not in local:
                            stateless = False
    return _Project(stateless, signatures)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


class _Inline(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.expr]) -> None:
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.expr:  # noqa: N802 - ast's visitor naming
        return self.values.get(node.id, node)
