"""Issue-style problem statements, written from what a user of the project would observe.

The statement says which behaviour is wrong (a failing test, shown as a reproduction), what
happened (the exception or the assertion's values) and what was expected. It never names the
changed file, function or line: everything in it comes from the test side of the failure.
An LLM can optionally reword it (:mod:`deepgym_envs.synth.rewrite`).
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass

_MAX_SNIPPET_LINES = 25
_MAX_ERROR_LINES = 8
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_EQ = re.compile(r"^(?:AssertionError: )?assert (.+?) == (.+)$")


@dataclass(frozen=True)
class Observation:
    """One failing test, as the user saw it."""

    test_id: str
    source: str
    """The test function's source ('' when it could not be found)."""
    error: list[str]
    """The exception message / assertion explanation lines."""


def test_source(file_text: str, test_id: str) -> str:
    """The source of the function a pytest id names (``file::Class::test[param]``), dedented."""
    parts = test_id.split("::")[1:]
    if not parts:
        return ""
    names = [p.split("[", 1)[0] for p in parts]
    try:
        tree = ast.parse(file_text)
    except SyntaxError:
        return ""
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for name in names:
        node = next((n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and n.name == name), None)
        if node is None and name is names[-1]:
            # A test method inherited from a mixin in the same file (``class LRUTest(CacheTestMixin, ...)``).
            node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and n.name == name), None)
        if node is None:
            return ""
        scope = getattr(node, "body", [])
    segment = ast.get_source_segment(file_text, node, padded=True) if node is not None else None
    return textwrap.dedent(segment or "").strip()


def humanize(test_id: str) -> str:
    """``tests/test_x.py::TestCache::test_maxsize_evicts[2]`` -> ``maxsize evicts``."""
    name = test_id.split("::")[-1].split("[", 1)[0]
    name = re.sub(r"^test_?", "", name)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").strip().lower()
    return name or "a test"


def write_statement(package: str, version: str, observations: list[Observation], total_failing: int) -> str:
    """The problem statement for a bug that makes ``total_failing`` tests fail."""
    first = observations[0]
    error = [_ADDRESS.sub("", line) for line in first.error[:_MAX_ERROR_LINES]]
    summary = _short_error(error)
    title = f"{package}: {humanize(first.test_id)} is broken" + (f" ({summary})" if summary else "")
    parts = [title, "",
             f"With {package} {version}, this no longer works:" if version else "This no longer works:", ""]
    snippet = first.source
    if snippet and len(snippet.splitlines()) <= _MAX_SNIPPET_LINES:
        parts += ["```python", snippet, "```", ""]
    else:
        parts += [f"(the check `{humanize(first.test_id)}` in the project's test suite)", ""]
    parts += ["Actual:", "", "```", *(error or ["the check fails (no message)"]), "```", ""]
    parts += ["Expected: " + _expected(error, first.source), ""]
    others = list(dict.fromkeys(humanize(o.test_id) for o in observations[1:]))
    if total_failing > 1:
        names = ", ".join(f"`{name}`" for name in others[:4])
        more = f" (among them {names})" if names else ""
        parts += [f"{total_failing - 1} other check(s) in the test suite fail as well{more}.", ""]
    return "\n".join(parts).rstrip() + "\n"


def _short_error(error: list[str]) -> str:
    if not error:
        return ""
    line = error[0]
    if _EQ.match(line) or line.startswith(("assert ", "AssertionError")):
        return "wrong result"
    name = line.split(":", 1)[0]
    return f"raises {name}" if name.isidentifier() and name[0].isupper() else ""


def _expected(error: list[str], source: str = "") -> str:
    if not error:
        return "the snippet runs without failing, as it did before."
    match = _EQ.match(error[0])
    if match:
        left, right = match.group(1).strip(), match.group(2).strip()
        side = _actual_side(source)
        if side == "left":
            return f"`{right}`, but `{left}` comes back."
        if side == "right":
            return f"`{left}`, but `{right}` comes back."
        return f"both sides of the comparison to agree (they are `{left}` and `{right}`)."
    if error[0].startswith(("assert", "AssertionError")):
        return "the assertion in the snippet holds."
    name = error[0].split(":", 1)[0]
    if "DID NOT RAISE" in error[0] or "Failed:" in error[0]:
        return "the error the snippet expects is raised."
    return f"no {name}: the snippet completes and its checks pass."


def _actual_side(source: str) -> str:
    """Which side of the test's one ``assert a == b`` computes the value (calls a function)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    compares = [n.test for n in ast.walk(tree) if isinstance(n, ast.Assert) and isinstance(n.test, ast.Compare)
                and len(n.test.ops) == 1 and isinstance(n.test.ops[0], ast.Eq)]
    if len(compares) != 1:
        return ""
    left, right = (any(isinstance(x, ast.Call) for x in ast.walk(side))
                   for side in (compares[0].left, compares[0].comparators[0]))
    return "left" if left and not right else "right" if right and not left else ""
