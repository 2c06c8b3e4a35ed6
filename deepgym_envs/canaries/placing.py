"""Where copied canaries go in a test file, and what they are called.

A copy is named the way its file names tests: its original's name with one word swapped for a
word of the file's other test names (drawn as often as those names use it), preferring a word
that the other names share too, so neither name of the pair is the odd one out. It goes among
its original's class for a method), right before or right after it, with the blank lines the file
puts between definitions.
"""

from __future__ import annotations

import ast
import functools
import math
import random
import re
from collections import Counter

from deepgym_envs.canaries.copies import Candidate

_CAMEL = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def render(path: str, source: str, chosen: list[Candidate], rng: random.Random, *,
           beside: bool = False) -> tuple[str, list[tuple[Candidate, str]]] | None:
    """``source`` with ``chosen`` planted under fresh names (those that get one), and each one's
    node id (without a parameter suffix). ``beside``: each goes just before its original, so
    whatever running it leaves behind meets the original (the gold proof). None where the file
    cannot take them."""
    names = _names(source)
    if names is None:
        return None
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    tests, taken = names[0], set(names[1])
    inserts: list[tuple[int, str, int]] = []
    planted = []
    for order, cand in enumerate(chosen):
        scope = _scope(tree, cand.cls)
        named = _name(cand, tests, taken, rng, beside) if scope and _holds(scope, cand.original) else None
        if named is None:
            continue
        name, after = named
        taken.add(name)
        block = re.sub(rf"(\bdef\s+){re.escape(cand.original)}(\s*\()", rf"\g<1>{name}\g<2>", cand.source, count=1)
        inserts.append((*_where(scope, cand.original, after, block, len(lines)), order))
        planted.append((cand, f"{path}::{cand.cls}::{name}" if cand.cls else f"{path}::{name}"))
    out = list(lines)
    for index, text, _ in sorted(inserts, key=lambda t: (t[0], t[2]), reverse=True):
        out.insert(index, text)
    return "".join(out), planted


def _name(cand: Candidate, tests: tuple[str, ...], taken: set[str], rng: random.Random,
          beside: bool) -> tuple[str, bool] | None:
    """A name for the copy and whether it goes after its original (the side the name suits)."""
    others = [n for n in tests if n != cand.original]
    first = not beside and rng.random() < 0.5
    for after in (first,) if beside else (first, not first):
        name = sibling_name(cand.original, others, taken, rng, sides=_sides(tests, cand.original, after))
        if name is not None:
            return name, after
    if beside:  # the proof's names are never seen by a change: any fresh one will do
        return next(f"{cand.original}_{k}" for k in range(len(taken) + 1) if f"{cand.original}_{k}" not in taken), False
    return None


def _holds(scope: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in scope)


def _sides(tests: tuple[str, ...], original: str, after: bool) -> tuple[str, str]:
    """(the neighbour the original keeps, the one its copy gets) when the copy goes ``after`` it."""
    i = tests.index(original) if original in tests else 0
    before_it, after_it = (tests[i - 1] if i else ""), (tests[i + 1] if i + 1 < len(tests) else "")
    return (before_it, after_it) if after else (after_it, before_it)


def can_name(source: str, cand: Candidate) -> bool:
    """Whether a copy of ``cand`` in ``source`` can be named like its siblings."""
    names = _names(source)
    if names is None:
        return False
    others = [n for n in names[0] if n != cand.original]
    return any(sibling_name(cand.original, others, set(names[1]), random.Random(0),
                            sides=_sides(names[0], cand.original, after)) for after in (False, True))


@functools.lru_cache(maxsize=32)
def _names(source: str) -> tuple[tuple[str, ...], frozenset[str]] | None:
    """The file's test function names, and every name it defines; None where it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    defs = [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return tuple(n for n in defs if n.startswith("test")), frozenset(defs)


def _scope(tree: ast.Module, cls: str | None) -> list[ast.stmt] | None:
    if cls is None:
        return tree.body
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    return node.body if node is not None else None


def _where(scope: list[ast.stmt], original: str, after: bool, block: str, end: int) -> tuple[int, str]:
    """(the 0-based line to insert before, the text) for a block right before or after ``original``."""
    defs = [n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    starts = [min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1 for n in defs]
    slot = next(i for i, n in enumerate(defs) if n.name == original) + after
    gap = "\n\n" if defs[0].col_offset == 0 else "\n"
    if slot < len(defs):
        return starts[slot], block + gap
    return defs[-1].end_lineno or end, gap + block


def sibling_name(original: str, others: list[str], taken: set[str], rng: random.Random,
                 sides: tuple[str, str] = ("", "")) -> str | None:
    """A fresh name for a copy of ``original``: one of its words swapped for a word of ``others``.

    The new word fits where it goes as well as the old one did: as common among the other names,
    about as long, and in word pairs (with the words either side) that the other names use as
    often as they used the old word's. A name made of words no other name puts together would
    stand out beside its original's, and so would one word left unique to the original. ``sides``
    (the neighbour the original keeps, the one the copy gets): files group tests by topic, so the
    new word is one the copy's neighbour has where the old word is one the original's has.
    """
    snake = "_" in original.strip("_")
    split = (lambda n: [w for w in n.split("_") if w]) if snake else _CAMEL.findall
    words = split(original)
    if len(words) < 2 or words[0].lower() != "test":
        return None
    names = [[w.lower() for w in split(n)] for n in others]
    counts = Counter(w for ws in names for w in ws[1:])
    pairs = {p for ws in names for p in zip(ws, ws[1:])}
    lower = [w.lower() for w in words]
    places = [i for i in range(1, len(words)) if counts[lower[i]]]
    rng.shuffle(places)
    vocabulary = sorted(counts)
    for i in places:
        kept, gets = ({w.lower() for w in split(n)} for n in sides)
        fits = [w for w in vocabulary if w not in lower and _fits(lower, i, w, counts, pairs)
                and (w in gets) == (lower[i] in kept)]
        # Drawn as often as the other names use each word, as the word it replaces was.
        for word in _weighted_order(fits, [counts[w] for w in fits], rng):
            if not snake:
                word = word.upper() if words[i].isupper() and len(words[i]) > 1 else word.capitalize()
            name = ("_" if snake else "").join([*words[:i], word, *words[i + 1:]])
            if name not in taken and name.isidentifier():
                return name
    return None


def _fits(words: list[str], i: int, word: str, counts: Counter, pairs: set) -> bool:
    def context(w: str) -> tuple[bool, bool]:
        return (words[i - 1], w) in pairs, i + 1 < len(words) and (w, words[i + 1]) in pairs

    return (context(word) == context(words[i]) and abs(len(word) - len(words[i])) <= 1
            and abs(math.log1p(counts[word]) - math.log1p(counts[words[i]])) <= 0.5)


def _weighted_order(items: list[str], weights: list[int], rng: random.Random) -> list[str]:
    """``items`` in a random order where each comes early in proportion to its weight."""
    return sorted(items, key=lambda w: rng.random() ** (1 / weights[items.index(w)]), reverse=True)
