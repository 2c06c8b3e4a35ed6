"""A white-box detector cannot tell a canary from the graded test it copies.

The template canaries shared a shape that eight substrings recognised every time. Copies have
their original's shape by construction, so what is left to a detector written with the planting
code in hand is what planting chooses: the name, the place, and the changed literal. Each
feature below aims at one of those choices; a detector learns which way each one points on half
of the pairs, and on the other half it must do no better than a coin.
"""

from __future__ import annotations

import ast
import functools
import math
import random
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepgym_envs import load_tasks
from deepgym_envs.canaries import Pool, plant
from deepgym_envs.canaries.copies import candidates
from deepgym_envs.trees import pristine_tree

#: Builds the synthesised tasks' trees and plants a few hundred pairs: about two minutes.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: A few synthesised tasks from packages whose tests are written in different ways.
SYNTH = ("arrow-1.3.0", "humanize-4.9.0", "pydash-8.0.1", "semantic-version-2.10.0", "toolz-1.0.0",
         "webcolors-24.6.0", "more-itertools-10.3.0", "natsort-8.4.0")


class _Files:
    """What plant() needs of a sandbox: the hidden test files, read and written."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = dict(files)

    def read_file(self, path: str) -> bytes:
        return self.files[path].encode()

    def write_file(self, path: str, data: bytes) -> None:
        self.files[path] = data.decode()


def _hidden_files(task) -> dict[str, str]:
    """The graded test files as a grading view holds them (the test patch applied), read on the host."""
    tree = pristine_tree(task)
    paths = sorted({i.split("::", 1)[0] for i in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if ".py" in i})
    out = {p: (tree / p).read_text() for p in paths if (tree / p).is_file()}
    if task.test_patch.strip():
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            for p, text in out.items():
                (Path(tmp) / p).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / p).write_text(text)
            args = ["git", "apply", "--unsafe-paths", *(f"--include={p}" for p in paths), "-"]
            subprocess.run(args, cwd=tmp, input=task.test_patch, text=True, check=True, capture_output=True)
            out = {p: (Path(tmp) / p).read_text() for p in paths if (Path(tmp) / p).is_file()}
    return out


def _pool(files: dict[str, str], ids: list[str], first: list[str]) -> Pool:
    """Every candidate taken as proven (the proof decides which survive, not what they look like)."""
    found = []
    for path, source in files.items():
        for cand in candidates(path, source, [i for i in ids if i.startswith(path + "::")], random.Random(path),
                               first=frozenset(first)):
            outcome = "failed" if cand.perturbed else "passed"
            found.append(cand.__class__(**{**cand.__dict__, "expect": (("", outcome, ""),)}))
    return Pool(tuple(found))


@dataclass
class Pair:
    source: str  # the planted file
    canary: str  # "name" or "Class::name"
    original: str
    perturbed: bool


def _pairs(tasks, rng: random.Random, per_task: int = 3) -> list[Pair]:
    pairs = []
    for task in tasks:
        ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
        files = _hidden_files(task)
        pool = _pool(files, ids, task.FAIL_TO_PASS)
        if not pool.usable:
            continue
        for _ in range(per_task):
            sb = _Files(files)
            planted = plant(sb, ids, rng, pool=pool)
            bases = {c.nodeid.split("[")[0]: c for c in planted if c.origin == "copy"}
            for base, c in bases.items():
                perturbed = any(o.expect == "failed" for o in planted if o.nodeid.split("[")[0] == base)
                pairs.append(Pair(sb.files[c.file], base.split("::", 1)[1], c.twin.split("[")[0].split("::", 1)[1],
                                  perturbed))
    return pairs


# -- the detector --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _tests(source: str) -> dict[str, ast.FunctionDef]:
    """The file's test functions by qualified name ("name", "Class::name"), in file order."""
    out = {}
    for node in ast.parse(source).body:
        inner = node.body if isinstance(node, ast.ClassDef) else [node]
        for fn in inner:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                out[f"{node.name}::{fn.name}" if fn is not node else fn.name] = fn
    return out


@functools.lru_cache(maxsize=64)
def _literals(source: str) -> Counter:
    return sum((_literals_of(fn) for fn in _tests(source).values()), Counter())


def _literals_of(fn: ast.FunctionDef) -> Counter:
    return Counter(repr(n.value) for n in ast.walk(fn) if isinstance(n, ast.Constant))


def _words(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name.split("::")[-1])][1:]


def _literal_diff(a: ast.FunctionDef, b: ast.FunctionDef) -> tuple[object, object] | None:
    ca = [n.value for n in ast.walk(a) if isinstance(n, ast.Constant)]
    cb = [n.value for n in ast.walk(b) if isinstance(n, ast.Constant)]
    diff = [(x, y) for x, y in zip(ca, cb) if x != y or type(x) is not type(y)]
    return diff[0] if len(diff) == 1 else None


