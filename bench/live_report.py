"""The report of a live benchmark run: the quota held after each job's end split at the last creation, the run's
timeline, and the Markdown table of the whole report."""

from __future__ import annotations

import statistics
from typing import Any, Protocol

from live_steps import steps_markdown

__all__ = ["Timings", "markdown", "release_phases", "timeline", "timeline_markdown"]


class Timings(Protocol):
    """What the runner noted, in seconds: on ``time.monotonic()``'s clock, or from the first creation where said."""

    t0: float
    answered: list[float]
    """When each creation was answered, from the first creation."""
    admitted: dict[str, float]
    """When each Job's workload was first seen admitted."""
    finished_at: list[float]
    """When each workload was seen Finished, from the first creation."""
    release: list[float]
    """Each finished Job's quota held from its finishing patch sent to its workload seen Finished."""
    release_sent: list[float]
    """When each of those patches was sent, from the first creation."""


def release_phases(run: Timings) -> dict[str, float | None]:
    """The average quota held after a job's end while Jobs are still being created, and after the last creation."""
    last = max(run.answered, default=0.0)
    during: list[float] = []
    after: list[float] = []
    for r, at in zip(run.release, run.release_sent, strict=True):
        (during if at <= last else after).append(r)
    return {"avg_while_creating": round(statistics.fmean(during), 3) if during else None,
            "avg_after_creating": round(statistics.fmean(after), 3) if after else None}


def timeline(run: Timings, parts: int = 20, virtual: list[float] | None = None) -> list[dict[str, float]]:
    """The run in ``parts`` equal spans: Jobs whose creation was answered, workloads first seen admitted and seen
    Finished in each, and the average quota held after the end of the jobs whose finishing patch went out in it; with
    ``virtual`` (when each workload finished in virtual time, from the first submission), how many of those finished in
    each span too (before the first span: in it; after the run: in the last)."""
    end = max([*run.finished_at, *run.answered, 0.0])
    if end <= 0:
        return []
    span = end / parts

    def part(t: float) -> int:
        return min(parts - 1, max(0, int(t / span)))

    counts = {name: [0] * parts for name in ("created", "admitted", "finished")}
    series = [("created", run.answered), ("admitted", [t - run.t0 for t in run.admitted.values()]),
              ("finished", run.finished_at)]
    if virtual is not None:
        counts["virtual_finished"] = [0] * parts
        series.append(("virtual_finished", virtual))
    for name, times in series:
        for t in times:
            counts[name][part(t)] += 1
    held: list[list[float]] = [[] for _ in range(parts)]
    for r, t in zip(run.release, run.release_sent, strict=True):
        held[part(t)].append(r)
    return [{"from_s": round(i * span, 2), **{name: c[i] for name, c in counts.items()},
             "release_avg_s": round(statistics.fmean(held[i]), 3) if held[i] else 0.0} for i in range(parts)]


def markdown(r: dict[str, Any]) -> str:
    c, s = r["creations"], r["server"]
    lines = [f"# Live {r['config']} (scale {r['scale']}): {r['finished']:,} of {r['jobs']:,} jobs finished", "",
             "| wall s | bound s | ratio | created/s (scheduled) | refused | max late s | server cpu s | peak RSS MB "
             "| store MB | load before/after |", "|---|---|---|---|---|---|---|---|---|---|",
             f"| {r['wall_s']} | {r['bound_s']} | {r['ratio']} | {c['achieved_per_s']} ({c['scheduled_per_s']}) "
             f"| {c['refused']} | {c['max_late_s']} | {s['cpu_s']} | {s['peak_rss_mb']} | {s['store_mb']} "
             f"| {r['load']['before']} / {r['load']['after']} |", "",
             *([f"The same config in virtual time (`flexq simulate`) ends at {r['virtual_wall_s']} s.", ""]
               if r.get("virtual_wall_s") is not None else []),
             "| class | admitted | avg s to admission | p99 s | virtual-time avg s |", "|---|---|---|---|---|"]
    for name, a in r["admission"].items():
        lines.append(f"| {name} | {a['count']:,} | {a['avg_s']} | {a['p99_s']} | {a.get('virtual_avg_s', '')} |")
    q = r["release_s"]
    lines += ["", "| quota held after a job's end, s | avg | p50 | p99 | avg while creating | avg after |",
              "|---|---|---|---|---|---|",
              f"| | {q['avg']} | {q['p50']} | {q['p99']} | {q.get('avg_while_creating')} "
              f"| {q.get('avg_after_creating')} |"]
    lines += cpu_markdown(r)
    lines += steps_markdown(r.get("controller_steps") or {})
    lines += timeline_markdown(r.get("timeline") or [])
    return "\n".join(lines) + "\n"


def cpu_markdown(r: dict[str, Any]) -> list[str]:
    """CPU seconds per process (the server, the load generator, the watcher and runner) and the generator's lag."""
    cpu, c = r.get("cpu_s") or {}, r["creations"]
    if not cpu:
        return []
    return ["", "| CPU s: server | per Job ms | load generator | watcher + runner | p99 late s | on schedule |",
            "|---|---|---|---|---|---|",
            f"| {cpu['server']} | {r.get('server_cpu_ms_per_job')} | {cpu['generator']} | {cpu['runner']} "
            f"| {c.get('p99_late_s')} | {'yes' if c.get('on_schedule') else 'no'} |", *_processes(cpu)]


def _processes(cpu: dict[str, Any]) -> list[str]:
    """The server's CPU by process, where it ran API workers."""
    found: dict[str, float] = cpu.get("server_processes") or {}
    if len(found) < 2:
        return []
    return ["", "| server CPU s by process | " + " | ".join(found) + " |", "|---|" + "---|" * len(found),
            "| | " + " | ".join(str(v) for v in found.values()) + " |"]


def timeline_markdown(spans: list[dict[str, float]]) -> list[str]:
    """The timeline as a table: a row a span (its start in seconds from the first creation)."""
    if not spans:
        return []
    counted = ["created", "admitted", "finished", *(["virtual_finished"] if "virtual_finished" in spans[0] else [])]
    heads = {"created": "created", "admitted": "first admitted", "finished": "finished",
             "virtual_finished": "in virtual time"}
    return ["", "| from s | " + " | ".join(heads[c] for c in counted) + " | quota held after a job's end, avg s |",
            "|---|" + "---|" * (len(counted) + 1),
            *(f"| {s['from_s']} | " + " | ".join(f"{s[c]:,}" for c in counted) + f" | {s['release_avg_s']} |"
              for s in spans)]
