"""Kueue's metrics, read off the control plane the same way on both clocks.

:class:`KueueCounts` counts what happened (Kueue's counters and histograms) from the plane's events as they are
told, and :func:`kueue_state` reads where things stand (Kueue's gauges) from the plane's scheduler. The live server
renders both at ``/metrics``; the simulator writes them at the end of a run (``flexq simulate --metrics``). Labels
follow Kueue's: a ClusterQueue's series by ``cluster_queue`` (and ``priority_class``, the workload's priority class
name, "" for none), a LocalQueue's by ``name`` and ``namespace``.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from flexq.control.pods_ready import STARTED, TIMEOUT_REASON, WAIT_FOR_RECOVERY
from flexq.scheduler import REPLACED, Event, EventKind, Scheduler, Workload, WorkloadState, eviction_reason

if TYPE_CHECKING:
    from flexq.control.plane import ControlPlane

__all__ = ["ATTEMPT_BUCKETS", "SHORT_WAIT_BUCKETS", "WAIT_BUCKETS", "Histogram", "KueueCounts", "KueueState",
           "eviction_labels", "kueue_state"]

K = TypeVar("K")

WAIT_BUCKETS: Final = (1.0, *(2.5 * 2 ** i for i in range(15)))
"""Kueue's buckets for ``admission_wait_time_seconds``: 1 s, then 2.5 s doubling (16 in all, up to 11.4 hours)."""
SHORT_WAIT_BUCKETS: Final = WAIT_BUCKETS[:14]
"""Kueue's buckets for its other waits (14: up to 2.8 hours)."""
ATTEMPT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""The Prometheus client's default buckets, which Kueue's ``admission_attempt_duration_seconds`` takes."""

_WAIT_FOR_START: Final = "WaitForStart"


@dataclass
class Histogram:
    """Observations counted into buckets (each into the first whose bound, ``le``, holds it; over the last bound,
    into none), with their sum and count; told as Prometheus' cumulative buckets."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def copy(self) -> Histogram:
        return Histogram(self.bounds, list(self.counts), self.total, self.count)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' buckets, ``+Inf`` last."""
        counts = self.counts or [0] * (len(self.bounds) + 1)
        bounds = _BOUNDS.get(self.bounds)
        if bounds is None:
            bounds = _BOUNDS[self.bounds] = tuple(_bound(b) for b in self.bounds)
        return [*zip(bounds, itertools.accumulate(counts), strict=False), ("+Inf", self.count)]


_BOUNDS: Final[dict[tuple[float, ...], tuple[str, ...]]] = {}
"""Each set of bounds as :func:`_bound` writes them (a histogram's buckets are one of a few sets)."""


def _bound(b: float) -> str:
    """A bucket's bound as Kueue's Go client writes it (``1``, ``2.5``, ``40960``)."""
    short = f"{b:g}"
    return short if float(short) == b else repr(b)


def eviction_labels(cause: str) -> tuple[str, str]:
    """Kueue's ``reason`` and ``underlying_cause`` of an eviction from its Evicted condition's reason: a deactivation
    names its cause after ``DeactivatedDueTo`` (``DeactivatedDueToMaximumExecutionTimeExceeded``)."""
    return eviction_reason(cause)


