"""The leak scan (issue 11, class F): is a task's answer lying around where its agent can read it?

Needles, per task: the gold patch's added lines (those not already in the files it fixes), the
hidden test names (FAIL_TO_PASS functions the pristine tree does not define) and the hidden test
patch's added lines (none the starting tree holds anywhere, unless that is all of them); short
lines and lines of nothing but syntax are dropped. They are searched for in everything readable from the sandbox's starting state, *inside*
the sandbox, so the scan sees exactly what the agent sees:

* the workspace, every file, ``.git`` included, and every git object (``git cat-file
  --batch-all-objects``: packs, unreachable objects, alternates);
* ``/tmp``, the support directory, the Python installation and its site-packages, and every other
  directory mounted into the sandbox that is not a system directory (read from the sandbox's own
  ``/proc/self/mountinfo``). Those are shared by many tasks: each is scanned once, for the needles
  of every task that sees it.

The needles reach the sandbox through a command's environment, never a file the scan would find.
A location leaks a task when it holds at least half of one kind of its needles (two at least,
where there are two): a copy of the fixed file, a git object of the fix or a task file holds them
all, a line that happens to recur elsewhere does not.

>>> leaks = scan_tasks(load_tasks("builtin"))          # doctest: +SKIP
>>> [l.to_dict() for l in leaks]
[]
"""

from __future__ import annotations

import base64
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from deepgym_envs.pyenv import sandbox_spec
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.tasks import Task, patch_paths
from deepgym_envs.trees import pristine_tree, run_git

MIN_LINE = 16
MIN_NAME = 10
#: Not searched: system directories (the distribution's files) and kernel file systems.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/dev",
          "/sys", "/run")
SCAN_TIMEOUT = 900.0
#: Characters of one environment string of needles (the kernel's limit is 128 KiB per string)...
ENV_PART = 96 << 10
#: ...and of all of them in one command (the whole environment and argv share about 2 MiB).
ENV_TOTAL = 1 << 20

#: Runs inside the sandbox: files of the per-task roots, every git object, then the mount list.
_SCANNER = r'''
import base64, json, os, site, subprocess, sys
parts = [os.environ.pop("AUDIT_NEEDLES_%d" % i) for i in range(int(os.environ.pop("AUDIT_PARTS")))]
needles = [n.encode() for n in json.loads(base64.b64decode("".join(parts)))]

def check(loc, data):
    hits = [i for i, n in enumerate(needles) if n in data]
    if hits:
        print(json.dumps({"loc": loc, "hits": hits}), flush=True)

for root in sys.argv[1:]:
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                if os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) < (64 << 20):
                    with open(path, "rb") as fh:
                        check(path, fh.read())
            except OSError:
                pass
git = subprocess.Popen(["git", "-c", "safe.directory=*", "-C", "/testbed", "cat-file", "--batch-all-objects",
                        "--batch", "--unordered"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
while True:
    head = git.stdout.readline().split()
    if len(head) != 3:
        break
    data = git.stdout.read(int(head[2]))
    git.stdout.read(1)
    check("git object %s (%s)" % (head[0].decode(), head[1].decode()), data)
git.wait()
stats = []
for dirpath, dirs, files in os.walk("/testbed"):
    dirs[:] = [d for d in dirs if d != ".git"]
    for name in files:
        try:
            st = os.lstat(os.path.join(dirpath, name))
        except OSError:
            continue
        stats.append([os.path.relpath(os.path.join(dirpath, name), "/testbed"), st.st_mtime_ns, st.st_ctime_ns,
                      st.st_ino])
print(json.dumps({"stats": stats}))
roots = [line.split()[4] for line in open("/proc/self/mountinfo")]
roots += [sys.prefix, sys.base_prefix, *site.getsitepackages()]
print(json.dumps({"roots": sorted({os.path.realpath(r) for r in roots if os.path.isdir(r)})}))
'''
_PER_TASK_ROOTS = ("/testbed", "/tmp")
#: An order singles out the files to fix only where chance would put them on top less than one
#: time in this many (C(files, files to fix) orders).
ORDER_ODDS = 100


@dataclass
class Leak:
    """Where one task's answer (``gold``) or hidden tests (``tests``) can be read from its sandbox."""

    task_id: str
    kind: str
    location: str
    found: int
    """How many of the kind's needles that location holds..."""
    of: int
    """...of how many."""
    sample: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Needles:
    task: Task
    by_kind: dict[str, list[str]] = field(default_factory=dict)
    context: dict[str, list[str]] = field(default_factory=dict)
    """A lone needle's neighbours in the fixed file (up to two lines each side, from its hunk): a
    well-known line (a leap-year test), or one the project repeats with its neighbour in a sibling
    module (isodate's ``int(groups["tzmin"] or 0),``), then only counts where all of them are too.
    A copy of the fixed file, its git object or a task file holds them all."""

    @property
    def flat(self) -> list[str]:
        base = [s for k in ("gold", "tests") for s in self.by_kind[k]] + [c for cs in self.context.values() for c in cs]
        return list(dict.fromkeys(base + [_escaped(s) for s in base]))

    def threshold(self, kind: str) -> int:
        n = len(self.by_kind.get(kind, []))
        return max(min(2, n), math.ceil(n / 2))


