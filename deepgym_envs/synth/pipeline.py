"""Synthesis, one project at a time: fetch, environment, reliable tests, bugs, tasks, validation.

>>> report = synthesize(SourceSpec.parse("pypi:inflection==0.5.1"), Path("out"))   # doctest: +SKIP
>>> report.kept, report.rejected
(12, {'no test fails': 30, ...})

A failure on one project (no tests shipped, the build fails, no test passes without network)
is a :class:`PackageReport` with its reason, never an exception out of :func:`synthesize_all`.
"""

from __future__ import annotations

import hashlib
import random
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from deepgym_envs.envspec import PythonEnv
from deepgym_envs.errors import DeepgymError
from deepgym_envs.grading import test_files
from deepgym_envs.openai_http import OpenAIChatClient
from deepgym_envs.progress import progress_bar
from deepgym_envs.synth.fetch import Fetched, SourceSpec, SynthError, fetch
from deepgym_envs.synth.mutate import Mutation, combine, find_mutations, sample
from deepgym_envs.synth.project import Layout, build_env, read_layout
from deepgym_envs.synth.rewrite import rewrite_statement
from deepgym_envs.synth.runner import SuiteRun, SuiteRunner, failure_messages, header_name
from deepgym_envs.synth.statement import Observation, test_source, write_statement
from deepgym_envs.synth.writer import RepoWriter, TaskDraft, task_row, write_rows
from deepgym_envs.tasks import Task, load_tasks
from deepgym_envs.trees import pristine_tree
from deepgym_envs.untrusted_tree import remove_untrusted
from deepgym_envs.validate import validate_tasks

#: Extra pytest arguments every synthesised task runs with: the project's own ``addopts`` often
#: name plugins (coverage, xdist) the grading runner does not load.
TEST_CMD = ["-o", "addopts="]


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

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "ok": self.ok, "reason": self.reason, "tried": self.tried, "kept": self.kept,
                "written": self.written, "rejected": dict(self.rejected), "reliable_tests": self.reliable_tests,
                "seconds": round(self.seconds, 1), "tasks_file": self.tasks_file}


def synthesize_all(specs: list[SourceSpec], out: Path, config: SynthConfig) -> list[PackageReport]:
    """Every source in turn; a failing one is reported and the run goes on."""
    return [synthesize(spec, out, config) for spec in specs]


def synthesize(spec: SourceSpec, out: Path, config: SynthConfig) -> PackageReport:
    report = PackageReport(str(spec))
    start = time.monotonic()
    out = out.resolve()  # git runs in other directories
    # Not TemporaryDirectory: its cleanup (Python < 3.11.8) chmods through links a build planted.
    tmp = tempfile.mkdtemp(prefix="deepgym-synth-")
    try:
        try:
            _synthesize(spec, out, config, Path(tmp), report)
            report.ok = report.written > 0
            if not report.ok and not report.reason:
                report.reason = "no candidate bug was kept" if not report.kept else "no task passed validation"
        except SynthError as exc:
            report.reason = str(exc)
        except DeepgymError as exc:  # infrastructure trouble on this project only
            report.reason = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - one odd project must not cost the others their run
            import traceback

            traceback.print_exc()
            report.reason = f"internal error ({type(exc).__name__}: {exc}); please report it"
    finally:
        remove_untrusted(tmp)
    report.seconds = time.monotonic() - start
    return report


def _synthesize(spec: SourceSpec, out: Path, config: SynthConfig, tmp: Path, report: PackageReport) -> None:
    fetched = fetch(spec, tmp)
    layout = read_layout(fetched.root)
    env = build_env(fetched, layout, use_host=config.use_host_python)
    clean = pristine_tree(Task(instance_id=f"synth-clean-{fetched.name}-{fetched.version}", problem_statement="",
                               FAIL_TO_PASS=["-"], repo_path=str(fetched.root)))
    targets = list(layout.test_targets)
    with SuiteRunner(clean, env, test_args=TEST_CMD, backend=config.backend, timeout=600) as runner:
        first, second = runner.run(targets), runner.run(targets)
    reliable = sorted(first.passed & second.passed)
    report.reliable_tests = len(reliable)
    if not reliable:
        raise SynthError("no test passes in the sandbox (tests need network, or the environment is incomplete): "
                         + _tail(second.output))
    timeout = config.run_timeout or 3 * max(first.duration, second.duration) + 30
    candidates = _candidates(fetched, layout, config)
    if not candidates:
        raise SynthError("no place to inject a bug was found in the library's functions")
    sources = {m: (fetched.root / m).read_text(encoding="utf-8") for m in layout.modules}

    kept = _evaluate(candidates, sources, clean, env, targets, reliable, timeout, config, report, "try bugs")
    if config.max_combined:
        pairs = _pairs(kept, config)
        report.tried += len(pairs)
        kept += _evaluate(pairs, sources, clean, env, targets, reliable, timeout, config, report, "try pairs",
                          count_tried=False)
    report.kept = len(kept)
    drafts = _dedupe(kept, sources, fetched, report)
    if not drafts:
        return
    drafts = _with_statements(drafts, clean, env, fetched, timeout, config)
    _write(drafts, fetched, clean, env, out, config, report)


def _candidates(fetched: Fetched, layout: Layout, config: SynthConfig) -> list[Mutation]:
    found: list[Mutation] = []
    for module in layout.modules:
        try:
            text = (fetched.root / module).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += find_mutations(text, module)
    return sample(found, config.max_candidates, random.Random(config.seed))


@dataclass
class _Kept:
    mutation: Mutation
    failing: list[str]
    passing: list[str]


