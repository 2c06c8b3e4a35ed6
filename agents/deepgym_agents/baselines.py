"""Baselines that bound every task from both sides.

* :class:`OracleAgent` solves a task through the environment's own tools: it views each file the
  gold patch touches, replays every hunk as an exact ``edit``/``str_replace`` call (widening the
  context until the match is unique), runs the tests and submits. If it resolves every task, every
  task is solvable through the tools.
* :class:`PatchOracle` (``oracle-patch``) applies the gold patch in one bash call: the shortest
  solving episode, for demonstrations a small policy can imitate.
* :class:`NoopAgent` submits at once. If it resolves nothing, no task is solved at the start.
"""

from __future__ import annotations

import re
import shlex
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator

from deepgym_agents.base import tool_call
from deepgym_envs import Task

_VIEW_LINE = re.compile(r"^\s*(\d+)\t(.*)$")


class NoopAgent:
    def __init__(self, task: Task | None = None) -> None:
        self.task = task

    def reset(self, observation: str, info: dict[str, Any]) -> None:
        pass

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return tool_call("submit")


@dataclass
class Hunk:
    old_start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    path: str
    new_file: bool = False
    deleted: bool = False
    hunks: list[Hunk] = field(default_factory=list)


def parse_unified_diff(diff: str) -> list[FilePatch]:
    """A small unified-diff reader: enough for text patches produced by git."""
    files: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    old_name = ""
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            current, hunk = None, None
        elif line.startswith("--- "):
            old_name = line[4:].split("\t")[0]
        elif line.startswith("+++ "):
            new_name = line[4:].split("\t")[0]
            deleted = new_name == "/dev/null"
            name = old_name if deleted else new_name
            current = FilePatch(name[2:] if name[:2] in ("a/", "b/") else name,
                                new_file=old_name == "/dev/null", deleted=deleted)
            files.append(current)
        elif line.startswith("@@") and current is not None:
            start = int(re.match(r"@@ -(\d+)", line).group(1))  # type: ignore[union-attr]
            hunk = Hunk(start)
            current.hunks.append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            if line[0] in " -":
                hunk.old.append(line[1:])
            if line[0] in " +":
                hunk.new.append(line[1:])
        elif hunk is not None and line == "":
            hunk.old.append("")
            hunk.new.append("")
    return files


class OracleAgent:
    """Replays the gold patch with view/edit tool calls, runs the tests, submits."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._plan: Iterator[Any] = iter(())
        self._pending: deque[str] = deque()

    def reset(self, observation: str, info: dict[str, Any]) -> None:
        self._plan = self._actions()

    def act(self, observation: str, info: dict[str, Any]) -> Any:
        self._last = observation
        return next(self._plan, tool_call("submit"))

    def _actions(self) -> Iterator[Any]:
        for fp in parse_unified_diff(self.task.patch):
            if fp.deleted:
                yield tool_call("bash", command=f"rm -f -- {shlex.quote(fp.path)}")
                continue
            if fp.new_file:
                text = "\n".join(fp.hunks[0].new) + "\n" if fp.hunks else ""
                yield tool_call("edit", command="create", path=fp.path, file_text=text)
                continue
            lines: list[str] = []
            total = None
            while total is None or len(lines) < total:  # the view tool pages long files
                yield tool_call("view", path=fp.path, view_range=[len(lines) + 1, -1])
                header = re.match(r".*\((\d+) lines\)", self._last.splitlines()[0])
                total = int(header.group(1)) if header else 0
                got = _view_lines(self._last)
                if " characters elided ...]" in self._last:
                    # The page was too long and clip() kept its head and tail: trust the head only,
                    # minus its last line (cut mid-way), and ask for the rest in the next view.
                    got = _view_lines(self._last.split("\n[... ", 1)[0])[:-1]
                if not got:
                    break
                lines += got
            for hunk in reversed(fp.hunks):  # bottom-up, so earlier hunks keep their line numbers
                old, new = _unique_context(lines, hunk)
                yield tool_call("edit", command="str_replace", path=fp.path, old_str=old, new_str=new)
                lines = lines[: hunk.old_start - 1] + hunk.new + lines[hunk.old_start - 1 + len(hunk.old):]
        yield tool_call("run_tests", **({"tests": tests} if (tests := self._test_files()) else {}))
        yield tool_call("submit")

    def _test_files(self) -> list[str]:
        """The visible test files the hidden tests go into (those the test patch changes rather
        than adds), as a developer runs the tests of what they fixed; none: the whole suite.
        A whole suite can be sympy's, which runs into run_tests' timeout (300 s)."""
        return [fp.path for fp in parse_unified_diff(self.task.test_patch)
                if fp.path.endswith(".py") and not fp.new_file and not fp.deleted]


class PatchOracle:
    """Applies the gold patch in one ``bash`` call (``git apply`` of a here-document), then submits.

    The shortest solving episode a tool set with ``bash`` allows (``toolset="bash"`` included): two
    turns, which is what a small policy trained from scratch can imitate. Its demonstrations
    (:mod:`deepgym_agents.demos`) are the warm start of the SWE-v0 learning benchmark.
    """

    DELIMITER = "DEEPGYM_PATCH"

    def __init__(self, task: Task) -> None:
        self.task = task
        self._turn = 0

    def reset(self, observation: str, info: dict[str, Any]) -> None:
        self._turn = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self._turn += 1
        if self._turn > 1:
            return tool_call("submit")
        patch = self.task.patch if self.task.patch.endswith("\n") else self.task.patch + "\n"
        return tool_call("bash", command=f"git apply <<'{self.DELIMITER}'\n{patch}{self.DELIMITER}")


def _view_lines(observation: str) -> list[str]:
    """The file's lines, from the view tool's numbered output."""
    out = []
    for line in observation.splitlines()[1:]:
        m = _VIEW_LINE.match(line)
        if m:
            out.append(m.group(2))
    return out


def _unique_context(lines: list[str], hunk: Hunk) -> tuple[str, str]:
    """old/new strings for str_replace, widened with surrounding lines until old is unique."""
    text = "\n".join(lines)
    start = hunk.old_start - 1
    end = start + len(hunk.old)
    before: list[str] = []
    after: list[str] = []
    while True:
        old = "\n".join(before + hunk.old + after)
        if text.count(old) == 1 or (start - len(before) <= 0 and end + len(after) >= len(lines)):
            return old, "\n".join(before + hunk.new + after)
        if start - len(before) > 0:
            before.insert(0, lines[start - len(before) - 1])
        if end + len(after) < len(lines):
            after.append(lines[end + len(after)])
