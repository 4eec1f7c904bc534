"""Kueue's delayed topology request: a pod set on a topology-aware flavor that a ProvisioningRequest check applies to
reserves quota unplaced (``delayedTopologyRequest: Pending``), since its nodes do not exist until the request is
provisioned. Once every admission check is Ready, a second scheduling pass places it on the nodes then there
(``Ready``, with its ``topologyAssignment``), and only then is the workload admitted.

As Kueue's second-pass queue: the second pass is first tried a second after the checks turned Ready, and one that
finds no placement keeps the quota, says why (a ``SecondPassFailed`` Warning) and is tried again after a backoff
that doubles (2 s, 4 s ... at most 30 s). Nothing else gives up on it: a ProvisioningRequest's booking that expires
unused fails the check (Retry), which evicts the workload as any Retry does.

Nodes a ProvisioningRequest booked for another workload are not the workload's to use
(:func:`~flexq.scheduler.tas.topology_view`); those booked for it are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final

from flexq.scheduler.domains import TopologyView, holding, place, tas_implied
from flexq.scheduler.flavorassigner import topology_request
from flexq.scheduler.model import (
    Admission,
    CheckState,
    DelayedTopology,
    FlavorSpec,
    PodSet,
    PodSetAssignment,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.state import SchedulerState
from flexq.scheduler.tas import topology_view
from flexq.scheduler.tas_groups import group_pairs, place_pair

__all__ = ["PENDING_MESSAGE", "backoff", "needs_second_pass", "pending_delayed", "place_delayed", "queue"]

PENDING_MESSAGE: Final = "There are pending delayed topology requests"
"""Kueue's Admitted condition message (reason ``PendingDelayedTopologyRequests``) while checks are Ready and a pod
set is not placed yet."""
FIRST_DELAY: Final = 1.0
MAX_DELAY: Final = 30.0


def backoff(iteration: int) -> float:
    """Seconds before the ``iteration``-th second pass (Kueue's: 1 s doubling, at most 30 s)."""
    return min(FIRST_DELAY * 2.0 ** (iteration - 1), MAX_DELAY)


def pending_delayed(wl: Workload) -> bool:
    """Kueue's ``HasTopologyAssignmentsPending``: a pod set of its admission waits for its delayed placement."""
    return wl.admission is not None and any(ps.topology is None and ps.delayed is DelayedTopology.PENDING
                                            for ps in wl.admission.podsets)


def needs_second_pass(wl: Workload) -> bool:
    """Kueue's ``NeedsSecondPass`` for a delayed topology request: it holds quota (not being evicted), has admission
    checks, all Ready, is not admitted, and a pod set waits for its placement."""
    return (wl.state is WorkloadState.QUOTA_RESERVED and not wl.evicting and bool(wl.checks)
            and all(s is CheckState.READY for s in wl.checks.values()) and pending_delayed(wl))


def queue(state: SchedulerState, key: str, now: float, iteration: int = 1) -> None:
    """Try ``key``'s ``iteration``-th second pass after its backoff."""
    state.second_pass[key] = (now + backoff(iteration), iteration)


def _flavor(state: SchedulerState, ps: PodSetAssignment) -> FlavorSpec | None:
    specs = state.config.flavors
    return next((specs[f] for f in ps.flavors.values() if f in specs and specs[f].topology and specs[f].levels),
                None)


def place_delayed(state: SchedulerState, wl: Workload, now: float) -> Admission | str:
    """``wl``'s admission with its delayed pod sets placed on the nodes at ``now`` (``Ready``; a pod set group's two
    together), or why one of them cannot be (the flavor assigner's message)."""
    assert wl.admission is not None
    cq = state.config.cluster_queues.get(wl.cluster_queue)
    view = topology_view(state, now, owner=wl.key)
    implied = cq is not None and tas_implied(cq, state.config.flavors)
    podsets = {p.name: p for p in wl.podsets}
    out = list(wl.admission.podsets)
    # what it asks of each delayed pod set: its pod set, with as many pods as it reserved (partial admission)
    asked = {i: dataclasses.replace(podsets[ps.name], count=ps.count) for i, ps in enumerate(out)
             if ps.delayed is DelayedTopology.PENDING and ps.topology is None and ps.name in podsets}
    flavors = {i: _flavor(state, out[i]) for i in asked}
    indexed = list(asked)
    names = [f.name if (f := flavors[i]) is not None else None for i in indexed]
    grouped = group_pairs([asked[i] for i in indexed], names.__getitem__)
    pairs = {indexed[a]: indexed[b] for a, b in grouped.items()}
    held: list[tuple[TopologyAssignment, Mapping[str, int]]] = []
    for i, podset in asked.items():
        if out[i].topology is not None:
            continue  # placed with its group's first pod set
        flavor, request = flavors[i], topology_request(podset, implied)
        if view is None or flavor is None or request is None:
            out[i] = dataclasses.replace(out[i], delayed=DelayedTopology.READY)  # nothing to place it by
            continue
        pair = (i, pairs[i]) if i in pairs else (i,)
        where = _place(view.plus(flavor.topology, held), flavor, [asked[k] for k in pair], request)
        if isinstance(where, str):
            return f"couldn't assign flavors to pod set {out[i].name}: {where}"
        for k, placed in zip(pair, where, strict=True):
            held.append(holding(placed, asked[k]))
            out[k] = dataclasses.replace(out[k], topology=placed, delayed=DelayedTopology.READY)
    return Admission.of(wl.admission.cluster_queue, tuple(out))


def _place(view: TopologyView, flavor: FlavorSpec, podsets: list[PodSet],
           request: TopologyRequest) -> tuple[TopologyAssignment, ...] | str:
    """Where ``podsets`` go: one pod set, or a group's two together (in their order)."""
    if len(podsets) == 1:
        (podset,) = podsets
        where = place(view, flavor, podset, request, (*podset.tolerations, *flavor.tolerations))
        return where if isinstance(where, str) else (where,)
    first, second = podsets
    return place_pair(view, flavor, first, second)
