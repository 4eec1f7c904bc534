"""The queue controller's steps during a live benchmark run, from the server's ``/metrics``: how many, how long, which
phase they spent their time in, and what they read and wrote (see ``flexq.controller.steps``); and the server's CPU
by thread (the controller's, the event loop's that serves HTTP, the threads that run the API's writes)."""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from flexq.controller.steps import PHASES

__all__ = ["controller_steps", "steps_markdown"]


def controller_steps(base: str, jobs: int, token: str) -> dict[str, Any]:
    """The steps' figures of the server at ``base`` (read once the run is over, as the administrator whose token is
    ``token``), ``jobs`` Jobs having run."""
    request = urllib.request.Request(base + "/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        text = answer.read().decode()
    values: dict[str, float] = {}
    buckets: list[tuple[float, float]] = []
    phases: dict[str, float] = {}
    threads: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "flexq_thread_cpu_seconds_total":
                threads[s.labels["thread"]] = s.value
            elif s.name == "flexq_controller_step_duration_seconds_bucket":
                buckets.append((float(s.labels["le"]), s.value))
            elif s.name == "flexq_controller_step_phase_seconds_total":
                phases[s.labels["phase"]] = s.value
            elif s.name.startswith("flexq_controller_"):
                values[s.name] = s.value
    steps = values.get("flexq_controller_steps_total", 0.0)
    seconds = values.get("flexq_controller_step_duration_seconds_sum", 0.0)
    if not steps:
        return {"steps": 0}
    buckets.sort()
    return {
        "steps": int(steps),
        "busy_s": round(seconds, 2),
        "avg_ms": round(seconds / steps * 1000, 1),
        "p50_ms_at_most": _quantile(buckets, steps, 0.5),
        "p90_ms_at_most": _quantile(buckets, steps, 0.9),
        "phase_share": {p: round(phases.get(p, 0.0) / seconds, 3) for p in PHASES} if seconds else {},
        "changes_per_step": round(values.get("flexq_controller_changes_read_total", 0.0) / steps, 1),
        "workload_writes_per_job": round(values.get("flexq_controller_workload_writes_total", 0.0) / jobs, 2)
        if jobs else None,
        "thread_cpu_s": {name: round(v, 2) for name, v in sorted(threads.items(), key=lambda t: -t[1]) if v >= 0.01},
    }


def _quantile(buckets: list[tuple[float, float]], steps: float, q: float) -> float | None:
    """The upper bound (ms) of the histogram bucket the ``q`` quantile of the steps falls in (None: above them all)."""
    for bound, seen in buckets:
        if seen >= q * steps:
            return None if bound == float("inf") else round(bound * 1000, 1)
    return None


def steps_markdown(steps: dict[str, Any]) -> list[str]:
    if not steps.get("steps"):
        return []
    share = steps["phase_share"]
    return ["", "| controller steps | busy s | avg ms | p50 ms ≤ | p90 ms ≤ | read | schedule | write | queues "
            "| commit | changes/step | workload writes/Job |", "|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {steps['steps']:,} | {steps['busy_s']} | {steps['avg_ms']} | {steps['p50_ms_at_most']} "
            f"| {steps['p90_ms_at_most']} | " + " | ".join(f"{share.get(p, 0):.0%}" for p in PHASES)
            + f" | {steps['changes_per_step']} | {steps['workload_writes_per_job']} |", *_threads_markdown(steps)]


def _threads_markdown(steps: dict[str, Any]) -> list[str]:
    threads = steps.get("thread_cpu_s") or {}
    if not threads:
        return []
    return ["", "| server CPU s by thread | " + " | ".join(threads) + " |", "|---|" + "---|" * len(threads),
            "| | " + " | ".join(str(v) for v in threads.values()) + " |"]
