"""Tasks: the SWE-bench row, loaded from JSONL.

A :class:`Task` carries the SWE-bench fields so that SWE-bench, SWE-Gym and SWE-smith rows load
as they are, plus the deepgym fields (``repo_path``, ``image``, ``test_cmd``, ...). Fields we do
not know are kept in :attr:`Task.extra` and written back by :meth:`Task.to_dict`.

>>> tasks = load_tasks("builtin")
>>> tasks[0].instance_id
'deepgym__cronparse-001'
"""

from __future__ import annotations

import dataclasses
import functools
import os
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from deepgym_envs.envspec import PythonEnv
from deepgym_envs.errors import TaskFormatError, UnknownTaskError
from deepgym_envs.hfdata import dataset_rows, is_dataset  # pyarrow and datasets are imported only to read one
from deepgym_envs.testplugins import plugin_args

#: Fields a row must have (SWE-bench's own required set, minus what local repositories lack).
REQUIRED = ("instance_id", "problem_statement", "FAIL_TO_PASS")


@dataclass
class Task:
    """One repository task: a problem, a hidden test patch and the tests that decide it."""

    instance_id: str
    problem_statement: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str] = field(default_factory=list)
    repo: str = ""
    base_commit: str = ""
    patch: str = ""
    """The gold fix, a unified diff against the base state."""
    test_patch: str = ""
    """The hidden tests, a unified diff applied only in the grading view."""
    version: str = ""
    environment_setup_commit: str = ""
    hints_text: str = ""
    created_at: str = ""
    # deepgym fields
    repo_path: str = ""
    """A local repository (directory), relative to the task file and inside its folder (see
    :func:`load_tasks`), used instead of cloning ``repo``."""
    gold_reverse_base: bool = False
    """The base state is ``repo_path`` with the gold patch reverse-applied (a synthesised bug)."""
    image: str = ""
    """A container image holding the repository (docker backend)."""
    test_cmd: list[str] = field(default_factory=list)
    """Extra pytest arguments for this repository (argv form)."""
    difficulty: str = ""
    flaky: list[str] = field(default_factory=list)
    """Test ids known to be flaky; excluded from rewards."""
    trust: list[str] = field(default_factory=list)
    """Capabilities the code under test keeps while it is graded, because the task's pristine tests
    need them (the gold run says so): any of ``frames``, ``code``, ``gc``, ``trace``, ``ctypes``, and
    ``source`` (the hidden test files are not blanked: tests that compare tracebacks showing their own
    lines), see ``testrun/in_sandbox/deepgym_lockdown.py``. Empty, the default, is the full seal."""
    harness: str = ""
    """How tests are chosen and counted: ``swebench`` (the official harness: the files of
    ``test_patch`` run, ``xfailed`` passes, skipped PASS_TO_PASS tests do not fail), ``deepgym``
    (the files holding the test ids; only ``passed`` passes), or empty: ``swebench`` for rows that
    carry SWE-bench's ``environment_setup_commit``, else ``deepgym``."""
    python_env: dict[str, Any] = field(default_factory=dict)
    """The Python environment the tests run in (see :mod:`deepgym_envs.pyenv`); empty = deepgym's own."""
    gold_seconds: float = 0.0
    """How long the gold patch's hidden-test run took when the task was validated (``deepgym tasks
    validate --record-gold-seconds``). Grading derives the task's deadline from it
    (:func:`deepgym_envs.grading.grading_deadline`); 0, the default, means never timed: the grading
    timeout alone bounds the run."""
    source: str = ""
    """Where the row came from (``file:line``); filled by the loader."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Unknown fields, kept verbatim."""

    @property
    def hidden_test_files(self) -> list[str]:
        """Paths the hidden test patch touches (protected during grading)."""
        return list(_patch_paths_once(self.test_patch))

    @property
    def swebench_semantics(self) -> bool:
        """Whether this row is graded as SWE-bench's harness grades (see :attr:`harness`)."""
        if self.harness:
            return self.harness == "swebench"
        return bool(self.environment_setup_commit)

    @property
    def imported(self) -> bool:
        """A row from a published set (``harness`` set by ``deepgym tasks import``, or SWE-bench's
        ``environment_setup_commit``), not a built-in or synthesised task: its environment is the
        official harness's, and it is graded only once it validates (:mod:`deepgym_envs.gate`)."""
        return bool(self.harness or self.environment_setup_commit)

    @property
    def pytest_args(self) -> list[str]:
        """The extra pytest arguments every run of this task's tests gets: ``test_cmd``, after, for an
        imported row, ``-p MODULE`` for each well-known test plugin its ``python_env`` installs (the
        official harness autoloads them; deepgym never does: :mod:`deepgym_envs.testplugins`). The
        built-in and synthesised sets were validated without them and stay so."""
        requirements = self.python_env.get("requirements") or [] if self.imported else []
        return [*plugin_args(requirements, self.test_cmd), *self.test_cmd]

    @property
    def gold_files(self) -> list[str]:
        """Paths the gold patch touches."""
        return list(_patch_paths_once(self.patch))

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data, unknown fields included, loader bookkeeping excluded."""
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        extra = row.pop("extra")
        row.pop("source")
        row.update(extra)
        return row


_FIELDS = {f.name: f for f in dataclasses.fields(Task)} 
_LIST_FIELDS = {"FAIL_TO_PASS", "PASS_TO_PASS", "test_cmd", "flaky", "trust"}
_BOOL_FIELDS = {"gold_reverse_base"}
_SECONDS_FIELDS = {"gold_seconds"}
#: What a task's ``trust`` may grant (the seal's capabilities, ``deepgym_lockdown.CAPABILITIES``).
TRUST_CAPABILITIES = ("frames", "code", "gc", "trace", "ctypes", "source")


#: Files of a test patch SWE-bench's harness does not hand to the test runner.
NON_TEST_EXTS = (".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml")


#: Where the official harness reads a test patch's files from: ``diff --git a/OLD b/NEW`` (the rest
#: of the line after its last `` b/`` is the file).
_HARNESS_HEADER = "diff --git a/"


def files_of_test_patch(test_patch: str) -> list[str]:
    """The files the official SWE-bench harness hands its test runner for a test patch, in patch
    order, each once: the target of every ``diff --git a/OLD b/NEW`` line (a change, an addition,
    a rename or copy, even at 100 % similarity with no ``+++`` line, a mode change, a binary file, a
    deletion), less data files (:data:`NON_TEST_EXTS`).

    This is the harness's rule (``get_test_directives``: the pattern ``diff --git a/.* b/(.*)`` over
    the whole patch), kept with its edges, so that a row is graded on the files its published ids
    were made from:

    * a deleted file is still named: pytest then stops ("file or directory not found") and runs
      nothing, so no prediction resolves such a row (import refuses it, see
      :func:`harness_cannot_run`);
    * a name git quotes (``"a/t\\303\\251st.py"``: non-ASCII, ``"``, ``\\`` or control characters) does
      not match, so that file is not run; a name with a space is not quoted by git and is read;
    * the target is what follows the line's *last* `` b/``, to the end of the line (``\\n``);
    * the pattern is not anchored: a hunk line holding ``diff --git a/... b/...`` names a file too.

    >>> files_of_test_patch("diff --git a/t/old.py b/t/new.py\\nsimilarity index 100%\\n")
    ['t/new.py']
    """
    out: list[str] = []
    for line in test_patch.split("\n"):  # the pattern's "." stops at "\n" only
        at = line.find(_HARNESS_HEADER)
        cut = line.rfind(" b/", at + len(_HARNESS_HEADER)) if at >= 0 else -1
        if cut < 0:
            continue
        path = line[cut + 3:]
        # An empty name adds nothing to the harness's command line (it joins them with spaces).
        if path and path not in out and not path.endswith(NON_TEST_EXTS):
            out.append(path)
    return out


#: Characters on which a shell splits, unquotes or expands a word, or stops the command (glob
#: characters left out: a pattern that matches nothing stays the word it was): the harness joins
#: its test files into a shell command line unquoted.
_SHELL_SPECIAL = frozenset(" \t\r\v\f\"'\\$`;&|<>()")


def harness_cannot_run(test_patch: str, exists: Callable[[str], bool] | None = None) -> str:
    """Why the official harness's test command for ``test_patch`` runs no test at all, or ``""``.

    Its files (:func:`files_of_test_patch`) go to pytest on one shell command line, and pytest stops
    before any test when one of them is missing ("file or directory not found"). That happens to
    a file the patch deletes, to a name the shell splits or expands (a space, a quote, ``$``,
    ``;``...), and to a name the harness reads wrongly (from a line inside a hunk, or cut at the
    wrong `` b/``) unless the tree after the patch has a file by that name: ``exists`` says which
    paths it has (without it, none). No prediction resolves such a row there.

    >>> harness_cannot_run("diff --git a/t/x.py b/t/x.py\\ndeleted file mode 100644\\n")[:60]
    "the official harness hands pytest 't/x.py' (a file the test "

    """
    deleted: list[str] = []
    kept: set[str] = set()
    headers: set[str] = set()
    miscut: dict[str, str] = {}  # the harness's name -> git's, where they differ
    current = ""
    for line in test_patch.split("\n"):
        if line.startswith(_HARNESS_HEADER):
            current = line.rsplit(" b/", 1)[-1] if " b/" in line[len(_HARNESS_HEADER):] else ""
            headers.add(current)
            kept.add(current)
            real = _git_header_paths(line[len("diff --git "):])
            if len(real) == 2 and real[1] != current:
                miscut[current] = real[1]
        elif current and (line.startswith("deleted file mode") or line.rstrip() == "+++ /dev/null"):
            kept.discard(current)
            deleted.append(current)
    for path in files_of_test_patch(test_patch):
        if path in deleted and path not in kept:
            why = "a file the test patch deletes"
        elif exists is not None and exists(path) and not _SHELL_SPECIAL.intersection(path):
            continue  # read wrongly, but a file all the same: it runs
        elif path in miscut:
            why = f"cut at its line's last ' b/' from the name {miscut[path]!r}"
        elif path not in headers:
            why = "read from a line inside a hunk: its pattern is not anchored to headers"
        elif _SHELL_SPECIAL.intersection(path):
            why = "a name its shell command line splits or expands: it joins the files unquoted"
        else:
            continue
        return (f"the official harness hands pytest {path!r} ({why}), and pytest stops before any test "
                "(file or directory not found): no prediction resolves this row there")
    return ""


def patch_paths(diff: str) -> list[str]:
    """The repository paths a unified diff touches (both sides of renames and copies), in order.

    Reads ``diff --git`` headers (a mode change or a binary file has no other), ``---``/``+++``
    headers and git's ``rename``/``copy from``/``to`` lines, and decodes git's C-quoted names
    (``"b/con\\146test.py"``).
    """
    paths: dict[str, None] = {}  # ordered, and a path seen before is found in constant time
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            for name in _git_header_paths(line[len("diff --git "):]):
                paths.setdefault(name)
            continue
        if line.startswith(("--- ", "+++ ")):
            name, strip = line[4:], True
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            name, strip = line.split(" ", 2)[2], False
        else:
            continue
        name = _unquote(name.split("\t", 1)[0].strip() if not name.startswith('"') else name.strip())
        if name == "/dev/null":
            continue
        if strip and name[:2] in ("a/", "b/"):
            name = name[2:]
        paths.setdefault(name)
    return list(paths)


def _git_header_paths(rest: str) -> list[str]:
    """The two paths of a ``diff --git`` header (what follows ``diff --git ``), prefixes dropped.

    Quoted names are read as git writes them. Two unquoted names are split where git splits them:
    in the middle, when both sides name the same file (``a/x y.py b/x y.py``); a rename whose names
    are ambiguous gives none here (its ``rename from``/``to`` lines name both)."""
    names: list[str] = []
    while rest:
        if rest.startswith('"'):
            end = _closing_quote(rest)
            if end < 0:
                return []
            names.append(_unquote(rest[:end + 1]))
            rest = rest[end + 1:].lstrip(" ")
        elif not names and '"' in rest:  # a/plain "b/quoted"
            plain, _, quoted = rest.partition(' "')
            names.append(plain)
            rest = '"' + quoted
        elif not names:  # both unquoted
            half = (len(rest) - 1) // 2
            if len(rest) % 2 == 1 and rest[half] == " " and rest[2:half] == rest[half + 3:]:
                names += [rest[:half], rest[half + 1:]]
            elif rest.count(" b/") == 1:
                cut = rest.index(" b/")
                names += [rest[:cut], rest[cut + 1:]]
            rest = ""
        else:
            names.append(rest)
            rest = ""
    return [n[2:] if n[:2] in ("a/", "b/") else n for n in names if n]


def _closing_quote(text: str) -> int:
    """Index of the quote that closes the C-quoted name ``text`` starts with; -1 if none."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return -1


@functools.lru_cache(maxsize=256)
def _patch_paths_once(diff: str) -> tuple[str, ...]:
    """:func:`patch_paths` of a task's own patches, read once (grading asks per changed path)."""
    return tuple(patch_paths(diff))


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(name: str) -> str:
    """Undo git's quoting of unusual path names ("…" with C escapes and octal bytes)."""
    if not (len(name) >= 2 and name[0] == name[-1] == '"'):
        return name
    body, out, i = name[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "01234567" and i + 3 < len(body) + 1 and body[i + 1:i + 4].isdigit():
                out.append(int(body[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out += c.encode()
        i += 1
    return out.decode("utf-8", "surrogateescape")


def task_from_row(row: dict[str, Any], *, path: str = "<row>", line: int | None = None) -> Task:
    """Build a Task from one JSON object, checking each field's type."""
    if not isinstance(row, dict):
        raise TaskFormatError(path, line, None, f"expected a JSON object, got {type(row).__name__}")
    for name in REQUIRED:
        if name not in row:
            raise TaskFormatError(path, line, name, "missing required field")
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in row.items():
        if key not in _FIELDS or key in ("extra", "source"):
            extra[key] = value
            continue
        values[key] = _coerce(key, value, path, line)
    if not values["instance_id"]:
        raise TaskFormatError(path, line, "instance_id", "must not be empty")
    if not values["FAIL_TO_PASS"]:
        raise TaskFormatError(path, line, "FAIL_TO_PASS", "must name at least one test")
    return Task(**values, extra=extra, source=f"{path}:{line}" if line else path)


def _coerce(key: str, value: Any, path: str, line: int | None) -> Any:
    if key in _LIST_FIELDS:
        # SWE-bench stores the test lists as JSON text inside the JSON row.
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else []
            except json.JSONDecodeError as exc:
                raise TaskFormatError(path, line, key, f"not a JSON list: {exc}") from None
        if value is None:
            value = []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TaskFormatError(path, line, key, "expected a list of strings")
        unknown = sorted(set(value) - set(TRUST_CAPABILITIES)) if key == "trust" else []
        if unknown:
            raise TaskFormatError(path, line, key, f"unknown capabilities {unknown}; known: {list(TRUST_CAPABILITIES)}")
        return value
    if key == "python_env":
        try:
            return PythonEnv.from_dict(value or {}).to_dict() if value else {}
        except ValueError as exc:
            raise TaskFormatError(path, line, key, str(exc)) from None
    if key == "harness" and value not in (None, "", "swebench", "deepgym"):
        raise TaskFormatError(path, line, key, f"expected 'swebench' or 'deepgym', got {value!r}")
    if key in _SECONDS_FIELDS:
        return _seconds(key, value, path, line)
    if key in _BOOL_FIELDS:
        if not isinstance(value, bool):
            raise TaskFormatError(path, line, key, f"expected true or false, got {value!r}")
        return value
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TaskFormatError(path, line, key, f"expected a string, got {type(value).__name__}")
    return value


def _seconds(key: str, value: Any, path: str, line: int | None) -> float:
    """A duration: a finite number of seconds, 0 or more (null: 0, not measured)."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise TaskFormatError(path, line, key, f"expected seconds (a number, 0 or more), got {value!r}")
    return float(value)


def builtin_dir() -> Path:
    """The built-in task set: inside the installed package, or ``tasks/builtin`` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_tasks" / "builtin", here.parent / "tasks" / "builtin"):
        if candidate.is_dir():
            return candidate
    raise TaskFormatError(str(here), None, None, "the built-in task set is missing from this install")


#: Directories task data was loaded from in this process (task files, their repositories): they
#: hold gold patches and hidden tests, so sandboxes hide them wherever a bind would show them.
_TASK_SOURCES: set[str] = set()


def task_sources() -> frozenset[str]:
    """Every directory this process loaded task data from (real paths)."""
    return frozenset(_TASK_SOURCES)


def _remember_source(path: str | Path) -> None:
    path = os.path.realpath(path)
    _TASK_SOURCES.add(path if os.path.isdir(path) else os.path.dirname(path))


#: Set to 1 to let task files name repositories outside their own folder (see :func:`load_tasks`).
ALLOW_OUTSIDE_ENV = "DEEPGYM_ALLOW_REPO_PATH_OUTSIDE"


def repo_path_outside_allowed(explicit: bool | None = None) -> bool:
    """The caller's choice, else ``$DEEPGYM_ALLOW_REPO_PATH_OUTSIDE=1``."""
    return explicit if explicit is not None else os.environ.get(ALLOW_OUTSIDE_ENV) == "1"


def load_tasks(source: str | Path = "builtin", *, allow_repo_path_outside: bool | None = None) -> list[Task]:
    """Load a task set: ``"builtin"``, a ``.jsonl`` file, a directory of ``.jsonl`` files, or a
    SWE-bench-style dataset saved by ``datasets`` / as ``.parquet`` or ``.arrow`` files (:mod:`deepgym_envs.hfdata`).

    A row's ``repo_path`` must resolve (links followed) to a folder inside the task file's own
    folder: a task file is data from whoever wrote it, and its repository becomes what the agent
    reads. ``allow_repo_path_outside=True`` (or ``DEEPGYM_ALLOW_REPO_PATH_OUTSIDE=1``) lifts that
    for files you trust. Dataset rows (Parquet, Arrow, hub) may not name a host path at all.

    Raises :class:`TaskFormatError` naming the file, line and field of the first bad row.
    """
    allow = repo_path_outside_allowed(allow_repo_path_outside)
    if str(source) == "builtin":
        root = builtin_dir()
    else:
        root = Path(source).expanduser()
    _remember_source(root)
    if root.suffix in (".parquet", ".arrow") or (root.is_dir() and not any(root.glob("*.jsonl"))):
        if is_dataset(root):
            return _load_dataset(root)
    if root.is_dir():
        files = sorted(root.glob("*.jsonl"))
        if not files:
            raise TaskFormatError(str(root), None, None, "directory holds no .jsonl task files "
                                  "(nor a datasets directory or .parquet/.arrow files)")
    elif root.is_file():
        files = [root]
    else:
        raise TaskFormatError(str(root), None, None, "no such task file or directory (or use 'builtin')")
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for file in files:
        for task in _load_file(file, allow):
            if task.instance_id in seen:
                raise TaskFormatError(str(file), int(task.source.rsplit(":", 1)[1]), "instance_id",
                                      f"duplicate id {task.instance_id!r} (first at {seen[task.instance_id]})")
            seen[task.instance_id] = task.source
            tasks.append(task)
    return tasks


def _load_dataset(root: Path) -> list[Task]:
    tasks: list[Task] = []
    for source, line, row in dataset_rows(root):
        task = task_from_row(row, path=source, line=line)
        if task.repo_path:
            # A dataset is rows from a hub: a host path in one would copy that folder of this
            # machine into the tree the agent reads.
            raise TaskFormatError(source, line, "repo_path",
                                  f"{task.repo_path!r}: rows from a dataset (Parquet, Arrow, hub) may not name a "
                                  "path on this machine; such a row runs in its 'image' (or the SWE-bench image "
                                  "named after its id). Convert the set to a JSONL file beside its repositories "
                                  "to use local ones")
        tasks.append(task)
    return tasks


def _load_file(file: Path, allow_outside: bool) -> list[Task]:
    tasks = []
    with file.open(encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TaskFormatError(str(file), lineno, None, f"invalid JSON: {exc.msg.removesuffix(' at')} "
                                      f"at column {exc.colno}") from None
            task = task_from_row(row, path=str(file), line=lineno)
            if task.repo_path:
                task.repo_path = confined_repo_path(file, lineno, task.repo_path, allow_outside)
                _remember_source(task.repo_path)
            tasks.append(task)
    return tasks


def confined_repo_path(file: Path, line: int | None, value: str, allow_outside: bool = False) -> str:
    """``value`` resolved against the task file's folder; refused unless it lies strictly inside.

    The folder itself is refused too: its tree would hold the task file (gold patch, hidden tests).
    """
    if "\0" in value:
        raise TaskFormatError(str(file), line, "repo_path", "a path cannot hold a NUL byte")
    folder = os.path.realpath(file.parent)
    path = os.path.realpath(os.path.join(folder, value))
    if allow_outside or path.startswith(folder.rstrip(os.sep) + os.sep):
        return path
    where = ("the task file's own folder, whose tree would hold the task file itself" if path == folder
             else f"{path}, outside the task file's folder {folder}")
    raise TaskFormatError(str(file), line, "repo_path",
                          f"{value!r} resolves to {where}. A task file may only name repositories inside its "
                          f"folder; if you trust this file, set {ALLOW_OUTSIDE_ENV}=1 (or pass "
                          "deepgym --allow-repo-path-outside, or allow_repo_path_outside=True to load_tasks)")


def find_task(tasks: list[Task], task_id: str) -> Task:
    """The task with this id, or an error that suggests the closest ids."""
    if not isinstance(task_id, str):
        raise UnknownTaskError(f"a task id is a string such as {tasks[0].instance_id!r} (got "
                               f"{type(task_id).__name__} {task_id!r})" if tasks else
                               f"a task id is a string (got {type(task_id).__name__} {task_id!r})")
    for task in tasks:
        if task.instance_id == task_id:
            return task
    import difflib

    close = difflib.get_close_matches(task_id, [t.instance_id for t in tasks], n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownTaskError(f"No task {task_id!r} in this task set.{hint}")
