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


def _svg_gantt(rows: Sequence[Mapping[str, Any]], end: float, width: int = 900) -> str:
    started = [r for r in rows if r.get("started") is not None]
    if not started:
        return "<p>No job started.</p>"
    lanes = sorted({"+".join(sorted({f for ps in (r.get("flavors") or {}).values() for f in ps.values()}))
                    for r in started})
    lane_h, height = 18, 30 + 18 * len(started)
    span = max(end, max(float(r.get("finished") or end) for r in started)) or 1.0
    colors = {lane: c for lane, c in zip(lanes, ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"] * 9,
                                         strict=False)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    for i, r in enumerate(sorted(started, key=lambda r: float(r["started"]))):
        lane = "+".join(sorted({f for ps in (r.get("flavors") or {}).values() for f in ps.values()}))
        x0 = 200 + (width - 210) * float(r["submitted"]) / span
        x1 = 200 + (width - 210) * float(r["started"]) / span
        x2 = 200 + (width - 210) * float(r.get("finished") or span) / span
        y = 20 + i * lane_h
        parts.append(f'<text x="0" y="{y + 12}" font-size="11">{html.escape(str(r["job"])[-28:])}</text>')
        parts.append(f'<rect x="{x0:.1f}" y="{y + 5}" width="{max(0.5, x1 - x0):.1f}" height="4" fill="#bbb">'
                     f'<title>waiting {format_seconds(float(r["started"]) - float(r["submitted"]))}</title></rect>')
        parts.append(f'<rect x="{x1:.1f}" y="{y}" width="{max(1.0, x2 - x1):.1f}" height="14" '
                     f'fill="{colors[lane]}"><title>{html.escape(lane)}</title></rect>')
    parts.append("</svg>")
    legend = " ".join(f'<span style="color:{c}">&#9632; {html.escape(name)}</span>' for name, c in colors.items())
    return legend + "<br>" + "".join(parts)


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


_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _svg_steps(series: Mapping[str, Sequence[tuple[float, float]]], end: float, label: str,
               width: int = 900, height: int = 220, log_time: bool = False) -> str:
    """Step lines (value held until the next point), one per series, on a shared time axis (logarithmic, from
    one second, with ``log_time``: for waits that span seconds to days)."""
    points = [p for s in series.values() for p in s]
    if not points:
        return "<p>Nothing to plot.</p>"
    span = max(end, max(t for t, _v in points)) or 1.0
    top = max(v for _t, v in points) or 1.0
    left, bottom = 50, height - 30

    def scale(t: float) -> float:
        return math.log10(1 + t) / math.log10(1 + span) if log_time else t / span

    def x(t: float) -> float:
        return left + (width - left - 10) * scale(t)

    def y(v: float) -> float:
        return bottom - (bottom - 20) * v / top

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="{html.escape(label)}">',
             f'<line x1="{left}" y1="{bottom}" x2="{width - 10}" y2="{bottom}" stroke="#333"/>',
             f'<line x1="{left}" y1="20" x2="{left}" y2="{bottom}" stroke="#333"/>',
             f'<text x="2" y="24" font-size="11">{top:g}</text><text x="2" y="{bottom}" font-size="11">0</text>',
             f'<text x="{left}" y="{height - 10}" font-size="11">0</text>'
             f'<text x="{width - 80}" y="{height - 10}" font-size="11">{format_seconds(span)}</text>']
    if log_time:
        for tick in (60, 600, 3600, 6 * 3600, 86400, 7 * 86400):
            if tick < span * 0.8:
                parts.append(f'<line x1="{x(tick):.1f}" y1="{bottom}" x2="{x(tick):.1f}" y2="{bottom + 4}" '
                             f'stroke="#333"/><text x="{x(tick) - 8:.1f}" y="{height - 10}" font-size="11">'
                             f'{format_seconds(tick)}</text>')
    for i, (name, steps) in enumerate(series.items()):
        color = _COLORS[i % len(_COLORS)]
        path: list[str] = []
        last = 0.0
        for t, v in steps:
            path.append(f"L{x(t):.1f},{y(last):.1f}L{x(t):.1f},{y(v):.1f}" if path else f"M{x(t):.1f},{y(v):.1f}")
            last = v
        path.append(f"L{x(span):.1f},{y(last):.1f}")
        parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{color}" stroke-width="1.5">'
                     f'<title>{html.escape(name)}</title></path>')
        parts.append(f'<text x="{left + 10 + i * 138}" y="12" fill="{color}" font-size="11">{html.escape(name)}</text>')
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
    """Each policy's pool nodes over time, the pools' utilisation rows, and each policy's Gantt chart."""
    pools = "".join(
        f"<h3>{html.escape(p)}</h3>" + _svg_steps(
            {f"{pool} {what}": [(t, sample.get(pool, (0, 0))[i]) for t, sample in run.nodes]
             for pool in sorted({pool for _t, sample in run.nodes for pool in sample})
             for i, what in enumerate(("nodes", "in use"))}, end,
            f"pool nodes over time, {p}")
        for p, run in runs.items() if run.nodes)
    usage = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{html.escape(pool)}</td><td>{u['peakNodes']:g}</td>"
        f"<td>{u['nodeHours']:g}</td><td>{u['busyNodeHours']:g}</td><td>{u['utilisation'] * 100:.0f}%</td></tr>"
        for p, s in summary.items() for pool, u in s.get("pools", {}).items())
    gantts = "".join(f"<h3>{html.escape(p)}</h3>{_svg_gantt(run.rows[:GANTT_MAX_JOBS], run.end)}"
                     + (f"<p>{len(run.rows) - GANTT_MAX_JOBS} more jobs not drawn.</p>"
                        if len(run.rows) > GANTT_MAX_JOBS else "")
                     for p, run in runs.items())
    return pools, usage, gantts


