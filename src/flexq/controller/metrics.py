"""What the live server measures, for ``/metrics``: Kueue's metrics by their names, and flexq's own.

:class:`Tally` counts what happened (from the scheduler's events, as they are written); :func:`sample` reads where
things stand (queues, quota, node pools) from the controller's state. Both are plain data: the server renders them
in Prometheus' text format (:mod:`flexq.server.prometheus`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeVar

from flexq.controller.steps import StepStats
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import WorkloadState

if TYPE_CHECKING:
    from flexq.capacity.driver import CapacityDriver
    from flexq.forecast import Forecast
    from flexq.scheduler.scheduler import Scheduler

__all__ = ["WAIT_BUCKETS", "Sample", "Tally", "sample"]

K = TypeVar("K")

WAIT_BUCKETS: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
                       8192.0, 16384.0, 32768.0, 65536.0, 131072.0, 262144.0, 524288.0, 1048576.0)
"""Kueue's admission wait buckets (seconds: 1, 2, 4, ... about 12 days)."""


@dataclass
class Tally:
    """Counters since the server started, by ClusterQueue (and reason or flavor)."""

    quota_reserved: dict[str, int] = field(default_factory=dict)
    admitted: dict[str, int] = field(default_factory=dict)
    evicted: dict[tuple[str, str], int] = field(default_factory=dict)
    preempted: dict[tuple[str, str], int] = field(default_factory=dict)
    """(preempting ClusterQueue, reason)"""
    races_won: dict[tuple[str, str], int] = field(default_factory=dict)
    """(ClusterQueue, flavor): racing workloads that started on that flavor."""
    waits: dict[str, list[float]] = field(default_factory=dict)
    """Admission waits (seconds from creation or requeue to admission), by ClusterQueue."""
    steps: StepStats = field(default_factory=StepStats)
    """The controller's steps."""

    def count(self, events: Iterable[Event], variants: Container[str], since: Callable[[str], float | None],
              cq_of: Callable[[str], str]) -> None:
        """Count ``events``, but not those of ``variants`` (a race is its workload's business). ``since``: when a
        workload (re)entered its queue; ``cq_of``: a workload's ClusterQueue."""
        for event in events:
            if event.workload in variants:
                continue
            cq = event.cluster_queue
            if event.kind is EventKind.QUOTA_RESERVED:
                _add(self.quota_reserved, cq)
            elif event.kind is EventKind.ADMITTED:
                _add(self.admitted, cq)
                queued = since(event.workload)
                if queued is not None:
                    self.waits.setdefault(cq, []).append(max(0.0, event.t - queued))
                flavor = event.extra.get("flavor")
                if isinstance(flavor, str):
                    _add(self.races_won, (cq, flavor))
            elif event.kind is EventKind.EVICTED:
                _add(self.evicted, (cq, str(event.extra.get("cause", "Evicted"))))
            elif event.kind is EventKind.PREEMPTED:
                preemptor = str(event.extra.get("preemptor", ""))
                _add(self.preempted, (cq_of(preemptor) or cq, str(event.extra.get("preemptionReason", "Preempted"))))


def _add(counter: dict[K, int], key: K) -> None:
    counter[key] = counter.get(key, 0) + 1


@dataclass(frozen=True)
class Sample:
    """Where things stand at one moment."""

    pending: dict[tuple[str, str], int]
    """(ClusterQueue, "active" | "inadmissible") -> workloads"""
    reserving: dict[str, int]
    admitted: dict[str, int]
    cohorts: dict[str, str]
    usage: dict[tuple[str, str, str], int]
    """(ClusterQueue, flavor, resource) -> thousandths in use"""
    nominal: dict[tuple[str, str, str], int]
    queue_status: dict[str, str]
    """ClusterQueue -> "active" | "pending" """
    nodes: dict[tuple[str, str], int]
    """(node pool, "booting" | "idle" | "busy") -> nodes"""
    pool_hourly: dict[str, float]
    provisioning: dict[str, int]
    """(node pool) -> ProvisioningRequests in flight"""
    cost: dict[str, float]
    """ClusterQueue -> USD spent by its workloads so far"""
    estimated_waits: dict[str, list[float]] = field(default_factory=dict)
    """ClusterQueue -> the forecast waits (seconds from now) of its waiting workloads that have a start foreseen"""
    unforeseen: dict[str, int] = field(default_factory=dict)
    """ClusterQueue -> its waiting workloads with no start foreseen"""
    forecasts: tuple[int, float, float] = (0, 0.0, 0.0)
    """Forecasts made since the start, the CPU seconds of the last one, and of all of them"""


