"""Topology-aware scheduling over the scheduler's state: the view a cycle places pod sets in, and the check, when a
nominated workload is admitted, that what it was placed on is still free (:mod:`flexq.scheduler.domains` places).

The nodes come from the capacity (:attr:`~flexq.scheduler.state.SchedulerState.nodes`, set by a capacity driver);
what admitted workloads hold is read from their admissions' topology assignments, so a workload reserved earlier in
the same cycle counts at once. With no topology-aware flavor configured there is no view, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from flexq.scheduler.domains import TopologyView, fits
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.model import TopologyAssignment, Workload
from flexq.scheduler.state import SchedulerState

__all__ = ["topology_fits", "topology_view"]


def topology_view(state: SchedulerState, now: float) -> TopologyView | None:
    """The nodes at ``now`` and what admitted workloads hold of them (None: no topology-aware flavor configured)."""
    flavors = state.config.flavors
    if not any(f.topology for f in flavors.values()):
        return None
    nodes = list(state.nodes()) if state.nodes is not None else []

    def held(key: str) -> bool:
        wl = state.workloads.get(key)
        return wl is not None and wl.admission is not None and any(ps.topology for ps in wl.admission.podsets)

    def usage(topology: str) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
        for queue in state.holding.values():
            for wl in queue.values():
                yield from _held(wl, topology, state)

    return TopologyView(nodes, now, held, usage)


def _held(wl: Workload, topology: str, state: SchedulerState) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
    if wl.admission is None:
        return
    requests = {ps.name: ps.requests for ps in wl.podsets}
    for ps in wl.admission.podsets:
        if ps.topology is None:
            continue
        if any(state.config.flavors[f].topology == topology for f in ps.flavors.values() if f in state.config.flavors):
            yield ps.topology, {**requests.get(ps.name, {}), "pods": 1000}


def topology_fits(state: SchedulerState, view: TopologyView | None, wl: Workload, assignment: Assignment) -> bool:
    """Whether the domains ``wl``'s pod sets were placed on at nomination still hold them (others may have been
    admitted there since, in the same cycle)."""
    if view is None:
        return True
    podsets = {p.name: p for p in wl.podsets}
    for result in assignment.podsets:
        if result.topology is None:
            continue
        flavor = next((state.config.flavors[f] for f in result.flavors.values()
                       if f in state.config.flavors and state.config.flavors[f].topology), None)
        if flavor is not None and not fits(view, flavor, podsets[result.name], result.topology):
            return False
    return True
