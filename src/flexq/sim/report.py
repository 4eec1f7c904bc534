"""Reports of a simulation: ``jobs.csv``, ``summary.json`` and a self-contained ``report.html``.

The summary gives, per ClusterQueue and overall, p50/p95/max wait (submission to start), the flavors
jobs ran on, how often flexq fell back to the next flavor and how often ProvisioningRequests were
retried, and the cost by capacity type (on-demand, flex-start). The HTML has the numbers and SVG plots
(wait distribution per policy, jobs waiting and pool nodes over time, a Gantt of jobs by flavor), with no external
assets, so it opens anywhere.
"""

from __future__ import annotations

import csv
import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flexq.capacity import ProvisioningState
from flexq.durations import format_seconds
from flexq.scheduler import EventKind
from flexq.sim.policies import LOWER_BOUND, ORACLE, PolicyRun

__all__ = ["percentile", "pool_usage", "ratio", "summarize", "waiting_over_time", "write_report"]

_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
_CHAR_PX = 6.4
"""About how wide a character of the plots' 11 px labels is."""
_LABEL_CHARS = 64
_TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 2 * 3600, 3 * 3600, 6 * 3600, 12 * 3600,
               86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400)
"""Round durations between a time axis' ticks: the first that makes six ticks or fewer is taken."""
"""Longer job names are cut in the middle in the Gantt chart (whole in their tooltip)."""


_KINDS = {kind.value: kind for kind in EventKind}
_STATES = {state.value: state for state in ProvisioningState}
_RETRIED = frozenset({ProvisioningState.FAILED, ProvisioningState.BOOKING_EXPIRED})


def _kind(event: Mapping[str, Any]) -> EventKind | None:
    """An event's kind, read back from the log (None: one of the simulator's own, such as Refused)."""
    return _KINDS.get(str(event.get("event")))


def _state(event: Mapping[str, Any]) -> ProvisioningState | None:
    """A ProvisioningRequest event's state, read back from the log."""
    return _STATES.get(str(event.get("state")))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    data = sorted(values)
    if len(data) == 1:
        return float(data[0])
    pos = (len(data) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return float(data[low] + (data[high] - data[low]) * (pos - low))


def _stats(waits: Sequence[float]) -> dict[str, Any]:
    def r(v: float | None) -> float | None:
        return None if v is None else round(v, 3)

    return {"jobs": len(waits), "p50": r(percentile(waits, 50)), "p95": r(percentile(waits, 95)),
            "max": r(max(waits)) if waits else None, "mean": r(sum(waits) / len(waits)) if waits else None}


def summarize(rows: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]],
              flex_flavors: set[str]) -> dict[str, Any]:
    """The numbers of one run: waits per ClusterQueue and overall, fallbacks, retries, cost by capacity type."""
    waits = [float(r["wait"]) for r in rows if r.get("wait") is not None]
    by_cq: dict[str, list[float]] = {}
    for r in rows:
        if r.get("wait") is not None:
            by_cq.setdefault(str(r["clusterQueue"]), []).append(float(r["wait"]))
    by_class: dict[str, list[float]] = {}
    for r in rows:
        if r.get("wait") is not None and r.get("class"):
            by_class.setdefault(str(r["class"]), []).append(float(r["wait"]))
    cost = {"on-demand": 0.0, "flex-start": 0.0}
    for r in rows:
        flavors = {f for ps in (r.get("flavors") or {}).values() for f in ps.values()}
        kind = "flex-start" if flavors & flex_flavors else "on-demand"
        cost[kind] += float(r.get("cost") or 0.0)
    wasted = sum(float(r.get("waste") or 0.0) for r in rows)
    return {
        "jobs": len(rows),
        "finished": sum(1 for r in rows if r.get("state") == "Finished"),
        "neverStarted": sum(1 for r in rows if r.get("started") is None),
        "wait": _stats(waits),
        "waitByClusterQueue": {cq: _stats(v) for cq, v in sorted(by_cq.items())},
        "waitByClass": {c: _stats(v) for c, v in sorted(by_class.items())},
        "fallbacks": sum(1 for e in events if _kind(e) is EventKind.FALLBACK),
        "provisioningRetries": sum(1 for e in events if _kind(e) is EventKind.PROVISIONING_REQUEST
                                   and _state(e) in _RETRIED),
        "preemptions": sum(1 for e in events if _kind(e) is EventKind.PREEMPTED),
        "cost": {k: round(v, 2) for k, v in cost.items()} | {"total": round(sum(cost.values()), 2),
                                                              "wasted": round(wasted, 2)},
    }


