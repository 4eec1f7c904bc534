"""Reports of a simulation: ``jobs.csv``, ``summary.json`` and a self-contained ``report.html``.

The summary gives, per ClusterQueue and overall, p50/p95/max wait (submission to start), the flavors
jobs ran on, how often flexq fell back to the next flavor and how often ProvisioningRequests were
retried, and the cost by capacity type (on-demand, flex-start). The HTML has the numbers and SVG plots
(wait distribution per policy, a Gantt of jobs by flavor, jobs waiting over time), with no external
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

from flexq.durations import format_seconds

__all__ = ["percentile", "summarize", "write_report"]


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
    cost = {"on-demand": 0.0, "flex-start": 0.0}
    for r in rows:
        flavors = {f for ps in (r.get("flavors") or {}).values() for f in ps.values()}
        kind = "flex-start" if flavors & flex_flavors else "on-demand"
        cost[kind] += float(r.get("cost") or 0.0)
    return {
        "jobs": len(rows),
        "finished": sum(1 for r in rows if r.get("state") == "Finished"),
        "neverStarted": sum(1 for r in rows if r.get("started") is None),
        "wait": _stats(waits),
        "waitByClusterQueue": {cq: _stats(v) for cq, v in sorted(by_cq.items())},
        "fallbacks": sum(1 for e in events if e.get("event") == "Fallback"),
        "provisioningRetries": sum(1 for e in events if e.get("event") == "ProvisioningRequest"
                                   and e.get("state") in ("Failed", "BookingExpired")),
        "preemptions": sum(1 for e in events if e.get("event") == "Preempted"),
        "cost": {k: round(v, 2) for k, v in cost.items()} | {"total": round(sum(cost.values()), 2)},
    }


def _svg_histogram(series: Mapping[str, Sequence[float]], width: int = 640, height: int = 240) -> str:
    values = [v for vs in series.values() for v in vs]
    if not values:
        return "<p>No job started.</p>"
    top = max(values) or 1.0
    bins = 20
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
    counts = {name: [0] * bins for name in series}
    for name, vs in series.items():
        for v in vs:
            counts[name][min(bins - 1, int(v / top * bins))] += 1
    peak = max(max(c) for c in counts.values()) or 1
    bar = (width - 60) / bins / max(1, len(series))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<line x1="40" y1="{height - 30}" x2="{width - 10}" y2="{height - 30}" stroke="#333"/>']
    for s, (name, bins_) in enumerate(counts.items()):
        for i, n in enumerate(bins_):
            h = (height - 60) * n / peak
            x = 40 + (i * len(series) + s) * bar
            parts.append(f'<rect x="{x:.1f}" y="{height - 30 - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{colors[s % len(colors)]}"><title>{html.escape(name)}: {n}</title></rect>')
        parts.append(f'<text x="{50 + s * 160}" y="15" fill="{colors[s % len(colors)]}" font-size="12">'
                     f'{html.escape(name)}</text>')
    parts.append(f'<text x="40" y="{height - 10}" font-size="11">0</text>'
                 f'<text x="{width - 80}" y="{height - 10}" font-size="11">{format_seconds(top)}</text>')
    parts.append("</svg>")
    return "".join(parts)


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


def write_report(directory: Path, runs: Mapping[str, tuple[list[dict[str, Any]], list[dict[str, Any]], float]],
                 flex_flavors: set[str]) -> dict[str, Any]:
    """Write jobs.csv, summary.json and report.html for one or more policies' runs; return the summary."""
    directory.mkdir(parents=True, exist_ok=True)
    summary = {policy: summarize(rows, events, flex_flavors) for policy, (rows, events, _end) in runs.items()}
    with (directory / "jobs.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["policy", "job", "workload", "clusterQueue", "state", "submitted", "admitted", "started",
                         "finished", "wait", "flavors", "cost"])
        for policy, (rows, _events, _end) in runs.items():
            for r in rows:
                flavors = ";".join(f"{ps}={'+'.join(sorted(set(res.values())))}"
                                   for ps, res in (r.get("flavors") or {}).items())
                writer.writerow([policy, r.get("job"), r.get("workload"), r.get("clusterQueue"), r.get("state"),
                                 r.get("submitted"), r.get("admitted"), r.get("started"), r.get("finished"),
                                 r.get("wait"), flavors, r.get("cost", "")])
    (directory / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    waits = {p: [float(r["wait"]) for r in rows if r.get("wait") is not None] for p, (rows, _e, _t) in runs.items()}
    table = "".join(
        f"<tr><td>{html.escape(p)}</td><td>{s['jobs']}</td><td>{_fmt(s['wait']['p50'])}</td>"
        f"<td>{_fmt(s['wait']['p95'])}</td><td>{_fmt(s['wait']['max'])}</td><td>{s['fallbacks']}</td>"
        f"<td>{s['provisioningRetries']}</td><td>${s['cost']['total']:.2f}</td></tr>" for p, s in summary.items())
    gantts = "".join(f"<h3>{html.escape(p)}</h3>{_svg_gantt(rows, end)}" for p, (rows, _e, end) in runs.items())
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>flexq simulation report</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px;text-align:right}}th{{background:#f4f4f4}}</style></head><body>
<h1>flexq simulation report</h1>
<table><tr><th>policy</th><th>jobs</th><th>p50 wait</th><th>p95 wait</th><th>max wait</th><th>fallbacks</th>
<th>DWS retries</th><th>cost</th></tr>{table}</table>
<h2>Wait from submission to start, per policy</h2>{_svg_histogram(waits)}
<h2>Jobs over time (grey: waiting; colour: running, by flavor)</h2>{gantts}
</body></html>
"""
    (directory / "report.html").write_text(page, encoding="utf-8")
    return summary


def _fmt(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)