@dataclass
class KueueCounts:
    """Kueue's counters and histograms since the start, keyed by their label values (without ``replica_role``).

    :meth:`attach` makes it hear a control plane's events; a racing variant's events are its workload's business
    (Kueue's metrics count the workload once, on the flavor it wins)."""

    quota_reserved: dict[tuple[str, str], int] = field(default_factory=dict)
    """(ClusterQueue, priority class) -> workloads that reserved quota; the histograms below are keyed alike."""
    quota_reserved_wait: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    admitted: dict[tuple[str, str], int] = field(default_factory=dict)
    admission_wait: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    checks_wait: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    finished: dict[tuple[str, str], int] = field(default_factory=dict)
    evicted: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    """(ClusterQueue, reason, underlying cause, priority class)"""
    evicted_once: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    """As :attr:`evicted`, each workload counted once for each reason and cause."""
    preempted: dict[tuple[str, str], int] = field(default_factory=dict)
    """(preempting ClusterQueue, reason)"""
    replaced_slices: dict[str, int] = field(default_factory=dict)
    lq_quota_reserved: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(LocalQueue name, namespace, priority class); the LocalQueue histograms below are keyed alike."""
    lq_quota_reserved_wait: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    lq_admitted: dict[tuple[str, str, str], int] = field(default_factory=dict)
    lq_admission_wait: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    lq_checks_wait: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    lq_finished: dict[tuple[str, str, str], int] = field(default_factory=dict)
    lq_evicted: dict[tuple[str, str, str, str, str], int] = field(default_factory=dict)
    """(LocalQueue name, namespace, reason, underlying cause, priority class)"""
    cohort_admitted: dict[tuple[str, str], int] = field(default_factory=dict)
    """(cohort, priority class): admissions in the cohort's subtree (every cohort above the ClusterQueue)."""
    attempts: dict[str, int] = field(default_factory=dict)
    """result ("success" | "inadmissible") -> scheduling passes"""
    attempt_seconds: dict[str, Histogram] = field(default_factory=dict)
    races_won: dict[tuple[str, str], int] = field(default_factory=dict)
    """flexq's own: (ClusterQueue, flavor) -> racing workloads that started on that flavor."""
    ready_wait: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    """waitForPodsReady's, keyed as :attr:`quota_reserved`: from created or requeued until all pods ready (the
    first time in an admission: Kueue's ``Started``, not ``Recovered``)."""
    admitted_until_ready: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    lq_ready_wait: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    lq_admitted_until_ready: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    ready_to_evicted: dict[tuple[str, str, str], Histogram] = field(default_factory=dict)
    """(ClusterQueue, reason, underlying cause): from all pods ready (last) until evicted, for the workloads whose
    pods were ready when evicted."""
    _evicted_for: dict[str, set[tuple[str, str]]] = field(default_factory=dict, repr=False)
    """Workload -> the (reason, cause) it was counted for in :attr:`evicted_once` (dropped when it finishes)."""
    _ready_since: dict[str, float] = field(default_factory=dict, repr=False)
    """Workload -> when its pods last became all ready (Kueue's ``PodsReady`` True), while they are."""
    _recovering: set[str] = field(default_factory=set, repr=False)
    """Workloads whose pods were ready and some stopped (Kueue's ``WaitForRecovery``)."""

    def snapshot(self) -> KueueCounts:
        """A copy to read while this one goes on counting (``/metrics``): the counters and histograms (each histogram
        copied), without the bookkeeping of the workloads under way."""
        copied: dict[str, Any] = {}
        for each in dataclasses.fields(self):
            if not each.name.startswith("_"):
                series: dict[Any, Any] = getattr(self, each.name)
                copied[each.name] = {k: v.copy() if isinstance(v, Histogram) else v for k, v in series.items()}
        return KueueCounts(**copied)

    def attach(self, plane: ControlPlane) -> KueueCounts:
        """Hear ``plane``'s events and scheduling passes from now on."""
        plane.names_priority_classes = True
        plane.listen(lambda event: self.hear(event, plane))
        plane.listen_attempts(self.attempt)
        plane.pods_ready.listen(lambda wl, at, reason: self.pods_ready(wl, at, reason, plane.priority_class_name))
        return self

    def pods_ready(self, wl: Workload, at: float, reason: str, priority_class: Callable[[str], str]) -> None:
        """``wl``'s PodsReady condition changed at ``at`` (Kueue's ``reason``). Its first readiness in an admission
        is timed, as Kueue's job reconciler times it: from its creation or requeue, and from its admission."""
        key = wl.key
        if reason == WAIT_FOR_RECOVERY:
            self._ready_since.pop(key, None)
            self._recovering.add(key)
            return
        self._ready_since[key] = at
        self._recovering.discard(key)
        if reason != STARTED or wl.admitted_at is None:
            return
        cq, pc, lq = wl.cluster_queue, priority_class(key), (wl.queue, wl.namespace)
        queued, admitted = max(0.0, at - wl.queue_time), max(0.0, at - wl.admitted_at)
        _observe(self.ready_wait, (cq, pc), SHORT_WAIT_BUCKETS, queued)
        _observe(self.admitted_until_ready, (cq, pc), SHORT_WAIT_BUCKETS, admitted)
        _observe(self.lq_ready_wait, (*lq, pc), SHORT_WAIT_BUCKETS, queued)
        _observe(self.lq_admitted_until_ready, (*lq, pc), SHORT_WAIT_BUCKETS, admitted)

    def attempt(self, admitted: bool, seconds: float) -> None:
        """A scheduling pass that decided something: whether it reserved quota for any workload, and how long it
        took."""
        result = "success" if admitted else "inadmissible"
        _add(self.attempts, result)
        _observe(self.attempt_seconds, result, ATTEMPT_BUCKETS, seconds)

    def hear(self, event: Event, plane: ControlPlane) -> None:
        """Count one event of ``plane`` (told as it happens: the workload is as the event left it)."""
        kind = event.kind
        if kind not in _COUNTED or event.extra.get("parent"):
            return
        wl = plane.scheduler.workload(event.workload)
        if wl is not None and wl.parent:
            return
        cq = event.cluster_queue
        pc = plane.priority_class_name(event.workload)
        lq = (wl.queue, wl.namespace) if wl is not None else None
        if kind is EventKind.QUOTA_RESERVED:
            _add(self.quota_reserved, (cq, pc))
            wait = max(0.0, event.t - wl.queue_time) if wl is not None else None
            if wait is not None:
                _observe(self.quota_reserved_wait, (cq, pc), SHORT_WAIT_BUCKETS, wait)
            if lq is not None:
                _add(self.lq_quota_reserved, (*lq, pc))
                if wait is not None:
                    _observe(self.lq_quota_reserved_wait, (*lq, pc), SHORT_WAIT_BUCKETS, wait)
        elif kind is EventKind.ADMITTED:
            self._admitted(event, wl, cq, pc, plane.scheduler)
        elif kind is EventKind.EVICTED:
            reason, cause = self._eviction(event)
            _add(self.evicted, (cq, reason, cause, pc))
            seen = self._evicted_for.setdefault(event.workload, set())
            if (reason, cause) not in seen:
                seen.add((reason, cause))
                _add(self.evicted_once, (cq, reason, cause, pc))
            if lq is not None:
                _add(self.lq_evicted, (*lq, reason, cause, pc))
        elif kind is EventKind.PREEMPTED:
            preemptor = plane.scheduler.workload(str(event.extra.get("preemptor", "")))
            by = preemptor.cluster_queue if preemptor is not None else cq
            _add(self.preempted, (by, str(event.extra.get("preemptionReason", "Preempted"))))
        elif kind is EventKind.FINISHED:
            _add(self.finished, (cq, pc))
            if lq is not None:
                _add(self.lq_finished, (*lq, pc))
            if event.extra.get("finishedReason") == REPLACED:
                _add(self.replaced_slices, cq)
            self._evicted_for.pop(event.workload, None)
            self._ready_since.pop(event.workload, None)
            self._recovering.discard(event.workload)

    def _eviction(self, event: Event) -> tuple[str, str]:
        """Kueue's ``reason`` and ``underlying_cause`` of an eviction (a PodsReady timeout's cause: whether the pods
        never were ready in this admission, or were and some stopped); a workload whose pods were all ready times
        how long they were."""
        key = event.workload
        reason, cause = eviction_labels(str(event.extra.get("cause", "Evicted")))
        if reason == TIMEOUT_REASON:
            cause = WAIT_FOR_RECOVERY if key in self._recovering else _WAIT_FOR_START
        self._recovering.discard(key)
        ready = self._ready_since.pop(key, None)
        if ready is not None:
            _observe(self.ready_to_evicted, (event.cluster_queue, reason, cause), SHORT_WAIT_BUCKETS,
                     max(0.0, event.t - ready))
        return reason, cause

    def _admitted(self, event: Event, wl: Workload | None, cq: str, pc: str, scheduler: Scheduler) -> None:
        _add(self.admitted, (cq, pc))
        lq = (wl.queue, wl.namespace) if wl is not None else None
        if lq is not None:
            _add(self.lq_admitted, (*lq, pc))
        if wl is not None:
            wait = max(0.0, event.t - wl.queue_time)
            _observe(self.admission_wait, (cq, pc), WAIT_BUCKETS, wait)
            checks = max(0.0, event.t - wl.reserved_at) if wl.reserved_at is not None else 0.0
            _observe(self.checks_wait, (cq, pc), SHORT_WAIT_BUCKETS, checks)
            _observe(self.lq_admission_wait, (wl.queue, wl.namespace, pc), SHORT_WAIT_BUCKETS, wait)
            _observe(self.lq_checks_wait, (wl.queue, wl.namespace, pc), SHORT_WAIT_BUCKETS, checks)
        for cohort in _ancestors(scheduler, cq):
            _add(self.cohort_admitted, (cohort, pc))
        flavor = event.extra.get("flavor")
        if isinstance(flavor, str):
            _add(self.races_won, (cq, flavor))

    def keep(self, cluster_queues: Container[str], local_queues: Container[tuple[str, str]],
             cohorts: Container[str]) -> None:
        """Drop the series of ClusterQueues, LocalQueues ((name, namespace)) and cohorts no longer configured, as
        Kueue clears a deleted queue's metrics (one made again under the name starts from zero)."""
        by_cluster_queue: tuple[dict[Any, Any], ...] = (
            self.quota_reserved, self.quota_reserved_wait, self.admitted, self.admission_wait, self.checks_wait,
            self.finished, self.evicted, self.evicted_once, self.preempted, self.races_won, self.ready_wait,
            self.admitted_until_ready, self.ready_to_evicted)
        for by_cq in by_cluster_queue:
            _drop(by_cq, lambda key: key[0] in cluster_queues)
        _drop(self.replaced_slices, lambda key: key in cluster_queues)
        by_local_queue: tuple[dict[Any, Any], ...] = (
            self.lq_quota_reserved, self.lq_quota_reserved_wait, self.lq_admitted, self.lq_admission_wait,
            self.lq_checks_wait, self.lq_finished, self.lq_evicted, self.lq_ready_wait, self.lq_admitted_until_ready)
        for by_lq in by_local_queue:
            _drop(by_lq, lambda key: (key[0], key[1]) in local_queues)
        _drop(self.cohort_admitted, lambda key: key[0] in cohorts)


