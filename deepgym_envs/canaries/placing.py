"""Where copied canaries go in a test file, and what they are called.

A copy is named the way its file names tests: its original's name with one word swapped for a
word of the file's other test names (drawn as often as those names use it), preferring a word
that the other names share too, so neither name of the pair is the odd one out. It goes among
its original's neighbours (a method into its original's class), before or after it, a few
definitions either way, with the blank lines the file puts between definitions.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter

from deepgym_envs.canaries.copies import Candidate

_CAMEL = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def render(path: str, source: str, chosen: list[Candidate], rng: random.Random, *,
           beside: bool = False) -> tuple[str, list[tuple[Candidate, str]]] | None:
    """``source`` with ``chosen`` planted under fresh names, and each one's node id (without a
    parameter suffix). ``beside``: each goes just before its original, so whatever running it
    leaves behind meets the original (the gold proof). None where the file cannot take them."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    taken = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    inserts: list[tuple[int, int, str]] = []
    planted = []
    for order, cand in enumerate(chosen):
        scope = _scope(tree, cand.cls)
        name = sibling_name(cand.original, _test_names(tree, cand.original), taken, rng) if scope else None
        if scope is None or name is None:
            continue
        taken.add(name)
        block = re.sub(rf"(\bdef\s+){re.escape(cand.original)}(\s*\()", rf"\g<1>{name}\g<2>", cand.source, count=1)
        inserts.append((*_where(scope, cand.original, rng, beside, block, len(lines)), order))
        planted.append((cand, f"{path}::{cand.cls}::{name}" if cand.cls else f"{path}::{name}"))
    out = list(lines)
    for index, text, _ in sorted(inserts, key=lambda t: (t[0], t[2]), reverse=True):
        out.insert(index, text)
    return "".join(out), planted


def _scope(tree: ast.Module, cls: str | None) -> list[ast.stmt] | None:
    if cls is None:
        return tree.body
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    return node.body if node is not None else None


def _test_names(tree: ast.Module, original: str) -> list[str]:
    return [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name.startswith("test") and n.name != original]


def _where(scope: list[ast.stmt], original: str, rng: random.Random, beside: bool, block: str,
           end: int) -> tuple[int, str]:
    """(the 0-based line to insert before, the text) for a block among the definitions of ``scope``."""
    defs = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    starts = [min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1 for n in defs]
    home = next(i for i, n in enumerate(defs) if n.name == original)
    gap = "\n\n" if scope and defs and defs[0].col_offset == 0 else "\n"
    slot = home if beside else min(max(home + rng.randint(-3, 4), 0), len(defs))
    if slot < len(defs):
        return starts[slot], block + gap
    last = defs[-1].end_lineno or end
    return last, gap + block


def sibling_name(original: str, others: list[str], taken: set[str], rng: random.Random) -> str | None:
    """A fresh name for a copy of ``original``: one of its words swapped for a word of ``others``."""
    snake = "_" in original.strip("_")
    words = original.split("_") if snake else _CAMEL.findall(original)
    if len(words) < 2 or words[0].lower() != "test":
        return None
    counts = Counter(w.lower() for name in others
                     for w in (name.split("_") if snake else _CAMEL.findall(name))[1:] if w)
    if not counts:
        return None
    shared = [i for i in range(1, len(words)) if counts[words[i].lower()]]
    bag = list(counts.elements())
    for _ in range(40):
        i = rng.choice(shared or range(1, len(words)))
        word = rng.choice(bag)
        if word in (w.lower() for w in words):
            continue
        if not snake:
            word = word.upper() if words[i].isupper() and len(words[i]) > 1 else word.capitalize()
        name = ("_" if snake else "").join([*words[:i], word, *words[i + 1:]])
        if name not in taken and name.isidentifier():
            return name
    return None
