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

As Kueue's ``findTopologyAssignment``, the pods placed are those the Ready checks' ``podSetUpdates`` made of the
template (:func:`updated`): their node selectors are matched and their tolerations tolerate the nodes' taints, so a
check that names the nodes it provisioned (a ``nodeSelector`` from a ProvisioningRequestConfig's
``podSetUpdates``) puts the pods on those nodes.
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
    PodSetUpdate,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.state import SchedulerState
from flexq.scheduler.tas import topology_view
from flexq.scheduler.tas_groups import group_pairs, place_pair

__all__ = ["FAILED_TO_START", "PENDING_MESSAGE", "backoff", "check_updates", "needs_second_pass", "pending_delayed",
           "place_delayed", "queue", "start_conflict", "updated", "with_updates"]

FAILED_TO_START: Final = "FailedToStart"
"""The Finished reason of a workload whose job could not be started on its admission (Kueue's
``FailedToStartFinishedReason``): the checks' ``podSetUpdates`` conflict."""

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


def check_updates(wl: Workload, podset: str) -> list[tuple[str, PodSetUpdate]]:
    """The ``podSetUpdates`` ``wl``'s Ready checks ask of pod set ``podset``: (check, update), in the checks' order."""
    return [(check, update) for check, state in wl.checks.items() if state is CheckState.READY
            if (update := wl.pod_set_updates.get(check, {}).get(podset)) is not None]


def with_updates(base: PodSetUpdate, updates: list[tuple[str, PodSetUpdate]]) -> PodSetUpdate | tuple[str, str]:
    """``base`` with each of ``updates`` merged in, in order; or the check whose update conflicts, and why."""
    for check, update in updates:
        merged = base.merged(update)
        if isinstance(merged, str):
            return check, merged
        base = merged
    return base


def updated(wl: Workload, podset: PodSet) -> PodSet | str:
    """``podset`` as the ``podSetUpdates`` of ``wl``'s Ready checks make it (Kueue's ``PodSetInfo.Merge`` of each,
    in the checks' order): their node selectors added to its own, their tolerations to its own (each once); or
    Kueue's message where two disagree on a key."""
    ours = check_updates(wl, podset.name)
    if not ours:
        return podset
    info = with_updates(PodSetUpdate(node_selector=podset.node_selector, tolerations=podset.tolerations), ours)
    if isinstance(info, tuple):
        return f"invalid podSetUpdate for PodSet {podset.name}, error: {info[1]}"
    return dataclasses.replace(podset, node_selector=info.node_selector, tolerations=info.tolerations)


def start_conflict(wl: Workload, flavors: Mapping[str, FlavorSpec]) -> str | None:
    """Why ``wl``'s job cannot start on its admission (Kueue's job reconciler: a permanent error, and the workload
    finishes ``FailedToStart``): a Ready check's ``podSetUpdates`` disagree, on a key, with another check's or with
    what the pod set's pods get from their template and flavors. None: it can start."""
    if wl.admission is None:
        return None
    podsets = {p.name: p for p in wl.podsets}
    for assigned in wl.admission.podsets:
        ours, podset = check_updates(wl, assigned.name), podsets.get(assigned.name)
        if not ours or podset is None:
            continue
        # (tolerations are appended, never in conflict: the node selector is what may clash)
        selector = {k: v for f in sorted(set(assigned.flavors.values())) if f in flavors
                    for k, v in flavors[f].node_labels.items()}
        info = with_updates(PodSetUpdate(node_selector={**podset.node_selector, **selector}), ours)
        if isinstance(info, tuple):
            return f'in admission check "{info[0]}": {info[1]}'
    return None


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
    # what it asks of each delayed pod set: its pod set as the checks updated it, with as many pods as it reserved
    # (partial admission)
    asked: dict[int, PodSet] = {}
    for i, ps in enumerate(out):
        if ps.delayed is DelayedTopology.PENDING and ps.topology is None and ps.name in podsets:
            podset = updated(wl, dataclasses.replace(podsets[ps.name], count=ps.count))
            if isinstance(podset, str):
                return f"couldn't assign flavors to pod set {ps.name}: {podset}"
            asked[i] = podset
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