def ratio(value: float | None, reference: float | None) -> str:
    """A policy's p95 over the oracle's ("-" when either is unknown)."""
    if value is None or reference is None:
        return "-"
    if reference == 0:
        return "1.00" if value == 0 else "-"
    return f"{value / reference:.2f}"


def _lane(r: Mapping[str, Any]) -> str:
    return "+".join(sorted({f for ps in (r.get("flavors") or {}).values() for f in ps.values()}))


def _label(name: str, most: int = _LABEL_CHARS) -> str:
    """A job's name whole, or cut in its middle where it is longer than ``most`` (the start says where it is, the end
    which one it is)."""
    if len(name) <= most:
        return name
    keep = (most - 1) // 2
    return name[:keep] + "…" + name[-(most - 1 - keep):]


def _svg_gantt(rows: Sequence[Mapping[str, Any]], end: float, label: str, width: int = 960) -> str:
    """A bar per started job, by start: grey while it waited, coloured (by flavor) while it ran. The names' column is
    as wide as the longest name (cut in the middle past :data:`_LABEL_CHARS`), so none is clipped."""
    started = sorted((r for r in rows if r.get("started") is not None), key=lambda r: float(r["started"]))
    if not started:
        return "<p>No job started.</p>"
    lanes = sorted({_lane(r) for r in started})
    names = [_label(str(r["job"])) for r in started]
    left = 16 + round(_CHAR_PX * max(len(n) for n in names))
    lane_h, top = 18, 8
    bottom = top + lane_h * len(started)
    height = bottom + 40
    span = max(end, max(float(r.get("finished") or end) for r in started)) or 1.0
    colors = {lane: _COLORS[i % len(_COLORS)] for i, lane in enumerate(lanes)}

    def x(t: float) -> float:
        return left + (width - left - 12) * t / span

    parts = [_svg_open(width, height, label)]
    for i, (r, name) in enumerate(zip(started, names, strict=True)):
        lane = _lane(r)
        x0, x1, x2 = x(float(r["submitted"])), x(float(r["started"])), x(float(r.get("finished") or span))
        y = top + i * lane_h
        parts.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end" class="name">{html.escape(name)}'
                     f'<title>{html.escape(str(r["job"]))}</title></text>')
        parts.append(f'<rect x="{x0:.1f}" y="{y + 5}" width="{max(0.5, x1 - x0):.1f}" height="4" fill="#bbb">'
                     f'<title>waiting {format_seconds(float(r["started"]) - float(r["submitted"]))}</title></rect>')
        parts.append(f'<rect x="{x1:.1f}" y="{y}" width="{max(1.0, x2 - x1):.1f}" height="14" '
                     f'fill="{colors[lane]}"><title>{html.escape(lane)}</title></rect>')
    parts.append(_time_axis(left, width - 12, bottom, span, "time since the simulation started"))
    parts.append("</svg>")
    legend = " ".join(f'<span class="key" style="color:{c}">&#9632; {html.escape(name)}</span>'
                      for name, c in colors.items())
    waiting = '<span class="key" style="color:#999">&#9644; waiting</span>'
    return f'<p class="legend">{legend} {waiting}</p>' + "".join(parts)


def waiting_over_time(run: PolicyRun) -> list[tuple[float, int, int]]:
    """(t, jobs waiting, jobs running) at each change: from the event log, or from the rows of a bound."""
    deltas: dict[float, list[int]] = {}

    def add(t: float, waiting: int, running: int) -> None:
        d = deltas.setdefault(t, [0, 0])
        d[0] += waiting
        d[1] += running

    if run.events:
        state: dict[str, str] = {}
        kinds = [_kind(e) for e in run.events]
        started_on = EventKind.STARTED if EventKind.STARTED in kinds else EventKind.ADMITTED
        variants: set[str] = set()
        for e, kind in zip(run.events, kinds, strict=True):
            key, t = str(e.get("workload")), float(e["t"])
            if kind is EventKind.CREATED and e.get("parent"):
                variants.add(key)  # a racing job's variant: the job itself is counted
            if key in variants:
                continue
            now = state.get(key)
            if kind is EventKind.CREATED and now is None:
                state[key] = "waiting"
                add(t, 1, 0)
            elif kind is started_on and now == "waiting":
                state[key] = "running"
                add(t, -1, 1)
            elif kind in (EventKind.EVICTED, EventKind.PREEMPTED) and now == "running":
                state[key] = "waiting"
                add(t, 1, -1)
            elif kind in (EventKind.FINISHED, EventKind.DEACTIVATED) and now in ("waiting", "running"):
                state[key] = "done"
                add(t, -1 if now == "waiting" else 0, -1 if now == "running" else 0)
    else:
        for r in run.rows:
            add(float(r["submitted"]), 1, 0)
            if r.get("started") is not None:
                add(float(r["started"]), -1, 1)
                if r.get("finished") is not None:
                    add(float(r["finished"]), 0, -1)
    out, waiting, running = [], 0, 0
    for t in sorted(deltas):
        waiting += deltas[t][0]
        running += deltas[t][1]
        out.append((t, waiting, running))
    return out