def sample(scheduler: Scheduler, driver: CapacityDriver | None, foreseen: Iterable[Forecast],
           forecasts: tuple[int, float, float], now: float) -> Sample:
    """Read where things stand (call under the controller's lock): the scheduler's queues and quota, the capacity
    driver's nodes and requests, the last forecasts, and ``forecasts`` (how many were made, the CPU seconds of the
    last one and of all)."""
    pending: dict[tuple[str, str], int] = {}
    reserving: dict[str, int] = {}
    admitted: dict[str, int] = {}
    cost: dict[str, float] = {}
    for wl in scheduler.workloads():
        cq = wl.cluster_queue
        if wl.parent:
            continue
        if driver is not None and cq:
            cost[cq] = cost.get(cq, 0.0) + driver.cost(wl.key)
        if wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
            continue
        if wl.state is WorkloadState.PENDING:
            active = wl.key in scheduler.variants or (scheduler.waiting(wl))
            kind = "active" if active else "inadmissible"
            pending[(cq, kind)] = pending.get((cq, kind), 0) + 1
        else:
            reserving[cq] = reserving.get(cq, 0) + 1
            if wl.state is WorkloadState.ADMITTED:
                admitted[cq] = admitted.get(cq, 0) + 1
    usage: dict[tuple[str, str, str], int] = {}
    nominal: dict[tuple[str, str, str], int] = {}
    cohorts: dict[str, str] = {}
    queue_status: dict[str, str] = {}
    for name, spec in scheduler.config.cluster_queues.items():
        cohorts[name] = spec.cohort or ""
        queue_status[name] = "active" if spec.active else "pending"
        if not scheduler.has_cluster_queue(name):
            continue
        for group in spec.groups:
            for (flavor, resource), quota in group.quotas.items():
                nominal[(name, flavor, resource)] = quota.nominal
                usage[(name, flavor, resource)] = scheduler.usage(name, (flavor, resource))
    nodes: dict[tuple[str, str], int] = {}
    hourly: dict[str, float] = {}
    provisioning: dict[str, int] = {}
    if driver is not None:
        for pool in driver.cluster.pools.values():
            hourly[pool.name] = pool.hourly
        for name, counted in driver.cluster.census(now).items():
            nodes.update({(name, "booting"): counted.booting, (name, "idle"): counted.idle,
                          (name, "busy"): counted.busy})
        for key, (_check, _name, asked) in driver.requests.items():
            if asked and key not in driver.running:  # answered and started: no longer in flight
                provisioning[asked] = provisioning.get(asked, 0) + 1
    waits, unforeseen = _forecast_waits(foreseen, now)
    return Sample(pending, reserving, admitted, cohorts, usage, nominal, queue_status, nodes, hourly, provisioning,
                  cost, waits, unforeseen, forecasts)


def _forecast_waits(foreseen: Iterable[Forecast], now: float) -> tuple[dict[str, list[float]], dict[str, int]]:
    """By ClusterQueue: the forecast waits from ``now`` of the workloads with a start foreseen, and how many have
    none."""
    waits: dict[str, list[float]] = {}
    unforeseen: dict[str, int] = {}
    for f in foreseen:
        if f.start is None:
            unforeseen[f.cluster_queue] = unforeseen.get(f.cluster_queue, 0) + 1
        else:
            waits.setdefault(f.cluster_queue, []).append(max(0.0, f.start - now))
    return waits, unforeseen

