"""From kept bugs to task drafts: deduplicate, decide what is hidden, write the issue.

Each step may turn a kept bug down, and says why in the project's rejects file:

- ``duplicate``: the same buggy module as an earlier bug, or the same problem statement but for
  the count of other failing tests (two edits an agent could not tell apart from their issues);
- ``no visible test would remain``: hiding the failing tests leaves the agent no suite to run;
- ``the failure names its own cause``: the script ends in a NameError or UnboundLocalError;
- ``no standalone reproduction``: none of the first failing tests gives a script that fails on
  the buggy code and passes on the clean code (:mod:`deepgym_envs.synth.repro`), so there is
  nothing true to put in the issue.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deepgym_envs.envspec import PythonEnv
from deepgym_envs.grading import test_files
from deepgym_envs.progress import progress_bar
from deepgym_envs.synth.fetch import Fetched
from deepgym_envs.synth.hide import strip_tests, test_path
from deepgym_envs.synth.mutate import Mutation
from deepgym_envs.synth.repro import failing_line, reproduction
from deepgym_envs.synth.runner import TEST_CMD, SuiteRunner, failure_sections, header_name
from deepgym_envs.synth.statement import Reproduced, exception_name, write_statement
from deepgym_envs.synth.writer import TaskDraft

if TYPE_CHECKING:
    from deepgym_envs.synth.pipeline import PackageReport, SynthConfig
    from deepgym_envs.synth.record import Recorder

#: Failing tests tried, in order, for a reproduction.
_REPRO_TRIES = 5


@dataclass
class Kept:
    mutation: Mutation
    failing: list[str]
    passing: list[str]


def mutation_fields(m: Mutation) -> dict[str, Any]:
    return {"kind": m.kind, "module": m.path, "function": m.function, "line": m.line, "digest": m.digest}


def make_drafts(kept: list[Kept], sources: dict[str, str], fetched: Fetched, reliable: list[str],
                rec: "Recorder", report: "PackageReport") -> list[TaskDraft]:
    """One draft per distinct buggy module text, with the failing tests hidden and a suite left visible."""
    seen: set[str] = set()
    drafts = []
    for k in kept:
        mutated = k.mutation.apply(sources[k.mutation.path])
        key = hashlib.sha256(f"{k.mutation.path}\0{mutated}".encode()).hexdigest()
        if key in seen:
            _reject(rec, report, "duplicate", k, detail="the same buggy module as an earlier candidate")
            continue
        hidden, stripped = hide_failing(k.failing, reliable, fetched.root)
        if hidden is None:
            _reject(rec, report, "no visible test would remain", k,
                    detail="the failing tests are the whole suite and could not be cut out of their files")
            continue
        seen.add(key)
        kind = k.mutation.kind.replace("+", "-")
        instance_id = f"{_slug(fetched.name)}-{_slug(fetched.version)}__{kind}__{key[:8]}"
        drafts.append(TaskDraft(instance_id, k.mutation.path, mutated, hidden, tuple(k.failing), tuple(k.passing),
                                "", k.mutation.kind, k.mutation.function, stripped))
    return drafts


def hide_failing(failing: list[str], reliable: list[str], root: Path
                 ) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]] | tuple[None, None]:
    """(files left out, files replaced by a copy without the failing tests), or (None, None).

    Whole files go when tests in other files stay visible; otherwise the failing test functions
    are cut out of their files, which must then still hold a reliable test."""
    files = test_files(failing)
    if any(t.split("::", 1)[0] not in files for t in reliable):
        return tuple(files), ()
    failing_set = set(failing)
    stripped = []
    visible = False
    for path in files:
        try:
            text = (root / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None, None
        cut = {test_path(t) for t in failing if t.startswith(path + "::")}
        new = strip_tests(text, cut)
        if new is None:
            return None, None
        stripped.append((path, new))
        # A reliable test stays visible when its function was not cut.
        visible |= any(t.startswith(path + "::") and t not in failing_set and test_path(t) not in cut
                       for t in reliable)
    return ((), tuple(stripped)) if visible else (None, None)


def with_statements(drafts: list[TaskDraft], clean: Path, env: PythonEnv, fetched: Fetched, timeout: float,
                    config: "SynthConfig", rec: "Recorder", report: "PackageReport") -> list[TaskDraft]:
    """Each draft's issue, from a reproduction that runs; drafts without one, or whose failing tests
    and issue repeat an earlier draft's, are turned down."""
    out = []
    seen: set[str] = set()
    with SuiteRunner(clean, env, test_args=TEST_CMD, backend=config.backend, timeout=timeout) as runner, \
            progress_bar(f"{fetched.name}: write issues", len(drafts), enabled=config.show_progress) as advance:
        for d in drafts:
            repro, tried = find_reproduction(runner, d, fetched.root)
            if repro is None:
                log = rec.log(f"reproduce-{d.instance_id}", tried)
                report.rejected["no standalone reproduction"] += 1
                rec.reject("statement", "no standalone reproduction", log=log, **_draft_fields(d))
            elif names_its_cause(repro.buggy_output):
                log = rec.log(f"reproduce-{d.instance_id}", repro.script + "\n" + repro.buggy_output)
                report.rejected["the failure names its own cause"] += 1
                rec.reject("statement", "the failure names its own cause", log=log, **_draft_fields(d))
            else:
                statement = write_statement(fetched.name, fetched.version, repro, len(d.fail_to_pass))
                key = statement_key(statement)
                if key in seen:
                    report.rejected["duplicate"] += 1
                    rec.reject("statement", "duplicate", detail="the same problem statement as an earlier task",
                               **_draft_fields(d))
                else:
                    seen.add(key)
                    out.append(dataclasses.replace(d, problem_statement=statement))
            advance(d.instance_id)
    return out


