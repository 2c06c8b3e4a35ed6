"""Where one warm grading's time goes (issue 36): host phases, and the warm server's child. Prints JSON.

    python bench/bench_grading_profile.py [--task deepgym__tabkit-001] [--repeats 15] [--cprofile 8] [--unsealed]

Grades ``task.patch`` on a pooled view (``grade(..., views=ViewPool())``, the warm path) once to warm
up, then ``--repeats`` times, timing each host phase by wrapping the functions ``grade`` calls (the
package is not changed; the wrappers cost a few µs). ``--unsealed`` alternates sealed and unsealed
gradings (the runner told nothing of the seal, as ``bench_run_tests.py``'s seal half) so the seal's
share shows. ``--cprofile N`` then profiles N more warm gradings of the host process and lists the
functions with the most own and cumulative time.

Inside the sandbox the script reads timing marks when the in-sandbox files carry them: apply
``bench/grading_profile_marks.patch`` first (``git apply bench/grading_profile_marks.patch``; undo with
``git apply -R``). The marked warm server writes one ``DGPROF {json}`` line to the run's stderr at
exit (request received, fork, plugin made, each step of the seal, pytest's configure, collection,
last test, session finish, exit) and returns its own (wait, clean-up) in its reply. Without the
patch only the host phases and pytest's own reported time are printed. Every grading's verdict must
be ``resolved`` (``all_resolved``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import time
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

# This checkout's package (and its in-sandbox files), not whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import builtin_task  # noqa: E402

import deepgym_envs.canaries as canaries  # noqa: E402
import deepgym_envs.grading as grading  # noqa: E402
import deepgym_envs.sandbox.resident as resident  # noqa: E402
import deepgym_envs.testrun.runner as runner  # noqa: E402
from deepgym_envs.sandbox.pool import ViewPool  # noqa: E402
from deepgym_envs.testrun.warm import WarmRunner  # noqa: E402

#: Host functions timed (inclusive), as ``grade`` and its helpers look them up: (module, name, label).
HOST = [(grading, "pristine_tree", "host.pristine_tree"), (grading, "sandbox_spec", "host.sandbox_spec"),
        (grading, "canary_pool", "host.canary_pool (cached pool)"),
        (grading, "prepare_grading_view", "host.prepare_grading_view"),
        (grading, "patch_writes", "host.prepare.patch_writes (git apply --numstat)"),
        (grading, "_write_gold_configs", "host.prepare.write_gold_configs"),
        (grading, "graded_files", "host.graded_files"), (grading, "grading_config_args", "host.grading_config_args"),
        (grading, "xfail_files", "host.xfail_files"), (canaries, "plant", "host.canaries.plant"),
        (grading, "run_pytest", "host.run_pytest"), (runner, "parse_report", "host.run_pytest.parse_report"),
        (grading, "own_xfails_only", "host.own_xfails_only"), (grading, "judge", "host.judge")]

#: The child's marks, in order; each phase runs from the previous mark present to this one.
PHASES = [("srv_recv", "sandbox: host send -> server received request"),
          ("srv_precompiled", "sandbox: server precompiles named test files"),
          ("child_forked", "sandbox: fork"),
          ("child_start", "sandbox: child scheduled"),
          ("child_env_ready", "sandbox: child setsid/fds/env"),
          ("plugin_module_exec", "sandbox: report plugin module exec"),
          ("mp_nonce_written", "sandbox: make_plugin nonce"),
          ("mp_trust_machinery", "sandbox: make_plugin _trust + _machinery snapshot"),
          ("mp_before_expected_bodies", "sandbox: make_plugin originals/closures"),
          ("mp_expected_bodies", "sandbox: make_plugin _expected_bodies (reads+parses test files)"),
          ("plugin_made", "sandbox: make_plugin rest (_reuse_rewrites ...)"),
          ("lock_start", "sandbox: load shipped plugins"),
          ("lockdown_compiled", "sandbox: seal: read+compile deepgym_lockdown.py"),
          ("seal_read_compiled", "sandbox: seal: read+compile hidden test files"),
          ("seal_blanked", "sandbox: seal: blank hidden files"),
          ("seal_undumpable_landlock", "sandbox: seal: undumpable + landlock (ctypes)"),
          ("seal_classifier", "sandbox: seal: classifier (walk code objects)"),
          ("seal_hook_installed", "sandbox: seal: consumers, vetting, audit hook"),
          ("sealed", "sandbox: seal: return"),
          ("pt_configure", "sandbox: pytest: argv/ini parse, plugin registration -> configure"),
          ("pt_collected", "sandbox: pytest: sessionstart + collection (imports project + tests)"),
          ("pt_first_logfinish", "sandbox: pytest: first test (setup, call, teardown)"),
          ("pt_last_logfinish", "sandbox: pytest: the other tests (incl. plugin per-test checks)"),
          ("pt_sessionfinish", "sandbox: pytest: after last test -> sessionfinish"),
          ("pt_sessionfinish_checked", "sandbox: report plugin sessionfinish checks"),
          ("main_returned", "sandbox: pytest: terminal summary (-rA), unconfigure"),
          ("exit", "sandbox: child _exit (threads, atexit, flush)"),
          ("srv_waited", "sandbox: child exit -> server wait returns"),
          ("srv_killed", "sandbox: server kills leftovers"),
          ("host_reply", "sandbox: server reply -> host received")]


class Recorder:
    def __init__(self) -> None:
        self.samples: list[dict[str, float]] = []
        self.current: dict[str, float] = {}
        self.extra: dict[str, Any] = {}

    def wrap(self, module: Any, name: str, label: str) -> Callable[[], None]:
        original = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.current[label] = self.current.get(label, 0.0) + time.perf_counter() - t0
        setattr(module, name, timed)
        return lambda: setattr(module, name, original)


def install(rec: Recorder) -> list[Callable[[], None]]:
    undo = [rec.wrap(m, n, label) for m, n, label in HOST]
    view = ViewPool.view
    wrapped: set[type] = set()

    @contextmanager
    def timed_view(self: ViewPool, *args: Any, **kwargs: Any):
        t0 = time.perf_counter()
        with view(self, *args, **kwargs) as sb:
            rec.current["host.view: take + renew"] = time.perf_counter() - t0
            if type(sb) not in wrapped:  # the view's class is known only once a view exists
                wrapped.add(type(sb))
                undo.append(rec.wrap(type(sb), "apply_patch", "host.prepare.apply_patch (x2: change, hidden tests)"))
            yield sb
            t1 = time.perf_counter()
        rec.current["host.view: give back"] = time.perf_counter() - t1
    ViewPool.view = timed_view
    undo.append(lambda: setattr(ViewPool, "view", view))

    exchange = resident.ForkServer._exchange

    def timed_exchange(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        got = exchange(self, *args, **kwargs)
        rec.extra["send"] = t0
        rec.extra["reply_at"] = time.monotonic()
        rec.extra["reply"] = got.reply if got is not None else None
        return got
    resident.ForkServer._exchange = timed_exchange
    undo.append(lambda: setattr(resident.ForkServer, "_exchange", exchange))
    undo.append(rec.wrap(WarmRunner, "run", "host.run_pytest.warm exchange (send -> reply)"))
    return undo


def sandbox_phases(stderr: str, extra: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """Phase -> seconds from the child's DGPROF line and the server's reply; ({}, {}) without marks."""
    line = next((ln for ln in reversed(stderr.splitlines()) if ln.startswith("DGPROF ")), None)
    reply = extra.get("reply") or {}
    if line is None or "dgprof" not in reply:
        return {}, {}
    data = json.loads(line[len("DGPROF "):])
    marks = dict(data["marks"])
    firsts = [t for k, t in data["marks"] if k == "pt_last_logfinish"]
    if firsts:
        marks["pt_first_logfinish"] = firsts[0]
    marks.update(dict(reply["dgprof"]))
    marks["host_reply"] = extra["reply_at"]
    out, prev = {}, extra["send"]
    for key, label in PHASES:
        if key in marks:
            out[label] = marks[key] - prev
            prev = marks[key]
    spans = {"sandbox span: request received -> pytest configure": ("srv_recv", "pt_configure"),
             "sandbox span: pytest configure -> sessionfinish done": ("pt_configure", "pt_sessionfinish_checked"),
             "sandbox span: sessionfinish done -> host has reply": ("pt_sessionfinish_checked", "host_reply")}
    for label, (a, b) in spans.items():
        if a in marks and b in marks:
            out[label] = marks[b] - marks[a]
    return out, data.get("acc", {})


def pytest_reported(stdout: str) -> float | None:
    """pytest's own session time: the ``in 0.18s`` of its last summary line."""
    found = re.findall(r" in ([0-9.]+)s(?: \([0-9:]+\))? =+\s*$", stdout, re.M)
    return float(found[-1]) if found else None


