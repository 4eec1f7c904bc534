"""Kueue's metrics in Prometheus' text format, under Kueue's names, with its types, help texts, labels and buckets
(Kueue v0.19's ``pkg/metrics``), from what :class:`~flexq.control.KueueCounts` counted and
:class:`~flexq.control.KueueState` read. The live server serves them at ``/metrics``; ``flexq simulate --metrics``
writes them as a scrape at the simulation's end would find them."""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Final, cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

import flexq
from flexq.control import Histogram as Observed
from flexq.control import KueueCounts, KueueState

__all__ = ["TextFamily", "TextHistogram", "exposition", "exposition_chunks", "go_float", "kueue_families",
           "render_kueue"]

ROLE: Final = "replica_role"

_EVICTION_REASONS: Final = (
    "The label 'reason' can have the following values:\n"
    '- "Preempted" means that the workload was evicted in order to free resources for a workload with'
    " a higher priority or reclamation of nominal quota.\n"
    '- "PodsReadyTimeout" means that the eviction took place due to a PodsReady timeout.\n'
    '- "AdmissionCheck" means that the workload was evicted because at least one admission check '
    "transitioned to False.\n"
    '- "ClusterQueueStopped" means that the workload was evicted because the ClusterQueue is stopped.\n'
    '- "LocalQueueStopped" means that the workload was evicted because the LocalQueue is stopped.\n'
    '- "NodeFailures" means that the workload was evicted due to node failures when using '
    "TopologyAwareScheduling.\n"
    '- "Deactivated" means that the workload was evicted because spec.active is set to false.\n'
    "The label 'underlying_cause' can have the following values:\n"
    '- "" means that the value in \'reason\' label is the root cause for eviction.\n'
)
"""What the eviction counters' ``reason`` label says, and the first of ``underlying_cause`` (Kueue's help)."""
_EVICTION_CAUSES: Final = (
    '- "AdmissionCheck" means that the workload was evicted by Kueue due to a rejected admission '
    "check.\n"
    '- "MaximumExecutionTimeExceeded" means that the workload was evicted by Kueue due to maximum '
    "execution time exceeded.\n"
    '- "RequeuingLimitExceeded" means that the workload was evicted by Kueue due to requeuing limit '
    "exceeded."
)
"""The causes Kueue itself evicts for, as every eviction counter's help ends."""

