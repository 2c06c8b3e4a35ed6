"""SWE-bench coverage: published rows imported, validated and graded, one table per repository.

    python bench/swebench_coverage.py ROWS [ROWS ...] --mirrors MIRRORS --work DIR
        [--per-repo N] [--seed S] [--repos owner/name,...] [--ids FILE] [--workers 2]
        [--judged FILE] [--noop valid|none]

ROWS are published rows: JSONL, a JSON array, or CSV (the shapes public copies come in). Rows are
picked reproducibly: all of them, or with ``--per-repo N`` N per repository drawn with ``--seed``
from the instance ids sorted; ``--ids FILE`` (one id a line) takes exactly those. The commands
are the ones a user types, run with the interpreter running this script (so ``PYTHONPATH``
chooses which checkout of deepgym is measured):

    deepgym tasks import WORK/rows.jsonl --out WORK/tasks --repos MIRRORS --json
    deepgym tasks validate WORK/tasks --task ID --json       one row a call, --workers calls at once
    deepgym tasks validate WORK/tasks --show-log ID           an invalid row: its log in WORK/logs/ID.log
    deepgym eval --agent oracle --tasks WORK/tasks --task-ids ID --json    a valid row
    deepgym eval --agent noop   --tasks WORK/tasks --task-ids ID --json    a valid row

A row's results go into WORK/state.json as they arrive, so a re-run skips what is done (the
rows are slow: a first environment build takes minutes). The report is WORK/coverage.json and
WORK/coverage.md: per repository, rows tried / imported / valid / invalid / wrong verdicts and
the time per row, then every invalid row with its reason.

A wrong verdict is the oracle not resolving a valid row, the empty patch resolving a row (noop
on a valid row; the base run of validation on an invalid one, the same grading), or a row
invalid because of deepgym itself. The last needs a person: read the row's log and write the
cause into ``--judged FILE``, a JSON object ``{"ID": {"cause": "ours: ..."|"network"|..., "note":
"..."}}``; a cause starting with ``ours`` counts as a wrong verdict, and the causes name the groups of
invalid rows in the report.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DEEPGYM = [sys.executable, "-m", "deepgym_envs.cli"]
STEP_TIMEOUT = 3600  # seconds for one command on one row: a first environment build included


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL, JSON-array or CSV file, each tagged with the file it came from."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".csv":
        csv.field_size_limit(sys.maxsize)
        rows = list(csv.DictReader(text.splitlines(keepends=True)))
    elif text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [{**r, "_source": path.name} for r in rows]


def pick(rows: list[dict[str, Any]], per_repo: int, seed: int, repos: set[str], ids: set[str]) -> list[dict]:
    """The rows to try: by id, else per repository a seeded draw from the sorted ids (0: all)."""
    unique: dict[str, dict[str, Any]] = {}
    for r in rows:  # a row in two files (Lite and Verified) is tried once, under both names
        first = unique.setdefault(r["instance_id"], {**r, "_source": []})
        first["_source"] = sorted({*first["_source"], r["_source"]})
    if ids:
        missing = ids - unique.keys()
        if missing:
            sys.exit(f"error: {len(missing)} ids are in no rows file, e.g. {sorted(missing)[0]}")
        return [unique[i] for i in sorted(ids)]
    by_repo: dict[str, list[str]] = defaultdict(list)
    for iid, r in sorted(unique.items()):
        if not repos or r["repo"] in repos:
            by_repo[r["repo"]].append(iid)
    chosen: list[str] = []
    for repo, iids in sorted(by_repo.items()):
        chosen += iids if not per_repo or len(iids) <= per_repo else sorted(random.Random(seed).sample(iids, per_repo))
    return [unique[i] for i in chosen]


def run_json(argv: list[str], timeout: float = STEP_TIMEOUT) -> tuple[dict[str, Any] | None, str, float]:
    """Run a ``--json`` command: (its document or None, its stderr's tail, seconds)."""
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f}s", time.monotonic() - started
    seconds = time.monotonic() - started
    try:
        return json.loads(proc.stdout), proc.stderr[-2000:], seconds
    except json.JSONDecodeError:
        return None, (proc.stderr or proc.stdout)[-2000:], seconds


