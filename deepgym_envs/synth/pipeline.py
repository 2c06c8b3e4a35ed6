"""Synthesis, one project at a time: fetch, environment, reliable tests, bugs, tasks, validation.

>>> report = synthesize(SourceSpec.parse("pypi:inflection==0.5.1"), Path("out"))   # doctest: +SKIP
>>> report.kept, report.rejected
(12, {'no test fails': 30, ...})

A failure on one project (no tests shipped, the build fails, no test passes without network)
is a :class:`PackageReport` with its reason, never an exception out of :func:`synthesize_all`.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape

from deepgym_envs.envspec import PythonEnv
from deepgym_envs.errors import DeepgymError
from deepgym_envs.openai_http import OpenAIChatClient
from deepgym_envs.progress import console, progress_bar
from deepgym_envs.synth.fetch import Fetched, SourceSpec, SynthError, fetch
from deepgym_envs.synth.mutate import Meaning, Mutation, combine, find_mutations, sample
from deepgym_envs.synth.project import Layout, add_metadata_stub, build_env, read_layout
from deepgym_envs.synth.rewrite import rewrite_statement
from deepgym_envs.synth.runner import TEST_CMD, SuiteRun, SuiteRunner
from deepgym_envs.synth.drafts import Kept, make_drafts, mutation_fields, with_statements
from deepgym_envs.synth.record import Recorder
from deepgym_envs.synth.writer import RepoWriter, TaskDraft, task_row, write_rows
from deepgym_envs.tasks import Task, load_tasks
from deepgym_envs.trees import pristine_tree
from deepgym_envs.untrusted_tree import remove_untrusted
from deepgym_envs.validate import validate_tasks

@dataclass(frozen=True)
class SynthConfig:
    """Bounds on the work per project, so a run finishes in minutes."""

    max_candidates: int = 60
    """Single-bug candidates tried per project."""
    max_combined: int = 5
    """Two-bug candidates (pairs of kept bugs in one module) tried per project; 0 = off."""
    max_fail_fraction: float = 0.5
    """Reject a bug that fails more than this fraction of the reliable tests (it breaks everything)."""
    run_timeout: float = 0.0
    """Seconds per test-suite run; 0 = three times the clean run, plus 30 s."""
    workers: int = 2
    """Candidate runs in parallel (one sandbox each)."""
    seed: int = 0
    backend: str | None = None
    use_host_python: bool = False
    """Run the tests with deepgym's interpreter instead of building an environment."""
    validate: bool = True
    show_progress: bool = True
    llm_url: str = ""
    """An OpenAI-compatible endpoint that rewords the problem statements ('' = keep the templates)."""
    llm_model: str = ""
    repo_format: str = "bundle"
    """How each project's repository is stored: ``bundle`` (one file) or ``bare`` (a bare repository)."""
    budget: float = 0.0
    """Seconds of candidate runs per project (0 = no limit); once spent, the candidates left are not
    tried (mpmath's suite takes a minute: 65 candidates would hold a run for over an hour)."""


@dataclass
class PackageReport:
    """What happened to one project."""

    source: str
    ok: bool = False
    reason: str = ""
    """Why nothing (or less) came of it."""
    tried: int = 0
    kept: int = 0
    written: int = 0
    """Tasks in the output after deduplication and validation."""
    rejected: Counter = field(default_factory=Counter)
    reliable_tests: int = 0
    seconds: float = 0.0
    tasks_file: str = ""
    validated: bool = False
    """The written tasks passed ``tasks validate`` (False with ``validate=False``)."""
    rejects_file: str = ""
    """``rejects/NAME-VERSION.jsonl``: every rejected candidate, its reason and log (relative to the output)."""
    log_dir: str = ""
    final: bool = True
    """The outcome stands (tasks, or a reason a rerun would meet again); False when fetching the
    source failed, after infrastructure trouble, or an internal error: a resumed run tries again."""

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "ok": self.ok, "reason": self.reason, "tried": self.tried, "kept": self.kept,
                "written": self.written, "validated": self.validated, "rejected": dict(self.rejected),
                "reliable_tests": self.reliable_tests, "seconds": round(self.seconds, 1),
                "tasks_file": self.tasks_file, "rejects_file": self.rejects_file, "log_dir": self.log_dir,
                "final": self.final}


def synthesize_all(specs: list[SourceSpec], out: Path, config: SynthConfig) -> list[PackageReport]:
    """Every source in turn; a failing one is reported and the run goes on."""
    return [synthesize(spec, out, config) for spec in specs]


