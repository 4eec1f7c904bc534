"""``/metrics``: the live server's figures in Prometheus' text format, with Kueue's metric names where Kueue has
them (so that dashboards made for Kueue work) and ``flexq_`` ones for what is flexq's own.

An administrator's scrape holds every series. A developer's holds what their role may read through the API (see
:mod:`flexq.auth.rbac`): the series of their own namespace (Kueue's LocalQueue families, labelled ``namespace``)
and the cluster-wide ones (ClusterQueues, cohorts, flavors, node pools), never another namespace's LocalQueue
names nor the server's threads, which are named after the pods and jobs of every namespace. So a dashboard made
for Kueue keeps working under a developer's token, for their queues, as a Prometheus behind
``prom-label-proxy`` serves a tenant.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from flexq.controller import PHASES, Sample, StepStats, Tally
from flexq.server.kueue_families import TextFamily, TextHistogram, exposition, exposition_chunks, kueue_families

__all__ = ["EVERY_NAMESPACE", "render", "render_chunks", "thread_cpu"]

EVERY_NAMESPACE: Final = frozenset({"flexq_thread_cpu_seconds"})
"""Families whose label values name objects of every namespace without a ``namespace`` label to tell them apart
(threads are named after the pods and jobs they run): left out of a developer's scrape."""


def render(tally: Tally, sample: Sample, namespace: str | None = None) -> bytes:
    """The text exposition of ``tally`` (counters since start) and ``sample`` (where things stand): every series
    (``namespace`` None, an administrator's scrape), or a developer's of ``namespace`` (see the module)."""
    return exposition(_Figures(tally, sample, namespace).collect())


def render_chunks(tally: Tally, sample: Sample, namespace: str | None = None) -> Iterator[bytes]:
    """:func:`render` in pieces, each written when the one before has been taken (a response sent as it is
    written)."""
    return exposition_chunks(_Figures(tally, sample, namespace).collect())


