"""Failed node replacement (Kueue's ``TASFailedNodeReplacement``, restated from the "workload with unhealthyNode
annotation; second pass" cases of its ``pkg/scheduler/scheduler_tas_test.go``): Kueue's nodes x1 (block b1, rack r1),
x2-x4 (b1, r2), x5 (b2, r1) and x6 (b2, r2), one cpu each, plus x0, which the workload was placed on and which is then
lost. Each case starts from Kueue's assignment; the pods of x0 are placed again within the domain the rest keep to,
or nowhere (the caller evicts)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.model import (
    FlavorSpec,
    PodSet,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import CPU, Node, node, tas_queue, tas_scheduler

BLOCK, RACK = "tas-block", "tas-rack"
KUEUE_NODES = {"x1": ("b1", "r1"), "x2": ("b1", "r2"), "x3": ("b1", "r2"), "x4": ("b1", "r2"), "x5": ("b2", "r1"),
               "x6": ("b2", "r2")}


def _node(name: str, block: str, rack: str, cpus: int = 1) -> Node:
    return node(name, {BLOCK: block, RACK: rack, HOSTNAME: name}, cpus, pods=110_000)


def _scheduler() -> tuple[Scheduler, list[Node]]:
    """Kueue's nodes, and x0 (8 cpus, its own rack) for the first placement, which each case then sets as Kueue's
    case starts."""
    flavor = FlavorSpec("tas", {}, topology="three-level", levels=(BLOCK, RACK, HOSTNAME))
    nodes = [_node("x0", "b0", "r0", cpus=8), *(_node(name, *where) for name, where in KUEUE_NODES.items())]
    return tas_scheduler(nodes, [flavor], [tas_queue("cq", ["tas"], 50)]), nodes


def _hosts(wl: Workload) -> dict[str, dict[str, int]]:
    assert wl.admission is not None
    return {ps.name: {values[-1]: count for values, count in ps.topology.domains}
            for ps in wl.admission.podsets if ps.topology is not None}


@dataclass(frozen=True)
class Case:
    podsets: tuple[PodSet, ...]
    placed: Mapping[str, Mapping[str, int]]
    """The assignment Kueue's case starts from (hosts by pod set)."""
    replaced: Mapping[str, Mapping[str, int]] | None = None
    """The assignment after x0 is lost (None: no replacement)."""
    also_lost: tuple[str, ...] = ()
    """Other nodes gone too (their pods not yet replaced)."""


def _ps(name: str, pods: int, request: TopologyRequest, milli: int = CPU) -> PodSet:
    return PodSet(name, pods, {"cpu": milli}, topology=request)


