"""The agent's tools: schemas (OpenAI function format) and what each one does in a sandbox.

``view``, ``search`` and ``edit`` work on the workspace through the sandbox's file interface
(no process is started, so they cost well under a millisecond of overhead); ``run_tests`` and
``bash`` run commands inside the sandbox. Every agent mistake is a :class:`ToolError`, which the
environment turns into an observation.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import itertools
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from deepgym_envs.actions import ToolCall, check_arguments
from deepgym_envs.errors import SandboxError, ToolError
from deepgym_envs.sandbox import ExecResult, HostPaths, Sandbox
from deepgym_envs.sandbox.execserver import agent_exec
from deepgym_envs.testrun import run_pytest

MAX_OUTPUT_CHARS = 16_000
MAX_SEARCH_MATCHES = 100
MAX_VIEW_LINES = 400
SKIP_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", "node_modules", ".tox"})


@dataclass
class ToolResult:
    """What a tool produced: the observation text, plus data for ``info``."""

    output: str
    info: dict[str, Any] = field(default_factory=dict)
    submitted: bool = False
    changed_workspace: bool = False
    """The tool may have changed files (edits, bash, tests writing files)."""


def _fn(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


SCHEMAS: dict[str, dict[str, Any]] = {
    "view": _fn("view", "Show a file with line numbers, or list a directory (two levels deep).", {
        "path": {"type": "string", "description": "Path relative to the repository root (or absolute under /testbed)."},
        "view_range": {"type": "array", "items": {"type": "integer"},
                       "description": "Optional [start, end] line numbers (1-based, inclusive; end -1 = to the end)."},
    }, ["path"]),
    "search": _fn("search", "Search file contents (like grep -rn). Returns up to 100 matching lines.", {
        "pattern": {"type": "string", "description": "Text to find (a Python regular expression if regex is true)."},
        "path": {"type": "string", "description": "Directory or file to search (default: the repository root)."},
        "regex": {"type": "boolean", "description": "Treat pattern as a regular expression (default false)."},
        "include": {"type": "string", "description": "Only files whose name matches this glob, e.g. '*.py'."},
    }, ["pattern"]),
    "edit": _fn("edit", "Edit files. 'str_replace' replaces one exact, unique occurrence of old_str; "
                "'insert' adds new_str after line insert_line (0 = top); 'create' writes a new file.", {
        "command": {"type": "string", "enum": ["str_replace", "insert", "create"]},
        "path": {"type": "string"},
        "old_str": {"type": "string", "description": "str_replace: the exact text to replace (must occur once)."},
        "new_str": {"type": "string", "description": "str_replace/insert: the new text."},
        "insert_line": {"type": "integer", "description": "insert: the line after which to insert."},
        "file_text": {"type": "string", "description": "create: the whole file."},
    }, ["command", "path"]),
    "run_tests": _fn("run_tests", "Run the repository's tests with pytest: all of them, or a selection.", {
        "tests": {"type": "array", "items": {"type": "string"},
                  "description": "Optional test files or ids, e.g. ['tests/test_core.py::test_add']."},
    }, []),
    "bash": _fn("bash", "Run a bash command in the repository (sandboxed, no network).", {
        "command": {"type": "string"},
        "timeout": {"type": "integer", "description": "Seconds before the command is killed (default 60, max 600)."},
    }, ["command"]),
    "submit": _fn("submit", "Submit the current state of the repository as your solution and end the episode.", {}, []),
}

TOOLSETS: dict[str, tuple[str, ...]] = {
    "default": ("view", "search", "edit", "run_tests", "bash", "submit"),
    "bash": ("bash", "submit"),
}


def schemas_for(toolset: str) -> list[dict[str, Any]]:
    return [SCHEMAS[name] for name in TOOLSETS[toolset]]


class Tools:
    """Runs tool calls against one sandbox."""

    def __init__(self, sandbox: Sandbox, toolset: str = "default", *, test_args: list[str] | None = None,
                 bash_timeout: float = 60.0, test_timeout: float = 300.0, warm_tests: bool = True) -> None:
        if toolset not in TOOLSETS:
            raise ValueError(f"unknown toolset {toolset!r}; choose one of {', '.join(TOOLSETS)}")
        self.sandbox = sandbox
        self.names = TOOLSETS[toolset]
        self.test_args = list(test_args or [])
        self.bash_timeout = bash_timeout
        self.test_timeout = test_timeout
        self.warm_tests = warm_tests  # run_tests and bash through the sandbox's resident servers, where it has them
        self._impl: dict[str, Callable[..., ToolResult]] = {
            "view": self.view, "search": self.search, "edit": self.edit, "run_tests": self.run_tests,
            "bash": self.bash, "submit": self.submit}

    def __call__(self, call: ToolCall) -> ToolResult:
        if call.name not in self.names:
            raise ToolError(f"unknown tool {call.name!r}; available: {', '.join(self.names)}")
        args = check_arguments(call, SCHEMAS[call.name])
        result = self._impl[call.name](**args)
        if call.extra_calls:
            result.output += f"\n[note: {call.extra_calls} further tool call(s) in this message were ignored; one per turn]"
        result.output = clip(result.output)
        return result

    # -- view ----------------------------------------------------------------------------------
    def view(self, path: str, view_range: list[int] | None = None) -> ToolResult:
        sb = self.sandbox
        if _is_dir(sb, path):
            return ToolResult(self._listing(path))
        data = _read_limited(sb, path, "view")
        if b"\0" in data[:8192]:
            return ToolResult(f"{path}: binary file ({len(data)} bytes), not shown")
        text = data.decode("utf-8", "replace")
        del data
        count = _check_lines(text, path, "view")
        start, end = 1, count
        if view_range is not None:
            if len(view_range) != 2:
                raise ToolError("view_range must be [start, end]")
            start, end = view_range[0], (count if view_range[1] == -1 else view_range[1])
            if not 1 <= start <= max(count, 1) or end < start:
                raise ToolError(f"view_range {view_range} is outside the file's {count} lines")
            end = min(end, count)
        note = ""
        if end - start + 1 > MAX_VIEW_LINES:
            end = start + MAX_VIEW_LINES - 1
            note = f"\n[showing lines {start}-{end} of {count}; use view_range to see more]"
        body = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(_lines(text, start - 1, end), start))
        return ToolResult(f"{path} ({count} lines)\n{body}{note}" if count else f"{path}: empty file")

    def _listing(self, path: str) -> str:
        out = []
        for entry in self.sandbox.list_dir(path):
            if entry.name in SKIP_DIRS:
                continue
            if entry.kind == "dir":
                out.append(entry.name + "/")
                child = f"{path.rstrip('/')}/{entry.name}"
                for sub in self.sandbox.list_dir(child):
                    if sub.name not in SKIP_DIRS:
                        out.append(f"  {sub.name}{'/' if sub.kind == 'dir' else ''}")
            else:
                out.append(entry.name + ("@" if entry.kind == "link" else ""))
        return f"{path}:\n" + ("\n".join(out) if out else "(empty)")

    # -- search --------------------------------------------------------------------------------
    def search(self, pattern: str, path: str = ".", regex: bool = False, include: str | None = None) -> ToolResult:
        if not pattern:
            raise ToolError("search: pattern must not be empty")
        if len(pattern) > MAX_PATTERN_CHARS or len(include or "") > MAX_PATTERN_CHARS:
            raise ToolError(f"search: the pattern and include are limited to {MAX_PATTERN_CHARS} characters each")
        try:
            rx = re.compile(pattern if regex else re.escape(pattern))
        except re.error as exc:
            raise ToolError(f"search: invalid regular expression: {exc}") from None
        host = host_paths(self.sandbox)
        root = host.resolve(path)
        base = host.resolve(".")
        if not os.path.exists(root):
            raise ToolError(f"{path}: no such file or directory")
        if regex:
            # The agent's regular expression runs in its sandbox, under a time limit: Python's
            # engine backtracks, so (a+)+$ over a line of forty a's would hold the host's
            # interpreter (every environment of the process) for hours.
            matches, total = self._search_in_sandbox(pattern, os.path.relpath(root, base), include)
        else:
            # On the host, within the time a sandboxed search gets: the files are the agent's, as
            # many as it likes, each read up to 2 MiB.
            wanted = re.compile(fnmatch.translate(include)).match if include else None
            matches, total, hit = _scan_dirs(_walk_dirs(root, wanted), rx, base, pattern,
                                             until=time.monotonic() + SEARCH_TIMEOUT)
            if hit:
                cut = (f"\n[the search stopped after {SEARCH_TIMEOUT:.0f}s; what it found is above, more may "
                       "exist: narrow it with path or include]")
                return ToolResult("\n".join(matches or [f"no matches for {pattern!r} so far"]) + cut)
        if not matches:
            return ToolResult(f"no matches for {pattern!r} in {path}")
        more = f"\n[{total - len(matches)} more matches not shown; narrow the search]" if total > len(matches) else ""
        return ToolResult("\n".join(matches) + more)

    def _search_in_sandbox(self, pattern: str, rel: str, include: str | None) -> tuple[list[str], int]:
        # -I: the working directory (the agent's workspace) is not on sys.path, so a json.py or re.py
        # there is not what the helper imports; PYTHON* variables are ignored. -S: no site-packages,
        # whose .pth files the agent may have written. What it prints is still read as the agent's.
        argv = ["python3", "-I", "-S", "-c", _search_script(), pattern, rel, include or "",
                json.dumps(sorted(SKIP_DIRS)), str(MAX_SEARCH_MATCHES)]
        res = self._own_command(argv, SEARCH_TIMEOUT)  # the agent's own, as a bash step is
        if res.timed_out:
            raise ToolError(f"search: the regular expression ran longer than {SEARCH_TIMEOUT:.0f}s; simplify it "
                            "(nested repetition such as (a+)+ backtracks exponentially)")
        found = _search_output(res.stdout)
        if found is None:
            raise ToolError(f"search failed: {(res.stderr or res.stdout).strip()[-500:]}")
        return found

    # -- edit ----------------------------------------------------------------------------------
    def edit(self, command: str, path: str, old_str: str | None = None, new_str: str | None = None,
             insert_line: int | None = None, file_text: str | None = None) -> ToolResult:
        sb = self.sandbox
        if command == "create":
            if file_text is None:
                raise ToolError("edit create: file_text is required")
            if sb.exists(path):
                raise ToolError(f"{path} already exists; use str_replace to change it")
            sb.write_file(path, _encode(file_text, path))
            return ToolResult(f"created {path} ({_line_count(file_text)} lines)", changed_workspace=True)
        text = self._read_text(path)
        if command == "str_replace":
            if old_str is None or new_str is None:
                raise ToolError("edit str_replace: old_str and new_str are required")
            if not old_str:
                raise ToolError("edit str_replace: old_str must not be empty")
            count = text.count(old_str)
            if count == 0:
                raise ToolError(f"edit str_replace: old_str does not occur in {path} (it must match exactly, "
                                "whitespace included)")
            if count > 1:
                # The first ten only: a line number per match is quadratic (old_str "\n" in a long file).
                starts = [m.start() for m in itertools.islice(re.finditer(re.escape(old_str), text), 10)]
                lines = [text.count("\n", 0, at) + 1 for at in starts]
                raise ToolError(f"edit str_replace: old_str occurs {count} times in {path} (lines "
                                f"{', '.join(map(str, lines[:10]))}); include more context to make it unique")
            at = text.index(old_str)
            text = text.replace(old_str, new_str, 1)
            first = text.count("\n", 0, at) + 1
        elif command == "insert":
            if new_str is None or insert_line is None:
                raise ToolError("edit insert: new_str and insert_line are required")
            count = _line_count(text)
            if not 0 <= insert_line <= count:
                raise ToolError(f"edit insert: insert_line must be between 0 and {count}")
            at = _line_offset(text, insert_line)
            # Spliced at an offset, never through a list of the file's lines (one string per line
            # cost the host 40 times the file's size).
            last_open = insert_line == count and count and not text.endswith("\n")
            text = "".join((text[:at], "\n" if last_open else "", new_str,
                            "" if new_str.endswith("\n") else "\n", text[at:]))
            first = insert_line + 1
        else:
            raise ToolError(f"edit: unknown command {command!r}; use str_replace, insert or create")
        sb.write_file(path, _encode(text, path))
        lo = max(first - 4, 0)
        snippet = _lines(text, lo, first + 4 + (new_str or "").count("\n"))
        shown = "\n".join(f"{i:6}\t{line}" for i, line in enumerate(snippet, start=lo + 1))
        return ToolResult(f"edited {path}; the lines around the change:\n{shown}", changed_workspace=True)

    def _read_text(self, path: str) -> str:
        if _is_dir(self.sandbox, path):
            raise ToolError(f"{path} is a directory")
        data = _read_limited(self.sandbox, path, "edit")
        if b"\0" in data[:8192]:
            raise ToolError(f"{path} is a binary file; it cannot be edited as text")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not valid UTF-8 text") from None
        _check_lines(text, path, "edit")
        return text

    # -- run_tests / bash / submit -------------------------------------------------------------
    def run_tests(self, tests: list[str] | None = None) -> ToolResult:
        for t in tests or []:
            if t.startswith("-"):
                raise ToolError(f"run_tests: {t!r} is not a test path or id (options are not accepted)")
        started = time.monotonic()
        report, result = run_pytest(self.sandbox, [*self.test_args, "-q", *(tests or [])], self.test_timeout,
                                    warm=self.warm_tests)
        outcomes = (report or {}).get("tests", {})
        summary = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "error", "skipped")}
        text = result.output
        if result.timed_out:
            text += f"\n[tests killed after {self.test_timeout:.0f}s]"
        return ToolResult(text.strip() or f"(pytest exited {result.exit_code} with no output)",
                          info={"test_results": outcomes, "test_summary": summary, "exit_code": result.exit_code,
                                "duration": time.monotonic() - started},
                          changed_workspace=True)

    def bash(self, command: str, timeout: int | None = None) -> ToolResult:
        if not command.strip():
            raise ToolError("bash: command is empty")
        limit = min(max(timeout or self.bash_timeout, 1), 600)
        result = self._own_command(command, limit)
        text = result.output.rstrip("\n")  # the notes below start on the next line, not after a blank one
        if result.truncated:
            text += "\n[output truncated]"
        if result.timed_out:
            text += f"\n[command killed after {limit:.0f}s]"
        elif result.exit_code != 0:
            text += f"\n[exit code {result.exit_code}]"
        return ToolResult(text.strip() or "(no output)", info={"exit_code": result.exit_code},
                          changed_workspace=True)

    def _own_command(self, cmd: list[str] | str, timeout: float) -> ExecResult:
        """One of the agent's own commands: through the sandbox's resident command server where it
        has one and warm helpers are on (no bubblewrap start per step, the same isolation), else cold."""
        return agent_exec(self.sandbox, cmd, timeout) if self.warm_tests else self.sandbox.exec(cmd, timeout)

    def submit(self) -> ToolResult:
        return ToolResult("submitted", submitted=True)


def host_paths(sb: Sandbox) -> HostPaths:
    """The sandbox's workspace by host path: search reads it from here, without a command per file."""
    if not isinstance(sb, HostPaths):
        raise SandboxError(f"{type(sb).__name__} shows no host path of its workspace, which view and search need")
    return sb