_COUNTED: Final = frozenset({EventKind.QUOTA_RESERVED, EventKind.ADMITTED, EventKind.EVICTED, EventKind.PREEMPTED,
                             EventKind.FINISHED})


def _add(counter: dict[K, int], key: K) -> None:
    counter[key] = counter.get(key, 0) + 1


def _observe(histograms: dict[K, Histogram], key: K, bounds: tuple[float, ...], value: float) -> None:
    histogram = histograms.get(key)
    if histogram is None:
        histogram = histograms[key] = Histogram(bounds)
    histogram.observe(value)


def _drop(series: dict[Any, Any], keep: Callable[[Any], bool]) -> None:
    for key in [k for k in series if not keep(k)]:
        del series[key]


def _ancestors(scheduler: Scheduler, cq: str) -> list[str]:
    """The cohorts above ClusterQueue ``cq``, nearest first."""
    config = scheduler.config
    spec = config.cluster_queues.get(cq)
    out: list[str] = []
    cohort = spec.cohort if spec is not None else None
    while cohort and cohort not in out:
        out.append(cohort)
        parent = config.cohorts.get(cohort)
        cohort = parent.parent if parent is not None else None
    return out


@dataclass(frozen=True)
class KueueState:
    """Kueue's gauges at one moment. Quantities in thousandths of the resource's unit (rendered in the unit)."""

    queue_status: dict[str, str]
    """ClusterQueue -> "active" | "pending" (every ClusterQueue configured)"""
    cohort_of: dict[str, str]
    """ClusterQueue -> its cohort ("" for none)"""
    pending: dict[tuple[str, str], int]
    """(ClusterQueue, "active" | "inadmissible") -> workloads"""
    reserving: dict[str, int]
    admitted: dict[str, int]
    finished: dict[str, int]
    reservation: dict[tuple[str, str, str], int]
    """(ClusterQueue, flavor, resource) -> quota held by the workloads that reserved it"""
    usage: dict[tuple[str, str, str], int]
    """(ClusterQueue, flavor, resource) -> quota held by the admitted workloads"""
    pending_resources: dict[tuple[str, str], int]
    """(ClusterQueue, resource) -> what its pending workloads ask for"""
    nominal: dict[tuple[str, str, str], int]
    borrowing_limit: dict[tuple[str, str, str], int | None]
    """None: no limit (Kueue reports +Inf)"""
    lending_limit: dict[tuple[str, str, str], int | None]
    local_queues: dict[tuple[str, str], bool]
    """(LocalQueue name, namespace) -> whether it is active (its ClusterQueue active, itself not stopped)"""
    lq_pending: dict[tuple[str, str, str], int]
    """(name, namespace, "active" | "inadmissible")"""
    lq_reserving: dict[tuple[str, str], int]
    lq_admitted: dict[tuple[str, str], int]
    lq_finished: dict[tuple[str, str], int]
    lq_reservation: dict[tuple[str, str, str, str], int]
    """(name, namespace, flavor, resource)"""
    lq_usage: dict[tuple[str, str, str, str], int]
    cohorts: dict[str, tuple[str, str]]
    """cohort -> (its parent, the root of its tree) ("" for no parent)"""
    cohort_quota: dict[tuple[str, str, str], int]
    """(cohort, flavor, resource) -> nominal quota of its subtree"""
    cohort_reservation: dict[tuple[str, str, str], int]
    cohort_admitted: dict[str, int]
    lq_fair_usage: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """(name, namespace, ClusterQueue) -> the LocalQueue's admission fair sharing usage (where it is on)"""
    weighted_share: dict[str, float] = field(default_factory=dict)
    """ClusterQueue -> its fair-sharing weighted share (+inf: weight 0 and borrowing); empty without fair sharing"""
    cohort_weighted_share: dict[str, float] = field(default_factory=dict)


