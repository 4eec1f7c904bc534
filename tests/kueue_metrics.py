"""Kueue's metric list (vendored from Kueue's source, ``tests/data/kueue-metrics``), the ones with no meaning in
flexq, and a check of a scrape against them: shared by the live server's test and the simulator's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

LIST: Final = Path(__file__).parent / "data/kueue-metrics/metrics.json"
KUEUE: Final[dict[str, dict[str, Any]]] = {m["name"]: m for m in json.loads(LIST.read_text())["metrics"]}
"""Kueue's metrics by name: type, help, labels, buckets."""

NO_MEANING: Final[dict[str, str]] = {
    # MultiKueue dispatches workloads to worker clusters; flexq has one cluster.
    "multikueue_workloads_admitted_total": "no MultiKueue: one cluster",
    "multikueue_workloads_dispatched_total": "no MultiKueue: one cluster",
    # Kueue's scheduler skips a preemption another ClusterQueue's in the same cycle needs; flexq's settles each
    # preemption in the pass that decides it.
    "kueue_admission_cycle_preemption_skips": "no preemption is skipped for another ClusterQueue's in one cycle",
    # Pods' scheduling gates (Topology Aware Scheduling, elastic jobs, plain pods' admission gate): flexq places
    # pods itself once admitted, ungated.
    "kueue_pod_scheduling_gate_removal_seconds": "no scheduling gates on pods",
    # A job and its workload are made in one controller step (no webhook, then a reconcile, between them).
    "kueue_workload_creation_latency_seconds": "a job's workload is made in the step that reads the job",
    # flexq releases an evicted workload's quota in the step that evicts it (no job controller to wait on).
    "kueue_workload_eviction_latency_seconds": "quota is released in the step that evicts: always 0",
    # Off by default in Kueue v0.19 (UnadmittedWorkloadsObservability, beta); flexq's pending reasons are on the
    # workloads and in the visibility API.
    "kueue_unadmitted_workloads": "behind Kueue's UnadmittedWorkloadsObservability gate, off by default",
    "kueue_local_queue_unadmitted_workloads": "behind Kueue's UnadmittedWorkloadsObservability gate, off by default",
}
"""Kueue's metrics flexq does not serve, each with its reason."""

SERVED: Final = sorted(set(KUEUE) - set(NO_MEANING))


def families(text: str) -> dict[str, Any]:
    """The scrape's metric families by their exposed name (a counter's with ``_total``, as Kueue names them)."""
    out = {}
    for family in text_string_to_metric_families(text):
        name = family.name + "_total" if family.type == "counter" else family.name
        out[name] = family
    return out


def check_scrape(text: str, *, need_samples: bool, samples_not_needed: frozenset[str] = frozenset()) -> list[str]:
    """Every way the scrape differs from Kueue's list: a metric it lacks, a type, help text, label names or
    buckets not Kueue's (or, with ``need_samples``, a served metric without a series, unless listed)."""
    assert set(NO_MEANING) <= set(KUEUE), set(NO_MEANING) - set(KUEUE)
    found = families(text)
    problems = []
    for name in SERVED:
        want, family = KUEUE[name], found.get(name)
        if family is None:
            problems.append(f"{name}: missing")
            continue
        if family.type != want["type"]:
            problems.append(f"{name}: type {family.type}, Kueue's {want['type']}")
        if family.documentation != want["help"]:
            problems.append(f"{name}: help {family.documentation!r}, Kueue's {want['help']!r}")
        if need_samples and not family.samples and name not in samples_not_needed:
            problems.append(f"{name}: no series")
        for sample in family.samples:
            labels = set(sample.labels) - {"le"}
            if labels != set(want["labels"]):
                problems.append(f"{name}: labels {sorted(labels)}, Kueue's {sorted(want['labels'])}")
                break
        bounds = sorted({float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")})
        if bounds and bounds != [*want["buckets"], float("inf")]:
            problems.append(f"{name}: buckets {bounds}, Kueue's {want['buckets']}")
    unknown = sorted(n for n in found if n.startswith("kueue_") and n not in KUEUE)
    problems += [f"{name}: not Kueue's (flexq's own take flexq_)" for name in unknown]
    return problems
