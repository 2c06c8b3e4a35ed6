"""Task validation (``deepgym tasks validate``): prove each task is well-formed by running it.

A task is valid when, through the same grading path agents are scored by,

* every FAIL_TO_PASS test fails on the base state and passes with the gold patch, and
* every PASS_TO_PASS test passes in both.

With ``runs`` > 1 both states are graded repeatedly, and tests whose outcome changes are
reported as flaky; ``record_flaky`` writes them into the task file, and grading then leaves them
out (with a warning).

With ``record_maps`` each valid task's hidden tests are also traced, each alone, on the base state
(inside a sandbox, as every test run), and the test map that selects tests for the shaping reward
(:mod:`deepgym_envs.selection`) is written beside the task file by :func:`save_test_maps`.

The gold run's test time is measured under the grading timeout alone (a recorded one is not
trusted to bound its own re-measurement) and must fit :data:`~deepgym_envs.grading.DEADLINE_HEADROOM`
times in the deadline the task is graded under: a gold patch cut off by its deadline would be a
false negative in every reward. :func:`record_gold_seconds` writes the time into the task file
(``gold_seconds``), from which grading derives the task's deadline.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from deepgym_envs.errors import InfrastructureError, SandboxUnavailable, ToolError
from deepgym_envs.grading import (DEADLINE_HEADROOM, GRADING_TIMEOUT, Verdict, counts_as_passing, grade,
                                  graded_files, grading_config_args, grading_deadline, prepare_grading_view)
from deepgym_envs.progress import progress_bar
from deepgym_envs.pyenv import sandbox_spec
from deepgym_envs.sandbox import make_sandbox
from deepgym_envs.selection import TestMap, build_map, map_key, save_maps, sidecar
from deepgym_envs.tasks import TRUST_CAPABILITIES, Task
from deepgym_envs.testplugins import KNOWN, fixture_provider, named_plugins
from deepgym_envs.testrun.trace import trace_tests
from deepgym_envs.trees import pristine_tree


@dataclass
class TaskValidation:
    task_id: str
    valid: bool
    problems: list[str]
    base: Verdict
    gold: Verdict
    flaky: list[str] = field(default_factory=list)
    """Tests whose outcome changed between runs (``runs`` > 1)."""
    test_map: TestMap | None = None
    """What each hidden test executes (``record_maps``; valid tasks only)."""
    gold_seconds: float = 0.0
    """The gold patch's hidden-test run time, the slowest of the runs (0: no verdict to time)."""


def validate_task(task: Task, *, backend: str | None = None, runs: int = 1, record_map: bool = False,
                  retime: bool = False) -> TaskValidation:
    """Grade the base state and the gold patch ``runs`` times each; flag tests that flip.
    ``record_map``: for a valid task, also trace its hidden tests into a :class:`TestMap`.
    ``retime``: the measured gold time replaces the recorded one (``--record-gold-seconds``), so
    the deadline checked is the one the new time gives."""
    if runs > 1 and task.flaky:
        task = dataclasses.replace(task, flaky=[])  # re-measure the recorded ones too
    untimed = dataclasses.replace(task, gold_seconds=0.0)  # measured under the grading timeout alone
    bases = [grade(untimed, "", backend=backend) for _ in range(runs)]
    golds = [grade(untimed, task.patch, backend=backend) for _ in range(runs)]
    measured = 0.0 if any(g.status == "no_verdict" for g in golds) else max(g.test_seconds for g in golds)
    flaky = sorted(_flipping(bases) | _flipping(golds))
    if flaky:
        task = dataclasses.replace(task, flaky=flaky)
    base, gold = bases[0], golds[0]
    problems: list[str] = []
    for name, verdict in (("base", base), ("gold", gold)):
        if verdict.status == "no_verdict":
            problems.append(f"{name}: no verdict: {verdict.reason}")
    if not problems:
        excluded = set(task.flaky)
        swe = task.swebench_semantics
        passing_at_base = [t for t in task.FAIL_TO_PASS
                           if t not in excluded and counts_as_passing(base.tests.get(t, ""), True, swe)]
        if passing_at_base:
            problems.append(f"FAIL_TO_PASS passes on the base state: {', '.join(passing_at_base)}")
        broken_at_base = [t for t in task.PASS_TO_PASS
                          if t not in excluded and not counts_as_passing(base.tests.get(t, ""), False, swe)]
        if broken_at_base:
            problems.append(f"PASS_TO_PASS not passing on the base state: "
                            f"{', '.join(f'{t} ({base.tests.get(t)})' for t in broken_at_base[:5])}")
        if gold.status != "resolved" and not all(_resolved_but_flaky(g, task) for g in golds):
            problems.append(f"gold patch does not resolve: {gold.reason}")
        if excluded and set(task.FAIL_TO_PASS) <= excluded:
            problems.append("every FAIL_TO_PASS test is flaky: nothing reliable is left to grade")
        late = deadline_problem(dataclasses.replace(task, gold_seconds=measured) if retime else task, measured)
        if late:
            problems.append(late)
    missing = missing_fixtures(task, base, gold) if problems else ""
    if missing:  # the cause, first: what the other problems follow from
        problems.insert(0, missing)
    needed = sealed_out(base, gold) if problems else []
    if needed:
        problems.append(f"the seal refused what the task's own tests use: {', '.join(needed)}; after "
                        f"review, keep it for this task with \"trust\": {json.dumps(needed)}")
    tmap = None
    if record_map and not problems:
        try:
            tmap = record_test_map(task, base, backend=backend)
        except (InfrastructureError, SandboxUnavailable, ToolError) as exc:
            problems.append(f"test map: the trace failed ({exc})")
    return TaskValidation(task.instance_id, not problems, problems, base, gold, flaky, tmap, measured)


