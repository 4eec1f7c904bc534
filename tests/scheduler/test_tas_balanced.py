"""Balanced placement (Kueue's ``TASBalancedPlacement``), restated from Kueue v0.19's integration test "place the
workers evenly on selected nodes" (test/integration/singlecluster/tas/tas_test.go): nodes x1 and x2 (12 GPUs each)
in rack r1, x3 (14) and x4 (6) in rack r2, all in block b1; sixteen one-GPU pods in slices of four per host,
preferred in one rack. Balanced, they go eight and eight on x1 and x2; BestFit (the gate off) takes the rack with the
least to spare, r2, and fills x3 first. A pod set group's leader is placed with its workers the same way (Kueue's
"balanced placement; leader worker set")."""

from __future__ import annotations

import copy

import pytest

from flexq.scheduler.domains import HOSTNAME, TopologyView, place
from flexq.scheduler.model import FlavorSpec, PodSet, TopologyAssignment, TopologyRequest
from flexq.scheduler.tas_balanced import Domain, optimal_set
from flexq.scheduler.tas_groups import place_group
from tests.support.tas import Node

BLOCK, RACK = "tas-block", "tas-rack"
GPU = "nvidia.com/gpu"
FLAVOR = FlavorSpec("tas", {}, topology="default", levels=(BLOCK, RACK, HOSTNAME))


NODES = [Node(name, {BLOCK: "b1", RACK: rack, HOSTNAME: name}, {GPU: gpus * 1000, "pods": 20_000})
         for name, rack, gpus in (("x1", "r1", 12), ("x2", "r1", 12), ("x3", "r2", 14), ("x4", "r2", 6))]


def _place(balanced: bool, request: TopologyRequest, count: int = 16) -> TopologyAssignment | str:
    view = TopologyView(NODES, 0.0, lambda _key: True, lambda _name: (), balanced)
    podset = PodSet("worker", count, {GPU: 1000}, topology=request)
    return place(view, FLAVOR, podset, request, ())


PREFERRED_RACK = TopologyRequest(level=RACK, slice_level=HOSTNAME, slice_size=4)
CASES: dict[str, tuple[bool, TopologyRequest, int, dict[str, int]]] = {
    "balanced: eight and eight on r1's hosts": (True, PREFERRED_RACK, 16, {"x1": 8, "x2": 8}),
    "gate off: BestFit's rack r2, x3 first": (False, PREFERRED_RACK, 16, {"x3": 12, "x4": 4}),
    # A required request is placed by BestFit even with the gate on (Kueue: balanced only for preferred ones).
    "required: BestFit": (True, TopologyRequest(level=RACK, required=True, slice_level=HOSTNAME, slice_size=4), 16,
                          {"x3": 12, "x4": 4}),
    # Forty pods, more than one rack holds: all four hosts are needed, so each takes the threshold (six, what x4
    # holds) and the sixteen left go to the freest first (x3 eight more, x1 six, x2 two).
    "balanced over both racks": (True, TopologyRequest(level=RACK), 40, {"x1": 12, "x2": 8, "x3": 14, "x4": 6}),
    "gate off over both racks": (False, TopologyRequest(level=RACK), 40, {"x1": 12, "x2": 12, "x3": 14, "x4": 2}),
}


@pytest.mark.parametrize("name", CASES)
def test_balanced_placement(name: str) -> None:
    balanced, request, count, expected = CASES[name]
    placed = _place(balanced, request, count)
    assert isinstance(placed, TopologyAssignment), placed
    assert placed.levels == (HOSTNAME,)
    assert {values[0]: n for values, n in placed.domains} == expected


# Kueue's "balanced placement; leader worker set" (pkg/cache/scheduler/tas_cache_test.go): hosts x1 (20 GPUs), x2
# (15) and x3 (12) in rack r1 of block b1; a pod set group of a leader (one pod of one GPU) and 25 workers (one GPU
# each, in slices of five per host), preferred in one rack.
GROUP_NODES = [Node(name, {BLOCK: "b1", RACK: "r1", HOSTNAME: name}, {GPU: gpus * 1000, "pods": 24_000})
               for name, gpus in (("x1", 20), ("x2", 15), ("x3", 12))]
GROUP_REQUEST = TopologyRequest(level=RACK, slice_level=HOSTNAME, slice_size=5, group="sameGroup")
GROUP_CASES: dict[str, tuple[bool, dict[str, int], dict[str, int]]] = {
    # balanced: two hosts needed, each taking two slices at least; x2 15 and x3 10 with the leader beside them
    "balanced: x2 15, x3 10 and the leader": (True, {"x3": 1}, {"x2": 15, "x3": 10}),
    # BestFit (the gate off): the leader on the host with most slices beside it, x1 (three slices: 19 GPUs left),
    # the other two slices where they fit with the least to spare, x3
    "gate off: BestFit": (False, {"x1": 1}, {"x1": 15, "x3": 10}),
}


@pytest.mark.parametrize("name", GROUP_CASES)
def test_balanced_placement_of_a_pod_set_group(name: str) -> None:
    balanced, leader_on, workers_on = GROUP_CASES[name]
    view = TopologyView(GROUP_NODES, 0.0, lambda _key: True, lambda _name: (), balanced)
    workers = PodSet("workers", 25, {GPU: 1000}, topology=GROUP_REQUEST)
    leader = PodSet("leader", 1, {GPU: 1000}, topology=TopologyRequest(level=RACK, slice_level=HOSTNAME,
                                                                         group="sameGroup"))
    placed = place_group(view, FLAVOR, workers, leader, GROUP_REQUEST, ())
    assert not isinstance(placed, str), placed
    assert [{values[0]: n for values, n in ta.domains} for ta in placed] == [leader_on, workers_on]


def _domain(name: str, slices: int, leaders: int, with_leader: int) -> Domain:
    return Domain((name,), pods=slices, slices=slices, leaders=leaders, pods_with=with_leader,
                  slices_with=with_leader)


# Kueue's TestSelectOptimalDomainSetToFit (pkg/cache/scheduler/tas_balanced_placement_test.go): the fewest domains
# that hold the workers and the leaders, with the least to spare (slices of one pod, by entropy).
OPTIMAL_DOMAINS = [_domain("d1", 9, 1, 8), _domain("d2", 6, 0, 6), _domain("d3", 4, 1, 3), _domain("d4", 2, 0, 2)]
OPTIMAL_CASES: dict[str, tuple[int, int, list[str] | None]] = {
    "no fit": (22, 0, None),
    "simple fit one domain": (5, 1, ["d1"]),
    "perfect fit with two domains": (9, 1, ["d2", "d3"]),
    "perfect fit with two domains 2": (10, 1, ["d1", "d4"]),
    "best fit, single domain": (5, 0, ["d2"]),
}


@pytest.mark.parametrize("name", OPTIMAL_CASES)
def test_the_optimal_domain_set_with_a_leader(name: str) -> None:
    workers, leaders, expected = OPTIMAL_CASES[name]
    chosen = optimal_set(copy.deepcopy(OPTIMAL_DOMAINS), workers, 1, True, leaders)
    assert (sorted(d.values[0] for d in chosen) if chosen is not None else None) == expected