def unsealed(run: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("seal", None)
        kwargs.pop("not_tests", None)
        return run(*args, **kwargs)
    return call


def one(task: Any, pool: ViewPool, rec: Recorder, sealed: bool) -> dict[str, Any]:
    rec.current, rec.extra = {}, {}
    captured: dict[str, Any] = {}
    run = grading.run_pytest

    def capture(*args: Any, **kwargs: Any) -> Any:
        report, result = (run if sealed else unsealed(run))(*args, **kwargs)
        captured["result"] = result
        captured["tests"] = len((report or {}).get("tests", {}) or {})
        return report, result
    grading.run_pytest = capture
    try:
        t0 = time.perf_counter()
        verdict = grading.grade(task, task.patch, views=pool)
        total = time.perf_counter() - t0
    finally:
        grading.run_pytest = run
    result = captured["result"]
    phases, acc = sandbox_phases(result.stderr, rec.extra) if rec.extra else ({}, {})
    return {"total": total, "host": dict(rec.current), "sandbox": phases, "acc": acc,
            "pytest_reported": pytest_reported(result.stdout), "status": verdict.status,
            "run_duration": result.duration,
            "n_tests": len(re.findall(r"^PASSED ", result.stdout, re.M))}


def medians(samples: list[dict[str, Any]], field: str) -> dict[str, float]:
    keys = list(dict.fromkeys(k for s in samples for k in s[field]))
    return {k: round(1000 * statistics.median([s[field].get(k, 0.0) for s in samples]), 2) for k in keys}


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    acc_keys = list(dict.fromkeys(k for s in samples for k in s["acc"]))
    pr = [s["pytest_reported"] for s in samples if s["pytest_reported"] is not None]
    return {"n": len(samples),
            "total_ms": round(1000 * statistics.median(s["total"] for s in samples), 1),
            "total_min_ms": round(1000 * min(s["total"] for s in samples), 1),
            "pytest_reported_ms": round(1000 * statistics.median(pr), 1) if pr else None,
            "warm_run_duration_ms": round(1000 * statistics.median(s["run_duration"] for s in samples), 1),
            "tests_passed_in_run": statistics.median(s["n_tests"] for s in samples),
            "all_resolved": all(s["status"] == "resolved" for s in samples),
            "host_ms": medians(samples, "host"), "sandbox_ms": medians(samples, "sandbox"),
            "plugin_per_test_ms": {k: {"calls": statistics.median(s["acc"].get(k, [0, 0])[0] for s in samples),
                                       "ms": round(1000 * statistics.median(s["acc"].get(k, [0, 0])[1]
                                                                             for s in samples), 2)}
                                   for k in acc_keys}}


def host_cprofile(task: Any, pool: ViewPool, n: int, top: int = 25) -> dict[str, Any]:
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(n):
        grading.grade(task, task.patch, views=pool)
    prof.disable()
    wall = time.perf_counter() - t0
    out = {"n": n, "wall_ms_per_grading": round(1000 * wall / n, 1)}
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
        out[key] = [ln for ln in buf.getvalue().splitlines() if re.match(r"\s*\d", ln)]
    return out


def direct_pytest(task: Any, n: int) -> dict[str, Any]:
    """Plain ``python -m pytest`` on the host over a pre-patched copy of the tree (gold patch and
    hidden tests applied), the same files, no deepgym plugin, no seal, no canaries, no sandbox:
    what pytest itself takes for these tests, and a new interpreter's wall time around it."""
    import shutil
    import subprocess
    import tempfile

    ids = [t for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS] if t not in task.flaky]
    files = grading.graded_files(task, ids)
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        shutil.copytree(grading.pristine_tree(task), repo, symlinks=True)
        for diff in (task.patch, task.test_patch):
            subprocess.run(["git", "apply", "-"], input=diff.encode(), cwd=repo, check=True)
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        reported, walls = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *task.test_cmd,
                                   *files], cwd=repo, env=env, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            reported.append(pytest_reported(proc.stdout))
    return {"n": n, "tests_passed": len(re.findall(r"^PASSED ", proc.stdout, re.M)), "exit": proc.returncode,
            "pytest_reported_ms": round(1000 * statistics.median(r for r in reported if r is not None), 1),
            "process_wall_ms": round(1000 * statistics.median(walls), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="deepgym__tabkit-001")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cprofile", type=int, default=8, help="warm gradings profiled with cProfile (0: none)")
    ap.add_argument("--unsealed", action="store_true", help="alternate sealed and unsealed gradings")
    ap.add_argument("--direct", type=int, default=0, help="also run plain host pytest N times on a patched copy")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    task = builtin_task(args.task)
    rec = Recorder()
    out: dict[str, Any] = {"task": args.task, "load_before": os.getloadavg()}
    # A warm server serves only runs with the environment it started with (the seal's variables
    # are part of it): sealed and unsealed gradings each get a pool of their own.
    with ViewPool() as pool, ViewPool() as open_pool:
        pools = {"sealed": pool, "unsealed": open_pool}
        kinds = ["sealed", "unsealed"] if args.unsealed else ["sealed"]
        for kind in kinds:  # the view, its warm server, the canary pool; then one warm grading
            for _ in range(2):
                one(task, pools[kind], rec, kind == "sealed")
        undo = install(rec)
        try:
            runs: dict[str, list[dict[str, Any]]] = {"sealed": [], "unsealed": []}
            for i in range(args.repeats):
                for kind in kinds[i % len(kinds):] + kinds[:i % len(kinds)]:
                    runs[kind].append(one(task, pools[kind], rec, kind == "sealed"))
        finally:
            for u in reversed(undo):
                u()
        for kind, samples in runs.items():
            if samples:
                out[kind] = summary(samples)
        if args.cprofile:
            out["host_cprofile"] = host_cprofile(task, pool, args.cprofile)
    if args.direct:
        out["direct_host_pytest"] = direct_pytest(task, args.direct)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