def pool_usage(run: PolicyRun) -> dict[str, dict[str, float]]:
    """Per pool: node-hours, node-hours in use, utilisation (in use / provisioned) and the peak size."""
    out: dict[str, dict[str, float]] = {}
    series = run.nodes
    for i, (t, sample) in enumerate(series):
        until = series[i + 1][0] if i + 1 < len(series) else max(run.end, t)
        for pool, (n, busy) in sample.items():
            numbers = out.setdefault(pool, {"nodeHours": 0.0, "busyNodeHours": 0.0, "peakNodes": 0})
            numbers["nodeHours"] += n * (until - t) / 3600
            numbers["busyNodeHours"] += busy * (until - t) / 3600
            numbers["peakNodes"] = max(numbers["peakNodes"], n)
    for numbers in out.values():
        total = numbers["nodeHours"]
        numbers["utilisation"] = round(numbers["busyNodeHours"] / total, 3) if total else 0.0
        numbers["nodeHours"] = round(total, 2)
        numbers["busyNodeHours"] = round(numbers["busyNodeHours"], 2)
    return dict(sorted(out.items()))




def _svg_open(width: int, height: int, label: str) -> str:
    """An SVG that shrinks with the page (down from ``width``), labelled for screen readers."""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" role="img" aria-label="{html.escape(label)}">')


