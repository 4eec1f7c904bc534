"""Topology-aware scheduling over the scheduler's state: the view a cycle places pod sets in, and the check, when a
nominated workload is admitted, that what it was placed on is still free (:mod:`flexq.scheduler.domains` places).

The nodes come from the capacity (:attr:`~flexq.scheduler.state.SchedulerState.nodes`, set by a capacity driver);
what admitted workloads hold is read from their admissions' topology assignments, so a workload reserved earlier in
the same cycle counts at once; what a preempting workload keeps for the cycle is added to a view
(:func:`reserving`), where it goes computed by :func:`placed_without` (its victims gone) or :func:`placed_empty` (it
found none). With no topology-aware flavor configured there is no view, and nothing changes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence

from flexq.scheduler.domains import TopologyNode, TopologyView, UsageOf, domain_base, fits, holding, place, tas_implied
from flexq.scheduler.flavorassigner import Assignment, topology_request
from flexq.scheduler.model import ClusterQueueSpec, FlavorSpec, PodSet, TopologyAssignment, TopologyRequest, Workload
from flexq.scheduler.preemption import Target
from flexq.scheduler.state import SchedulerState
from flexq.scheduler.tas_groups import group_pairs, place_pair

__all__ = ["Held", "delayed_flavors", "placed_empty", "placed_without", "reserving", "topology_check", "topology_fits",
           "topology_view"]


Held = list[tuple[TopologyAssignment, Mapping[str, int]]]
"""Topology assignments held, each with what one of its pods holds (a view's usage)."""


def reserving(view: TopologyView, reserved: Mapping[str, Held]) -> TopologyView:
    """``view`` with ``reserved`` (by Topology: the placements preempting workloads keep during a cycle) held too."""
    if not any(reserved.values()):
        return view
    usage = view.usage

    def more(name: str) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
        return [*usage(name), *reserved.get(name, ())]

    return dataclasses.replace(view, usage=more)


def topology_view(state: SchedulerState, now: float, without: frozenset[str] = frozenset(),
                  owner: str = "") -> TopologyView | None:
    """The nodes at ``now`` and what admitted workloads hold of them, but those ``without`` names (preemption's
    victims, as if gone); None: no topology-aware flavor configured. Nodes a ProvisioningRequest booked for a
    workload other than ``owner`` are left out: their capacity is that workload's."""
    flavors = state.config.flavors
    if not any(f.topology for f in flavors.values()):
        return None
    nodes = [n for n in state.nodes() if _booked(n) in ("", owner)] if state.nodes is not None else []

    def held(key: str) -> bool:
        # A workload that holds no quota any more (evicted, finished) counts for nothing: its pods are on their way
        # out, as Kueue's cache no longer counts a workload once its admission is gone.
        wl = state.workloads.get(key)
        return wl is not None and (wl.admission is None or any(ps.topology for ps in wl.admission.podsets))

    def usage(topology: str) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
        for queue in state.holding.values():
            for wl in queue.values():
                if wl.key not in without:
                    yield from _held(wl, topology, state)

    return TopologyView(nodes, now, held, usage, state.config.balanced_placement)


def _booked(node: TopologyNode) -> str:
    """The workload a node is booked for (a capacity driver's node may say, as ``booked_for``); empty: none."""
    owner = getattr(node, "booked_for", None)
    return owner if isinstance(owner, str) else ""


def delayed_flavors(state: SchedulerState, cq: ClusterQueueSpec) -> frozenset[str]:
    """The topology-aware flavors of ``cq`` that one of its ProvisioningRequest checks applies to (Kueue's
    ``HasProvRequestAdmissionCheck``): a pod set on one reserves quota unplaced, and is placed once the check is
    Ready."""
    provisioning = state.config.provisioning_checks
    if not provisioning:
        return frozenset()
    flavors = state.config.flavors
    return frozenset(f for g in cq.groups for f in g.flavors if f in flavors and flavors[f].topology and any(
        name in provisioning and (only is None or f in only) for name, only in cq.checks))


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
    admitted there since, in the same cycle): all of them together, as Kueue checks a workload's topology usage, each
    pod set with the places of those before it on its topology held."""
    if view is None:
        return True
    podsets = {p.name: p for p in wl.podsets}
    held: dict[str, Held] = {}  # by Topology: the places of the pod sets checked so far
    for result in assignment.podsets:
        if result.topology is None:
            continue
        flavor = next((state.config.flavors[f] for f in result.flavors.values()
                       if f in state.config.flavors and state.config.flavors[f].topology), None)
        if flavor is None:
            continue
        podset = podsets[result.name]
        if not fits(view.plus(flavor.topology, held.get(flavor.topology, [])), flavor, podset, result.topology):
            return False
        held.setdefault(flavor.topology, []).append(holding(result.topology, podset))
    return True



def _changed(back: Mapping[str, Held], topology: str, held: Held) -> UsageOf:
    """What changed since a pod set's leaves were built: the victims' assignments back (``back``, by Topology) and
    the earlier pod sets' ``held`` on ``topology``."""
    extra = list(held)

    def usage(name: str) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
        return [*back.get(name, ()), *(extra if name == topology else ())]

    return usage