def kueue_state(plane: ControlPlane) -> KueueState:
    """Where things stand on ``plane``, as Kueue's gauges say it (read under the lock of whoever drives it)."""
    config = plane.scheduler.config
    queue_status = {name: "active" if spec.active else "pending" for name, spec in config.cluster_queues.items()}
    local_queues = {(lq, ns): queue_status.get(cq) == "active" and (ns, lq) not in config.stopped_queues
                    for (ns, lq), cq in plane.local_queues.items()}
    counted = _Workloads()
    counted.count(plane.scheduler)
    nominal: dict[tuple[str, str, str], int] = {}
    borrowing: dict[tuple[str, str, str], int | None] = {}
    lending: dict[tuple[str, str, str], int | None] = {}
    for name, spec in config.cluster_queues.items():
        for group in spec.groups:
            for (flavor, resource), quota in group.quotas.items():
                nominal[(name, flavor, resource)] = quota.nominal
                borrowing[(name, flavor, resource)] = quota.borrowing_limit
                lending[(name, flavor, resource)] = quota.lending_limit
    cohorts = _cohort_tree(plane.scheduler)
    subtree_quota, subtree_reservation, subtree_admitted = _subtrees(plane.scheduler, cohorts, nominal, counted)
    return KueueState(
        queue_status, {name: spec.cohort or "" for name, spec in config.cluster_queues.items()}, counted.pending,
        counted.reserving, counted.admitted, counted.finished, counted.reservation, counted.usage,
        counted.pending_resources, nominal, borrowing, lending, local_queues, counted.lq_pending,
        counted.lq_reserving, counted.lq_admitted, counted.lq_finished, counted.lq_reservation, counted.lq_usage,
        cohorts, subtree_quota, subtree_reservation, subtree_admitted, _fair_usage(plane),
        *(plane.scheduler.weighted_shares() or ({}, {})))


