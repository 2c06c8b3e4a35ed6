"""The leaderboard: reading results files, ranking, the CLI, and the page in a real browser."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest

from _browser import CHROMIUM, Browser, dump_dom
from deepgym_envs.cli import main
from deepgym_envs.errors import ResultsFormatError
from deepgym_envs.evaluation import EpisodeResult, EvalResult
from deepgym_envs.leaderboard import load_run, load_runs, pass_at_k, rank, render

REPO = Path(__file__).resolve().parents[1]
TASKS = ["demo__alpha-001", "demo__alpha-002", "demo__beta-001"]
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def result(agent: str, outcomes: dict[str, list[str]], *, model: Any = None, created_at: str = "2026-01-02T03:04:05Z",
           task_set: str = "demo", steps: int = 3, k: int | None = None, **summary: Any) -> dict[str, Any]:
    """A results file as `deepgym eval --out` writes it; ``outcomes`` maps task -> status per rollout."""
    episodes = [{"task_id": task, "status": status, "steps": steps + i, "episode_return": 1.0 if status == "resolved"
                 else -0.1, "duration": 1.0, "invalid_actions": 0, "reason": "", "fail_to_pass": {},
                 "pass_to_pass": {}, "rollout_index": i}
                for task, statuses in outcomes.items() for i, status in enumerate(statuses)]
    n = len(episodes)
    resolved = sum(e["status"] == "resolved" for e in episodes)
    data: dict[str, Any] = {
        "agent": agent, "task_set": task_set, "env_id": "deepgym/SWE-v0", "backend": "namespace",
        "created_at": created_at, "machine": {"python": "3.11", "platform": "linux"},
        "summary": {"tasks": len(outcomes), "resolved": resolved, "resolved_rate": resolved / n, "no_verdict":
                    sum(e["status"] == "no_verdict" for e in episodes),
                    "mean_steps": sum(e["steps"] for e in episodes) / n, "wall_time": 12.5, **summary},
        "episodes": episodes}
    if model is not None:
        data["model"] = model
    if k is not None:
        data["summary"]["k"] = k
    return data


def write(directory: Path, name: str, data: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    """Three agents on the demo set: one with k=2 rollouts and a model, one with an infrastructure failure."""
    d = tmp_path / "results"
    write(d, "oracle.json", result("oracle", {t: ["resolved"] for t in TASKS}, steps=5))
    write(d, "noop.json", result("noop", {t: ["unresolved"] for t in TASKS}, steps=1))
    write(d, "llm.json", result("openai", {TASKS[0]: ["resolved", "unresolved"], TASKS[1]: ["unresolved", "unresolved"],
                                           TASKS[2]: ["no_verdict", "resolved"]},
                                model="Qwen/Qwen3-8B", k=2, steps=8, tokens={"prompt": 9000, "completion": 3000}))
    return d


# --- reading --------------------------------------------------------------------------------------

def test_reads_what_deepgym_eval_writes(tmp_path: Path) -> None:
    ev = EvalResult("oracle", "builtin", "namespace", [EpisodeResult("t-1", "resolved", 4, 2.0, 1.5, 0),
                                                       EpisodeResult("t-2", "unresolved", 1, 0.0, 0.5, 1)], 3.0)
    ev.write(tmp_path / "r.json")
    run = load_run(tmp_path / "r.json")
    assert (run.agent, run.model, run.task_set, run.k) == ("oracle", None, "builtin", 1)
    assert (run.resolved, run.tasks, run.resolved_rate, run.mean_steps) == (1, 2, 0.5, 2.5)
    assert run.pass_at_k == {1: 0.5} and run.top_pass == 0.5 and run.tokens is None
    assert run.mean_return == 1.0


def test_committed_baselines_load_and_rank_oracle_first() -> None:
    runs, skipped = load_runs(REPO / "leaderboard" / "results")
    assert not skipped
    board = rank(runs)
    top = {e.run.agent: e for e in board["builtin"]}
    assert {"oracle", "noop"} <= set(top)
    assert top["oracle"].rank == 1 and top["oracle"].run.resolved_rate == 1.0
    assert top["noop"].run.resolved == 0


def test_loop_fields_are_read(results_dir: Path) -> None:
    run = load_run(results_dir / "llm.json")
    assert run.name == "openai (Qwen/Qwen3-8B)" and run.k == 2
    assert run.tokens == 12000  # a {prompt, completion} breakdown counts as its total
    assert run.no_verdict == 1
    cells = run.per_task()
    assert cells[TASKS[0]].fraction == 0.5
    assert cells[TASKS[2]].fraction == 1.0  # the no-verdict rollout is not counted as a failure


def test_model_may_be_a_policy_record(tmp_path: Path) -> None:
    path = write(tmp_path, "r.json", result("vllm", {"a": ["resolved"]}, model={"model": "tiny", "version": 3}))
    assert load_run(path).model == "tiny@3"


def test_pass_at_k_is_the_unbiased_estimator(results_dir: Path) -> None:
    assert pass_at_k(4, 2, 2) == pytest.approx(1 - math.comb(2, 2) / math.comb(4, 2))
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(3, 2, 2) == 1.0
    run = load_run(results_dir / "llm.json")  # no pass_at_k in the file: computed from the rollouts
    # alpha-001: 1 of 2, alpha-002: 0 of 2, beta-001: 1 of 2 (a rollout without a verdict did not pass)
    assert run.pass_at_k == pytest.approx({1: (0.5 + 0 + 0.5) / 3, 2: (1 + 0 + 1) / 3})
    assert run.top_pass == pytest.approx(2 / 3)


def test_pass_at_k_from_the_file_is_kept_where_its_episodes_bear_it_out(tmp_path: Path) -> None:
    # The agent loop averages pass@2 over the tasks with two rollouts; from the episodes alone the
    # leaderboard would stop at pass@1 (b has one rollout). A number that disagrees is refused
    # (tests/security/test_results_files.py).
    path = write(tmp_path, "r.json", result("m", {"a": ["resolved", "unresolved"], "b": ["unresolved"]}, k=2,
                                            pass_at_k={"1": 0.25, "2": 1.0}))
    run = load_run(path)
    assert run.pass_at_k == {1: 0.25, 2: 1.0} and run.top_pass == 1.0


# --- malformed files ------------------------------------------------------------------------------

def _broken(change) -> dict:
    data = result("x", {"a": ["resolved"], "b": ["unresolved"]})
    change(data)
    return data


BROKEN = [
    ("missing agent", lambda d: d.pop("agent"), "'agent'"),
    ("bad status", lambda d: d["episodes"][1].update(status="done"), "'episodes[1].status'"),
    ("rate above 1", lambda d: d["summary"].update(resolved_rate=1.5), "'summary.resolved_rate'"),
    ("boolean steps", lambda d: d["episodes"][0].update(steps=True), "'episodes[0].steps'"),
    ("bad time", lambda d: d.update(created_at="yesterday"), "'created_at'"),
    ("episodes not a list", lambda d: d.update(episodes={"a": 1}), "'episodes'"),
    ("episode not an object", lambda d: d["episodes"].append("resolved"), "'episodes[2]'"),
    ("no summary", lambda d: d.pop("summary"), "'summary'"),
    ("bad pass_at_k key", lambda d: d["summary"].update(pass_at_k={"one": 0.5}), "'summary.pass_at_k'"),
]


@pytest.mark.parametrize("change,field", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_malformed_file_names_file_and_field(tmp_path: Path, change, field: str) -> None:
    path = write(tmp_path, "bad.json", _broken(change))
    with pytest.raises(ResultsFormatError) as exc:
        load_run(path)
    assert str(path) in str(exc.value) and field in str(exc.value)


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", '{"agent": "x",\n  "task_set": }')
    with pytest.raises(ResultsFormatError, match=r"bad\.json: not valid JSON \(line 2"):
        load_run(path)


def test_cli_skips_a_malformed_file_with_a_warning(results_dir: Path, tmp_path: Path, capsys) -> None:
    bad = write(results_dir, "zz-bad.json", _broken(lambda d: d["episodes"][1].update(status="done")))
    out = tmp_path / "site" / "index.html"
    assert main(["leaderboard", "--results", str(results_dir), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "warning" in printed and bad.name in printed and "episodes[1].status" in printed
    assert "Traceback" not in printed
    page = out.read_text()
    assert page.count('class="entry"') == 3  # the good files are all still there
    assert "Skipped results files" in page and "episodes[1].status" in page


def test_predictions_files_beside_the_results_are_not_warned_about(results_dir: Path) -> None:
    write(results_dir, "openai.predictions.json", [{"instance_id": TASKS[0], "model_name_or_path": "m",
                                                    "model_patch": "diff --git a/x b/x"}])
    write(results_dir, "by-id.json", {TASKS[0]: {"instance_id": TASKS[0], "model_patch": ""}})
    runs, skipped = load_runs(results_dir)
    assert len(runs) == 3 and not skipped


def test_cli_strict_turns_the_warning_into_an_error(results_dir: Path, tmp_path: Path, capsys) -> None:
    write(results_dir, "bad.json", "[1, 2]")
    assert main(["leaderboard", "--results", str(results_dir), "--out", str(tmp_path / "i.html"), "--strict"]) == 2
    printed = capsys.readouterr().out
    assert "error" in printed and "bad.json" in printed and "expected an object" in printed
    assert not (tmp_path / "i.html").exists()


def test_cli_missing_results_directory_is_an_error(tmp_path: Path, capsys) -> None:
    assert main(["leaderboard", "--results", str(tmp_path / "nope"), "--out", str(tmp_path / "i.html")]) == 2
    assert "deepgym eval" in capsys.readouterr().out


def test_empty_results_directory_still_writes_a_page(tmp_path: Path, capsys) -> None:
    (tmp_path / "results").mkdir()
    assert main(["leaderboard", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "i.html")]) == 0
    assert "No results yet" in (tmp_path / "i.html").read_text()


# --- ranking --------------------------------------------------------------------------------------

def test_ranked_by_resolved_rate_then_pass_at_k(tmp_path: Path) -> None:
    d = tmp_path / "r"
    # a and b resolve half their rollouts; a's are spread over both tasks (pass@2 1.0), b's not (0.5)
    write(d, "a.json", result("a", {"t": ["resolved", "unresolved"], "u": ["resolved", "unresolved"]}, k=2,
                                    pass_at_k={"1": 0.5, "2": 1.0}))
    write(d, "b.json", result("b", {"t": ["resolved", "resolved"], "u": ["unresolved", "unresolved"]}, k=2,
                                    pass_at_k={"1": 0.5, "2": 0.5}))
    write(d, "c.json", result("c", {"t": ["resolved", "resolved"], "u": ["resolved", "unresolved"]}, k=2))
    entries = rank(load_runs(d)[0])["demo"]
    assert [(e.rank, e.run.agent) for e in entries] == [(1, "c"), (2, "a"), (3, "b")]


def test_ties_go_to_fewer_infrastructure_failures_then_fewer_steps(tmp_path: Path) -> None:
    d = tmp_path / "r"
    write(d, "slow.json", result("slow", {"t": ["resolved"], "u": ["unresolved"]}, steps=9))
    write(d, "fast.json", result("fast", {"t": ["resolved"], "u": ["unresolved"]}, steps=2))
    write(d, "flaky.json", result("flaky", {"t": ["resolved"], "u": ["no_verdict"]}, steps=1))
    write(d, "twin.json", result("twin", {"t": ["resolved"], "u": ["unresolved"]}, steps=2))
    entries = rank(load_runs(d)[0])["demo"]
    assert [e.run.agent for e in entries] == ["fast", "twin", "slow", "flaky"]
    assert [e.rank for e in entries] == [1, 1, 3, 4]  # equal on every metric: a shared rank


def test_newest_run_per_agent_and_model_unless_all(tmp_path: Path, capsys) -> None:
    d = tmp_path / "r"
    write(d, "old.json", result("m", {"t": ["resolved"]}, created_at="2026-01-01T00:00:00Z"))
    write(d, "new.json", result("m", {"t": ["unresolved"]}, created_at="2026-02-01T00:00:00Z"))
    write(d, "other-model.json", result("m", {"t": ["unresolved"]}, model="big"))
    write(d, "other-set.json", result("m", {"t": ["resolved"]}, task_set="swe-gym"))
    runs = load_runs(d)[0]
    board = rank(runs)
    assert sorted(board) == ["demo", "swe-gym"]
    assert sorted(e.run.path.name for e in board["demo"]) == ["new.json", "other-model.json"]
    assert len(rank(runs, every_run=True)["demo"]) == 3
    assert main(["leaderboard", "--results", str(d), "--no-html", "--all"]) == 0
    printed = capsys.readouterr().out
    assert "swe-gym" in printed and printed.count("01-01 00:00") == 1  # --all shows the old run, dated


def test_cli_table_shows_every_entry(results_dir: Path, capsys) -> None:
    assert main(["leaderboard", "--results", str(results_dir), "--no-html"]) == 0
    printed = capsys.readouterr().out
    for text in ("oracle", "noop", "openai", "Qwen/Qwen3-8B", "3/3 100%", "2/6 33%", "0.667@2", "12.0k"):
        assert text in printed
    assert printed.index("oracle") < printed.index("openai") < printed.index("noop")


# --- the page -------------------------------------------------------------------------------------

def test_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    d = tmp_path / "r"
    write(d, "x.json", result("<script>alert(1)</script>", {'t"><img src=x>': ["resolved"]}))
    runs, skipped = load_runs(d)
    page = render(rank(runs), skipped)
    assert "<script>alert(1)" not in page and "<img src=x>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=", page)
    assert "@import" not in page and "url(" not in page
    assert set(re.findall(r"https?://[^\s\"')]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_heat_map_gets_darker_as_more_is_resolved() -> None:
    from deepgym_envs.leaderboard.page import colour

    def luminance(hex_colour: str) -> float:
        r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    shades = [luminance(colour(f / 10)) for f in range(11)]
    assert all(a > b for a, b in zip(shades, shades[1:]))
    assert colour(-1) == colour(0) and colour(2) == colour(1)


@needs_chromium
def test_page_renders_and_sorts_in_chromium(results_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "index.html"
    assert main(["leaderboard", "--results", str(results_dir), "--out", str(out)]) == 0
    # DEEPGYM_SCREENSHOT_DIR keeps the screenshot (a CI artifact, or to look at); by default it is temporary
    shot_dir = Path(os.environ.get("DEEPGYM_SCREENSHOT_DIR") or tmp_path)
    shot_dir.mkdir(parents=True, exist_ok=True)
    shot = shot_dir / "leaderboard.png"
    with Browser() as browser:
        browser.open(out.as_uri())
        rows = "Array.from(document.querySelectorAll('tr.entry')).map(r => r.dataset.agent)"
        assert browser.evaluate(rows) == ["oracle", "openai", "noop"]
        # the heat map: one cell per agent and task, coloured by resolved fraction over rollouts
        cells = browser.evaluate("Array.from(document.querySelectorAll('rect.cell')).map("
                                 "c => [c.dataset.agent, c.dataset.task, c.dataset.frac])")
        assert len(cells) == 3 * len(TASKS)
        assert ["openai", TASKS[0], "0.500"] in cells and ["noop", TASKS[2], "0.000"] in cells
        assert browser.evaluate("document.querySelectorAll('svg.returns rect.bar').length") == 3
        assert browser.evaluate("document.querySelectorAll('svg.steps circle.dot').length") == 3 + 3 + 6
        # a real mouse click on a header sorts; the first click on 'mean steps' puts the fewest first
        browser.click("th[data-key=steps]")
        assert browser.evaluate(rows) == ["noop", "oracle", "openai"]
        assert browser.evaluate("location.hash") == "#sort=steps"
        browser.click("th[data-key=steps]")
        assert browser.evaluate(rows) == ["openai", "oracle", "noop"]
        assert browser.evaluate("document.querySelector('th[data-key=steps]').getAttribute('aria-sort')") == "descending"
        # a sorted view can be linked to
        browser.open(out.as_uri() + "#sort=agent")
        assert browser.evaluate(rows) == ["noop", "openai", "oracle"]
        browser.open(out.as_uri())
        browser.screenshot(shot)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


@needs_chromium
def test_committed_page_renders_the_baselines() -> None:
    """`leaderboard/index.html` as committed, after its scripts ran: never an empty board."""
    dom = dump_dom((REPO / "leaderboard" / "index.html").as_uri())
    agents = re.findall(r'<tr class="entry"[^>]*data-agent="([^"]+)"', dom)
    assert {"oracle", "noop"} <= set(agents)
    assert len(re.findall(r'<rect class="cell"', dom)) >= 2 * 30  # both baselines × the built-in tasks
    assert 'aria-sort="ascending"' in dom