def _place_pair(view: TopologyView, changed: UsageOf, flavor: FlavorSpec, pair: tuple[PodSet, PodSet],
                held: Held) -> tuple[TopologyAssignment, TopologyAssignment] | None:
    """Where a pod set group is placed with ``changed`` (victims back, earlier pod sets held) on top of what the
    view's holders hold (None: it is not); where it is, both its pod sets' places are added to ``held``."""
    usage = view.usage

    def more(name: str) -> Iterable[tuple[TopologyAssignment, Mapping[str, int]]]:
        return [*usage(name), *changed(name)]

    where = place_pair(dataclasses.replace(view, usage=more), flavor, *pair)
    if isinstance(where, str):
        return None
    held.extend(holding(placed, podset) for placed, podset in zip(where, pair, strict=True))
    return where


def _tas_flavor(state: SchedulerState, flavors: Iterable[str]) -> FlavorSpec | None:
    specs = state.config.flavors
    return next((specs[f] for f in flavors if f in specs and specs[f].topology and specs[f].levels), None)


Asked = list[tuple[PodSet, TopologyRequest, FlavorSpec]]
Placer = Callable[[Sequence[Target]], dict[str, TopologyAssignment] | None]


def _asked(state: SchedulerState, wl: Workload, assignment: Assignment) -> Asked:
    """``wl``'s pod sets placed on a topology by ``assignment``'s flavors (but those whose placement is delayed),
    with their requests and flavors."""
    cq = state.config.cluster_queues[wl.cluster_queue]
    implied = tas_implied(cq, state.config.flavors)
    asked = []
    for podset, result in zip(wl.podsets, assignment.podsets, strict=False):
        request, flavor = topology_request(podset, implied), _tas_flavor(state, result.flavors.values())
        if request is not None and flavor is not None and not result.delayed:
            # (a partial admission's pod set as many pods as it was assigned)
            asked.append((podset if result.count == podset.count else dataclasses.replace(podset, count=result.count),
                          request, flavor))
    return asked


def topology_check(state: SchedulerState, now: float, wl: Workload, assignment: Assignment,
                   reserved: Mapping[str, Held] | None = None) -> Callable[[Sequence[Target]], bool] | None:
    """What Kueue's preemption asks of a set of victims besides quota, where ``wl``'s pod sets are placed on a
    topology: that with the victims gone every such pod set is placed (the earlier ones held for the later ones),
    on the nodes at ``now`` (``reserved``: what preempting workloads keep this cycle, held too). None where no pod
    set of ``wl`` is placed on a topology."""
    placer = _placer(state, now, wl, assignment, reserved or {})
    if placer is None:
        return None
    return lambda victims: placer(victims) is not None


def placed_without(state: SchedulerState, now: float, wl: Workload, assignment: Assignment, victims: Sequence[Target],
                   reserved: Mapping[str, Held] | None = None) -> Assignment:
    """``assignment`` of a preempting ``wl`` with its topology-aware pod sets placed where they go once ``victims``
    are gone (Kueue computes this placement for a preempting workload and keeps it for the rest of the cycle); as it
    is where they are not placed, or none is topology-aware."""
    placer = _placer(state, now, wl, assignment, reserved or {})
    where = placer(victims) if placer is not None else None
    return _with_placements(assignment, where) if where else assignment


