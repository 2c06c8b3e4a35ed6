"""Issue-style problem statements, written from what a user of the project would observe.

The statement is a script that fails (:mod:`deepgym_envs.synth.repro`, checked to fail on the
buggy code and pass on the clean code), a title naming the call and what goes wrong ("`index()`
returns 2 instead of 1"), what the script printed, and what was expected: the value the clean
code gives, or no error. It never names the changed file, function or line: everything in it
comes from the test side of the failure. An LLM can optionally reword it
(:mod:`deepgym_envs.synth.rewrite`).
"""

from __future__ import annotations

import ast
import builtins
import re

from deepgym_envs.synth.repro import literalish
from dataclasses import dataclass

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


@dataclass(frozen=True)
class Reproduced:
    """A reproduction script and what it did on the buggy and the clean tree."""

    test_id: str
    script: str
    buggy_output: str
    """The script's stdout and stderr on the buggy tree (it failed there)."""
    clean_output: str
    """Its stdout on the clean tree (it passed there)."""


def write_statement(package: str, version: str, repro: Reproduced, total_failing: int) -> str:
    """The problem statement: a title from the behaviour, the script, what it printed, what it should.

    Everything comes from running the script, not from pytest's rendering (no ``...`` elisions,
    no "Use -v to get more diff", no diff cut mid-line).
    """
    error = _exception_line(repro.buggy_output)
    name = error.split(":", 1)[0].strip()
    actual, expected = _last_value(repro.buggy_output), _last_value(repro.clean_output)
    shows_result = "print(repr(" in repro.script and actual is not None
    equality = bool(re.search(r"^assert \w+ == ", repro.script, re.M))
    expr = _result_expr(repro.script)
    called = "" if expr and _is_operation(expr) else call_name(repro.script)
    subject = f"`{called}()`" if called else f"`{expr}`" if expr else "this code"
    same = shows_result and actual == expected
    if name == "Failed" and "DID NOT RAISE" in error:
        raised = re.search(r"DID NOT RAISE <class '(?:[\w.]*\.)?(\w+)'>", error)
        what = f"does not raise {raised.group(1)}" if raised else "does not raise the expected error"
    elif name != "AssertionError":
        what = f"raises {name}" if name else "fails"
    elif same:
        what = "compares wrongly"  # the value is right; == (or its hash) is what broke
    elif shows_result and equality and expected is not None and max(len(actual), len(expected)) <= 40:
        what = f"returns {actual} instead of {expected}"
    elif shows_result:
        what = "returns a wrong value"
    else:
        what = "gives a wrong result"
    parts = [f"{package}: {subject} {what}", "",
             f"With {package} {version}, this script fails:" if version else "This script fails:", "",
             "```python", repro.script.rstrip(), "```", ""]
    if name == "AssertionError" and same:
        parts += ["It prints", "", "```", _shown(actual), "```", "",
                  "which is the value it should be, yet the assertion after it fails. Expected: the "
                  "assertion holds.", ""]
    elif name == "AssertionError" and shows_result:
        parts += ["It prints", "", "```", _shown(actual), "```", "",
                  "and the assertion after it fails. Expected: " + (f"`{_shown(expected)}`" if expected is not None
                                                                   else "the assertion holds") + ".", ""]
    else:
        parts += ["Actual:", "", "```", _shown(error) or "AssertionError", "```", ""]
        tail = f" (it prints `{_shown(expected)}`)" if expected is not None and shows_result else ""
        parts += [f"Expected: the script runs to the end without an error{tail}.", ""]
    if total_failing > 1:
        parts += [f"{total_failing - 1} other test(s) in the project's suite fail as well.", ""]
    return "\n".join(parts).rstrip() + "\n"


def call_name(script: str) -> str:
    """The function or method the failing statement calls (the one assigned to ``result``, or the
    script's last statement), else the last call before it (``s.remove('b')`` before
    ``assert s == ...``): what a person would name in the title."""
    try:
        tree = ast.parse(script)
    except SyntaxError:
        return ""
    modules = {(a.asname or a.name) for s in tree.body if isinstance(s, ast.Import) for a in s.names}
    body: list[ast.stmt] = tree.body
    while body:
        assigns = [i for i, s in enumerate(body) if isinstance(s, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "result" for t in s.targets)]
        at = assigns[-1] if assigns else len(body) - 1
        inner = getattr(body[at], "body", None)
        if assigns or not isinstance(inner, list) or not inner or isinstance(body[at], ast.With):
            break
        body = inner
    else:
        return ""
    # The failing statement first, then the ones before it, nearest first.
    for stmt in [body[at], *reversed(body[:at])]:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        parts: list[ast.AST] = [stmt]
        if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare):
            # Not the written-out expected value: `assert s == OrderedSet('bc')` is about s.
            parts = [x for x in (stmt.test.left, *stmt.test.comparators) if not literalish(x)]
        for node in (n for part in parts for n in ast.walk(part)):
            if isinstance(node, ast.Call):
                name = _subject(node.func, modules)
                if name:
                    return name
    return ""


def _subject(func: ast.expr, modules: set[str]) -> str:
    if isinstance(func, ast.Name):
        name = func.id
    elif isinstance(func, ast.Attribute):
        name = func.attr
        if isinstance(func.value, ast.Name) and func.value.id in modules and func.value.id != "pytest":
            return f"{func.value.id}.{name}"  # pickle.loads, not loads
    else:
        return ""
    return name if name not in _NOT_SUBJECTS and not hasattr(builtins, name) else ""


def _result_expr(script: str, limit: int = 40) -> str:
    """The expression assigned to ``result`` (``dur1 + dur2``), when short."""
    match = re.search(r"^\s*result = (.+)$", script, re.M)
    return match.group(1) if match and len(match.group(1)) <= limit else ""


def _is_operation(expr: str) -> bool:
    """``a + b``, ``-d``, ``x[1:2]``: an operator, not a call, is what the title names."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.BoolOp))


_NOT_SUBJECTS = {"raises", "print", "repr", "approx"}
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$")


def _exception_line(output: str) -> str:
    """The last line of the traceback (``KeyError: 'b'``), without memory addresses."""
    lines = output.splitlines()
    if not any(line.startswith("Traceback (most recent call last)") for line in lines):
        return ""
    for line in reversed(lines):
        if line and not line[0].isspace() and _EXC_LINE.match(line):
            return _ADDRESS.sub("", line).strip()
    return ""


def exception_name(output: str) -> str:
    """``KeyError`` for a traceback ending in ``KeyError: 'b'`` ('' without a traceback)."""
    return _exception_line(output).split(":", 1)[0].strip()


def _last_value(output: str) -> str | None:
    """The last line the script printed before any traceback (the ``repr`` of ``result``)."""
    lines = output.split("Traceback (most recent call last)", 1)[0].strip().splitlines()
    return _ADDRESS.sub("", lines[-1]).strip() if lines else None


def _shown(text: str | None, limit: int = 600) -> str:
    text = text or ""
    if len(text) <= limit:
        return text
    return f"(a value {len(text)} characters long; run the script to see it whole)"