def _escaped(text: str) -> str:
    """The text as it reads inside a JSON string (a task file holds its patches so)."""
    return json.dumps(text)[1:-1]


def task_needles(task: Task, tree: Path | None = None) -> _Needles:
    n = _Needles(task, needles(task, tree))
    for kind, patch in (("gold", task.patch), ("tests", task.test_patch)):
        if len(n.by_kind[kind]) == 1:
            ctx = _neighbours(patch, n.by_kind[kind][0])
            if ctx:
                n.context[n.by_kind[kind][0]] = ctx
    return n


def _neighbours(patch: str, needle: str, each_side: int = 2) -> list[str]:
    """The nearest lines of at least 8 characters before and after ``needle`` in its hunk of the
    patched file, ``each_side`` at most on each side."""
    hunk: list[str] = []
    for line in [*patch.splitlines(), "@@"]:
        if line.startswith(("+++", "---", "@@", "diff ")):
            if needle in hunk:
                at = hunk.index(needle)
                return hunk[:at][-each_side:] + hunk[at + 1:][:each_side]
            hunk = []
        elif line[:1] in ("+", " ") and (len(line[1:].strip()) >= 8 or line[1:].strip() == needle):
            hunk.append(line[1:].strip())
    return []


def needles(task: Task, tree: Path | None = None) -> dict[str, list[str]]:
    """{"gold": [...], "tests": [...]}: the strings that give a task away (see the module doc)."""
    tree = Path(tree) if tree else pristine_tree(task)
    gold = _added(task.patch, _texts(tree, patch_paths(task.patch)))
    tests = _added(task.test_patch, _texts(tree, patch_paths(task.test_patch)))
    # A hidden test line that a file of the starting tree holds too (test suites repeat themselves
    # across sibling modules) gives nothing away: finding it proves no leak. Where that is every
    # line, they stay. The gold's lines all stay: a fixed file's copy in the tree must be found.
    known = _in_tree_any(tree, tests)
    tests = [s for s in tests if s not in known] or tests
    for test_id in task.FAIL_TO_PASS:
        name = re.sub(r"\[.*\]$", "", test_id.split("::")[-1])
        if len(name) >= MIN_NAME and name not in tests and not _in_tree(tree, name):
            tests.append(name)
    return {"gold": gold, "tests": tests}


def _texts(tree: Path, paths: list[str]) -> str:
    return "\n".join((tree / p).read_text(encoding="utf-8", errors="replace") for p in paths if (tree / p).is_file())


def _added(patch: str, before: str) -> list[str]:
    out: list[str] = []
    for line in patch.splitlines():
        if not line.startswith("+") or line.startswith("+++"):
            continue
        text = line[1:].strip()
        if len(text) >= MIN_LINE and re.search(r"[A-Za-z0-9]{3}", text) and text not in before and text not in out:
            out.append(text)
    return out


def _in_tree_any(tree: Path, texts: list[str]) -> set[str]:
    """Those of ``texts`` some file of the tree's commit holds (one ``git grep`` for all)."""
    if not texts:
        return set()
    # git grep exits 1 when nothing matches: not an error here. The patterns come on stdin.
    out = run_git(["grep", "-h", "-o", "-I", "-F", "--no-color", "-f", "-", "HEAD", "--"], cwd=tree,
                  input="\n".join(texts) + "\n", check=False)
    # -o prints the longest match at a place: a text inside a longer one is found through it.
    matches = set(out.splitlines())
    return {t for t in texts if t in matches or any(t in m for m in matches)}


def _in_tree(tree: Path, text: str) -> bool:
    try:
        run_git(["grep", "-q", "-F", "-e", text, "HEAD", "--"], cwd=tree)
        return True
    except Exception:  # git grep exits 1 when nothing matches
        return False


def scan_tasks(tasks: Sequence[Task], backend: str | None = None) -> list[Leak]:
    """Every leak of every task (none is what a sound task set gives)."""
    leaks: list[Leak] = []
    shared: dict[str, list[_Needles]] = {}  # root -> the tasks that see it
    first_task: dict[str, Task] = {}
    for task in tasks:
        n = task_needles(task)
        flat = n.flat
        if not flat:
            continue
        with _sandbox(task, backend) as sb:
            result = sb.exec(["python3", "-c", _SCANNER, *_PER_TASK_ROOTS, sb.support_dir], SCAN_TIMEOUT,
                             env=_needle_env(json.dumps(flat).encode()))
        hits: dict[str, set[str]] = {}
        for line in result.stdout.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if "roots" in row:
                for root in _shared_roots(row["roots"], sb.support_dir):
                    shared.setdefault(root, []).append(n)
                    first_task.setdefault(root, task)
            elif "loc" in row:
                hits[row["loc"]] = {flat[i] for i in row["hits"]}
            elif "stats" in row:
                leaks += _order_leaks(task, row["stats"])
        leaks += _judge(n, hits)
    for root, owners in shared.items():
        leaks += _scan_shared(root, owners, first_task[root], backend)
    return leaks