def _time_axis(x0: float, x1: float, y: float, span: float, title: str, log_time: bool = False) -> str:
    """The time axis under a plot: ticks with durations, and what it measures."""
    if log_time:
        ticks = [0.0] + [t for t in (1, 10, 60, 600, 3600, 6 * 3600, 86400, 7 * 86400) if t < span * 0.8] + [span]
        place = [math.log10(1 + t) / math.log10(1 + span) for t in ticks]
    else:
        step = next((n for n in _TICK_STEPS if span / n <= 6), span / 5)
        ticks = [step * i for i in range(int(span // step) + 1)]
        place = [t / span for t in ticks]
    parts = [f'<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" class="axis"/>']
    for t, at in zip(ticks, place, strict=True):
        tx = x0 + (x1 - x0) * at
        anchor = "start" if at == 0 else "end" if at == 1 else "middle"
        parts.append(f'<line x1="{tx:.1f}" y1="{y}" x2="{tx:.1f}" y2="{y + 4}" class="axis"/>'
                     f'<text x="{tx:.1f}" y="{y + 16}" text-anchor="{anchor}">{format_seconds(t)}</text>')
    parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{y + 32}" text-anchor="middle" class="title">'
                 f'{html.escape(title)}</text>')
    return "".join(parts)


def _value_axis(x: float, bottom: float, top_y: float, top: float, title: str) -> str:
    """The value axis: 0, half and the top, and what it counts, written along it."""
    parts = [f'<line x1="{x}" y1="{top_y}" x2="{x}" y2="{bottom}" class="axis"/>']
    for v in (0.0, top / 2, top):
        if top >= 2 and v != int(v):
            continue
        y = bottom - (bottom - top_y) * (v / top if top else 0)
        parts.append(f'<line x1="{x - 4}" y1="{y:.1f}" x2="{x}" y2="{y:.1f}" class="axis"/>'
                     f'<text x="{x - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    parts.append(f'<text transform="translate(12 {(bottom + top_y) / 2:.1f}) rotate(-90)" text-anchor="middle" '
                 f'class="title">{html.escape(title)}</text>')
    return "".join(parts)


def _svg_steps(series: Mapping[str, Sequence[tuple[float, float]]], end: float, label: str, y_title: str,
               width: int = 960, height: int = 240, log_time: bool = False, x_title: str = "",
               areas: frozenset[str] = frozenset()) -> str:
    """Step lines (value held until the next point), one per series, on a shared time axis (logarithmic, from
    one second, with ``log_time``: for waits that span seconds to days), both axes titled. Series named in
    ``areas`` are drawn filled, under the lines (a pool's nodes under those in use: they never hide each other)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return "<p>Nothing to plot.</p>"
    span = max(end, max(t for t, _v in points)) or 1.0
    top = max(v for _t, v in points) or 1.0
    left, right, top_y, bottom = 58, 14, 24, height - 42

    def scale(t: float) -> float:
        return math.log10(1 + t) / math.log10(1 + span) if log_time else t / span

    def x(t: float) -> float:
        return left + (width - left - right) * scale(t)

    def y(v: float) -> float:
        return bottom - (bottom - top_y) * v / top

    parts = [_svg_open(width, height, label), _value_axis(left, bottom, top_y, top, y_title),
             _time_axis(left, width - right, bottom, span,
                        x_title or ("time since the simulation started" if not log_time else ""), log_time)]
    legend_x = left + 8
    drawn = sorted(series.items(), key=lambda item: item[0] not in areas)  # areas first: lines over them
    for name, steps in drawn:
        color = _COLORS[list(series).index(name) % len(_COLORS)]
        path: list[str] = []
        last = 0.0
        for t, v in steps:
            path.append(f"L{x(t):.1f},{y(last):.1f}L{x(t):.1f},{y(v):.1f}" if path else f"M{x(t):.1f},{y(v):.1f}")
            last = v
        path.append(f"L{x(span):.1f},{y(last):.1f}")
        if name in areas and steps:
            shape = (f'd="{"".join(path)}L{x(span):.1f},{y(0):.1f}L{x(steps[0][0]):.1f},{y(0):.1f}Z" '
                     f'fill="{color}" fill-opacity="0.25" stroke="{color}" stroke-width="1"')
        else:
            shape = f'd="{"".join(path)}" fill="none" stroke="{color}" stroke-width="1.8"'
        parts.append(f'<path {shape}><title>{html.escape(name)}</title></path>')
        parts.append(f'<text x="{legend_x}" y="14" style="fill:{color}" class="legend">&#9632; {html.escape(name)}'
                     "</text>")
        legend_x += 24 + round(_CHAR_PX * len(name))
    parts.append("</svg>")
    return "".join(parts)


def _cdf(waits: Sequence[float]) -> list[tuple[float, float]]:
    data = sorted(waits)
    return [(w, round((i + 1) / len(data), 4)) for i, w in enumerate(data)]


GANTT_MAX_JOBS = 400
"""Beyond this many jobs a Gantt chart stops being readable: the first ones are drawn and the rest counted."""


def write_report(directory: Path, runs: Mapping[str, PolicyRun], flex_flavors: set[str]) -> dict[str, Any]:
    """Write jobs.csv, summary.json and report.html for one or more policies' runs; return the summary."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = {}
    queue_series = {p: waiting_over_time(run) for p, run in runs.items()}
    for policy, run in runs.items():
        numbers = summarize(run.rows, run.events, flex_flavors)
        series = queue_series[policy]
        numbers["peakWaiting"] = max((w for _t, w, _r in series), default=0)
        if run.nodes:
            numbers["pools"] = pool_usage(run)
        summary[policy] = numbers
    _write_jobs(directory / "jobs.csv", runs)
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (directory / "report.html").write_text(_page(runs, summary, queue_series), encoding="utf-8")
    return summary


def _write_jobs(path: Path, runs: Mapping[str, PolicyRun]) -> None:
    """jobs.csv: one row per job and policy."""
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["policy", "job", "workload", "clusterQueue", "state", "submitted", "admitted", "started",
                         "finished", "wait", "flavors", "cost", "wasted"])
        for policy, run in runs.items():
            for r in run.rows:
                flavors = ";".join(f"{ps}={'+'.join(sorted(set(res.values())))}"
                                   for ps, res in (r.get("flavors") or {}).items())
                writer.writerow([policy, r.get("job"), r.get("workload"), r.get("clusterQueue"), r.get("state"),
                                 r.get("submitted"), r.get("admitted"), r.get("started"), r.get("finished"),
                                 r.get("wait"), flavors, r.get("cost", ""), r.get("waste", "")])


def _tables(summary: dict[str, Any]) -> tuple[str, str, str]:
    """The rows of the policies' table, of waits per ClusterQueue and of waits per class."""
    reference = (summary.get(ORACLE) or {}).get("wait", {}).get("p95")
    table = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{s['jobs']}</td><td>{_fmt(s['wait']['p50'])}</td>"
        f"<td>{_fmt(s['wait']['p95'])}</td><td>{_fmt(s['wait']['max'])}</td>"
        f"<td>{ratio(s['wait']['p95'], reference)}</td><td>{s['fallbacks']}</td>"
        f"<td>{s['provisioningRetries']}</td><td>{s['preemptions']}</td>"
        f"<td>{'-' if p in (LOWER_BOUND, ORACLE) else '$' + format(s['cost']['total'], ',.2f')}</td>"
        f"<td>{'-' if p in (LOWER_BOUND, ORACLE) else '$' + format(s['cost']['wasted'], ',.2f')}</td></tr>"
        for p, s in summary.items())
    by_cq = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{html.escape(cq)}</td><td>{w['jobs']}</td><td>{_fmt(w['p50'])}</td>"
        f"<td>{_fmt(w['p95'])}</td><td>{_fmt(w['max'])}</td></tr>"
        for p, s in summary.items() for cq, w in s["waitByClusterQueue"].items())
    by_class = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{html.escape(c)}</td><td>{w['jobs']}</td><td>{_fmt(w['p50'])}</td>"
        f"<td>{_fmt(w['p95'])}</td><td>{_fmt(w['max'])}</td></tr>"
        for p, s in summary.items() for c, w in s["waitByClass"].items())
    return table, by_cq, by_class