def placed_empty(state: SchedulerState, view: TopologyView, wl: Workload, assignment: Assignment) -> Assignment:
    """``assignment`` of a preempting ``wl`` that found nobody to preempt, its topology-aware pod sets placed as if
    no other workload held the nodes (Kueue's ``simulateEmpty``: the placement it keeps for the cycle so that a
    lower-priority workload does not take what it waits for); as it is where they are not placed."""
    asked = _asked(state, wl, assignment)
    if not asked:
        return assignment
    pairs = group_pairs([podset for podset, _, _ in asked], lambda i: asked[i][2].name)
    held: Held = []
    where: dict[str, TopologyAssignment] = {}
    for i, (podset, request, flavor) in enumerate(asked):
        mine = dataclasses.replace(view, usage=_changed({}, flavor.topology, held))  # only its earlier pod sets held
        if i in pairs:
            if pairs[i] > i:
                both = place_pair(mine, flavor, podset, asked[pairs[i]][0])
                if isinstance(both, str):
                    return assignment
                pair = (podset, asked[pairs[i]][0])
                held.extend(holding(placed, ps) for placed, ps in zip(both, pair, strict=True))
                where.update({ps.name: placed for placed, ps in zip(both, pair, strict=True)})
            continue
        placed = place(mine, flavor, podset, request, (*podset.tolerations, *flavor.tolerations))
        if isinstance(placed, str):
            return assignment
        held.append(holding(placed, podset))
        where[podset.name] = placed
    return _with_placements(assignment, where)


def _with_placements(assignment: Assignment, where: Mapping[str, TopologyAssignment]) -> Assignment:
    return dataclasses.replace(assignment, podsets=tuple(
        dataclasses.replace(result, topology=where[result.name]) if result.name in where else result
        for result in assignment.podsets))


def _placer(state: SchedulerState, now: float, wl: Workload, assignment: Assignment,
            reserved: Mapping[str, Held]) -> Placer | None:
    """Where ``wl``'s topology-aware pod sets are placed once a set of victims is gone, by pod set (None: not all of
    them are), on the nodes at ``now`` with ``reserved`` held too; None where none is topology-aware."""
    asked = _asked(state, wl, assignment)
    if not asked:
        return None

    view = topology_view(state, now)
    assert view is not None
    view = reserving(view, reserved)
    pairs = group_pairs([podset for podset, _, _ in asked], lambda i: asked[i][2].name)
    bases = [None if i in pairs else domain_base(view, flavor, podset, (*podset.tolerations, *flavor.tolerations))
             for i, (podset, _, flavor) in enumerate(asked)]

    memo: dict[tuple[str, str], Held] = {}

    def negated(wl: Workload, topology: str) -> Held:
        """What ``wl`` holds on ``topology``, with negative requests (put back, it frees its place)."""
        key = (wl.key, topology)
        if key not in memo:
            memo[key] = [(where, {r: -v for r, v in per_pod.items()}) for where, per_pod in _held(wl, topology, state)]
        return memo[key]

    def placed(victims: Sequence[Target]) -> dict[str, TopologyAssignment] | None:
        # Each pod set's leaves were built once, with every holder's assignment off: the victims' go back on (as
        # negative usage), the earlier pod sets' come off, in whole numbers, so the free capacity is the same as a
        # tree built without the victims.
        gone = [wl for key, wl in {t.workload.key: t.workload for t in victims}.items()
                if key in state.holding.get(wl.cluster_queue, {})]  # as the view without them leaves out
        back: dict[str, Held] = {topology: [h for wl in gone for h in negated(wl, topology)]
                                 for topology in {flavor.topology for _, _, flavor in asked}}
        held: Held = []
        out: dict[str, TopologyAssignment] = {}
        for i, ((podset, request, flavor), base) in enumerate(zip(asked, bases, strict=True)):
            if i in pairs:
                if pairs[i] > i:
                    pair = (podset, asked[pairs[i]][0])
                    both = _place_pair(view, _changed(back, flavor.topology, held), flavor, pair, held)
                    if both is None:
                        return None
                    out.update({ps.name: where for where, ps in zip(both, pair, strict=True)})
                continue
            changed = dataclasses.replace(view, usage=_changed(back, flavor.topology, held))
            where = place(changed, flavor, podset, request, (*podset.tolerations, *flavor.tolerations), base=base)
            if isinstance(where, str):
                return None
            held.append(holding(where, podset))
            out[podset.name] = where
        return out

    return placed
