"""The leaderboard as one self-contained HTML page: a sortable table, a heat map, two plots.

Nothing is fetched when the page opens (no CDN, no fonts, no data file): CSS, the sorting script
and every chart (SVG, generated here) are inline, so the page works from ``file://``, from a CI
artifact or from a static host alike. Every string from a results file is escaped.

Sorting: click a column header (again to reverse). The sort is kept in the address as
``#sort=KEY`` or ``#sort=-KEY`` (descending), so a sorted view can be linked to.
"""

from __future__ import annotations

import html
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Sequence

from deepgym_envs.leaderboard.results import Ranked, Run, Skipped, TaskCell

#: heat-map colours: resolved fraction 0 -> 0.5 -> 1 (pale grey: nothing solved; green: solved)
_STOPS = ((0.0, (232, 235, 240)), (0.5, (143, 209, 158)), (1.0, (26, 127, 55)))
_NO_VERDICT = "#f2c14e"
_CELL = 18


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    numeric: bool
    descending_first: bool
    """The first click sorts best-first: descending for 'more is better' columns."""
    cell: Callable[[Ranked], tuple[str, str]]
    """(text shown, value sorted by; "" sorts last)."""
    hint: str = ""


def format_tokens(n: int | None, missing: str = "—") -> str:
    """12345 -> '12.3k': token counts span six orders of magnitude between a baseline and an LLM."""
    if n is None:
        return missing
    return f"{n / 1e6:.2f}M" if n >= 1_000_000 else f"{n / 1e3:.1f}k" if n >= 10_000 else str(n)


COLUMNS: tuple[Column, ...] = (
    Column("rank", "#", True, False, lambda r: (str(r.rank), str(r.rank))),
    Column("agent", "agent", False, False, lambda r: (r.run.agent, r.run.agent)),
    Column("model", "model", False, False, lambda r: (r.run.model or "—", r.run.model or "")),
    Column("resolved", "resolved", True, True,
           lambda r: ("%d/%d" % r.run.counts + f" ({100 * r.run.resolved_rate:.1f}%)", f"{r.run.resolved_rate:.6f}"),
           "episodes whose hidden tests pass (SWE-bench 'resolved'), over all rollouts"),
    Column("pass", "pass@k", True, True,
           lambda r: (f"{r.run.top_pass:.3f} (k={r.run.k})", f"{r.run.top_pass:.6f}"),
           "unbiased pass@k estimator over the run's k rollouts per task"),
    Column("no_verdict", "no verdict", True, False, lambda r: (str(r.run.no_verdict), str(r.run.no_verdict)),
           "episodes the infrastructure failed (not the agent's fault)"),
    Column("steps", "mean steps", True, False, lambda r: (f"{r.run.mean_steps:.1f}", f"{r.run.mean_steps:.6f}")),
    Column("return", "mean return", True, True, lambda r: (f"{r.run.mean_return:.2f}", f"{r.run.mean_return:.6f}")),
    Column("tokens", "tokens", True, False,
           lambda r: (format_tokens(r.run.tokens), "" if r.run.tokens is None else str(r.run.tokens))),
    Column("wall", "wall (s)", True, False, lambda r: (f"{r.run.wall_time:.0f}", f"{r.run.wall_time:.3f}")),
    Column("date", "date", False, True,
           lambda r: (r.run.created_at.strftime("%Y-%m-%d %H:%M"), r.run.created_at.isoformat())),
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def colour(fraction: float) -> str:
    """The heat-map fill for a resolved fraction in [0, 1]."""
    fraction = min(1.0, max(0.0, fraction))
    for (x0, c0), (x1, c1) in zip(_STOPS, _STOPS[1:]):
        if fraction <= x1:
            t = (fraction - x0) / (x1 - x0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1))
    return "#%02x%02x%02x" % _STOPS[-1][1]