def _pool_plots(runs: Mapping[str, PolicyRun], summary: dict[str, Any], end: float) -> tuple[str, str, str]:
    """Each policy's pool nodes over time (a small plot per pool, side by side: pools never draw over each other),
    the pools' utilisation rows, and each policy's Gantt chart."""
    pools = "".join(
        f"<h3>{html.escape(p)}</h3><div class=\"multiples\">" + "".join(
            f"<figure><figcaption>{html.escape(pool)}</figcaption>" + _svg_steps(
                {what: [(t, sample.get(pool, (0, 0))[i]) for t, sample in run.nodes]
                 for i, what in enumerate(("nodes", "in use"))}, end,
                f"{pool} nodes over time, {p}", "nodes", width=400, height=190, areas=frozenset({"nodes"}))
            + "</figure>"
            for pool in sorted({pool for _t, sample in run.nodes for pool in sample})) + "</div>"
        for p, run in runs.items() if run.nodes)
    usage = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{html.escape(pool)}</td><td>{u['peakNodes']:g}</td>"
        f"<td>{u['nodeHours']:g}</td><td>{u['busyNodeHours']:g}</td><td>{u['utilisation'] * 100:.0f}%</td></tr>"
        for p, s in summary.items() for pool, u in s.get("pools", {}).items())
    gantts = "".join(f"<h3>{html.escape(p)}</h3>"
                     + _svg_gantt(run.rows[:GANTT_MAX_JOBS], run.end, f"jobs over time, {p}")
                     + (f"<p>{len(run.rows) - GANTT_MAX_JOBS} more jobs not drawn.</p>"
                        if len(run.rows) > GANTT_MAX_JOBS else "")
                     for p, run in runs.items())
    return pools, usage, gantts


_STYLE = """
:root{--fg:#1d2330;--muted:#5b6475;--line:#d9dde5;--bg:#f7f8fa;--card:#fff;--accent:#1a5fb4;
 font:14px/1.45 system-ui,sans-serif;color:var(--fg)}
*{box-sizing:border-box}body{margin:0;background:var(--bg)}
header{display:flex;gap:1.5rem;align-items:center;padding:.6rem 1.2rem;background:#1d2330;color:#fff}
header .brand{font-weight:700}header a{color:#cfd6e4;text-decoration:none}header a:hover{color:#fff}
header nav{display:flex;gap:1rem;flex-wrap:wrap}
main{padding:1rem 1.2rem;max-width:1100px}h1{font-size:1.35rem;margin:.2rem 0 1rem}
h2{font-size:1.1rem;margin:0 0 .6rem}h3{font-size:1rem;margin:1rem 0 .4rem;color:var(--muted)}
section{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:.8rem 1rem;margin-bottom:1rem}
table{border-collapse:collapse;margin-bottom:.5rem;background:var(--card)}
td,th{border-bottom:1px solid var(--line);padding:.3rem .6rem;text-align:right;font-variant-numeric:tabular-nums}
td:first-child,th:first-child,.named td:nth-child(2),.named th:nth-child(2){text-align:left}
th{color:var(--muted);font-weight:600}
p.note{color:var(--muted);margin:.2rem 0 .6rem}
svg{max-width:100%;height:auto;background:#fff;border:1px solid var(--line);display:block}
svg text{font-size:11px;fill:var(--muted)}svg text.title{fill:var(--fg)}svg text.name{fill:var(--fg)}
svg .axis{stroke:#8a93a5}svg text.legend{font-size:12px}
.multiples{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:1rem}
figure{margin:0}figcaption{font-weight:600;margin-bottom:.2rem}
.legend .key{margin-right:1rem;font-weight:600}
#back[hidden]{display:none}
"""