def synthesize(spec: SourceSpec, out: Path, config: SynthConfig) -> PackageReport:
    report = PackageReport(str(spec))
    start = time.monotonic()
    out = out.resolve()  # git runs in other directories
    # Not TemporaryDirectory: its cleanup (Python < 3.11.8) chmods through links a build planted.
    tmp = tempfile.mkdtemp(prefix="deepgym-synth-")
    holder: list[Recorder] = []
    try:
        try:
            _synthesize(spec, out, config, Path(tmp), report, holder)
            report.ok = report.written > 0
            if not report.ok and not report.reason:
                report.reason = ("the time budget (--source-budget) ran out before a bug was kept"
                                 if not report.kept and report.rejected[UNTRIED] else
                                 "no candidate bug was kept" if not report.kept else
                                 "no task passed validation" if report.rejected["failed validation"] else
                                 "no kept bug made a task (see the rejects file)")
        except SynthError as exc:
            report.reason = str(exc)
        except DeepgymError as exc:  # infrastructure trouble on this project only
            report.reason = f"{type(exc).__name__}: {exc}"
            report.final = False
        except Exception as exc:  # noqa: BLE001 - one odd project must not cost the others their run
            import traceback

            traceback.print_exc()
            report.reason = f"internal error ({type(exc).__name__}: {exc}); please report it"
            report.final = False
    finally:
        remove_untrusted(tmp)
    if not report.ok and not holder:
        report.final = False  # the download or clone failed: a network blip, worth another try
    report.seconds = time.monotonic() - start
    if holder and not report.ok:
        rec = holder[0]
        log = rec.log("failure", report.reason)
        if rec.count:
            report.rejects_file = str(rec.rejects_file.relative_to(out))
        report.reason = _short(report.reason) + f" (log: {out / log}" + (
            f"; rejected candidates: {out / report.rejects_file})" if report.rejects_file else ")")
    return report


def _synthesize(spec: SourceSpec, out: Path, config: SynthConfig, tmp: Path, report: PackageReport,
                holder: list[Recorder]) -> None:
    fetched = fetch(spec, tmp)
    key = f"{_slug(fetched.name)}-{_slug(fetched.version)}"
    rec = Recorder(out, key)
    holder.append(rec)
    report.log_dir = str(rec.log_dir.relative_to(out))
    layout = read_layout(fetched.root)
    _status(config, f"{report.source}: building the test environment")
    env = build_env(fetched, layout, use_host=config.use_host_python)
    add_metadata_stub(fetched, layout)
    clean = pristine_tree(Task(instance_id=f"synth-clean-{fetched.name}-{fetched.version}", problem_statement="",
                               FAIL_TO_PASS=["-"], repo_path=str(fetched.root)))
    targets = list(layout.test_targets)
    _status(config, f"{report.source}: running the test suite twice on the clean code")
    with SuiteRunner(clean, env, test_args=TEST_CMD, backend=config.backend, timeout=600) as runner:
        first, second = runner.run(targets), runner.run(targets)
    rec.log("baseline-1", first.output)
    rec.log("baseline-2", second.output)
    reliable, unstable = stable_passes(first.tests, second.tests)
    if unstable:
        rec.log("unstable-test-ids", "Test functions whose ids changed between two runs of the clean suite "
                "(parameters from a set or dict: ordered by hash), left out of every task:\n" + "\n".join(unstable))
    report.reliable_tests = len(reliable)
    if not reliable:
        raise SynthError("no test passes in the sandbox (tests need network, or the environment is incomplete): "
                         + _tail(second.output))
    timeout = config.run_timeout or 3 * max(first.duration, second.duration) + 30
    candidates = _candidates(fetched, layout, config)
    if not candidates:
        raise SynthError("no place to inject a bug was found in the library's functions")
    sources = {m: (fetched.root / m).read_text(encoding="utf-8") for m in layout.modules}

    deadline = time.monotonic() + config.budget if config.budget > 0 else math.inf
    ctx = _Ctx(sources, clean, env, targets, reliable, timeout, config, report, rec, deadline)
    kept = _evaluate(ctx, candidates, "try bugs")
    if config.max_combined:
        pairs = _pairs(kept, config)
        report.tried += len(pairs)
        kept += _evaluate(ctx, pairs, "try pairs", count_tried=False)
    report.kept = len(kept)
    drafts = make_drafts(kept, sources, fetched, reliable, rec, report)
    if not drafts:
        return
    drafts = with_statements(drafts, clean, env, fetched, timeout, config, rec, report)
    if drafts:
        _write(drafts, fetched, clean, env, out, config, report, rec)
    if rec.count:
        report.rejects_file = str(rec.rejects_file.relative_to(out))