def _sandbox(task: Task, backend: str | None) -> Any:
    return make_sandbox(pristine_tree(task), backend, spec=sandbox_spec(task))


def _shared_roots(roots: list[str], support: str) -> list[str]:
    """Mounted directories worth scanning once for all tasks: no system, no per-task root."""
    skip = (*_PER_TASK_ROOTS, support, "/")
    keep = [r for r in roots if r not in skip and not any(r.startswith(p + "/") for p in _PER_TASK_ROOTS)
            and (not any(r == s or r.startswith(s + "/") for s in SYSTEM) or "-packages" in r)]
    keep.sort(key=len)
    out: list[str] = []
    for r in keep:
        if not any(r.startswith(o.rstrip("/") + "/") for o in out):
            out.append(r)
    return out


def _scan_shared(root: str, owners: list[_Needles], task: Task, backend: str | None) -> list[Leak]:
    """One grep of ``root`` (inside a sandbox that sees it) for the needles of every task that sees it."""
    strings = sorted({s for n in owners for s in n.flat})
    # The needles go to grep through a pipe from the environment: no file holds them.
    script = ('grep -rFoIZ -f <(for i in $(seq 0 $((AUDIT_PARTS - 1))); do v=AUDIT_NEEDLES_$i; '
              'printf %s "${!v}"; done | base64 -d) -- "$1" 2>/dev/null | sort -u')
    found: dict[str, set[str]] = {}
    with _sandbox(task, backend) as sb:
        for batch in _batches(strings, ENV_TOTAL):
            result = sb.exec(["bash", "-c", script, "deepgym-leak-scan", root], SCAN_TIMEOUT,
                             env=_needle_env("\n".join(batch).encode()))
            for line in result.stdout.splitlines():
                path, sep, match = line.partition("\0")
                if sep:
                    found.setdefault(path, set()).add(match)
    out: list[Leak] = []
    for n in owners:
        out += _judge(n, found)
    return out


def _needle_env(data: bytes) -> dict[str, str]:
    """``data`` base64-encoded into ``AUDIT_NEEDLES_0..`` (``AUDIT_PARTS`` of them): the kernel takes
    at most 128 KiB in one environment string, so a large set of needles is split over several."""
    text = base64.b64encode(data).decode()
    parts = [text[i:i + ENV_PART] for i in range(0, len(text), ENV_PART)] or [""]
    return {"AUDIT_PARTS": str(len(parts)), **{f"AUDIT_NEEDLES_{i}": part for i, part in enumerate(parts)}}


def _batches(strings: list[str], budget: int) -> list[list[str]]:
    """``strings`` in consecutive groups whose encoded environment stays within ``budget`` bytes."""
    raw = budget * 3 // 4
    out: list[list[str]] = [[]]
    size = 0
    for s in strings:
        cost = len(s.encode()) + 1
        if out[-1] and size + cost > raw:
            out.append([])
            size = 0
        out[-1].append(s)
        size += cost
    return [b for b in out if b]


def _judge(n: _Needles, hits: dict[str, set[str]]) -> list[Leak]:
    out = []
    for loc, strings in sorted(hits.items()):
        for kind in ("gold", "tests"):
            mine = [s for s in n.by_kind[kind] if _holds(strings, s)]
            lone = len(n.by_kind[kind]) == 1 and n.by_kind[kind][0] in n.context
            if lone and mine and not all(_holds(strings, c) for c in n.context[mine[0]]):
                continue
            if mine and len(mine) >= n.threshold(kind):
                out.append(Leak(n.task.instance_id, kind, loc, len(mine), len(n.by_kind[kind]), mine[0][:120]))
    return out


def _holds(strings: set[str], needle: str) -> bool:
    return any(v in strings or any(v in h for h in strings) for v in {needle, _escaped(needle)})


def _order_leaks(task: Task, stats: list[list[Any]]) -> list[Leak]:
    """The files to fix singled out by metadata: newest modification or change time, or highest
    inode (created last), while the order of their paths would not single them out."""
    gold = set(task.gold_files)
    files = [row for row in stats if isinstance(row, list) and len(row) == 4]
    present = gold & {row[0] for row in files}
    k = len(present)
    if not k or math.comb(len(files), k) < ORDER_ODDS:
        # Any order would put them on top this often: a file system that reuses freed inodes
        # numbers a small tree's files in no particular order, and one of six files is on top by
        # chance one time in six. What cannot single them out is no leak; the agent sees no more.
        return []
    by_path = {row[0] for row in sorted(files, key=lambda r: r[0], reverse=True)[:k]}
    out = []
    for index, what in ((1, "modification time"), (2, "change time"), (3, "inode number")):
        ranked = sorted(files, key=lambda r: r[index], reverse=True)
        top = {row[0] for row in ranked[:k]}
        if top == present and ranked[k - 1][index] > ranked[k][index] and by_path != present:
            out.append(Leak(task.instance_id, "gold", f"/testbed: the files to fix have the highest {what}", k, k,
                            ", ".join(sorted(present))[:120]))
    return out