_SECTIONS = (("policies-h", "Policies"), ("classes-h", "Wait per class"), ("queues-h", "Wait per ClusterQueue"),
             ("waits-h", "Wait distribution"), ("waiting-h", "Jobs waiting"), ("pools-h", "Pool nodes"),
             ("usage-h", "Pool utilisation"), ("gantt-h", "Jobs over time"))


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section aria-labelledby="{anchor}"><h2 id="{anchor}">{title}</h2>{body}</section>\n'


def _page(runs: Mapping[str, PolicyRun], summary: dict[str, Any],
          queue_series: dict[str, list[tuple[float, int, int]]]) -> str:
    """report.html: a header with a way back to the dashboard's reports (where it is served by ``flexq server``)
    and links to each part, the tables, then the plots, every axis titled."""
    waits = {p: [float(r["wait"]) for r in run.rows if r.get("wait") is not None] for p, run in runs.items()}
    table, by_cq, by_class = _tables(summary)
    end = max(run.end for run in runs.values())
    queue_plot = _svg_steps({p: [(t, w) for t, w, _r in s] for p, s in queue_series.items()}, end,
                            "jobs waiting over time", "jobs waiting")
    pools, usage, gantts = _pool_plots(runs, summary, end)
    cdf = _svg_steps({p: _cdf(w) for p, w in waits.items()}, 0.0, "wait distribution per policy",
                     "share of started jobs", log_time=True, x_title="wait from submission to start (log scale)")
    parts = [
        _section("policies-h", "Policies", '<table id="policies"><tr><th>policy</th><th>jobs</th><th>p50 wait</th>'
                 "<th>p95 wait</th><th>max wait</th><th>p95 / oracle</th><th>fallbacks</th><th>DWS retries</th>"
                 f"<th>preemptions</th><th>cost</th><th>wasted</th></tr>{table}</table>"),
        _section("classes-h", "Wait per class", '<table class="named"><tr><th>policy</th><th>class</th><th>jobs</th>'
                 f"<th>p50</th><th>p95</th><th>max</th></tr>{by_class}</table>") if by_class else "",
        _section("queues-h", "Wait per ClusterQueue", '<table class="named"><tr><th>policy</th><th>ClusterQueue</th>'
                 "<th>jobs</th>"
                 f"<th>p50</th><th>p95</th><th>max</th></tr>{by_cq}</table>"),
        _section("waits-h", "Wait distribution", '<p class="note">The share of started jobs that waited at most so '
                 f"long, per policy.</p>{cdf}"),
        _section("waiting-h", "Jobs waiting over time", queue_plot),
        _section("pools-h", "Pool nodes over time", '<p class="note">Per policy, a plot per pool: its nodes (shaded) '
                 f"and how many of them run a job (line).</p>{pools or '<p>No capacity modelled.</p>'}"),
        _section("usage-h", "Pool utilisation", '<table class="named"><tr><th>policy</th><th>pool</th>'
                 "<th>peak nodes</th>"
                 f"<th>node-hours</th><th>in use</th><th>utilisation</th></tr>{usage}</table>") if usage else "",
        _section("gantt-h", "Jobs over time", '<p class="note">A row per job: grey while it waited, coloured by '
                 f"flavor while it ran.</p>{gantts}"),
    ]
    shown = {anchor for anchor, _title in _SECTIONS if f'id="{anchor}"' in "".join(parts)}
    contents = "".join(f'<a href="#{anchor}">{title}</a>' for anchor, title in _SECTIONS if anchor in shown)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>flexq simulation report</title><style>{_STYLE}</style></head><body>
<header><span class="brand">flexq</span><a id="back" href="../../reports" hidden>&larr; Simulator reports</a>
<nav aria-label="Report">{contents}</nav></header>
<main><h1>Simulation report</h1>
{"".join(parts)}</main>
<script>if (location.protocol !== "file:") document.getElementById("back").hidden = false;</script>
</body></html>
"""


def _fmt(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)