def _counter(name: str, doc: str, labels: list[str], counts: Iterable[tuple[Sequence[str], int]]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, n in sorted(counts, key=lambda row: tuple(row[0])):
        family.add_metric(list(key), n)
    return family


class _Figures(Collector):
    def __init__(self, tally: Tally, sample: Sample, namespace: str | None = None) -> None:
        self.tally = tally
        self.sample = sample
        self.namespace = namespace
        """Whose scrape: None, an administrator's (every series); else a developer's of this namespace."""

    def collect(self) -> Iterator[Metric]:
        families = itertools.chain(kueue_families(self.tally.kueue, self.sample.kueue, self.sample.replica_role),
                                   self._flexq())
        if self.namespace is None:
            yield from families
            return
        for family in families:
            if family.name not in EVERY_NAMESPACE:
                yield _of_namespace(family, self.namespace)

    def _flexq(self) -> Iterator[Metric]:
        """flexq's own: races, node pools, their prices, requests in flight, cost."""
        s, t = self.sample, self.tally
        yield _counter("flexq_races_won", "Racing workloads that started on a flavor", ["cluster_queue", "flavor"],
                       t.kueue.races_won.items())
        nodes = GaugeMetricFamily("flexq_node_pool_nodes",
                                  "Nodes of each node pool, by state: booting, idle, busy, not_ready",
                                  labels=["node_pool", "state"])
        for (pool, state), n in sorted(s.nodes.items()):
            nodes.add_metric([pool, state], n)
        yield nodes
        hourly = GaugeMetricFamily("flexq_node_pool_price_per_node_hour_usd", "What a node of each pool costs",
                                   labels=["node_pool"])
        for pool, price in sorted(s.pool_hourly.items()):
            hourly.add_metric([pool], price)
        yield hourly
        asked = GaugeMetricFamily("flexq_provisioning_requests_in_flight",
                                  "ProvisioningRequests not yet answered or used, by node pool", labels=["node_pool"])
        for pool, n in sorted(s.provisioning.items()):
            asked.add_metric([pool], n)
        yield asked
        cost = GaugeMetricFamily("flexq_workload_cost_usd", "What the workloads of each ClusterQueue have cost",
                                 labels=["cluster_queue"])
        for cq, usd in sorted(s.cost.items()):
            cost.add_metric([cq], round(usd, 6))
        yield cost
        yield from _forecasts(s)
        yield from _steps(t.steps)
        threads = CounterMetricFamily("flexq_thread_cpu_seconds", "CPU seconds of the server's threads, by name "
                                      "(numbered threads of one pool together; MainThread runs the event loop, which "
                                      "serves the HTTP requests)", labels=["thread"])
        for name, seconds in sorted(thread_cpu().items()):
            threads.add_metric([name], seconds)
        yield threads


def _of_namespace(family: Metric, namespace: str) -> Metric:
    """``family`` with only the series of ``namespace`` among those labelled by one (those with no ``namespace``
    label are cluster-wide: kept). Changes ``family``, made for this scrape alone."""
    if isinstance(family, TextFamily | TextHistogram):
        if "namespace" in family.labels:
            at = family.labels.index("namespace")
            rows: list[Any] = family.rows
            rows[:] = [row for row in rows if row[0][at] == namespace]
    else:
        family.samples = [s for s in family.samples if s.labels.get("namespace", namespace) == namespace]
    return family


def _forecasts(s: Sample) -> Iterator[Metric]:
    """The forecasts' waits by ClusterQueue (median, 90th percentile, longest), those with no start foreseen, and
    what forecasting costs."""
    waits = GaugeMetricFamily("flexq_pending_workloads_estimated_wait_seconds",
                              "Forecast wait of the pending workloads with a start foreseen, by ClusterQueue",
                              labels=["cluster_queue", "quantile"])
    for cq, observed in sorted(s.estimated_waits.items()):
        ordered = sorted(observed)
        for q in ("0.5", "0.9", "1"):
            waits.add_metric([cq, q], round(ordered[min(len(ordered) - 1, int(float(q) * len(ordered)))], 3))
    yield waits
    unforeseen = GaugeMetricFamily("flexq_pending_workloads_unforeseen",
                                   "Pending workloads with no start foreseen (a job of unknown run time ahead, or "
                                   "beyond the horizon), by ClusterQueue", labels=["cluster_queue"])
    for cq, n in sorted(s.unforeseen.items()):
        unforeseen.add_metric([cq], n)
    yield unforeseen
    made, last, total = s.forecasts
    yield CounterMetricFamily("flexq_forecasts", "Forecasts made since the server started", value=made)
    yield GaugeMetricFamily("flexq_forecast_cpu_seconds", "CPU seconds of the last forecast (fork and run)",
                            value=round(last, 6))
    yield CounterMetricFamily("flexq_forecast_cpu_seconds_total", "CPU seconds of every forecast",
                              value=round(total, 6))


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by name, those of one pool (``flexq-write-0``, ``-1``...)
    summed under its name: from ``/proc`` (Linux), empty where there is none. A thread that ended is not counted."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    seconds: dict[str, float] = {}
    for thread in threading.enumerate():
        try:
            fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # no /proc here, or the thread ended meanwhile
            continue
        name = re.sub(r"[-_]\d+$", "", thread.name)
        seconds[name] = seconds.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return {name: round(spent, 2) for name, spent in seconds.items()}


def _steps(steps: StepStats) -> Iterator[Metric]:
    """The queue controller's steps: how many, how long, in which phase, what they read and wrote."""
    yield CounterMetricFamily("flexq_controller_steps", "Steps of the queue controller", value=steps.steps)
    duration = HistogramMetricFamily("flexq_controller_step_duration_seconds", "How long a step of the queue "
                                     "controller took, from reading the store's changes to its commit")
    duration.add_metric([], steps.cumulative(), steps.seconds)
    yield duration
    phases = CounterMetricFamily("flexq_controller_step_phase_seconds", "Seconds the queue controller's steps "
                                 "spent in each phase (read, schedule, write, queues, commit)", labels=["phase"])
    for phase in PHASES:
        phases.add_metric([phase], steps.phases.get(phase, 0.0))
    yield phases
    yield CounterMetricFamily("flexq_controller_changes_read", "Changes of the store the queue controller read",
                              value=steps.changes)
    yield CounterMetricFamily("flexq_controller_workload_writes", "Workloads the queue controller wrote (a status, "
                              "or a workload stored with its first status)", value=steps.writes)
