"""Failed node replacement (Kueue's ``TASFailedNodeReplacement``, restated from the "workload with unhealthyNode
annotation; second pass" cases of its ``pkg/scheduler/scheduler_tas_test.go``): Kueue's nodes x1 (block b1, rack r1),
x2-x4 (b1, r2), x5 (b2, r1) and x6 (b2, r2), one cpu each, plus x0, which the workload was placed on and which is then
lost. The pods of x0 are placed again within the domain the rest keep to, or nowhere (the caller evicts)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    Quota,
    ResourceGroup,
    Taint,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Config, Scheduler

CPU = 1000
BLOCK, RACK = "tas-block", "tas-rack"
KUEUE_NODES = {"x1": ("b1", "r1"), "x2": ("b1", "r2"), "x3": ("b1", "r2"), "x4": ("b1", "r2"), "x5": ("b2", "r1"),
               "x6": ("b2", "r2")}


@dataclass
class _Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    taints: tuple[Taint, ...] = ()
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def ready(self, now: float) -> bool:
        return True


def _node(name: str, block: str, rack: str, cpus: int = 1) -> _Node:
    return _Node(name, {BLOCK: block, RACK: rack, HOSTNAME: name}, {"cpu": cpus * CPU, "pods": 110_000})


def _scheduler(x0: tuple[str, str], x0_cpus: int) -> tuple[Scheduler, list[_Node]]:
    flavors = {"tas": FlavorSpec("tas", {}, topology="three-level", levels=(BLOCK, RACK, HOSTNAME))}
    group = ResourceGroup(("cpu",), ("tas",), {("tas", "cpu"): Quota(50 * CPU)})
    cq = ClusterQueueSpec("cq", groups=(group,))
    s = Scheduler(Config(flavors, {cq.name: cq}, {}), instant_eviction=True)
    nodes = [_node("x0", *x0, cpus=x0_cpus), *(_node(name, *where) for name, where in KUEUE_NODES.items())]
    s.nodes = lambda: nodes
    return s, nodes


def _hosts(wl: Workload) -> dict[str, dict[str, int]]:
    assert wl.admission is not None
    return {ps.name: {values[-1]: count for values, count in ps.topology.domains}
            for ps in wl.admission.podsets if ps.topology is not None}


@dataclass(frozen=True)
class Case:
    podsets: tuple[PodSet, ...]
    x0: tuple[str, str] = ("b0", "r0")
    """Where x0 sits, so that the first placement takes it as Kueue's case starts."""
    x0_cpus: int = 1
    placed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    replaced: Mapping[str, Mapping[str, int]] | None = None
    """The assignment after x0 is lost (None: no replacement)."""


def _ps(name: str, pods: int, request: TopologyRequest, cpus: int = 1) -> PodSet:
    return PodSet(name, pods, {"cpu": cpus * CPU}, topology=request)


PREFERRED_HOST, REQUIRED_RACK = TopologyRequest(HOSTNAME), TopologyRequest(RACK, required=True)
CASES = {
    # "baseline scenario": one pod, preferred hostname: the first free host by Kueue's order takes it.
    "baseline": Case((_ps("one", 1, PREFERRED_HOST),), placed={"one": {"x0": 1}}, replaced={"one": {"x1": 1}}),
    # "required rack; fit": x2's rack (b1/r2) keeps the pods; x3 takes x0's.
    "required rack; fit": Case((_ps("one", 2, REQUIRED_RACK),), x0=("b1", "r2"), placed={"one": {"x0": 1, "x2": 1}},
                               replaced={"one": {"x2": 1, "x3": 1}}),
    # "required rack for a single node; fit": x0 held every pod: placed afresh, in any rack.
    "required rack, single node": Case((_ps("one", 1, REQUIRED_RACK),), placed={"one": {"x0": 1}},
                                       replaced={"one": {"x1": 1}}),
    # "required rack; no fit": x1's rack has no other host: no replacement (FailFast evicts).
    "required rack; no fit": Case((_ps("one", 2, REQUIRED_RACK),), x0=("b1", "r1"),
                                  placed={"one": {"x0": 1, "x1": 1}}),
    # "preferred; no fit; FailFast": three cpus fit no other host.
    "preferred; no fit": Case((_ps("one", 1, TopologyRequest(RACK), cpus=3),), x0_cpus=3,
                              placed={"one": {"x0": 1}}),
    # "two podsets": only the pod set on x0 moves, and not onto x1, which the other holds.
    "two podsets": Case((_ps("one", 1, PREFERRED_HOST), _ps("two", 1, PREFERRED_HOST)),
                        placed={"one": {"x0": 1}, "two": {"x1": 1}}, replaced={"one": {"x2": 1}, "two": {"x1": 1}}),
    # A slice left incomplete (Kueue's findIncompleteSliceDomain): x0's pod goes back into its slice's rack (x3),
    # not to x1, the tightest fit in the block without slices.
    "slice left incomplete": Case((_ps("one", 2, TopologyRequest(BLOCK, required=True, slice_level=RACK,
                                                                 slice_size=2)),),
                                  x0=("b1", "r2"), placed={"one": {"x0": 1, "x2": 1}},
                                  replaced={"one": {"x2": 1, "x3": 1}}),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_lost_nodes_pods_are_placed_again_in_their_domain(case: Case) -> None:
    s, nodes = _scheduler(case.x0, case.x0_cpus)
    wl = Workload("default", "foo", "lq", "cq", case.podsets, uid="foo")
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert (wl.state, _hosts(wl)) == (WorkloadState.ADMITTED, case.placed), "as Kueue's case starts"
    before = wl.admission
    nodes.pop(0)  # x0 is lost
    replaced = s.replace_node(wl.key, "x0", 10.0)
    assert replaced is (case.replaced is not None)
    assert wl.state is WorkloadState.ADMITTED
    assert _hosts(wl) == (case.replaced if case.replaced is not None else case.placed)
    assert wl.admission is not None and before is not None and wl.admission.total == before.total, "same quota"


def test_a_node_the_assignment_does_not_name_is_no_replacement() -> None:
    s, _ = _scheduler(("b0", "r0"), 1)
    wl = Workload("default", "foo", "lq", "cq", (_ps("one", 1, PREFERRED_HOST),), uid="foo")
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert not s.replace_node(wl.key, "x6", 10.0)
    assert _hosts(wl) == {"one": {"x0": 1}}