def _page(runs: Mapping[str, PolicyRun], summary: dict[str, Any],
          queue_series: dict[str, list[tuple[float, int, int]]]) -> str:
    """report.html: the tables, then the plots."""
    waits = {p: [float(r["wait"]) for r in run.rows if r.get("wait") is not None] for p, run in runs.items()}
    table, by_cq, by_class = _tables(summary)
    end = max(run.end for run in runs.values())
    queue_plot = _svg_steps({p: [(t, w) for t, w, _r in s] for p, s in queue_series.items()}, end,
                            "jobs waiting over time")
    pools, usage, gantts = _pool_plots(runs, summary, end)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>flexq simulation report</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1em}}td,th{{border:1px
solid #ccc;padding:4px 8px;text-align:right}}th{{background:#f4f4f4}}</style></head><body>
<h1>flexq simulation report</h1>
<table id="policies"><tr><th>policy</th><th>jobs</th><th>p50 wait</th><th>p95 wait</th><th>max wait</th>
<th>p95 / oracle</th><th>fallbacks</th><th>DWS retries</th><th>preemptions</th><th>cost</th><th>wasted</th></tr>
{table}</table>
{"<h2>Wait per class</h2><table><tr><th>policy</th><th>class</th><th>jobs</th><th>p50</th><th>p95</th>"
 "<th>max</th></tr>" + by_class + "</table>" if by_class else ""}
<h2>Wait per ClusterQueue</h2>
<table><tr><th>policy</th><th>ClusterQueue</th><th>jobs</th><th>p50</th><th>p95</th><th>max</th></tr>{by_cq}</table>
<h2>Wait from submission to start, per policy (share of started jobs that waited at most this long; time
on a log scale)</h2>
{_svg_steps({p: _cdf(w) for p, w in waits.items()}, 0.0, "wait distribution per policy", log_time=True)}
<h2>Jobs waiting over time</h2>{queue_plot}
<h2>Pool nodes over time (and how many run a job)</h2>{pools or "<p>No capacity modelled.</p>"}
{"<h2>Pool utilisation</h2><table><tr><th>policy</th><th>pool</th><th>peak nodes</th><th>node-hours</th>"
 "<th>in use</th><th>utilisation</th></tr>" + usage + "</table>" if usage else ""}
<h2>Jobs over time (grey: waiting; colour: running, by flavor)</h2>{gantts}
</body></html>
"""

def _fmt(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)
