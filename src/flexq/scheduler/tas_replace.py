"""Kueue's failed node replacement ("hot swap", feature gate ``TASFailedNodeReplacement``): the pods a topology-aware
workload's assignment put on a node that is gone are placed again, within the domain the rest of its pods keep to,
and the workload stays admitted with its assignment rewritten.

As Kueue's ``findReplacementAssignment`` (pkg/cache/scheduler/tas_flavor_snapshot.go):

- the lost node's domain comes off the assignment; its pods are the ones to place (only where the Topology's lowest
  level is ``kubernetes.io/hostname``: Kueue tracks a workload's nodes by their names);
- a node of the rest of the assignment that is gone too (a stale assignment) leaves no replacement;
- the replacement keeps to one domain: where slices are asked and the pods lost leave a slice incomplete, the
  slice-level domain of that slice (all of them there); else, for a ``required`` request, the domain at its level
  where the rest are; else (``preferred``, unconstrained, or no pod left) anywhere the request allows;
- the pods placed are those the Ready checks' ``podSetUpdates`` made of the template (node selectors, tolerations);
- the pods placed there are merged into what is left of the assignment.

Each pod set on the node is replaced in turn, the earlier replacements held for the later ones; one that has no
replacement leaves the workload none (the caller evicts it: Kueue's ``TASFailedNodeReplacementFailFast``; with that
gate off, it tries again later).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from flexq.scheduler.domains import TopologyView, by_node, holding, place, tas_implied
from flexq.scheduler.flavorassigner import topology_request
from flexq.scheduler.model import Admission, FlavorSpec, PodSet, TopologyAssignment, TopologyRequest, Workload
from flexq.scheduler.second_pass import updated
from flexq.scheduler.state import SchedulerState
from flexq.scheduler.tas import topology_view

__all__ = ["names_node", "replacement"]

Held = list[tuple[TopologyAssignment, Mapping[str, int]]]


def names_node(admission: Admission, node: str) -> bool:
    """Whether a topology assignment of ``admission`` puts pods on ``node`` (by its hostname)."""
    return any(ps.topology is not None and by_node(ps.topology.levels) and
               any(values[-1] == node for values, _ in ps.topology.domains) for ps in admission.podsets)


def replacement(state: SchedulerState, now: float, wl: Workload, node: str) -> Admission | None:
    """``wl``'s admission with its pods on ``node`` (gone from the nodes at ``now``) placed on others; None where
    some pod set has no replacement."""
    assert wl.admission is not None
    view = topology_view(state, now)
    cq = state.config.cluster_queues.get(wl.cluster_queue)
    if view is None or cq is None:
        return None
    implied = tas_implied(cq, state.config.flavors)
    podsets = {p.name: p for p in wl.podsets}
    held: dict[str, Held] = {}
    out = []
    for assigned in wl.admission.podsets:
        ta = assigned.topology
        if ta is None or not by_node(ta.levels) or not any(values[-1] == node for values, _ in ta.domains):
            out.append(assigned)
            continue
        podset = updated(wl, podsets[assigned.name])  # as the Ready checks' podSetUpdates make it, as Kueue's
        if isinstance(podset, str):
            return None
        request = topology_request(podset, implied)
        flavor = next((state.config.flavors[f] for f in assigned.flavors.values()
                       if f in state.config.flavors and state.config.flavors[f].topology), None)
        if request is None or flavor is None:
            return None
        merged = _replace(view.plus(flavor.topology, held.get(flavor.topology, [])), flavor, podset, request, ta, node)
        if merged is None:
            return None
        held.setdefault(flavor.topology, []).append(holding(merged, podset))
        out.append(dataclasses.replace(assigned, topology=merged))
    return Admission.of(wl.admission.cluster_queue, tuple(out))


def _replace(view: TopologyView, flavor: FlavorSpec, podset: PodSet, request: TopologyRequest,
             ta: TopologyAssignment, node: str) -> TopologyAssignment | None:
    """``ta`` with its pods on ``node`` placed again (Kueue's ``findReplacementAssignment``); None: nowhere."""
    kept = [(values, count) for values, count in ta.domains if values[-1] != node]
    lost = sum(count for values, count in ta.domains if values[-1] == node)
    by_name = {n.name: n for n in view.nodes if n.ready(view.now)}
    if any(values[-1] not in by_name for values, _ in kept):
        return None  # stale: another node of the assignment is gone too
    paths = [(tuple(by_name[values[-1]].labels.get(level, "") for level in flavor.levels), count)
             for values, count in kept]
    within, ask = _where(flavor.levels, request, paths, lost)
    if within:
        view = dataclasses.replace(view, nodes=[n for n in view.nodes if all(
            n.labels.get(level) == value for level, value in zip(flavor.levels, within, strict=False))])
    where = place(view, flavor, dataclasses.replace(podset, count=lost), ask, (*podset.tolerations,
                                                                                 *flavor.tolerations))
    if isinstance(where, str) or not where.domains:
        return None
    counts: dict[tuple[str, ...], int] = {}
    for values, count in (*kept, *where.domains):
        counts[values] = counts.get(values, 0) + count
    return TopologyAssignment(ta.levels, tuple(sorted(counts.items())))


def _where(levels: Sequence[str], request: TopologyRequest, paths: Sequence[tuple[tuple[str, ...], int]],
           lost: int) -> tuple[tuple[str, ...], TopologyRequest]:
    """The domain (its values from the top level down; empty: anywhere) the replacement keeps to, and what it asks
    there (Kueue's ``requiredReplacementDomain``), the rest of the assignment being at ``paths``."""
    if not paths:
        return (), request  # the node held every pod: placed afresh
    size = max(1, request.slice_size) if request.slice_level else 1
    if request.slice_level and lost % size:
        # A slice left incomplete: its pods go back into its slice-level domain, all of them together.
        depth = levels.index(request.slice_level) + 1
        per_domain: dict[tuple[str, ...], int] = {}
        for path, count in paths:
            per_domain[path[:depth]] = per_domain.get(path[:depth], 0) + count
        broken = next((d for d, count in sorted(per_domain.items()) if count % size), paths[0][0][:depth])
        return broken, TopologyRequest(level=request.slice_level, required=True)
    if request.required and request.level and not request.unconstrained:
        return paths[0][0][:levels.index(request.level) + 1], request
    return (), request