class State:
    """WORK/state.json: every row's results so far, written after each step (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
        self.lock = threading.Lock()

    def row(self, iid: str) -> dict[str, Any]:
        return self.data.setdefault(iid, {})

    def put(self, iid: str, key: str, value: Any) -> None:
        with self.lock:
            self.row(iid)[key] = value
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1) + "\n")
            tmp.replace(self.path)


def import_rows(rows: list[dict], work: Path, mirrors: Path, state: State) -> None:
    """Import the picked rows (one ``tasks import`` call for the set) unless every one is imported
    already: a row that failed is tried again (its mirror may have been completed since)."""
    if all(state.row(r["instance_id"]).get("import", {}).get("status") == "imported" for r in rows):
        return
    path = work / "rows.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "_source"}) + "\n" for r in rows))
    print(f"importing {len(rows)} rows ...", flush=True)
    doc, err, seconds = run_json([*DEEPGYM, "tasks", "import", str(path), "--out", str(work / "tasks"),
                                  "--repos", str(mirrors), "--json"])
    if doc is None:
        sys.exit(f"error: the import gave no report:\n{err}")
    for r in doc["rows"]:
        state.put(r["instance_id"], "import", {"status": r["status"], "spec": r.get("spec"),
                                               "reason": r.get("reason", "")})
    print(f"imported {doc['imported']}, failed {doc['failed']} ({seconds:.0f}s)", flush=True)


def episode(work: Path, iid: str, agent: str) -> dict[str, Any]:
    doc, err, seconds = run_json([*DEEPGYM, "eval", "--agent", agent, "--tasks", str(work / "tasks"),
                                  "--task-ids", iid, "--json"])
    if doc is None or not doc.get("episodes"):
        return {"status": "error", "reason": err, "seconds": seconds}
    e = doc["episodes"][0]
    return {"status": e["status"], "reason": e.get("reason", ""), "seconds": seconds}


def run_row(work: Path, iid: str, state: State, noop: str, logs: bool) -> str:
    """Validate one row, then grade it with oracle and noop (valid rows) or keep its log (invalid)."""
    done = state.row(iid)
    if "validate" not in done:
        doc, err, seconds = run_json([*DEEPGYM, "tasks", "validate", str(work / "tasks"), "--task", iid,
                                      "--workers", "1", "--json"])
        result = doc["tasks"][0] if doc and doc.get("tasks") else {"valid": False, "problems": [f"error: {err}"]}
        state.put(iid, "validate", {**result, "seconds": round(seconds, 1)})
    v = state.row(iid)["validate"]
    if not v["valid"] and logs and "log" not in done:  # a second validation: the CLI's --json has no logs
        log = work / "logs" / f"{iid}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("w") as out:
            subprocess.run([*DEEPGYM, "tasks", "validate", str(work / "tasks"), "--show-log", iid],
                           stdout=out, stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT)
        state.put(iid, "log", str(log))
    if v["valid"]:
        for agent in ("oracle", "noop") if noop == "valid" else ("oracle",):
            if agent not in state.row(iid):
                state.put(iid, agent, episode(work, iid, agent))
    row = state.row(iid)
    return "valid" if v["valid"] else "INVALID: " + "; ".join(v["problems"])[:160] + (
        f" (log: {row.get('log')})" if row.get("log") else "")


# What a log says about why a row has no verdict, most telling first: (pattern, group name).
LOG_CAUSES = (
    (r"refused to the code under test during grading \(capability '(\w+)'", "the seal refused '{0}'"),
    (r"Temporary failure in name resolution|Name or service not known", "network (the tests call a host)"),
    (r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'", "missing module '{0}'"),
    (r"fixture '(\w+)' not found", "missing fixture '{0}'"),
    (r"unable to read ([0-9a-f]{40})", "the mirror lacks a blob"),
    (r"pip install failed", "the environment does not build (pip)"),
    (r"partially initialized module '(\w+)'", "'{0}' cannot be imported (a pin too old for the Python?)"),
)


def problem_group(problems: list[str], log: str = "") -> str:
    """A coarse, automatic name for why a row is invalid (a judged cause replaces it)."""
    text = "; ".join(problems)
    # pytest's "E   " lines and import failures decide; a refusal printed along the way may be a side issue
    decisive = "\n".join(line for line in log.splitlines() if line.startswith("E ") or "Error" in line[:40])
    if "no verdict" in text or text.startswith("error:"):
        for where in (decisive, log, text):
            for pattern, name in LOG_CAUSES:
                m = re.search(pattern, where)
                if m:
                    return "no verdict: " + name.format(*m.groups())
        m = re.search(r"(pytest exited \d+|pytest did not complete \(exit \d+\)|timed out)", text)
        return f"no verdict: {m.group(1) if m else text[:80]}"
    for pattern, name in ((r"FAIL_TO_PASS passes on the base", "FAIL_TO_PASS passes at the base"),
                          (r"PASS_TO_PASS not passing", "PASS_TO_PASS fail at the base"),
                          (r"gold patch does not resolve", "the gold patch does not resolve"),
                          (r"gold patch's tests took", "the gold run is too slow for the deadline"),
                          (r"seal refused", "the seal refused what the tests use")):
        if re.search(pattern, text):
            cause = next((name.format(*m.groups()) for pat, name in LOG_CAUSES[:2] if (m := re.search(pat, log))), "")
            return f"{name} ({cause})" if cause else name
    return text[:80] or "unknown"


def verdict_of(row: dict[str, Any]) -> tuple[str, str, bool]:
    """(outcome, group, wrong) of one row (its state, with "_judged": its judged cause): outcome is
    not_run, import_failed, valid, invalid or no_verdict."""
    judgement = row.get("_judged") or {}
    imp = row.get("import")
    if imp is None:
        return "not_run", "", False
    if imp.get("status") != "imported":
        reason = re.sub(r"^\S+:\d+: ", "", imp.get("reason", ""))  # the rows file's line differs per run
        return "import_failed", judgement.get("cause") or f"import: {reason[:80]}", \
            judgement.get("cause", "").startswith("ours")
    v = row.get("validate")
    if v is None:
        return "not_run", "", False
    if v["valid"]:
        oracle, noop = row.get("oracle", {}).get("status"), row.get("noop", {}).get("status")
        wrong = oracle not in (None, "resolved") or noop == "resolved"  # None: not graded yet
        return "valid", "", wrong
    outcome = "no_verdict" if any("no verdict" in p or p.startswith("error:") for p in v["problems"]) else "invalid"
    wrong = judgement.get("cause", "").startswith("ours") or v.get("base") == "resolved"
    log = Path(row["log"]).read_text(errors="replace") if row.get("log") and Path(row["log"]).exists() else ""
    return outcome, judgement.get("cause") or problem_group(v["problems"], log), wrong


OUTCOMES = ("tried", "imported", "valid", "invalid", "no_verdict", "not_run", "import_failed", "wrong")


def mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 1) if xs else None


def summarize(rows: list[dict], state: State, judged: dict[str, Any]) -> tuple[dict[str, Any], list[dict]]:
    """(per repository: the counts, mean seconds and reasons; per row: its outcome) from the state."""
    counts: dict[str, Counter] = defaultdict(Counter)
    seconds: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    groups: dict[str, Counter] = defaultdict(Counter)
    listing = []
    for r in rows:
        iid, repo = r["instance_id"], r["repo"]
        row = {**state.row(iid), "_judged": judged.get(iid)}
        outcome, group, wrong = verdict_of(row)
        imported = row.get("import", {}).get("status") == "imported"
        counts[repo].update({"tried": 1, "imported": imported, outcome: 1, "wrong": wrong})
        for step in ("validate", "oracle"):
            if step in row:
                seconds[repo][step].append(row[step]["seconds"])
        if group:
            groups[repo][group] += 1
        listing.append({"instance_id": iid, "repo": repo, "source": "+".join(r["_source"]), "outcome": outcome,
                        "group": group, "wrong": wrong, "note": (judged.get(iid) or {}).get("note", ""),
                        "problems": row.get("validate", {}).get("problems", []),
                        "spec": row.get("import", {}).get("spec"),
                        "validate_seconds": row.get("validate", {}).get("seconds"),
                        "oracle": row.get("oracle", {}).get("status"), "noop": row.get("noop", {}).get("status")})
    table = {repo: {**{k: c[k] for k in OUTCOMES}, "validate_seconds_mean": mean(seconds[repo]["validate"]),
                    "oracle_seconds_mean": mean(seconds[repo]["oracle"]), "reasons": dict(groups[repo])}
             for repo, c in sorted(counts.items())}
    return table, listing


def markdown(table: dict[str, Any], listing: list[dict]) -> str:
    lines = ["| repository | tried | imported | valid | invalid | no_verdict | not run | wrong verdicts "
             "| validate s/row | oracle s/row | reasons (invalid, no_verdict, import) |", "|---" * 11 + "|"]
    total: Counter = Counter()
    for repo, c in table.items():
        total.update({k: c[k] for k in OUTCOMES})
        reasons = "; ".join(f"{g} ({n})" for g, n in sorted(c["reasons"].items())) or "-"
        cells = [c[k] for k in ("tried", "imported", "valid", "invalid", "no_verdict", "not_run", "wrong")]
        cells += [c["validate_seconds_mean"] or "-", c["oracle_seconds_mean"] or "-", reasons]
        lines.append(f"| {repo} | " + " | ".join(map(str, cells)) + " |")
    cells = [total[k] for k in ("tried", "imported", "valid", "invalid", "no_verdict", "not_run", "wrong")]
    lines += ["| **all** | " + " | ".join(map(str, cells)) + " | | | |", "", "Rows not valid:", ""]
    lines += [f"- `{x['instance_id']}` ({x['source']}, {x['spec'] or '-'}): {x['outcome']}, {x['group']}"
              + (f" -- {x['note']}" if x["note"] else "") + (" **WRONG VERDICT**" if x["wrong"] else "")
              for x in listing if x["outcome"] not in ("valid", "not_run")]
    lines += [f"- `{x['instance_id']}`: valid, oracle {x['oracle']}, noop {x['noop']} **WRONG VERDICT**"
              for x in listing if x["outcome"] == "valid" and x["wrong"]]
    return "\n".join(lines) + "\n"


def deepgym_source() -> dict[str, str]:
    """Which checkout of deepgym ran (its path and commit), for the report."""
    code = "import deepgym_envs, os; print(os.path.dirname(deepgym_envs.__file__))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", out, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"deepgym_envs": out, "commit": commit}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rows", nargs="+", type=Path, help="published rows: .jsonl, a .json array or .csv")
    p.add_argument("--mirrors", required=True, type=Path, help="a directory of mirrors named owner__name")
    p.add_argument("--work", required=True, type=Path, help="where the task set, state, logs and report go")
    p.add_argument("--per-repo", type=int, default=0, help="rows per repository, a seeded draw (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repos", default="", help="only these repositories (owner/name, comma-separated)")
    p.add_argument("--ids", type=Path, help="exactly these instance ids (a file, one a line)")
    p.add_argument("--workers", type=int, default=2, help="rows in flight at once")
    p.add_argument("--judged", type=Path, help="JSON: the cause of each invalid row, after reading its log")
    p.add_argument("--noop", choices=("valid", "none"), default="valid", help="grade the empty patch on valid rows")
    p.add_argument("--no-logs", action="store_true", help="keep no log of an invalid row (saves its second run)")
    p.add_argument("--report-only", action="store_true", help="write the report from the state, run nothing")
    args = p.parse_args(argv)

    rows = [r for path in args.rows for r in read_rows(path)]
    ids = {line.strip() for line in args.ids.read_text().splitlines() if line.strip()} if args.ids else set()
    repos = {x.strip() for x in args.repos.split(",") if x.strip()}
    picked = pick(rows, args.per_repo, args.seed, repos, ids)
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "ids.txt").write_text("".join(r["instance_id"] + "\n" for r in picked))
    state = State(args.work / "state.json")
    judged = json.loads(args.judged.read_text()) if args.judged else {}
    print(f"{len(picked)} rows of {len({r['repo'] for r in picked})} repositories "
          f"({', '.join(f'{k} {v}' for k, v in sorted(Counter(r['repo'] for r in picked).items()))})", flush=True)
    if not args.report_only:
        import_rows(picked, args.work, args.mirrors, state)
        todo = [r["instance_id"] for r in picked if state.row(r["instance_id"]).get("import", {}).get("status")
                == "imported"]
        started, finished = time.monotonic(), 0
        lock = threading.Lock()

        def one(iid: str) -> None:
            nonlocal finished
            try:
                outcome = run_row(args.work, iid, state, args.noop, not args.no_logs)
            except (OSError, subprocess.SubprocessError) as exc:  # one row's failure stops no other row
                outcome = f"error: {exc}"
            with lock:
                finished += 1
                print(f"[{finished}/{len(todo)} {time.monotonic() - started:.0f}s] {iid}: {outcome}", flush=True)

        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            list(pool.map(one, todo))
    meta = {"command": " ".join(sys.argv), "rows_files": [str(x) for x in args.rows], **deepgym_source()}
    table, listing = summarize(picked, state, judged)
    (args.work / "coverage.json").write_text(json.dumps({**meta, "repos": table, "rows": listing}, indent=1) + "\n")
    text = markdown(table, listing)
    (args.work / "coverage.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
