"""The import graph of deepgym_envs: layered as pyproject's import-linter contracts say, and without
a circle, imports inside functions included (a circle held together by a late import is still one)."""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import deepgym_envs

REPO = Path(__file__).resolve().parents[1]
PACKAGE = Path(deepgym_envs.__file__).resolve().parent

#: Imports (importer -> imported) that may close a circle: only for optional heavy dependencies
#: imported where they are needed, each named with why. None is needed today.
ALLOWED: dict[tuple[str, str], str] = {}


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name (a package by its own name)."""
    out = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if rel.parts[0] == "_tasks":  # the installed wheel's task repositories: their code, not ours
            continue
        parts = [package, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth (functions, try blocks), but not under TYPE_CHECKING:
    those never run."""
    for node in ast.iter_child_nodes(tree):
        if _type_checking(node):
            yield from (i for child in node.orelse for i in _imports(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def import_graph(mods: dict[str, Path], package: str) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (a name's own module where it is one)."""

    def owner(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the importing module's package
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = ".".join([*here[:len(here) - node.level + 1], *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                if target == package or target.startswith(package + "."):
                    found = owner(target)
                    if found is not None and found != name:
                        graph[name].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _edges_within(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    members = set(component)
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]


def test_no_module_of_deepgym_envs_is_in_an_import_circle():
    graph = import_graph(modules(PACKAGE, "deepgym_envs"), "deepgym_envs")
    for (importer, imported), why in ALLOWED.items():
        graph[importer].discard(imported)
    found = circles(graph)
    assert not found, "import circles (function-level imports count):\n" + "\n".join(
        "  " + "; ".join(_edges_within(graph, c)) for c in found)


def test_a_circle_closed_by_an_import_inside_a_function_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    try:\n        from pkg.sub import high\n    except ImportError:\n"
                                "        pass\n")
    (pkg / "sub" / "high.py").write_text("from pkg import low\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import low\n")
    (pkg / "mid.py").write_text("from . import typed\n")
    graph = import_graph(modules(pkg, "pkg"), "pkg")
    assert graph["pkg.sub.high"] == {"pkg.low"} and graph["pkg.low"] == {"pkg.sub.high"}
    assert graph["pkg.typed"] == set() and graph["pkg.mid"] == {"pkg.typed"}
    assert circles(graph) == [["pkg.low", "pkg.sub.high"]]


@pytest.mark.skipif(importlib.util.find_spec("importlinter") is None or not (REPO / "pyproject.toml").is_file(),
                    reason="needs import-linter (the dev extra) and the checkout's pyproject.toml")
def test_the_import_linter_contracts_hold():
    """pyproject's contracts: the layer order, the core never importing the reference agents, and no
    circle between the modules of any package."""
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run([exe, "--no-cache", "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