def _fair_usage(plane: ControlPlane) -> dict[tuple[str, str, str], float]:
    """Each LocalQueue's admission fair sharing usage, with the samples due by now taken (empty where it is off)."""
    ledger = plane.fair_usage
    if ledger is None:
        return {}
    plane.scheduler.fair_tick(plane.timers.now())
    weights = plane.scheduler.config.queue_weights
    return {(lq, ns, cq): ledger.usage((ns, lq), weights.get((ns, lq), 1.0))
            for (ns, lq), cq in plane.local_queues.items()}


@dataclass
class _Workloads:
    """The workloads counted by ClusterQueue and by LocalQueue (name, namespace), as :class:`KueueState` has them."""

    pending: dict[tuple[str, str], int] = field(default_factory=dict)
    reserving: dict[str, int] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    reservation: dict[tuple[str, str, str], int] = field(default_factory=dict)
    usage: dict[tuple[str, str, str], int] = field(default_factory=dict)
    pending_resources: dict[tuple[str, str], int] = field(default_factory=dict)
    lq_pending: dict[tuple[str, str, str], int] = field(default_factory=dict)
    lq_reserving: dict[tuple[str, str], int] = field(default_factory=dict)
    lq_admitted: dict[tuple[str, str], int] = field(default_factory=dict)
    lq_finished: dict[tuple[str, str], int] = field(default_factory=dict)
    lq_reservation: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    lq_usage: dict[tuple[str, str, str, str], int] = field(default_factory=dict)

    def count(self, scheduler: Scheduler) -> None:
        for wl in scheduler.workloads():
            if wl.parent:
                continue  # a racing variant: its workload is counted
            cq, lq = wl.cluster_queue, (wl.queue, wl.namespace)
            if wl.state is WorkloadState.FINISHED:
                _add(self.finished, cq)
                _add(self.lq_finished, lq)
            elif wl.state is WorkloadState.PENDING:
                status = "active" if wl.key in scheduler.variants or scheduler.waiting(wl) else "inadmissible"
                _add(self.pending, (cq, status))
                _add(self.lq_pending, (*lq, status))
                for podset in wl.podsets:
                    for resource in podset.requests:
                        _sum(self.pending_resources, (cq, resource), podset.total(resource))
            elif wl.holds_quota and wl.admission is not None:
                self._holding(wl, cq, lq)

    def _holding(self, wl: Workload, cq: str, lq: tuple[str, str]) -> None:
        assert wl.admission is not None
        admitted = wl.state is WorkloadState.ADMITTED
        _add(self.reserving, cq)
        _add(self.lq_reserving, lq)
        if admitted:
            _add(self.admitted, cq)
            _add(self.lq_admitted, lq)
        for (flavor, resource), amount in wl.admission.usage().items():
            _sum(self.reservation, (cq, flavor, resource), amount)
            _sum(self.lq_reservation, (*lq, flavor, resource), amount)
            if admitted:
                _sum(self.usage, (cq, flavor, resource), amount)
                _sum(self.lq_usage, (*lq, flavor, resource), amount)