#: The largest file view and edit read (the host holds it in memory: a gigabyte of newlines the
#: agent wrote was ten of the host's); bash reads larger ones in the sandbox.
MAX_TEXT_BYTES = 16 << 20
#: The most lines a file view and edit take: each line costs the host a step of work (16 MiB of
#: newlines is 16 million lines); a million is far beyond any source file.
MAX_TEXT_LINES = 1 << 20
#: The longest search pattern or include glob (both are compiled on the host).
MAX_PATTERN_CHARS = 4096
#: Where str.splitlines breaks a line (so line numbers agree with what view showed before).
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_BREAK = re.compile("\r\n|[" + re.escape(_LINE_BREAKS) + "]")


def _read_limited(sb: Sandbox, path: str, tool: str) -> bytes:
    """The file's bytes, refused over MAX_TEXT_BYTES both before the read (by its size) and after
    (the agent's background process may have grown it in between)."""
    _check_size(sb, path, tool)
    data = sb.read_file(path)
    if len(data) > MAX_TEXT_BYTES:
        raise ToolError(f"{path}: {len(data)} bytes is too large for {tool} (the limit is "
                        f"{MAX_TEXT_BYTES >> 20} MiB); use bash (head, sed -n, grep) on it")
    return data


def _check_size(sb: Sandbox, path: str, tool: str) -> None:
    try:
        size = os.stat(host_paths(sb).resolve(path)).st_size
    except OSError:
        return  # read_file says what is wrong with the path
    if size > MAX_TEXT_BYTES:
        raise ToolError(f"{path}: {size} bytes is too large for {tool} (the limit is {MAX_TEXT_BYTES >> 20} MiB); "
                        "use bash (head, sed -n, grep) on it")