def deadline_problem(task: Task, measured: float, timeout: float = GRADING_TIMEOUT) -> str:
    """Why a gold run of ``measured`` seconds is too close to the deadline ``task`` is graded under
    (:func:`~deepgym_envs.grading.grading_deadline`), or "" when it fits ``DEADLINE_HEADROOM`` times."""
    fresh = grading_deadline(dataclasses.replace(task, gold_seconds=measured), timeout)
    given = grading_deadline(task, timeout)
    if measured * DEADLINE_HEADROOM > fresh:
        return (f"the gold patch's tests took {measured:g}s, more than 1/{DEADLINE_HEADROOM:g} of the {fresh:g}s "
                "grading timeout: a loaded machine may cut the gold patch off; grade this task with a longer "
                "SandboxConfig(grading_timeout=...), or make its tests faster")
    if measured * DEADLINE_HEADROOM > given:
        return (f"the gold patch's tests took {measured:g}s, more than 1/{DEADLINE_HEADROOM:g} of the {given:g}s "
                f"deadline its recorded gold_seconds ({task.gold_seconds:g}) gives: time it again "
                f"(deepgym tasks validate --record-gold-seconds)")
    return ""


_NO_FIXTURE = re.compile(r"fixture '(\w+)' not found")


def missing_fixtures(task: Task, *verdicts: Verdict) -> str:
    """What to do about fixtures the runs could not find ("fixture 'mocker' not found" at setup),
    naming the package and plugin that provide each where it is a well-known one; "" for none."""
    names = sorted({m.group(1) for v in verdicts for m in _NO_FIXTURE.finditer(v.log or "")})
    if not names:
        return ""
    advice = []
    for name in names:
        found = fixture_provider(name)
        if found is None:
            advice.append(f"fixture {name!r} not found: install the package that provides it (python_env "
                          "requirements) and load its plugin (test_cmd: -p MODULE)")
            continue
        package, module = found
        installed = any(re.match(rf"{re.escape(package)}\s*(\[|==|;|$)", r, re.I)
                        for r in task.python_env.get("requirements") or [])
        if not installed:
            load = (f"its plugin {module} is then loaded" if task.imported and module in KNOWN.values()
                    else f"and add \"-p\", \"{module}\" to test_cmd")
            advice.append(f"fixture {name!r} not found: it comes from {package}, which this task's environment "
                          f"does not install: add {package}==VERSION to python_env's requirements ({load})")
        elif module in named_plugins(task.pytest_args):
            advice.append(f"fixture {name!r} not found although {package}'s plugin {module} is loaded: see the log")
        else:
            advice.append(f"fixture {name!r} not found: {package} is installed but its plugin is not loaded "
                          f"(autoloading is off): add \"-p\", \"{module}\" to test_cmd")
    return "; ".join(advice)


_REFUSED = re.compile(r"refused to the code under test during grading \(capability '(\w+)'")


def sealed_out(*verdicts: Verdict) -> list[str]:
    """Capabilities the seal refused in these runs (``deepgym_lockdown.py`` says which in the log),
    where a task can keep them (``Task.trust``): for the base state and the gold patch, that is what
    the project's own tests need, since neither is the agent's code."""
    found = {m.group(1) for v in verdicts for m in _REFUSED.finditer(v.log or "")}
    return sorted(found & set(TRUST_CAPABILITIES))


