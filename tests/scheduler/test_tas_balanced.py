"""Balanced placement (Kueue's ``TASBalancedPlacement``), restated from Kueue v0.19's integration test "place the
workers evenly on selected nodes" (test/integration/singlecluster/tas/tas_test.go): nodes x1 and x2 (12 GPUs each)
in rack r1, x3 (14) and x4 (6) in rack r2, all in block b1; sixteen one-GPU pods in slices of four per host,
preferred in one rack. Balanced, they go eight and eight on x1 and x2; BestFit (the gate off) takes the rack with the
least to spare, r2, and fills x3 first."""

from __future__ import annotations

import pytest

from flexq.scheduler.domains import HOSTNAME, TopologyView, place
from flexq.scheduler.model import FlavorSpec, PodSet, TopologyAssignment, TopologyRequest
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