def _evaluate(candidates: list[Mutation], sources: dict[str, str], clean: Path, env: PythonEnv,
              targets: list[str], reliable: list[str], timeout: float, config: SynthConfig,
              report: PackageReport, label: str, count_tried: bool = True) -> list[_Kept]:
    """Run the suite on each candidate (``workers`` sandboxes) and keep the ones the suite catches."""
    if count_tried:
        report.tried += len(candidates)
    if not candidates:
        return []
    workers = max(1, min(config.workers, len(candidates)))
    chunks = [candidates[i::workers] for i in range(workers)]
    results: dict[int, _Kept | str] = {}
    index = {id(m): i for i, m in enumerate(candidates)}

    with progress_bar(f"{report.source}: {label}", len(candidates), enabled=config.show_progress) as advance:
        def work(chunk: list[Mutation]) -> None:
            with SuiteRunner(clean, env, test_args=TEST_CMD, backend=config.backend, timeout=timeout) as runner:
                for m in chunk:
                    run = runner.run(targets, files={m.path: m.apply(sources[m.path])})
                    verdict = _judge(m, run, reliable, config)
                    results[index[id(m)]] = verdict
                    advance(f"{m.kind}: {'kept' if isinstance(verdict, _Kept) else verdict}")

        with ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in [pool.submit(work, c) for c in chunks]:
                fut.result()
    kept = []
    for i in range(len(candidates)):
        verdict = results[i]
        if isinstance(verdict, _Kept):
            kept.append(verdict)
        else:
            report.rejected[verdict] += 1
    return kept


def _judge(m: Mutation, run: SuiteRun, reliable: list[str], config: SynthConfig) -> _Kept | str:
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
    return _Kept(m, failing, passing)


def _pairs(kept: list[_Kept], config: SynthConfig) -> list[Mutation]:
    rng = random.Random(config.seed + 1)
    by_module: dict[str, list[Mutation]] = {}
    for k in kept:
        if "+" not in k.mutation.kind:
            by_module.setdefault(k.mutation.path, []).append(k.mutation)
    pairs = []
    for items in by_module.values():
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                if (pair := combine(a, b)) is not None:
                    pairs.append(pair)
    rng.shuffle(pairs)
    return pairs[: config.max_combined]


def _dedupe(kept: list[_Kept], sources: dict[str, str], fetched: Fetched, report: PackageReport) -> list[TaskDraft]:
    """One task per distinct buggy module text (different edits can produce the same code)."""
    seen: set[str] = set()
    drafts = []
    for k in kept:
        mutated = k.mutation.apply(sources[k.mutation.path])
        key = hashlib.sha256(f"{k.mutation.path}\0{mutated}".encode()).hexdigest()
        if key in seen:
            report.rejected["duplicate"] += 1
            continue
        seen.add(key)
        kind = k.mutation.kind.replace("+", "-")
        instance_id = f"{_slug(fetched.name)}-{_slug(fetched.version)}__{kind}__{key[:8]}"
        hidden = tuple(test_files(k.failing))
        drafts.append(TaskDraft(instance_id, k.mutation.path, mutated, hidden, tuple(k.failing), tuple(k.passing),
                                "", k.mutation.kind, k.mutation.function))
    return drafts


def _with_statements(drafts: list[TaskDraft], clean: Path, env: PythonEnv, fetched: Fetched, timeout: float,
                     config: SynthConfig) -> list[TaskDraft]:
    """Run each bug's failing tests once more, with tracebacks, and write the issue from them."""
    out = []
    with SuiteRunner(clean, env, test_args=TEST_CMD, backend=config.backend, timeout=timeout) as runner, \
            progress_bar(f"{fetched.name}: write issues", len(drafts), enabled=config.show_progress) as advance:
        for d in drafts:
            shown = list(d.fail_to_pass[:5])
            run = runner.run(shown, files={d.module: d.mutated_source}, extra_args=["--tb=short", "-q"])
            messages = failure_messages(run.output)
            observations = []
            for test_id in shown:
                path = fetched.root / test_id.split("::", 1)[0]
                text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
                observations.append(Observation(test_id, test_source(text, test_id),
                                                messages.get(header_name(test_id), [])))
            statement = write_statement(fetched.name, fetched.version, observations, len(d.fail_to_pass))
            out.append(dataclasses.replace(d, problem_statement=statement))
            advance(d.instance_id)
    return out


def _write(drafts: list[TaskDraft], fetched: Fetched, clean: Path, env: PythonEnv, out: Path,
           config: SynthConfig, report: PackageReport) -> None:
    repo = RepoWriter(out, fetched, clean)
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
    if config.validate:
        # Exactly what `deepgym tasks validate` runs, on the file as written.
        results = validate_tasks(load_tasks(tasks_file), backend=config.backend, workers=config.workers,
                                 show_progress=config.show_progress)
        bad = {r.task_id: r for r in results if not r.valid}
        for task_id, r in bad.items():
            report.rejected["failed validation"] += 1
            repo.drop(task_id)
        rows = [r for r in rows if r["instance_id"] not in bad]
        write_rows(tasks_file, rows)
    repo.finish()
    if not rows:
        tasks_file.unlink()
    report.written = len(rows)
    report.tasks_file = tasks_file.name if rows else ""  # relative to the output directory
    requirements = out / "envs" / f"{_slug(fetched.name)}-{_slug(fetched.version)}.txt"
    requirements.parent.mkdir(parents=True, exist_ok=True)
    requirements.write_text("".join(f"{r}\n" for r in env.requirements) or "# deepgym's own interpreter\n")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text)


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])[:600]


__all__ = ["PackageReport", "SynthConfig", "synthesize", "synthesize_all"]