PREFERRED_HOST, REQUIRED_RACK = TopologyRequest(HOSTNAME), TopologyRequest(RACK, required=True)
CASES = {
    # "baseline scenario": one pod, preferred hostname: the first free host by Kueue's order takes it.
    "baseline": Case((_ps("one", 1, PREFERRED_HOST),), {"one": {"x0": 1}}, {"one": {"x1": 1}}),
    # "preferred; fit in different rack": two pods of half a cpu; x1 has room for the second.
    "preferred; fit beside the other pod": Case((_ps("one", 2, TopologyRequest(RACK), milli=500),),
                                                {"one": {"x0": 1, "x1": 1}}, {"one": {"x1": 2}}),
    # "preferred; no fit; FailFast": three cpus fit no host: no replacement (FailFast evicts).
    "preferred; no fit": Case((_ps("one", 1, TopologyRequest(RACK), milli=3 * CPU),), {"one": {"x0": 1}}),
    # "required rack; fit": x2's rack (b1/r2) keeps the pods; x3 takes x0's.
    "required rack; fit": Case((_ps("one", 2, REQUIRED_RACK),), {"one": {"x0": 1, "x2": 1}},
                               {"one": {"x2": 1, "x3": 1}}),
    # "required rack for a single node; fit": x0 held every pod: placed afresh, in any rack.
    "required rack, single node": Case((_ps("one", 1, REQUIRED_RACK),), {"one": {"x0": 1}}, {"one": {"x1": 1}}),
    # "required rack; no fit": x1's rack has no other host.
    "required rack; no fit": Case((_ps("one", 2, REQUIRED_RACK),), {"one": {"x0": 1, "x1": 1}}),
    # "two podsets": only the pod set on x0 moves, and not onto x1, which the other holds.
    "two podsets": Case((_ps("one", 1, PREFERRED_HOST), _ps("two", 1, PREFERRED_HOST)),
                        {"one": {"x0": 1}, "two": {"x1": 1}}, {"one": {"x2": 1}, "two": {"x1": 1}}),
    # Kueue's IsTopologyAssignmentStale: another node of the assignment is gone too: no replacement.
    "stale assignment": Case((_ps("one", 2, REQUIRED_RACK),), {"one": {"x0": 1, "x2": 1}}, also_lost=("x2",)),
    # A slice left incomplete (Kueue's findIncompleteSliceDomain): x0's pod goes back into its slice's rack (x3),
    # not to x1, the tightest fit in the block without slices.
    "slice left incomplete": Case((_ps("one", 2, TopologyRequest(BLOCK, required=True, slice_level=RACK,
                                                                 slice_size=2)),),
                                  {"one": {"x0": 1, "x2": 1}}, {"one": {"x2": 1, "x3": 1}}),
    # Of the slices left, x1's (rack r1) is whole; the one x0 broke is r2's: its pod goes back beside x2's.
    "the broken slice among whole ones": Case((_ps("one", 4, TopologyRequest(BLOCK, required=True, slice_level=RACK,
                                                                             slice_size=2), milli=500),),
                                              {"one": {"x0": 1, "x1": 2, "x2": 1}}, {"one": {"x1": 2, "x2": 2}}),
    # A slice is whole by the pods of its rack, on however many hosts: r2's two (x2 and x3) make one; the slice x0
    # broke is b2/r1's, whose pod is on x5 alone: x0's pod goes back beside it.
    "a whole slice on two hosts": Case((_ps("one", 4, TopologyRequest(BLOCK, required=True, slice_level=RACK,
                                                                      slice_size=2), milli=500),),
                                       {"one": {"x0": 1, "x2": 1, "x3": 1, "x5": 1}},
                                       {"one": {"x2": 1, "x3": 1, "x5": 2}}),
    # Slices of one pod are never left incomplete: x0's pod goes anywhere in the block the rest keep to.
    "slices of one pod": Case((_ps("one", 2, TopologyRequest(BLOCK, required=True, slice_level=RACK, slice_size=1)),),
                              {"one": {"x0": 1, "x2": 1}}, {"one": {"x1": 1, "x2": 1}}),
    # x0 held a whole slice: no slice is left incomplete, so the slice goes anywhere in the block the rest keep to
    # (rack r2's hosts), not back to the rack of the slice that is left.
    "a whole slice lost": Case((_ps("one", 4, TopologyRequest(BLOCK, required=True, slice_level=RACK, slice_size=2),
                                    milli=500),),
                               {"one": {"x0": 2, "x1": 2}}, {"one": {"x1": 2, "x2": 2}}),
    # The pod set on x0 second: the first, untouched, is kept as it is, and the second placed again.
    "the lost node's pod set second": Case((_ps("one", 1, PREFERRED_HOST), _ps("two", 1, PREFERRED_HOST)),
                                           {"one": {"x1": 1}, "two": {"x0": 1}}, {"one": {"x1": 1}, "two": {"x2": 1}}),
    # No topology request: the ClusterQueue's flavors are all topology-aware, which implies one (unconstrained).
    "an implied request": Case((PodSet("one", 1, {"cpu": CPU}),), {"one": {"x0": 1}}, {"one": {"x1": 1}}),
    # Two pod sets both on x0: each placed again, the second beside what the first took.
    "two podsets on the lost node": Case((_ps("one", 1, PREFERRED_HOST), _ps("two", 1, PREFERRED_HOST)),
                                         {"one": {"x0": 1}, "two": {"x0": 1}}, {"one": {"x1": 1}, "two": {"x2": 1}}),
}


def _set(wl: Workload, placed: Mapping[str, Mapping[str, int]]) -> None:
    """``wl``'s admission with Kueue's starting assignment (hosts by pod set)."""
    assert wl.admission is not None
    wl.admission = dataclasses.replace(wl.admission, podsets=tuple(
        dataclasses.replace(ps, topology=TopologyAssignment((HOSTNAME,), tuple(
            ((host,), count) for host, count in sorted(placed[ps.name].items())))) for ps in wl.admission.podsets))


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_lost_nodes_pods_are_placed_again_in_their_domain(case: Case) -> None:
    s, nodes = _scheduler()
    wl = Workload("default", "foo", "lq", "cq", case.podsets, uid="foo")
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert wl.state is WorkloadState.ADMITTED and wl.admission is not None
    _set(wl, case.placed)
    before = wl.admission
    nodes[:] = [n for n in nodes if n.name not in ("x0", *case.also_lost)]
    replaced = s.replace_node(wl.key, "x0", 10.0)
    assert replaced is (case.replaced is not None)
    assert wl.state is WorkloadState.ADMITTED
    assert _hosts(wl) == (case.replaced if case.replaced is not None else case.placed)
    assert (wl.admission.cluster_queue, wl.admission.total) == ("cq", before.total), "the same quota"


def test_a_node_the_assignment_does_not_name_is_no_replacement() -> None:
    s, _ = _scheduler()
    wl = Workload("default", "foo", "lq", "cq", (_ps("one", 1, PREFERRED_HOST),), uid="foo")
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert not s.replace_node(wl.key, "x6", 10.0)
    assert _hosts(wl) == {"one": {"x1": 1}}, "as placed (the tightest host)"
