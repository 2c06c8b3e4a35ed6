"""Hide the tests that decide a task while keeping a visible suite.

The usual way is to leave every file that holds a FAIL_TO_PASS test out of the base state. When
those files are the whole suite (ordered-set ships one test file), that would leave the agent
nothing to run, so the failing test functions are cut out of their files instead and come back
in ``test_patch``: the rest of each file stays visible, and still passes.

>>> text = "import m\\n\\n\\ndef test_a():\\n    assert m.a()\\n\\n\\ndef test_b():\\n    assert m.b()\\n"
>>> print(strip_tests(text, {("test_a",)}))
import m
<BLANKLINE>
<BLANKLINE>
def test_b():
    assert m.b()
<BLANKLINE>
"""

from __future__ import annotations

import ast


def test_path(test_id: str) -> tuple[str, ...]:
    """``tests/t.py::Cls::test_x[2]`` -> ``("Cls", "test_x")``: where the test's function is in its file."""
    return tuple(p.split("[", 1)[0] for p in test_id.split("::")[1:])


def strip_tests(text: str, paths: set[tuple[str, ...]]) -> str | None:
    """The file without the functions ``paths`` name (class path + function name), or None when
    one of them is not defined in this file (inherited from elsewhere: it could not be hidden)
    or the file does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.splitlines(keepends=True)
    cuts: list[tuple[int, int, str]] = []  # (first line, last line, replacement) 1-based
    for path in paths:
        found = _find(tree.body, path)
        if found is None:
            return None
        node, siblings = found
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        last = node.end_lineno or node.lineno
        # A class whose only statement goes still needs a body.
        alone = [s for s in siblings if s not in _removed(siblings, paths, path[:-1])]
        indent = " " * node.col_offset
        cuts.append((first, last, f"{indent}pass\n" if not alone and node is siblings[-1] else ""))
    for first, last, repl in sorted(set(cuts), reverse=True):
        lines[first - 1:last] = [repl] if repl else []
    out = "".join(lines)
    try:
        ast.parse(out)
    except SyntaxError:
        return None
    return out


def _find(body: list[ast.stmt], path: tuple[str, ...]) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef,
                                                                    list[ast.stmt]] | None:
    scope = body
    for name in path[:-1]:
        cls = next((n for n in scope if isinstance(n, ast.ClassDef) and n.name == name), None)
        if cls is None:
            return None
        scope = cls.body
    fn = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == path[-1]),
              None)
    return (fn, scope) if fn is not None else None


def _removed(siblings: list[ast.stmt], paths: set[tuple[str, ...]], prefix: tuple[str, ...]) -> list[ast.stmt]:
    names = {p[-1] for p in paths if p[:-1] == prefix}
    return [s for s in siblings if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in names]