def statement_key(statement: str) -> str:
    """What makes two issues the same to a reader: everything but the count of other failing tests.
    Four ordered-set bugs broke one test the same way; a two-bug task read like its one-bug part."""
    return re.sub(r"^\d+ other test\(s\) in the project's suite fail as well\.$", "", statement, flags=re.M).strip()


def names_its_cause(output: str) -> bool:
    """A NameError or UnboundLocalError names the variable whose assignment went: the failure points
    at the removed line instead of at behaviour."""
    return exception_name(output) in ("NameError", "UnboundLocalError")


def find_reproduction(runner: SuiteRunner, d: TaskDraft, root: Path) -> tuple[Reproduced | None, str]:
    """The first failing test whose script fails on the task's base state and passes on the clean
    code; with a transcript of the attempts (for the log when none does)."""
    shown = list(d.fail_to_pass[:_REPRO_TRIES])
    buggy_files = {d.module: d.mutated_source, **dict(d.stripped_tests)}
    run = runner.run(shown, files={d.module: d.mutated_source}, extra_args=["--tb=short", "-q"])
    sections = failure_sections(run.output)
    notes = []
    for test_id in shown:
        path = test_id.split("::", 1)[0]
        try:
            text = (root / path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            notes.append(f"{test_id}: test file unreadable")
            continue
        line = failing_line(run.output, path, sections.get(header_name(test_id)))
        script = reproduction(text, test_id, line)
        if script is None:
            notes.append(f"{test_id}: no standalone script (fixtures, setUp, relative imports, or too long)")
            continue
        # On the task's base state: the bug in, the hidden tests out.
        buggy = runner.run_script(script, files=buggy_files, removed=list(d.hidden_files))
        if buggy.exit_code == 0 or buggy.timed_out:
            notes.append(f"{test_id}: the script passes (or hangs) on the buggy code:\n{script}")
            continue
        fixed = runner.run_script(script, files=dict(d.stripped_tests), removed=list(d.hidden_files))
        if fixed.exit_code != 0:
            notes.append(f"{test_id}: the script fails on the clean code too:\n{script}\n{fixed.stderr[-1500:]}")
            continue
        return Reproduced(test_id, script, buggy.stdout + buggy.stderr, fixed.stdout), ""
    return None, "\n\n".join(notes) + "\n\n--- the failing tests' output ---\n" + run.output


def _reject(rec: "Recorder", report: "PackageReport", reason: str, k: Kept, **extra: Any) -> None:
    report.rejected[reason] += 1
    rec.reject("drafts", reason, failing=k.failing[:5], **mutation_fields(k.mutation), **extra)


def _draft_fields(d: TaskDraft) -> dict[str, Any]:
    return {"instance_id": d.instance_id, "kind": d.kind, "module": d.module, "function": d.function,
            "failing": list(d.fail_to_pass[:5])}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text)