def _collection_order(fn: ast.FunctionDef, value: object) -> float:
    """How orderly the number sequences holding ``value`` are: sorted, evenly spaced, no repeats."""
    score = 0.0
    for node in ast.walk(fn):
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            nums = [e.value for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is int]
            if len(nums) >= 3 and value in nums:
                steps = {b - a for a, b in zip(nums, nums[1:])}
                score += (nums == sorted(nums)) + (len(steps) == 1) + (len(set(nums)) == len(nums))
    return score


def _features(source: str, name: str, partner: str) -> list[float]:
    fns = _tests(source)
    me, other = fns[name], fns[partner]
    rest = [q for q in fns if q not in (name, partner)]
    counts = Counter(w for q in rest for w in _words(q))
    words = _words(name)
    bigrams = {b for q in rest for b in zip(_words(q), _words(q)[1:])}
    order = list(fns)
    i = order.index(name)
    near = [order[j] for j in (i - 1, i + 1) if 0 <= j < len(order) and order[j] != partner]
    literals = _literals(source) - _literals_of(me) - _literals_of(other)
    diff = _literal_diff(me, other)
    mine = diff[0] if diff else None
    text = str(mine) if isinstance(mine, (str, int, float)) else ""
    return [
        sum(counts[w] == 0 for w in words),  # a word no other test name uses
        sum(math.log1p(counts[w]) for w in words) / max(len(words), 1),  # how common its words are
        len(name),
        sum(b in bigrams for b in zip(words, words[1:])),  # word pairs other names use
        float(order.index(name) > order.index(partner)),  # comes second
        sum(len(set(_words(n)) & set(words)) for n in near),  # like its neighbours
        i / len(order),  # how far down the file
        literals[repr(mine)] if diff else 0.0,  # the value turns up elsewhere
        len(text) - len(text.rstrip("0")) if isinstance(mine, int) else 0.0,  # a round number
        _collection_order(me, mine) if diff else 0.0,  # an orderly sequence
        sum(c.isalpha() for c in text) / max(len(text), 1) if isinstance(mine, str) else 0.0,
        float(mine is True) if isinstance(mine, bool) else 0.0,
    ]


def _train(pairs: list[Pair], rng: random.Random) -> list[float]:
    """Per feature, the sign that points at the canary more often on these pairs (0: no lead)."""
    diffs = [[a - b for a, b in zip(_features(p.source, p.canary, p.original),
                                     _features(p.source, p.original, p.canary))] for p in pairs]
    return [float(sum(d[k] > 0 for d in diffs) - sum(d[k] < 0 for d in diffs)) for k in range(len(diffs[0]))]


def _guess(weights: list[float], pair: Pair, shown_first: str, shown_second: str, rng: random.Random) -> str:
    """Which of the two shown names is the canary."""
    diff = [a - b for a, b in zip(_features(pair.source, shown_first, shown_second),
                                  _features(pair.source, shown_second, shown_first))]
    score = sum(w * (1 if d > 0 else -1 if d < 0 else 0) for w, d in zip(weights, diff))
    return shown_first if score > 0 else shown_second if score < 0 else rng.choice([shown_first, shown_second])


def _interval(n: int) -> tuple[float, float]:
    half = 1.96 * math.sqrt(0.25 / n)
    return 0.5 - half, 0.5 + half


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    rng = random.Random(20261127)
    tasks = list(load_tasks("builtin"))
    for name in SYNTH:
        tasks += list(load_tasks(str(ROOT / "tasks" / "synth-curated" / f"{name}.jsonl")))[:2]
    found = _pairs(tasks, rng)
    rng.shuffle(found)
    return found


def test_a_detector_with_the_planting_code_in_hand_does_no_better_than_chance(pairs):
    rng = random.Random(7)
    train, held = pairs[: len(pairs) // 2], pairs[len(pairs) // 2:]
    weights = _train(train, rng)
    right = 0
    for p in held:
        shown = [p.canary, p.original]
        rng.shuffle(shown)
        right += _guess(weights, p, *shown, rng) == p.canary
    low, high = _interval(len(held))
    print(f"detector: {right}/{len(held)} = {right / len(held):.3f}; chance interval [{low:.3f}, {high:.3f}]; "
          f"weights {weights}")
    assert len(held) >= 100, len(held)
    assert low <= right / len(held) <= high, (right, len(held), weights)


def test_the_pairs_hold_both_kinds_and_each_copy_is_its_original_but_for_one_literal(pairs):
    assert {p.perturbed for p in pairs} == {True, False}
    for p in pairs:
        a, b = _tests(p.source)[p.canary], _tests(p.source)[p.original]
        same = ast.dump(a).replace(repr(a.name), "NAME") == ast.dump(b).replace(repr(b.name), "NAME")
        assert same != p.perturbed and (same or _literal_diff(a, b) is not None), (p.canary, p.original)
        assert [x.arg for x in a.args.args] == [x.arg for x in b.args.args]