def record_test_map(task: Task, base: Verdict, *, backend: str | None = None,
                    timeout: float = GRADING_TIMEOUT) -> TestMap:
    """Trace each hidden test alone on the base state (the grading view of an empty change, in a
    sandbox); ``base`` is that state's full-run verdict, whose outcomes the map keeps."""
    tree = pristine_tree(task)
    ids = [t for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if t not in task.flaky]
    with make_sandbox(tree, backend, None, spec=sandbox_spec(task, backend)) as sb:
        prepare_grading_view(sb, task, tree, "")
        files = graded_files(task, ids)
        config = grading_config_args(sb, task, tree, files)
        trace = trace_tests(sb, [*task.pytest_args, *config, *files], ids, timeout)

        def read(path: str) -> bytes | None:
            try:
                return sb.read_file(path)
            except ToolError:
                return None

        return build_map(map_key(task), trace, base.tests, ids, read)


def save_test_maps(results: list[TaskValidation], tasks: list[Task]) -> list[str]:
    """Write the recorded maps beside their task files (``NAME.testmap.json``). Returns the files."""
    by_file: dict[Path, dict[str, TestMap]] = {}
    for res, task in zip(results, tasks):
        path = sidecar(task)
        if res.test_map is not None and path is not None:
            by_file.setdefault(path, {})[task.instance_id] = res.test_map
    for path, maps in by_file.items():
        save_maps(path, maps)
    return sorted(map(str, by_file))


def _flipping(verdicts: list[Verdict]) -> set[str]:
    """Test ids that did not get the same outcome in every verdict."""
    if len(verdicts) < 2 or any(v.status == "no_verdict" for v in verdicts):
        return set()
    ids = set().union(*(v.tests for v in verdicts))
    return {t for t in ids if len({v.tests.get(t) for v in verdicts}) > 1}


def _resolved_but_flaky(verdict: Verdict, task: Task) -> bool:
    """Unresolved only through tests known to be flaky: never a run that was tampered with (its
    tests may all have passed: the scale run's funcy tasks were valid with an unresolved gold)."""
    if verdict.tampered or verdict.status == "no_verdict":
        return False
    f2p = set(task.FAIL_TO_PASS)
    return all(counts_as_passing(outcome, test in f2p, task.swebench_semantics) or test in task.flaky
               for test, outcome in verdict.tests.items())


def record_flaky(results: list[TaskValidation], tasks: list[Task]) -> list[str]:
    """Write each task's flaky tests back into its task file (the ``flaky`` field). Returns the files."""
    by_id = {r.task_id: r for r in results}
    values = {task.source: by_id[task.instance_id].flaky for task in tasks
              if task.instance_id in by_id and sorted(task.flaky) != by_id[task.instance_id].flaky}
    return _write_field("flaky", values)


def record_gold_seconds(results: list[TaskValidation], tasks: list[Task]) -> list[str]:
    """Write each valid task's gold run time into its task file (``gold_seconds``, rounded up to the
    hundredth), from which grading derives the task's deadline. Returns the files."""
    by_id = {r.task_id: r for r in results}
    values = {task.source: math.ceil(by_id[task.instance_id].gold_seconds * 100) / 100 for task in tasks
              if task.instance_id in by_id and by_id[task.instance_id].valid and by_id[task.instance_id].gold_seconds}
    return _write_field("gold_seconds", values)


def _write_field(name: str, values: dict[str, object]) -> list[str]:
    """Set field ``name`` of the rows at these sources (``file:line``) to their values. Returns the files."""
    edits: dict[str, dict[int, object]] = {}
    for source, value in values.items():
        if ":" in source:
            path, line = source.rsplit(":", 1)
            edits.setdefault(path, {})[int(line)] = value
    for path, lines in edits.items():
        text = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
        for lineno, value in lines.items():
            row = json.loads(text[lineno - 1])
            row[name] = value
            # Written as it was: a row that holds "…" as is keeps it so, not turned into \u2026.
            text[lineno - 1] = json.dumps(row, ensure_ascii=text[lineno - 1].isascii()) + "\n"
        Path(path).write_text("".join(text), encoding="utf-8")
    return sorted(edits)


def validate_tasks(tasks: list[Task], *, backend: str | None = None, workers: int = 2, runs: int = 1,
                   show_progress: bool = True, record_maps: bool = False,
                   retime: bool = False) -> list[TaskValidation]:
    """Validate every task, ``workers`` at a time; results in task order."""
    with progress_bar("validate", len(tasks), enabled=show_progress) as advance, \
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(validate_task, t, backend=backend, runs=runs, record_map=record_maps, retime=retime)
                   for t in tasks]
        out = []
        for fut in futures:
            res = fut.result()
            advance(f"{res.task_id}: {'ok' if res.valid else 'INVALID'}")
            out.append(res)
    return out
