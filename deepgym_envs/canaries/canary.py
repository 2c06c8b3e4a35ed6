"""A planted canary and the host-side check of what a run made of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Literal

from deepgym_envs.errors import ToolError
from deepgym_envs.sandbox import Sandbox

Expect = Literal["passed", "failed"]
#: Where a canary came from: a copy of a graded test proven on the gold patch, or the template fallback.
Origin = Literal["copy", "template"]


@dataclass(frozen=True)
class Canary:
    """One planted test: its node id, the file it lives in, the outcome it must have, its origin,
    and for a copy the graded test it copies (``twin``).

    A copy's outcome follows its twin's on any code, not on the gold patch's alone: a copy whose
    twin passed must pass, and a perturbed copy (``expect="failed"``) must not pass beside a twin
    that passed, since one value cannot equal two different expected ones. Where the twin failed
    the change is wrong anyway, and the copy's outcome says nothing.
    """

    nodeid: str
    file: str
    expect: Expect
    origin: Origin = "template"
    twin: str | None = None


def check(canaries: list[Canary], outcomes: dict[str, str], finished: bool) -> list[str]:
    """What the canaries say about a run: empty when every canary came out as it must.

    A canary missing counts only when the session finished and real tests of its file were
    reported (a crash or a collection error of the file is not tampering, and is unresolved anyway).
    """
    planted = {c.nodeid for c in canaries}
    problems = []
    for c in canaries:
        got = outcomes.get(c.nodeid)
        if got is None:
            if finished and any(k.startswith(c.file + "::") and k not in planted for k in outcomes):
                problems.append(f"a canary test in {c.file} was never reported")
        elif _wrong(c, got, outcomes.get(c.twin) if c.twin else None):
            problems.append(f"a canary test that must have {c.expect} {got}")
    return sorted(set(problems))


def _wrong(canary: Canary, got: str, twin: str | None) -> bool:
    if canary.twin is None:
        return got != canary.expect
    return twin == "passed" and (got == "passed") != (canary.expect == "passed")


def graded_sources(sb: Sandbox, ids: list[str]) -> Iterator[tuple[str, str, list[str]]]:
    """(path, text, the ids it holds) of each graded Python file that reads as UTF-8, in id order."""
    by_file: dict[str, list[str]] = {}
    for test_id in ids:
        by_file.setdefault(test_id.split("::", 1)[0], []).append(test_id)
    for path, file_ids in by_file.items():
        if not path.endswith(".py"):
            continue
        try:
            yield path, sb.read_file(path).decode("utf-8"), file_ids
        except (ToolError, UnicodeDecodeError):
            continue
