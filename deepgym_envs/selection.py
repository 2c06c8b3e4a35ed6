"""Test selection for the shaping reward: which hidden tests a change can affect.

At validation each hidden test is run alone, traced, on the pristine tree with the hidden tests
applied (:func:`deepgym_envs.validate.record_test_map`); the result is a :class:`TestMap`, stored
beside the task file (``NAME.testmap.json``, keyed by task id and a hash of what the task's grading
depends on, so a stale map is ignored). A shaping step then runs every FAIL_TO_PASS test plus the
PASS_TO_PASS tests whose recorded code the change touched; the others keep the outcome the map
recorded for them. The final verdict is always a full run.

The unit is the *block*: the body of a function (or method) defined outside any other function.
Everything else in a file (imports, signatures and defaults, decorators, class bodies, module
code, comments between functions) is the file's *skeleton*. For each file the change modified:

* added, deleted, a link, not Python source (data, configuration), unparsable, read at
  collection, or in no test's record: the full run;
* its skeleton changed (module-level code runs at import, for every test): the full run;
* a block that ran at collection changed (called at import): the full run;
* otherwise the tests that ran a changed block, or opened the file (``inspect`` reading
  source), are selected.

A block is compared with its first line, so a block that moved is changed too (tracebacks and
``inspect`` see line numbers). Tests that start processes, or whose outcome alone differs from
their outcome in the full run at validation, are always run.

What this assumes is what any per-test selection assumes: a test's outcome depends on the code
it runs, not on state another test's changed code left behind. An agent that breaks that (a
changed function run by a selected test that poisons a global another test reads) could move Φ on
one step; the episode's shaping still sums to the full runs' (the final verdict corrects Φ, see
:meth:`deepgym_envs.rewards.RewardModel.finish`), so no such path earns reward.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from deepgym_envs.gitrepo import run_git
from deepgym_envs.tasks import Task
from deepgym_envs.trees import pristine_tree

MAP_VERSION = 1
#: The block key for code outside every block (skeleton): it changes only with the skeleton.
MODULE = "<module>"
SIDECAR_SUFFIX = ".testmap.json"


@dataclass(frozen=True)
class Analysis:
    """A Python file cut into its skeleton and its blocks."""

    skeleton: bytes
    blocks: dict[str, tuple[int, bytes]]
    """key → (first line of the body, the body's text)."""
    starts: list[int]
    """Sorted first lines (decorators included) of the blocks' whole definitions, for :meth:`key_at`."""
    spans: list[tuple[int, int, str]]

    def key_at(self, line: int) -> str:
        """The block whose definition holds ``line`` (a code object's first line), else MODULE."""
        i = bisect.bisect_right(self.starts, line) - 1
        if i >= 0:
            lo, hi, key = self.spans[i]
            if lo <= line <= hi:
                return key
        return MODULE


#: The largest source cut into blocks (and read for it): a larger changed file gets the full run.
#: The agent shapes the file (a 1 GiB sparse one costs it nothing) and the host would read, parse
#: and cache it whole.
MAX_SOURCE_BYTES = 4 << 20
#: Sources up to this size are cached by their bytes (the pristine files, asked about every step);
#: larger ones are cut anew each time, so the cache holds at most 256 of these.
_CACHED_SOURCE_BYTES = 256 << 10


def analyse(source: bytes) -> Analysis | None:
    """Cut ``source`` into skeleton and blocks; None when it does not parse or is over MAX_SOURCE_BYTES."""
    if len(source) > MAX_SOURCE_BYTES:
        return None
    return _analysed(source) if len(source) <= _CACHED_SOURCE_BYTES else _analyse(source)


@functools.lru_cache(maxsize=256)
def _analysed(source: bytes) -> Analysis | None:
    return _analyse(source)


def _analyse(source: bytes) -> Analysis | None:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # An expression nested past the parser's recursion (1+1+...+1 a hundred thousand times):
        # the agent's source, which a full run grades as well as any.
        return None
    lines = source.splitlines(keepends=True)
    found: list[tuple[int, int, int, str]] = []  # (definition start, body start, end, qualname)

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                body = child.body[0]
                # A body sharing a line with the signature cannot be cut out: all skeleton.
                if body.lineno > child.lineno and not lines[body.lineno - 1][:body.col_offset].strip():
                    found.append((start, body.lineno, child.end_lineno or body.lineno, prefix + child.name))
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.stmt) or isinstance(child, (ast.excepthandler, ast.match_case)):
                walk(child, prefix)

    walk(tree, "")
    found.sort()
    skeleton: list[bytes] = []
    blocks: dict[str, tuple[int, bytes]] = {}
    spans: list[tuple[int, int, str]] = []
    pos = 0
    for i, (start, body, end, name) in enumerate(found):
        key = f"{i}:{name}"  # two definitions of one name (under if/else) stay apart
        skeleton += lines[pos:body - 1]
        skeleton.append(b"\0" + key.encode() + b"\n")
        blocks[key] = (body, b"".join(lines[body - 1:end]))
        spans.append((start, end, key))
        pos = end
    skeleton += lines[pos:]
    return Analysis(b"".join(skeleton), blocks, [s for s, _, _ in spans], spans)