def stable_passes(first: dict[str, str], second: dict[str, str]) -> tuple[list[str], list[str]]:
    """Tests that passed in both runs, and the test functions left out because their ids changed.

    A parametrized test over a set (isodate's ``TEST_CASES = {...}``) gets ids such as
    ``[4-19-expected15-%C]`` whose numbers follow hash order, so they change from one interpreter
    to the next: an id that passed in both runs by chance names nothing in the grader's run.
    """
    def functions(tests: dict[str, str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for test_id in tests:
            out.setdefault(test_id.split("[", 1)[0], set()).add(test_id)
        return out

    a, b = functions(first), functions(second)
    unstable = sorted(f for f in a.keys() | b.keys() if a.get(f) != b.get(f))
    bad = set(unstable)
    passed = {t for t, o in first.items() if o == "passed"} & {t for t, o in second.items() if o == "passed"}
    return sorted(t for t in passed if t.split("[", 1)[0] not in bad), unstable


def _status(config: SynthConfig, text: str) -> None:
    if config.show_progress:
        console().print(f"[dim]{escape(text)} ...[/]", soft_wrap=True)


def _candidates(fetched: Fetched, layout: Layout, config: SynthConfig) -> list[Mutation]:
    found: list[Mutation] = []
    meanings: dict[str, Meaning] = {}
    for module in layout.modules:
        try:
            text = (fetched.root / module).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += find_mutations(text, module, check=False)
        meanings[module] = Meaning(text)
    # Only the drawn ones are checked (a module is parsed once per drawn mutation, not per site).
    return sample(found, config.max_candidates, random.Random(config.seed), keep=lambda m: meanings[m.path].differs(m))


@dataclass
class _Ctx:
    sources: dict[str, str]
    clean: Path
    env: PythonEnv
    targets: list[str]
    reliable: list[str]
    timeout: float
    config: SynthConfig
    report: PackageReport
    rec: Recorder
    deadline: float = math.inf
    """``time.monotonic()`` past which no candidate is tried (``SynthConfig.budget``)."""


#: The rejection reason of the candidates a spent budget left untried.
UNTRIED = "not tried (time budget spent)"


def _evaluate(ctx: _Ctx, candidates: list[Mutation], label: str, count_tried: bool = True) -> list[Kept]:
    """Run the suite on each candidate (``workers`` sandboxes) and keep the ones the suite catches."""
    config, report = ctx.config, ctx.report
    if count_tried:
        report.tried += len(candidates)
    if not candidates:
        return []
    workers = max(1, min(config.workers, len(candidates)))
    chunks = [candidates[i::workers] for i in range(workers)]
    results: dict[int, tuple[Kept | str, str]] = {}
    index = {id(m): i for i, m in enumerate(candidates)}

    with progress_bar(f"{report.source}: {label}", len(candidates), enabled=config.show_progress) as advance:
        def work(chunk: list[Mutation]) -> None:
            with SuiteRunner(ctx.clean, ctx.env, test_args=TEST_CMD, backend=config.backend,
                             timeout=ctx.timeout) as runner:
                for m in chunk:
                    if time.monotonic() > ctx.deadline:
                        results[index[id(m)]] = (UNTRIED, "")
                        advance(f"{m.kind}: {UNTRIED}")
                        continue
                    run = runner.run(ctx.targets, files={m.path: m.apply(ctx.sources[m.path])})
                    verdict = _judge(m, run, ctx.reliable, config)
                    results[index[id(m)]] = (verdict, run.output if not isinstance(verdict, Kept) else "")
                    advance(f"{m.kind}: {'kept' if isinstance(verdict, Kept) else verdict}")

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in [pool.submit(work, c) for c in chunks]:
                fut.result()
    kept = []
    for i, m in enumerate(candidates):
        verdict, output = results[i]
        if isinstance(verdict, Kept):
            kept.append(verdict)
        else:
            report.rejected[verdict] += 1
            log = ctx.rec.log(f"candidate-{m.kind}-{m.digest}", output) if verdict != UNTRIED else ""
            ctx.rec.reject("tests", verdict, log=log, **mutation_fields(m))
    return kept


def _judge(m: Mutation, run: SuiteRun, reliable: list[str], config: SynthConfig) -> Kept | str:
    """Keep the bug, or say why not (these strings are the summary's rejection reasons)."""
    if run.timed_out:
        return "timeout"
    if not run.reported:
        return "test run crashed"
    failing = [t for t in reliable if run.tests.get(t) != "passed"]
    if not failing:
        return "no test fails"
    if len(failing) > config.max_fail_fraction * len(reliable):
        return "breaks too many tests"
    passing = [t for t in reliable if t not in set(failing)]
    return Kept(m, failing, passing)


def _pairs(kept: list[Kept], config: SynthConfig) -> list[Mutation]:
    """Two kept bugs in one module, when each breaks a test the other leaves alone: otherwise one
    hides behind the other, and the task reads (and grades) like the one-bug task it contains."""
    rng = random.Random(config.seed + 1)
    by_module: dict[str, list[Kept]] = {}
    for k in kept:
        if "+" not in k.mutation.kind:
            by_module.setdefault(k.mutation.path, []).append(k)
    pairs = []
    for items in by_module.values():
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                if not each_bug_matters(a.failing, b.failing):
                    continue
                if (pair := combine(a.mutation, b.mutation)) is not None:
                    pairs.append(pair)
    rng.shuffle(pairs)
    return pairs[: config.max_combined]


def each_bug_matters(first: list[str], second: list[str]) -> bool:
    """Each bug fails a test the other does not."""
    return bool(set(first) - set(second)) and bool(set(second) - set(first))


def _write(drafts: list[TaskDraft], fetched: Fetched, clean: Path, env: PythonEnv, out: Path,
           config: SynthConfig, report: PackageReport, rec: Recorder) -> None:
    repo = RepoWriter(out, fetched, clean, config.repo_format)
    client = None
    if config.llm_url:
        client = OpenAIChatClient(config.llm_url, config.llm_model, temperature=0.3, max_tokens=1500)
    rows = []
    for d in drafts:
        commit, gold, test_patch = repo.add(d)
        if client is not None:
            d = dataclasses.replace(d, problem_statement=rewrite_statement(client, d.problem_statement, gold))
        rows.append(task_row(d, fetched, repo.rel, commit, gold, test_patch, test_cmd=TEST_CMD,
                             python_env=env.to_dict()))
    tasks_file = out / f"{_slug(fetched.name)}-{_slug(fetched.version)}.jsonl"
    write_rows(tasks_file, rows)
    # Before validation: the rows name what finish leaves (the bundle), and every task's branch,
    # a rejected one's included, is still there for it to keep.
    repo.finish()
    if config.validate:
        # Exactly what `deepgym tasks validate` runs, on the file as written.
        results = validate_tasks(load_tasks(tasks_file), backend=config.backend, workers=config.workers,
                                 show_progress=config.show_progress)
        bad = {r.task_id: r for r in results if not r.valid}
        for row in rows:
            r = bad.get(row["instance_id"])
            if r is None:
                continue
            report.rejected["failed validation"] += 1
            log = rec.log(f"validate-{row['instance_id']}", "\n".join(r.problems) + "\n\n" + (r.base.log or "")
                          + "\n\n--- with the gold patch ---\n" + (r.gold.log or ""))
            rec.reject("validation", "; ".join(r.problems)[:500], log=log, instance_id=row["instance_id"],
                       **row["synth"])
            rec.rejected_row(row)  # its branch stays: `deepgym tasks validate OUT/NAME.rejected` re-runs it
        rows = [r for r in rows if r["instance_id"] not in bad]
        report.validated = True
    if rows:
        write_rows(tasks_file, rows)
    else:
        tasks_file.unlink()
    if not rows and not bad_rows(rec):
        repo.remove()  # nothing refers to it: no empty repos/ entry
        return
    report.written = len(rows)
    report.tasks_file = tasks_file.name if rows else ""  # relative to the output directory
    requirements = out / "envs" / f"{_slug(fetched.name)}-{_slug(fetched.version)}.txt"
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text("".join(f"{r}\n" for r in env.requirements) or "# deepgym's own interpreter\n")


def bad_rows(rec: Recorder) -> bool:
    return rec.rejected_rows_file.is_file()


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text)


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])[:600]


def _short(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


__all__ = ["PackageReport", "SynthConfig", "synthesize", "synthesize_all"]