_HELP: Final[dict[str, str]] = {
    "admission_attempt_duration_seconds": (
        "The latency of an admission attempt.\n"
        "The label 'result' can have the following values:\n"
        "- 'success' means that at least one workload was admitted.,\n"
        "- 'inadmissible' means that no workload was admitted."
    ),
    "admission_attempts_total": (
        "The total number of attempts to admit workloads.\n"
        "Each admission attempt might try to admit more than one workload.\n"
        "The label 'result' can have the following values:\n"
        "- 'success' means that at least one workload was admitted.,\n"
        "- 'inadmissible' means that no workload was admitted."
    ),
    "admission_checks_wait_time_seconds": (
        "The time from when a workload got the quota reservation until admission, per 'cluster_queue'"
    ),
    "admission_wait_time_seconds": (
        "The time between a workload was created or requeued until admission, per 'cluster_queue'"
    ),
    "admitted_active_workloads": "The number of admitted Workloads that are active, per 'cluster_queue'",
    "admitted_workloads_total": "The total number of admitted workloads per 'cluster_queue'",
    "admitted_until_ready_wait_time_seconds": (
        "The time between a workload was admitted until ready, per 'cluster_queue'"
    ),
    "build_info": (
        "Kueue build information. 1 labeled by git version, git commit, build date, go version, compiler,"
        " platform"
    ),
    "cluster_queue_borrowing_limit": (
        "Reports the cluster_queue's resource borrowing limit within all the flavors. If borrowingLimit "
        "is unset, this metric reports +Inf."
    ),
    "cluster_queue_info": (
        "Reports ClusterQueue hierarchy information. The metric has value 1 and can be joined using "
        "labels."
    ),
    "cluster_queue_lending_limit": (
        "Reports the cluster_queue's resource lending limit within all the flavors. If lendingLimit is "
        "unset, this metric reports +Inf."
    ),
    "cluster_queue_nominal_quota": "Reports the cluster_queue's resource nominal quota within all the flavors",
    "cluster_queue_resource_pending": (
        "Reports the cluster_queue's total pending resource requests. Unlike resource_reservation, "
        "pending workloads have not yet been assigned to flavors."
    ),
    "cluster_queue_resource_reservation": (
        "Reports the cluster_queue's total resource reservation within all the flavors"
    ),
    "cluster_queue_resource_usage": "Reports the cluster_queue's total resource usage within all the flavors",
    "cluster_queue_status": (
        "Reports 'cluster_queue' with its 'status' (with possible values 'pending', 'active' or "
        "'terminated').\n"
        "For a ClusterQueue, the metric only reports a value of 1 for one of the statuses."
    ),
    "cluster_queue_weighted_share": (
        "Reports a value that representing the maximum of the ratios of usage above nominal\n"
        "quota to the lendable resources in the cohort, among all the resources provided by\n"
        "the ClusterQueue, and divided by the weight.\n"
        "If zero, it means that the usage of the ClusterQueue is below the nominal quota.\n"
        "If the ClusterQueue has a weight of zero and is borrowing, this will return NaN."
    ),
    "cohort_weighted_share": (
        "Reports a value that representing the maximum of the ratios of usage above nominal\n"
        "quota to the lendable resources in the Cohort, among all the resources provided by\n"
        "the Cohort, and divided by the weight.\n"
        "If zero, it means that the usage of the Cohort is below the nominal quota.\n"
        "If the Cohort has a weight of zero and is borrowing, this will return NaN."
    ),
    "cohort_info": "Reports Cohort hierarchy information. The metric has value 1 and can be joined using labels.",
    "cohort_subtree_admitted_active_workloads": (
        "The number of admitted Workloads that are active, per cohort's subtree"
    ),
    "cohort_subtree_admitted_workloads_total": "The total number of admitted workloads per cohort's subtree",
    "cohort_subtree_quota": (
        "Reports the cohort's nominal quota aggregated within the cohort's subtree. The values are "
        "reported per resource and flavor"
    ),
    "cohort_subtree_resource_reservations": (
        "Reports the cohort's resource reservations aggregated within the cohort's subtree. The values "
        "are reported per resource and flavor"
    ),
    "evicted_workloads_once_total": (
        "The number of unique workload evictions per 'cluster_queue',\n" + _EVICTION_REASONS
        + '- "WaitForStart" means that the pods have not been ready since admission, or the workload is not'
        " admitted.\n"
        '- "WaitForRecovery" means that the Pods were ready since the workload admission, but some pod '
        "has failed.\n" + _EVICTION_CAUSES
    ),
    "evicted_workloads_total": (
        "The number of evicted workloads per 'cluster_queue',\n" + _EVICTION_REASONS + _EVICTION_CAUSES
    ),
    "finished_workloads": "The number of finished workloads per 'cluster_queue'.",
    "finished_workloads_total": "The total number of finished workloads per 'cluster_queue'",
    "local_queue_admission_fair_sharing_usage": (
        "Reports a value representing the LocalQueue's Admission Fair Sharing usage,\n"
        "calculated from the resource-weighted sum of consumed resources and pending\n"
        "admission penalties, divided by the LocalQueue's fair sharing weight"
    ),
    "local_queue_admission_checks_wait_time_seconds": (
        "The time from when a workload got the quota reservation until admission, per 'local_queue'"
    ),
    "local_queue_admission_wait_time_seconds": (
        "The time between a workload was created or requeued until admission, per 'local_queue'"
    ),
    "local_queue_admitted_active_workloads": "The number of admitted Workloads that are active, per 'localQueue'",
    "local_queue_admitted_workloads_total": "The total number of admitted workloads per 'local_queue'",
    "local_queue_admitted_until_ready_wait_time_seconds": (
        "The time between a workload was admitted until ready, per 'local_queue'"
    ),
    "local_queue_evicted_workloads_total": (
        "The number of evicted workloads per 'local_queue',\n" + _EVICTION_REASONS + _EVICTION_CAUSES
    ),
    "local_queue_finished_workloads": "The number of finished workloads, per 'local_queue'.",
    "local_queue_finished_workloads_total": "The total number of finished workloads per 'local_queue'",
    "local_queue_pending_workloads": (
        "The number of pending workloads, per 'local_queue' and 'status'.\n"
        "'status' can have the following values:\n"
        '- "active" means that the workloads are in the admission queue.\n'
        '- "inadmissible" means there was a failed admission attempt for these workloads and they won\'t '
        "be retried until cluster conditions, which could make this workload admissible, change"
    ),
    "local_queue_quota_reserved_wait_time_seconds": (
        "The time between a workload was created or requeued until it got quota reservation, per "
        "'local_queue'"
    ),
    "local_queue_quota_reserved_workloads_total": "The total number of quota reserved workloads per 'local_queue'",
    "local_queue_ready_wait_time_seconds": (
        "The time between a workload was created or requeued until ready, per 'local_queue'"
    ),
    "local_queue_reserving_active_workloads": "The number of Workloads that are reserving quota, per 'localQueue'",
    "local_queue_resource_reservation": "Reports the localQueue's total resource reservation within all the flavors",
    "local_queue_resource_usage": "Reports the localQueue's total resource usage within all the flavors",
    "local_queue_status": (
        "Reports 'localQueue' with its 'active' status (with possible values 'True', 'False', or "
        "'Unknown').\n"
        "For a LocalQueue, the metric only reports a value of 1 for one of the statuses."
    ),
    "pending_workloads": (
        "The number of pending workloads, per 'cluster_queue' and 'status'.\n"
        "'status' can have the following values:\n"
        '- "active" means that the workloads are in the admission queue.\n'
        '- "inadmissible" means there was a failed admission attempt for these workloads and they won\'t '
        "be retried until cluster conditions, which could make this workload admissible, change"
    ),
    "pods_ready_to_evicted_time_seconds": (
        "The number of seconds between a workload's pods being ready and eviction workloads per 'cluster_queue',\n"
        + _EVICTION_REASONS + _EVICTION_CAUSES
    ),
    "preempted_workloads_total": (
        "The number of preempted workloads per 'preempting_cluster_queue',\n"
        "The label 'reason' can have the following values:\n"
        '- "InClusterQueue" means that the workload was preempted by a workload in the same ClusterQueue.\n'
        '- "InCohortReclamation" means that the workload was preempted by a workload in the same cohort '
        "due to reclamation of nominal quota.\n"
        '- "InCohortFairSharing" means that the workload was preempted by a workload in the same cohort '
        "Fair Sharing.\n"
        '- "InCohortReclaimWhileBorrowing" means that the workload was preempted by a workload in the '
        "same cohort due to reclamation of nominal quota while borrowing."
    ),
    "quota_reserved_wait_time_seconds": (
        "The time between a workload was created or requeued until it got quota reservation, per "
        "'cluster_queue'"
    ),
    "quota_reserved_workloads_total": "The total number of quota reserved workloads per 'cluster_queue'",
    "ready_wait_time_seconds": "The time between a workload was created or requeued until ready, per 'cluster_queue'",
    "replaced_workload_slices_total": "The number of replaced workload slices per 'cluster_queue'",
    "reserving_active_workloads": "The number of Workloads that are reserving quota, per 'cluster_queue'",
}