@dataclass
class TestRecord:
    """What one hidden test did when it ran alone on the pristine tree."""

    __test__ = False  # not a pytest class, whatever its name

    blocks: dict[str, list[str]] = field(default_factory=dict)
    """file → keys of the blocks it ran (MODULE for code outside every block)."""
    files: list[str] = field(default_factory=list)
    """Workspace files it opened."""
    always: bool = False
    """Run it on every step: it started a process, or alone it did not get its full-run outcome."""
    outcome: str = "missing"
    """Its outcome in the full run on the pristine tree: what it keeps while not selected."""


@dataclass
class TestMap:
    """One task's recorded tests (see the module's docstring)."""

    __test__ = False

    key: str
    tests: dict[str, TestRecord]
    global_blocks: dict[str, list[str]]
    """Blocks run at collection (imports and what they call): a change to one runs everything."""
    global_files: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"version": MAP_VERSION, "key": self.key, "global": {"blocks": self.global_blocks,
                                                                     "files": self.global_files},
                "tests": {t: vars(r) for t, r in self.tests.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TestMap":
        return cls(data["key"], {t: TestRecord(**r) for t, r in data["tests"].items()},
                   data["global"]["blocks"], data["global"]["files"])


def build_map(key: str, trace: dict[str, Any], outcomes: dict[str, str], ids: list[str],
              read_pristine: Callable[[str], bytes | None]) -> TestMap:
    """A test map from a trace (:func:`deepgym_envs.testrun.trace.trace_tests`), the full run's
    ``outcomes`` on the pristine tree, and the pristine files (``read_pristine``)."""
    analyses: dict[str, Analysis | None] = {}

    def blocks_of(records: list[list[Any]]) -> dict[str, list[str]]:
        out: dict[str, set[str]] = {}
        for path, line, name in records:
            if path not in analyses:
                source = read_pristine(path) if path.endswith(".py") else None
                analyses[path] = analyse(source) if source is not None else None
            found = analyses[path]
            # A module's own code starts at line 1, where a function may start too: it is MODULE.
            out.setdefault(path, set()).add(found.key_at(line) if found is not None and name != "<module>"
                                            else MODULE)
        return {p: sorted(k) for p, k in sorted(out.items())}

    tests = {}
    for test_id in ids:
        rec = trace["tests"].get(test_id)
        outcome = outcomes.get(test_id, "missing")
        if not rec or "error" in rec:
            tests[test_id] = TestRecord(always=True, outcome=outcome)
            continue
        tests[test_id] = TestRecord(blocks_of(rec["blocks"]), rec["files"],
                                    rec["opaque"] or rec["outcome"] != outcome, outcome)
    glob = trace["global"]
    return TestMap(key, tests, blocks_of(glob["blocks"]), glob["files"])


def sidecar(task: Task) -> Path | None:
    """Where the map of ``task`` lives: beside its task file (None for tasks made in memory)."""
    if ":" not in task.source:
        return None
    path = Path(task.source.rsplit(":", 1)[0])
    return path.with_name(path.name.removesuffix(".jsonl") + SIDECAR_SUFFIX)


@functools.lru_cache(maxsize=64)
def _read_sidecar(path: str, mtime: float) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return data if data.get("version") == MAP_VERSION else {}


@functools.lru_cache(maxsize=1024)
def _tree_hash(tree: str) -> str:
    return run_git(["rev-parse", "HEAD^{tree}"], cwd=Path(tree)).strip()


def map_key(task: Task) -> str:
    """What a map is valid for, hashed: the pristine tree's content (its git tree, never file times,
    so a fresh checkout or an installed wheel keeps its maps), the hidden tests and the test command."""
    spec = json.dumps([_tree_hash(str(pristine_tree(task))), task.test_patch, task.FAIL_TO_PASS, task.PASS_TO_PASS,
                       task.flaky, task.test_cmd])
    return hashlib.sha256(spec.encode()).hexdigest()


def load_map(task: Task) -> TestMap | None:
    """The task's map, if one is stored and is current (:func:`map_key`); else None."""
    path = sidecar(task)
    try:
        data = _read_sidecar(str(path), os.stat(path).st_mtime) if path is not None else {}
    except (OSError, ValueError):
        return None
    row = data.get("tasks", {}).get(task.instance_id)
    if not row or row.get("key") != map_key(task):
        return None
    return TestMap.from_json(row)


def save_maps(path: Path, maps: dict[str, TestMap]) -> None:
    """Add ``maps`` (task id → map) to the sidecar at ``path``, keeping the other tasks' maps."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != MAP_VERSION:
            data = {}
    except (OSError, ValueError):
        data = {}
    rows = data.get("tasks", {})
    rows.update({t: m.to_json() for t, m in maps.items()})
    path.write_text(json.dumps({"version": MAP_VERSION, "tasks": dict(sorted(rows.items()))},
                               separators=(",", ":")) + "\n", encoding="utf-8")


def select_tests(tmap: TestMap, changed: list[str], read_pristine: Callable[[str], bytes | None],
           read_current: Callable[[str], bytes | None]) -> set[str] | None:
    """The hidden tests the changed files can affect, or None for "run them all".

    ``changed``: the paths that differ from the state the map was recorded on. ``read_*``: a
    path's bytes in that state and now; None when it is not a regular file there. They need read
    no more than MAX_SOURCE_BYTES + 1 bytes: a longer file gets the full run.
    """
    selected = {t for t, r in tmap.tests.items() if r.always or r.outcome != "passed"}
    global_files = set(tmap.global_files)
    for path in changed:
        old, new = read_pristine(path), read_current(path)
        if old is None or new is None:
            return None  # added, deleted, a link or a directory
        if len(old) > MAX_SOURCE_BYTES or len(new) > MAX_SOURCE_BYTES:
            return None  # read in part only: too large to tell what changed
        if old == new:
            continue
        if path in global_files or not path.endswith(".py"):
            # A data file may be read by stat, listdir or a child process as well as by open: no
            # record can say who depends on it.
            return None
        users = {t for t, r in tmap.tests.items() if path in r.files}
        ran = {t: set(r.blocks[path]) for t, r in tmap.tests.items() if path in r.blocks}
        if path in tmap.global_blocks or ran:
            before, after = analyse(old), analyse(new)
            if before is None or after is None or before.skeleton != after.skeleton:
                return None
            touched = {k for k, v in before.blocks.items() if after.blocks.get(k) != v}
            if touched & set(tmap.global_blocks.get(path, ())):
                return None
            users |= {t for t, keys in ran.items() if keys & touched}
        elif not users:
            return None  # outside every record: nothing says who reads it
        selected |= users
    return selected