def _text_width(text: str, px: float = 12) -> float:
    """Rough width of a label in the page's sans-serif font; SVG has no layout engine to ask."""
    return len(text) * px * 0.6


def _short(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- the table ------------------------------------------------------------------------------------

def table(task_set: str, entries: Sequence[Ranked]) -> str:
    head = "".join(
        f'<th data-key="{c.key}" data-type="{"num" if c.numeric else "text"}" '
        f'data-dir="{"desc" if c.descending_first else "asc"}"{f" title={_q(c.hint)}" if c.hint else ""} '
        f'{" aria-sort=ascending" if c.key == "rank" else ""} tabindex="0">{_e(c.label)}</th>' for c in COLUMNS)
    rows = []
    for i, entry in enumerate(entries):
        cells = "".join(f'<td data-sort="{_e(v)}">{_e(t)}</td>' for t, v in (c.cell(entry) for c in COLUMNS))
        rows.append(f'<tr class="entry" data-order="{i}" data-agent="{_e(entry.run.agent)}" '
                    f'data-model="{_e(entry.run.model or "")}" title="{_e(entry.run.path)}">{cells}</tr>')
    return (f'<table class="board" data-task-set="{_e(task_set)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _q(text: str) -> str:
    return f'"{_e(text)}"'


# --- the heat map ---------------------------------------------------------------------------------

def heatmap(entries: Sequence[Ranked]) -> str:
    """Agents (rows, in rank order) × tasks (columns): colour = resolved fraction over rollouts."""
    cells = [e.run.per_task() for e in entries]
    tasks = sorted({t for per in cells for t in per})
    if not tasks:
        return '<p class="empty">No episodes.</p>'
    cut = _shared_prefix(tasks)
    label_w = max(_text_width(_short(e.run.name)) for e in entries) + 14
    top = max(_text_width(t[cut:], 11) for t in tasks) * 0.82 + 14  # labels run up at 55 degrees
    right = 70
    width = label_w + len(tasks) * _CELL + right
    height = top + len(entries) * _CELL + 6
    out = [f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="resolved fraction per agent and task">']
    for j, task in enumerate(tasks):
        x = label_w + j * _CELL + _CELL / 2
        out.append(f'<text class="task-label" x="{x:.1f}" y="{top - 6:.1f}" transform="rotate(-55 {x:.1f} {top - 6:.1f})">'
                   f'<title>{_e(task)}</title>{_e(task[cut:])}</text>')
    for i, (entry, per) in enumerate(zip(entries, cells)):
        y = top + i * _CELL
        out.append(f'<text class="row-label" x="{label_w - 8:.1f}" y="{y + _CELL / 2 + 4:.1f}" text-anchor="end">'
                   f'<title>{_e(entry.run.name)}</title>{_e(_short(entry.run.name))}</text>')
        for j, task in enumerate(tasks):
            out.append(_cell(entry.run, task, per.get(task), label_w + j * _CELL, y))
        solved = sum(c.resolved > 0 for c in per.values())
        out.append(f'<text class="row-total" x="{label_w + len(tasks) * _CELL + 8:.1f}" y="{y + _CELL / 2 + 4:.1f}">'
                   f'{solved}/{len(tasks)}</text>')
    out.append("</svg>")
    return "".join(out)


def _shared_prefix(tasks: Sequence[str]) -> int:
    """Length of the namespace every task id shares (``deepgym__``): repeated 36 times it is noise."""
    if len(tasks) < 2:
        return 0
    common = os.path.commonprefix(list(tasks))
    return max(common.rfind("__") + 2, common.rfind("/") + 1, 0)


def _cell(run: Run, task: str, cell: TaskCell | None, x: float, y: float) -> str:
    common = f'class="cell" data-agent="{_e(run.agent)}" data-model="{_e(run.model or "")}" data-task="{_e(task)}"'
    box = f'x="{x + 1:.1f}" y="{y + 1:.1f}" width="{_CELL - 2}" height="{_CELL - 2}" rx="2"'
    if cell is None:
        return (f'<rect {common} data-frac="" {box} fill="none" stroke="#c9ced6" stroke-dasharray="2 2">'
                f'<title>{_e(run.name)} · {_e(task)}: not run</title></rect>')
    if cell.fraction is None:
        return (f'<rect {common} data-frac="" {box} fill="{_NO_VERDICT}"><title>{_e(run.name)} · {_e(task)}: '
                f'no verdict in {cell.rollouts} rollout(s)</title></rect>')
    note = f", {cell.no_verdict} without verdict" if cell.no_verdict else ""
    return (f'<rect {common} data-frac="{cell.fraction:.3f}" {box} fill="{colour(cell.fraction)}"><title>'
            f'{_e(run.name)} · {_e(task)}: {cell.resolved}/{cell.graded} resolved{note}</title></rect>')


def legend() -> str:
    steps = "".join(f'<span class="swatch" style="background:{colour(f)}"></span>{f:g}' for f in (0, 0.25, 0.5, 0.75, 1))
    return (f'<p class="legend">resolved fraction over rollouts: {steps}'
            f'<span class="swatch" style="background:{_NO_VERDICT}"></span>no verdict'
            '<span class="swatch missing"></span>not run</p>')


# --- bar charts -----------------------------------------------------------------------------------

def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round-numbered axis ticks covering [lo, hi]."""
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    return [round(first + i * step, 10) for i in range(int(math.ceil((hi - first) / step + 1e-9)) + 1)]


def bar_chart(title: str, entries: Sequence[Ranked], value: Callable[[Run], list[float]], css: str) -> str:
    """Horizontal bars of the per-agent mean, with every episode's value as a dot on top."""
    series = [(e.run, value(e.run)) for e in entries]
    everything = [v for _, vals in series for v in vals] or [0.0]
    lo, hi = min(0.0, min(everything)), max(0.0, max(everything))  # bars start at 0, so 0 is on the axis
    ticks = _ticks(lo, hi if hi > lo else lo + 1.0)
    lo, hi = ticks[0], ticks[-1]
    label_w = max(_text_width(_short(run.name)) for run, _ in series) + 14
    plot_w, row_h, top = 360.0, 24, 26
    width, height = label_w + plot_w + 56, top + len(series) * row_h + 26

    def x(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * plot_w

    out = [f'<svg class="chart {css}" xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{_e(title)}">',
           f'<text class="chart-title" x="{label_w:.1f}" y="16">{_e(title)}</text>']
    axis_y = top + len(series) * row_h
    for t in ticks:
        out.append(f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top - 4}" y2="{axis_y}"/>'
                   f'<text class="tick" x="{x(t):.1f}" y="{axis_y + 14}" text-anchor="middle">{t:g}</text>')
    for i, (run, vals) in enumerate(series):
        y = top + i * row_h
        mean = sum(vals) / len(vals) if vals else 0.0
        x0, x1 = sorted((x(0.0), x(mean)))
        out.append(f'<text class="row-label" x="{label_w - 8:.1f}" y="{y + row_h / 2 + 4:.1f}" text-anchor="end">'
                   f'{_e(_short(run.name))}</text>'
                   f'<rect class="bar" data-agent="{_e(run.agent)}" x="{x0:.1f}" y="{y + 5}" width="{max(x1 - x0, 1):.1f}" '
                   f'height="{row_h - 10}"><title>{_e(run.name)}: mean {mean:.3f} over {len(vals)} episodes</title></rect>')
        for k, v in enumerate(vals):  # a fixed jitter, so re-rendering the same results gives the same page
            jitter = ((k * 7919) % 11 - 5) * 0.9
            out.append(f'<circle class="dot" cx="{x(v):.1f}" cy="{y + row_h / 2 + jitter:.1f}" r="2"/>')
        out.append(f'<text class="value" x="{label_w + plot_w + 10:.1f}" y="{y + row_h / 2 + 4:.1f}">{mean:.2f}</text>')
    out.append(f'<line class="axis" x1="{x(0.0):.1f}" x2="{x(0.0):.1f}" y1="{top - 4}" y2="{axis_y}"/></svg>')
    return "".join(out)


# --- the page -------------------------------------------------------------------------------------

#: The one part of a page that changes when nothing else does.
_STAMP = re.compile(r" · generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def same_page(old: str, new: str) -> bool:
    """True when two renderings differ at most in when they were generated: a tracked page is then
    left as it is, so regenerating it changes nothing in git."""
    return _STAMP.sub("", old) == _STAMP.sub("", new)


def render(board: dict[str, list[Ranked]], skipped: Sequence[Skipped] = (), *, source: str = "",
           generated_at: datetime | None = None) -> str:
    """The whole page as one HTML string."""
    stamp = (generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    runs = sum(len(v) for v in board.values())
    sections = [_section(ts, entries) for ts, entries in board.items()]
    if not sections:
        sections = ['<p class="empty">No results yet. Run <code>deepgym eval --agent oracle --out '
                    'leaderboard/results/oracle-builtin.json</code>, then <code>deepgym leaderboard</code>.</p>']
    nav = ""
    if len(board) > 1:
        nav = "<nav>" + " · ".join(f'<a href="#ts-{_e(ts)}">{_e(ts)}</a>' for ts in board) + "</nav>"
    warn = ""
    if skipped:
        items = "".join(f"<li>{_e(s.reason)}</li>" for s in skipped)
        warn = f'<section class="skipped"><h2>Skipped results files</h2><ul>{items}</ul></section>'
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>deepgym_envs leaderboard</title><style>{_CSS}</style></head><body>"
            f"<header><h1>deepgym_envs leaderboard</h1><p class=\"meta\">{runs} entr{'y' if runs == 1 else 'ies'}"
            f"{f' from <code>{_e(source)}</code>' if source else ''} · generated {stamp}</p>{nav}</header>"
            f"<main>{''.join(sections)}{warn}</main>"
            f'<footer>Ranked by resolved rate, then pass@k; ties go to fewer no-verdict episodes, then fewer steps '
            f"and tokens. Click a column header to sort.</footer><script>{_JS}</script></body></html>\n")


def _section(task_set: str, entries: Sequence[Ranked]) -> str:
    tasks = sorted({t for e in entries for t in e.run.per_task()})
    cut = _shared_prefix(tasks)
    note = f' <small>task ids without their shared prefix "{_e(tasks[0][:cut])}"</small>' if cut else ""
    return (f'<section class="task-set" id="ts-{_e(task_set)}"><h2>{_e(task_set)} '
            f'<small>{len(tasks)} tasks · {len(entries)} entr{"y" if len(entries) == 1 else "ies"}</small></h2>'
            f'<div class="scroll">{table(task_set, entries)}</div>'
            f'<h3>Per-task results{note}</h3><div class="scroll">{heatmap(entries)}</div>{legend()}'
            f'<h3>Reward and steps</h3><div class="plots">'
            f'{bar_chart("mean episode return", entries, lambda r: [e.episode_return for e in r.episodes], "returns")}'
            f'{bar_chart("mean steps per episode", entries, lambda r: [float(e.steps) for e in r.episodes], "steps")}'
            f"</div></section>")


_CSS = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--accent:#0969da;--bar:#4c8bd6}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:#fff}
header,main,footer{max-width:1180px;margin:0 auto;padding:0 20px}
header{padding-top:20px}h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:28px 0 10px}
h2 small,h3 small{font-weight:normal;color:var(--muted);font-size:13px}h3{font-size:15px;margin:22px 0 6px}
.meta,footer{color:var(--muted)}footer{padding:24px 20px 32px;font-size:12px}nav a{margin-right:4px}
code{font-size:12.5px;background:#f6f8fa;padding:1px 4px;border-radius:4px}
table.board{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
.board th,.board td{padding:6px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
.board th:nth-child(2),.board td:nth-child(2),.board th:nth-child(3),.board td:nth-child(3){text-align:left}
.board th{cursor:pointer;user-select:none;background:#f6f8fa;font-weight:600;position:sticky;top:0}
.board th:hover{color:var(--accent)}
.board th[aria-sort=ascending]::after{content:" \\25B2";font-size:10px}
.board th[aria-sort=descending]::after{content:" \\25BC";font-size:10px}
.board tbody tr:hover{background:#f6f8fa}.board td:nth-child(2){font-weight:600}
.board td:nth-child(3){white-space:normal;overflow-wrap:anywhere;min-width:9em;max-width:20em}
.scroll{overflow-x:auto}svg text{font-family:inherit;fill:var(--fg)}
.task-label{font-size:11px;fill:var(--muted)}.row-label{font-size:12px}.row-total,.value,.tick{font-size:11px;fill:var(--muted)}
.cell:hover{stroke:#1f2328;stroke-width:1.5}
.legend{font-size:12px;color:var(--muted)}.swatch{display:inline-block;width:13px;height:13px;border-radius:2px;
vertical-align:-2px;margin:0 4px 0 10px}.swatch.missing{border:1px dashed #c9ced6}
.plots{display:flex;flex-wrap:wrap;gap:12px 36px}.chart-title{font-size:13px;font-weight:600}
.bar{fill:var(--bar);fill-opacity:.75}.dot{fill:#1f2328;fill-opacity:.35}.grid{stroke:#eef0f3}.axis{stroke:#8c959f}
.skipped{color:#9a6700}.empty{color:var(--muted);font-style:italic}
"""

_JS = """
(function(){
  function value(td,num){var s=td.getAttribute('data-sort');if(s===null)s=td.textContent;s=s.trim();
    if(s==='')return null;if(!num)return s.toLowerCase();var v=parseFloat(s);return isNaN(v)?null:v;}
  function sortTable(table,key,dir){
    var ths=table.tHead.rows[0].cells,col=-1,num=false;
    for(var i=0;i<ths.length;i++){ths[i].removeAttribute('aria-sort');
      if(ths[i].getAttribute('data-key')===key){col=i;num=ths[i].getAttribute('data-type')==='num';}}
    if(col<0)return;
    ths[col].setAttribute('aria-sort',dir>0?'ascending':'descending');
    var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
    rows.sort(function(a,b){var x=value(a.cells[col],num),y=value(b.cells[col],num);
      if(x===null||y===null){if(x!==y)return x===null?1:-1;}  /* blanks last, either direction */
      else{var c=num?x-y:x.localeCompare(y);if(c)return c*dir;}
      return a.getAttribute('data-order')-b.getAttribute('data-order');});
    rows.forEach(function(r){body.appendChild(r);});
  }
  function sortAll(key,dir){document.querySelectorAll('table.board').forEach(function(t){sortTable(t,key,dir);});}
  function fromHash(){var m=/^#sort=(-?)([a-z_]+)$/.exec(location.hash);if(m)sortAll(m[2],m[1]?-1:1);}
  document.querySelectorAll('table.board th').forEach(function(th){
    function go(){var key=th.getAttribute('data-key'),now=th.getAttribute('aria-sort');
      var dir=now==='ascending'?-1:now==='descending'?1:(th.getAttribute('data-dir')==='desc'?-1:1);
      sortAll(key,dir);history.replaceState(null,'','#sort='+(dir<0?'-':'')+key);}
    th.addEventListener('click',go);
    th.addEventListener('keydown',function(ev){if(ev.key==='Enter'||ev.key===' '){ev.preventDefault();go();}});
  });
  window.addEventListener('hashchange',fromHash);fromHash();
})();
"""