def render_kueue(counts: KueueCounts, state: KueueState, role: str = "standalone") -> bytes:
    """The text exposition of Kueue's metrics alone (the simulator's)."""
    return exposition(kueue_families(counts, state, role))


def exposition(families: Iterable[Metric]) -> bytes:
    """Prometheus' text format of ``families``, as prometheus_client's ``generate_latest`` writes it (see
    :func:`exposition_chunks`)."""
    return b"".join(exposition_chunks(families))


def exposition_chunks(families: Iterable[Metric]) -> Iterator[bytes]:
    """:func:`exposition` in pieces, a family (or :data:`CHUNK_SERIES` series of one) at a time, for a response
    that is sent as it is written: a :class:`TextFamily` or :class:`TextHistogram` writes its own text, the others go
    through ``generate_latest`` in their turn."""
    plain: list[Metric] = []
    for family in families:
        if isinstance(family, TextFamily | TextHistogram):
            if plain:
                yield _generated(plain)
                plain = []
            for text in family.texts():
                yield text.encode()
        else:
            plain.append(family)
    if plain:
        yield _generated(plain)


CHUNK_SERIES: Final = 500
"""Series of one family written into one piece of :func:`exposition_chunks`."""


def _generated(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Given(families))
    return generate_latest(registry)


class _Given(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self.families)