def _check_lines(text: str, path: str, tool: str) -> int:
    count = _line_count(text)
    if count > MAX_TEXT_LINES:
        raise ToolError(f"{path}: {count} lines is too many for {tool} (the limit is {MAX_TEXT_LINES}); "
                        "use bash (head, sed -n, grep) on it")
    return count


def _line_count(text: str) -> int:
    """``len(text.splitlines())`` without making the list (a string per line)."""
    breaks = sum(text.count(c) for c in _LINE_BREAKS) - text.count("\r\n")
    return breaks + (1 if text and text[-1] not in _LINE_BREAKS else 0)


def _line_offset(text: str, n: int, pos: int = 0) -> int:
    """Where the line ``n`` lines after the one at ``pos`` starts (the text's end if there is none)."""
    if n <= 0:
        return pos
    found = next(itertools.islice(_LINE_BREAK.finditer(text, pos), n - 1, None), None)
    return found.end() if found else len(text)


def _lines(text: str, start: int, stop: int) -> list[str]:
    """``text.splitlines()[start:stop]``, splitting only those lines."""
    lo = _line_offset(text, start)
    return text[lo:_line_offset(text, stop - start, lo)].splitlines() if stop > start else []


def _encode(text: str, path: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate the tool call's JSON carried ("\ud800")
        raise ToolError(f"{path}: the new text is not valid Unicode (a lone surrogate); nothing was written") from None


#: The most a regex search's helper may print (100 matches of a line's 200 characters and a path).
_SEARCH_OUTPUT_MAX = 1 << 20


def _search_output(stdout: str) -> tuple[list[str], int] | None:
    """The helper's ``[matches, total]`` from the last line it printed, or None if that is not one.
    The helper runs in the agent's sandbox, so its output is the agent's: read with a bound on its
    size, and its shape checked before anything is taken from it."""
    line = stdout.rstrip()[-(_SEARCH_OUTPUT_MAX + 1):].rpartition("\n")[2]
    if not line or len(line) > _SEARCH_OUTPUT_MAX:
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # not JSON; an integer of thousands of digits; nested too deep
        return None
    if not (isinstance(data, list) and len(data) == 2 and isinstance(data[0], list)
            and type(data[1]) is int and len(data[0]) <= MAX_SEARCH_MATCHES
            and len(data[0]) <= data[1] < 1 << 62 and all(isinstance(m, str) for m in data[0])):
        return None
    return data[0], data[1]


def _is_dir(sb: Sandbox, path: str) -> bool:
    return os.path.isdir(host_paths(sb).resolve(path))


def _walk_files(root: str, wanted: Callable[[str], object] | None = None):
    """Regular files under ``root`` in sorted order, skipping SKIP_DIRS, symlinks and anything
    else that is not a plain file (a FIFO would block the read): the paths of :func:`_walk_dirs`."""
    if os.path.isfile(root):
        yield root
        return
    for top, names in _walk_dirs(root, wanted):
        for name in names:
            yield os.path.join(top, name)


def _walk_dirs(root: str, wanted: Callable[[str], object] | None = None):
    """(directory, names of its regular files) under ``root`` in sorted order, skipping SKIP_DIRS,
    symlinks and anything else that is not a plain file (a FIFO would block the read). The file
    type comes from the directory listing, not a stat per file: through ``/proc/<pid>/root`` each
    lookup is dear. One item per directory, not per file: a search's per-file work in Python is
    what it costs beyond grep's. ``wanted``: a file-name filter (the compiled ``include`` glob). A
    stack, not recursion: the agent's tree may nest thousands of directories deep. A file with
    several names (hard links) is listed once, under the first: ten thousand links to one file
    cost one read, not ten thousand."""
    if os.path.isfile(root):
        yield os.path.split(root)[0], [os.path.basename(root)]
        return
    pending = [root]
    seen = set()
    while pending:
        top = pending.pop()
        try:
            with os.scandir(top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs, names = [], []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIP_DIRS:
                    subdirs.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and (wanted is None or wanted(entry.name)):
                if entry.inode() in seen:  # from the directory listing: no stat
                    continue
                seen.add(entry.inode())
                names.append(entry.name)
        if names:
            yield top, names
        pending += reversed(subdirs)  # the first subdirectory is walked next, as recursion would


def _read_head(path: str, limit: int = 2 << 20, dir_fd: int | None = None) -> bytes | None:
    """The first ``limit`` bytes of the regular file ``path``, or None. Opened without following a
    symlink and without blocking (the agent may have swapped the listed file for a link or a FIFO
    since the walk), and read only if it is a regular file; read in small chunks, since one read of
    ``limit`` bytes allocates that much for every file, which was most of a search's time.
    ``dir_fd``: the open directory ``path`` (then a bare name) is in.

    Read with ``pread``, which refuses what is not a file (ESPIPE on a FIFO or socket, EISDIR on a
    directory): that is the regular-file check, without an ``fstat`` per file, which an overlay
    answers slowly (a third of a search's time on the namespace backend). A device node is the one
    other kind ``pread`` reads, and the agent cannot make one (no ``CAP_MKNOD``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        chunk = os.pread(fd, min(1 << 16, limit), 0)
        if len(chunk) < 1 << 16:  # the end of the file: no second read for the many small ones
            return chunk
        chunks, size = [chunk], len(chunk)
        while size < limit:
            want = min(1 << 16, limit - size)
            chunk = os.pread(fd, want, size)
            chunks.append(chunk)
            size += len(chunk)
            if len(chunk) < want:
                break
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _scan(files, rx, base: str, literal: str | None) -> tuple[list[str], int]:
    """The first matches (``path:line: text``) of ``rx`` in ``files``, and how many there are
    (:func:`_scan_dirs` over the files grouped by directory)."""
    return _scan_dirs(_by_dir(files), rx, base, literal)[:2]


def _by_dir(files):
    """``files`` as (directory, names) runs, in their order."""
    top, names = None, []
    for file in files:
        parent, name = os.path.split(file)
        if parent != top and names:
            yield top, names
            names = []
        top = parent
        names.append(name)
    if names:
        yield top, names


def _scan_dirs(dirs, rx, base: str, literal: str | None,
               until: float | None = None) -> tuple[list[str], int, bool]:
    """The first matches (``path:line: text``) of ``rx`` in the files of ``dirs`` ((directory,
    names) pairs), how many there are, and whether the scan stopped at ``until`` (a
    ``time.monotonic()`` time) before the end. ``literal``: the pattern when it is plain text
    (files without it are skipped undecoded: a literal without U+FFFD is in the decoded text only
    if its UTF-8 bytes are in the raw ones)."""
    needle = None
    if literal is not None and "\ufffd" not in literal:
        needle = literal.encode("utf-8", "surrogatepass")
    matches: list[str] = []
    total = 0
    for top, names in dirs:
        # Each file is opened relative to its open directory: a full path through /proc/<pid>/root
        # is looked up again from the root for every file, which cost the namespace backend 2x.
        try:
            dir_fd = os.open(top or ".", os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            for name in names:
                if until is not None and time.monotonic() > until:
                    return matches, total, True
                data = _read_head(name, dir_fd=dir_fd)
                if data is None or (needle is not None and needle not in data) or data.find(b"\0", 0, 8192) >= 0:
                    continue
                text = data.decode("utf-8", "replace")
                if literal is not None and literal not in text:  # most files do not match: skip splitting them
                    continue
                rel = os.path.relpath(os.path.join(top, name), base)
                for lineno, line in enumerate(text.splitlines(), 1):
                    if rx.search(line[:4000]):
                        total += 1
                        if len(matches) < MAX_SEARCH_MATCHES:
                            matches.append(f"{rel}:{lineno}: {line.strip()[:200]}")
        finally:
            os.close(dir_fd)
    return matches, total, False


#: Seconds a search may run (a regular expression's in the sandbox, plain text's on the host).
SEARCH_TIMEOUT = 20.0


_SEARCH_MAIN = """
pattern, root, include = sys.argv[1], sys.argv[2], sys.argv[3]
SKIP_DIRS, MAX_SEARCH_MATCHES = frozenset(json.loads(sys.argv[4])), int(sys.argv[5])
wanted = re.compile(fnmatch.translate(include)).match if include else None
print(json.dumps(_scan_dirs(_walk_dirs(root, wanted), re.compile(pattern), os.getcwd(), None)[:2]))
"""


@functools.lru_cache(maxsize=1)
def _search_script() -> str:
    """The same walk and scan as a script for the sandbox's Python (one implementation of both)."""
    head = "from __future__ import annotations\nimport fnmatch, json, os, re, sys, time\nfrom typing import Callable\n"
    return head + "".join(inspect.getsource(f) for f in (_walk_dirs, _read_head, _scan_dirs)) + _SEARCH_MAIN


def clip(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Keep the head and the tail of a long output, with a note of what was dropped."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - limit} characters elided ...]\n{text[-half:]}"