def _subtrees(scheduler: Scheduler, cohorts: Mapping[str, tuple[str, str]],
              nominal: Mapping[tuple[str, str, str], int], counted: _Workloads
              ) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str, str], int], dict[str, int]]:
    """Each cohort's subtree: its nominal quota (its own and its ClusterQueues' and cohorts' below), the quota
    reserved in it, and its admitted workloads."""
    config = scheduler.config
    quota: dict[tuple[str, str, str], int] = {}
    reservation: dict[tuple[str, str, str], int] = {}
    admitted: dict[str, int] = {}
    for name in cohorts:
        spec = config.cohorts.get(name)
        for group in spec.groups if spec is not None else ():
            for (flavor, resource), q in group.quotas.items():
                for above in [name, *_cohort_ancestors(cohorts, name)]:
                    _sum(quota, (above, flavor, resource), q.nominal)
    above_queue = {cq: _ancestors(scheduler, cq) for cq in config.cluster_queues}
    for by_queue, into in ((nominal, quota), (counted.reservation, reservation)):
        for (cq, flavor, resource), amount in by_queue.items():
            for cohort in above_queue.get(cq, ()):
                _sum(into, (cohort, flavor, resource), amount)
    for cq, cohorts_above in above_queue.items():
        for cohort in cohorts_above:
            _sum(admitted, cohort, counted.admitted.get(cq, 0))
    return quota, reservation, admitted


def _sum(counter: dict[K, int], key: K, amount: int) -> None:
    counter[key] = counter.get(key, 0) + amount


def _cohort_tree(scheduler: Scheduler) -> dict[str, tuple[str, str]]:
    """Every cohort (those named by a ClusterQueue or a Cohort's parent without an object of their own included):
    its parent and its root."""
    config = scheduler.config
    parents: dict[str, str] = {}
    for name, cohort in config.cohorts.items():
        parents[name] = cohort.parent or ""
        if cohort.parent:
            parents.setdefault(cohort.parent, "")
    for queue in config.cluster_queues.values():
        if queue.cohort:
            parents.setdefault(queue.cohort, "")
    out: dict[str, tuple[str, str]] = {}
    for name, parent in parents.items():
        chain = _cohort_ancestors({n: (p, "") for n, p in parents.items()}, name)
        out[name] = (parent, chain[-1] if chain else name)
    return out


def _cohort_ancestors(tree: Mapping[str, tuple[str, str]], name: str) -> list[str]:
    """The cohorts above ``name`` in ``tree`` (cohort -> (parent, ...)), nearest first (a cycle stops the walk)."""
    out: list[str] = []
    parent = tree.get(name, ("", ""))[0]
    while parent and parent not in out and parent != name:
        out.append(parent)
        parent = tree.get(parent, ("", ""))[0]
    return out
