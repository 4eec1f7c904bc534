"""What the live server measures, for ``/metrics``: Kueue's metrics by their names, and flexq's own.

:class:`Tally` counts what happened (Kueue's counters, heard from the control plane's events as they are told, by
:class:`~flexq.control.metrics.KueueCounts`, the simulator's too; and the controller's steps); :func:`sample` reads
where things stand (Kueue's gauges from the plane, as the simulator reads them; node pools, requests, forecasts).
Both are plain data: the server renders them in Prometheus' text format (:mod:`flexq.server.prometheus`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from flexq.control import KueueCounts, KueueState, kueue_state
from flexq.controller.steps import StepStats

if TYPE_CHECKING:
    from flexq.control import ControlPlane
    from flexq.forecast import Forecast

__all__ = ["Sample", "Tally", "sample"]


@dataclass
class Tally:
    """Counters since the server started."""

    kueue: KueueCounts = field(default_factory=KueueCounts)
    """Kueue's counters and histograms, and the races won."""
    steps: StepStats = field(default_factory=StepStats)
    """The controller's steps."""

    def snapshot(self) -> Tally:
        """A copy to read while this one goes on counting (:meth:`KueueCounts.snapshot`)."""
        return Tally(self.kueue.snapshot(), copy.deepcopy(self.steps))


@dataclass(frozen=True)
class Sample:
    """Where things stand at one moment."""

    kueue: KueueState
    """Kueue's gauges."""
    nodes: dict[tuple[str, str], int]
    """(node pool, "booting" | "idle" | "busy" | "not_ready") -> nodes"""
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
    replica_role: str = "standalone"
    """Kueue's ``replica_role``: ``leader`` or ``follower`` where servers share a store and elect a leader,
    ``standalone`` where one server runs alone."""


def sample(plane: ControlPlane, foreseen: Iterable[Forecast], forecasts: tuple[int, float, float],
           now: float) -> Sample:
    """Read where things stand (call under the controller's lock): Kueue's gauges from the control plane, the
    capacity driver's nodes and requests, the last forecasts, and ``forecasts`` (how many were made, the CPU seconds
    of the last one and of all)."""
    driver = plane.driver
    cost: dict[str, float] = {}
    if driver is not None:
        for wl in plane.scheduler.workloads():
            if not wl.parent and wl.cluster_queue:
                cost[wl.cluster_queue] = cost.get(wl.cluster_queue, 0.0) + driver.cost(wl.key)
    nodes: dict[tuple[str, str], int] = {}
    hourly: dict[str, float] = {}
    provisioning: dict[str, int] = {}
    if driver is not None:
        for pool in driver.cluster.pools.values():
            hourly[pool.name] = pool.hourly
        for name, counted in driver.cluster.census(now).items():
            nodes.update({(name, "booting"): counted.booting, (name, "idle"): counted.idle,
                          (name, "busy"): counted.busy, (name, "not_ready"): counted.not_ready})
        for key, (_check, _name, asked) in driver.requests.items():
            if asked and key not in driver.running:  # answered and started: no longer in flight
                provisioning[asked] = provisioning.get(asked, 0) + 1
    waits, unforeseen = _forecast_waits(foreseen, now)
    return Sample(kueue_state(plane), nodes, hourly, provisioning, cost, waits, unforeseen, forecasts)


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