_go_float = cast(Callable[[float], str], floatToGoString)


def go_float(value: float) -> str:
    """A sample's value as prometheus_client writes it (as Go does: ``4.0``, ``+Inf``, ``1.5e+07``); a whole count
    below a million (where Go's form is the number and ``.0``) without converting it."""
    if type(value) is int and 0 <= value < 1_000_000:
        return f"{value}.0"
    return _go_float(value)


def _label_value(value: str) -> str:
    """A label's value escaped as prometheus_client escapes it (backslash, newline, double quote)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _help(name: str, documentation: str, kind: str) -> str:
    doc = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"


class TextFamily(Metric):
    """A gauge or counter family that writes its text itself, in the bytes ``generate_latest`` writes for a
    ``GaugeMetricFamily`` or ``CounterMetricFamily`` of the same series (a counter's name without ``_total``, its
    samples' with it). Kueue's gauges come per ClusterQueue, flavor and resource, and per LocalQueue: a thousand
    queues make tens of thousands of lines, and prometheus_client's objects for each took most of a scrape."""

    def __init__(self, name: str, documentation: str, kind: str, labels: Sequence[str],
                 rows: list[tuple[Sequence[str], float]]) -> None:
        if kind not in ("gauge", "counter"):
            raise ValueError(f"a text family is a gauge or a counter, not {kind!r}")
        super().__init__(name.removesuffix("_total") if kind == "counter" else name, documentation, kind)
        self.labels = list(labels)
        self.rows = rows
        """Each series: its label values and its value."""

    def texts(self) -> Iterator[str]:
        """The family's text in pieces (:func:`_pieces`)."""
        shown = f"{self.name}_total" if self.type == "counter" else self.name
        order = sorted(range(len(self.labels)), key=lambda i: self.labels[i])
        names = [self.labels[i] for i in order]

        def series() -> Iterator[str]:
            for values, value in self.rows:
                if names:
                    plain = ",".join(f'{k}="{_label_value(values[i])}"' for k, i in zip(names, order, strict=True))
                    yield f"{shown}{{{plain}}} {go_float(value)}\n"
                else:
                    yield f"{shown} {go_float(value)}\n"

        return _pieces(_help(shown, self.documentation, self.type), series())


class TextHistogram(Metric):
    """A histogram family that writes its text itself, in the bytes ``generate_latest`` writes for a
    ``HistogramMetricFamily`` of the same series. Kueue's histograms come per ClusterQueue and priority class (and per
    LocalQueue): a thousand queues make hundreds of thousands of lines, and prometheus_client's objects for each line
    took seconds of the server's interpreter a scrape (88 MB in 9.8 s at a tenth of Kueue's large-scale config)."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 rows: list[tuple[Sequence[str], list[tuple[str, int]], float]]) -> None:
        super().__init__(name, documentation, "histogram")
        self.labels = list(labels)
        self.rows = rows
        """Each series: its label values, its cumulative buckets (``+Inf`` last) and its sum."""

    def texts(self) -> Iterator[str]:
        """The family's text in pieces (:func:`_pieces`)."""
        name = self.name

        def series() -> Iterator[str]:
            for values, buckets, total in self.rows:
                pairs = sorted(zip(self.labels, values, strict=True))
                before = "".join(f'{k}="{_label_value(v)}",' for k, v in pairs if k < "le")
                after = "".join(f',{k}="{_label_value(v)}"' for k, v in pairs if k >= "le")
                head, tail = f'{name}_bucket{{{before}le="', f'"{after}}} '
                plain = ",".join(f'{k}="{_label_value(v)}"' for k, v in pairs)
                braces = f"{{{plain}}}" if plain else ""
                yield "".join([*(f"{head}{le}{tail}{go_float(n)}\n" for le, n in buckets),
                               f"{name}_count{braces} {go_float(buckets[-1][1])}\n",
                               f"{name}_sum{braces} {go_float(total)}\n"])

        return _pieces(_help(name, self.documentation, "histogram"), series())


def _pieces(head: str, series: Iterator[str]) -> Iterator[str]:
    """``head`` and the text of each series, in pieces of :data:`CHUNK_SERIES` series."""
    lines = [head]
    for written, text in enumerate(series, 1):
        lines.append(text)
        if written % CHUNK_SERIES == 0:
            yield "".join(lines)
            lines = []
    if lines:
        yield "".join(lines)


def kueue_families(counts: KueueCounts, state: KueueState, role: str) -> Iterator[Metric]:
    """Every Kueue metric flexq serves; ``role``: the ``replica_role`` label's value."""
    yield _gauge("build_info", ["git_version", "git_commit", "build_date", "go_version", "compiler", "platform"],
                 [((f"flexq-{flexq.__version__}", "", "", f"python{platform.python_version()}",
                    platform.python_implementation(), f"{platform.system().lower()}/{platform.machine()}"), 1)],
                 role=None)
    yield _counter("admission_attempts_total", ["result"], (((r,), n) for r, n in counts.attempts.items()), role)
    yield _histogram("admission_attempt_duration_seconds", ["result"],
                     (((r,), h) for r, h in counts.attempt_seconds.items()), role)
    yield from _cluster_queues(counts, state, role)
    yield from _quotas(state, role)
    yield from _local_queues(counts, state, role)
    yield from _cohorts(counts, state, role)


def _cluster_queues(counts: KueueCounts, state: KueueState, role: str) -> Iterator[Metric]:
    queues = sorted(state.queue_status)
    yield _gauge("pending_workloads", ["cluster_queue", "status"],
                 (((cq, s), state.pending.get((cq, s), 0)) for cq in queues for s in ("active", "inadmissible")),
                 role)
    for name, by_queue in (("reserving_active_workloads", state.reserving),
                           ("admitted_active_workloads", state.admitted), ("finished_workloads", state.finished)):
        yield _gauge(name, ["cluster_queue"], (((cq,), by_queue.get(cq, 0)) for cq in queues), role)
    yield _gauge("cluster_queue_status", ["cluster_queue", "status"],
                 (((cq, s), 1 if s == state.queue_status[cq] else 0) for cq in queues
                  for s in ("pending", "active", "terminating")), role)
    yield _gauge("cluster_queue_info", ["cluster_queue", "parent_cohort", "root_cohort"],
                 (((cq, state.cohort_of[cq], state.cohorts.get(state.cohort_of[cq], ("", ""))[1]), 1)
                  for cq in queues), role)
    by_priority = ["cluster_queue", "priority_class"]
    yield _counter("quota_reserved_workloads_total", by_priority, counts.quota_reserved.items(), role)
    yield _counter("admitted_workloads_total", by_priority, counts.admitted.items(), role)
    yield _counter("finished_workloads_total", by_priority, counts.finished.items(), role)
    yield _histogram("quota_reserved_wait_time_seconds", by_priority, counts.quota_reserved_wait.items(), role)
    yield _histogram("admission_wait_time_seconds", by_priority, counts.admission_wait.items(), role)
    yield _histogram("admission_checks_wait_time_seconds", by_priority, counts.checks_wait.items(), role)
    yield _histogram("ready_wait_time_seconds", by_priority, counts.ready_wait.items(), role)
    yield _histogram("admitted_until_ready_wait_time_seconds", by_priority, counts.admitted_until_ready.items(), role)
    yield _histogram("pods_ready_to_evicted_time_seconds", ["cluster_queue", "reason", "underlying_cause"],
                     counts.ready_to_evicted.items(), role)
    evicted = ["cluster_queue", "reason", "underlying_cause", "priority_class"]
    yield _counter("evicted_workloads_total", evicted, counts.evicted.items(), role)
    yield _counter("evicted_workloads_once_total", evicted, counts.evicted_once.items(), role)
    yield _counter("preempted_workloads_total", ["preempting_cluster_queue", "reason"], counts.preempted.items(),
                   role)
    yield _counter("replaced_workload_slices_total", ["cluster_queue"],
                   (((cq,), n) for cq, n in counts.replaced_slices.items()), role)
    # Under fair sharing only, as Kueue; a ClusterQueue of weight 0 that borrows reports NaN (a cohort, +Inf).
    yield _gauge("cluster_queue_weighted_share", ["cluster_queue", "cohort"],
                 (((cq, state.cohort_of.get(cq, "")), math.nan if math.isinf(share) else share)
                  for cq, share in state.weighted_share.items() if cq in state.queue_status), role)


def _quotas(state: KueueState, role: str) -> Iterator[Metric]:
    """Quota, its limits, and what is held of it, by ClusterQueue, flavor and resource."""
    labels = ["cohort", "cluster_queue", "flavor", "resource"]

    def rows(by: Mapping[tuple[str, str, str], int | None]) -> Iterator[tuple[Sequence[str], float]]:
        for (cq, flavor, resource), milli in by.items():
            if cq in state.queue_status:  # workloads of a deleted queue hold no quota of it
                yield (state.cohort_of[cq], cq, flavor, resource), _amount(milli)

    yield _gauge("cluster_queue_nominal_quota", labels, rows(state.nominal), role)
    yield _gauge("cluster_queue_borrowing_limit", labels, rows(state.borrowing_limit), role)
    yield _gauge("cluster_queue_lending_limit", labels, rows(state.lending_limit), role)
    yield _gauge("cluster_queue_resource_reservation", labels, rows(state.reservation), role)
    yield _gauge("cluster_queue_resource_usage", labels, rows(state.usage), role)
    yield _gauge("cluster_queue_resource_pending", ["cluster_queue", "resource"],
                 ((key, _amount(milli)) for key, milli in state.pending_resources.items()
                  if key[0] in state.queue_status), role)


def _local_queues(counts: KueueCounts, state: KueueState, role: str) -> Iterator[Metric]:
    queues = sorted(state.local_queues)
    lq = ["name", "namespace"]
    yield _gauge("local_queue_pending_workloads", [*lq, "status"],
                 (((*q, s), state.lq_pending.get((*q, s), 0)) for q in queues for s in ("active", "inadmissible")),
                 role)
    for name, by_queue in (("local_queue_reserving_active_workloads", state.lq_reserving),
                           ("local_queue_admitted_active_workloads", state.lq_admitted),
                           ("local_queue_finished_workloads", state.lq_finished)):
        yield _gauge(name, lq, ((q, by_queue.get(q, 0)) for q in queues), role)
    yield _gauge("local_queue_status", [*lq, "active"],
                 (((*q, s), 1 if s == ("True" if state.local_queues[q] else "False") else 0) for q in queues
                  for s in ("True", "False", "Unknown")), role)
    for name, held in (("local_queue_resource_reservation", state.lq_reservation),
                       ("local_queue_resource_usage", state.lq_usage)):
        yield _gauge(name, [*lq, "flavor", "resource"], ((key, _amount(milli)) for key, milli in held.items()
                                                          if key[:2] in state.local_queues), role)
    by_priority = [*lq, "priority_class"]
    yield _counter("local_queue_quota_reserved_workloads_total", by_priority, counts.lq_quota_reserved.items(), role)
    yield _counter("local_queue_admitted_workloads_total", by_priority, counts.lq_admitted.items(), role)
    yield _counter("local_queue_finished_workloads_total", by_priority, counts.lq_finished.items(), role)
    yield _histogram("local_queue_quota_reserved_wait_time_seconds", by_priority,
                     counts.lq_quota_reserved_wait.items(), role)
    yield _histogram("local_queue_admission_wait_time_seconds", by_priority, counts.lq_admission_wait.items(), role)
    yield _histogram("local_queue_admission_checks_wait_time_seconds", by_priority, counts.lq_checks_wait.items(),
                     role)
    yield _histogram("local_queue_ready_wait_time_seconds", by_priority, counts.lq_ready_wait.items(), role)
    yield _histogram("local_queue_admitted_until_ready_wait_time_seconds", by_priority,
                     counts.lq_admitted_until_ready.items(), role)
    yield _counter("local_queue_evicted_workloads_total", [*lq, "reason", "underlying_cause", "priority_class"],
                   counts.lq_evicted.items(), role)
    yield _gauge("local_queue_admission_fair_sharing_usage", [*lq, "cluster_queue"], state.lq_fair_usage.items(),
                 role)


def _cohorts(counts: KueueCounts, state: KueueState, role: str) -> Iterator[Metric]:
    cohorts = sorted(state.cohorts)
    yield _gauge("cohort_info", ["cohort", "parent_cohort", "root_cohort"],
                 (((c, *state.cohorts[c]), 1) for c in cohorts), role)
    yield _gauge("cohort_subtree_quota", ["cohort", "flavor", "resource"],
                 ((key, _amount(milli)) for key, milli in state.cohort_quota.items()), role)
    yield _gauge("cohort_subtree_resource_reservations", ["cohort", "flavor", "resource"],
                 ((key, _amount(milli)) for key, milli in state.cohort_reservation.items()), role)
    yield _gauge("cohort_subtree_admitted_active_workloads", ["cohort"],
                 (((c,), state.cohort_admitted.get(c, 0)) for c in cohorts), role)
    yield _counter("cohort_subtree_admitted_workloads_total", ["cohort", "priority_class"],
                   counts.cohort_admitted.items(), role)
    yield _gauge("cohort_weighted_share", ["cohort"],
                 (((c,), share) for c, share in state.cohort_weighted_share.items()), role)


def _amount(milli: int | None) -> float:
    """Kueue reports quantities in the resource's unit (cpu in cores, memory in bytes); no limit is +Inf."""
    return float("inf") if milli is None else float(Fraction(milli, 1000))


def _labels(labels: list[str], role: str | None) -> list[str]:
    return labels if role is None else [*labels, ROLE]


def _values(key: Sequence[str], role: str | None) -> list[str]:
    return list(key) if role is None else [*key, role]


def _gauge(name: str, labels: list[str], rows: Iterable[tuple[Sequence[str], float]], role: str | None) -> Metric:
    return _text_family("gauge", name, labels, rows, role)


def _counter(name: str, labels: list[str], rows: Iterable[tuple[Sequence[str], int]], role: str) -> Metric:
    return _text_family("counter", name, labels, rows, role)


def _text_family(kind: str, name: str, labels: list[str], rows: Iterable[tuple[Sequence[str], float]],
                 role: str | None) -> Metric:
    """Kueue's gauge or counter ``name``, its series in the order of their label values."""
    return TextFamily(f"kueue_{name}", _HELP[name], kind, _labels(labels, role),
                      [(_values(key, role), value) for key, value in sorted(rows, key=lambda row: tuple(row[0]))])


def _histogram(name: str, labels: list[str], rows: Iterable[tuple[Sequence[str], Observed]], role: str) -> Metric:
    return TextHistogram(f"kueue_{name}", _HELP[name], _labels(labels, role),
                         [(_values(key, role), observed.cumulative(), observed.total)
                          for key, observed in sorted(rows, key=lambda row: tuple(row[0]))])


