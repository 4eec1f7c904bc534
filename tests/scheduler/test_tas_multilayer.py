"""Multi-layer slices (Kueue's ``TASMultiLayerTopology``, beta and on in v0.19), restated from the "multi-layer
topology" cases of Kueue's pkg/cache/scheduler/tas_cache_test.go: a block b1 of racks r1 (hosts x1 with 1 cpu, x2
with 4) and r2 (x3 with 3, x4 with 4); eight one-cpu pods required in the block, in slices of four per rack, each of
them in groups of two per host."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from flexq.scheduler.domains import HOSTNAME, TopologyView, place
from flexq.scheduler.model import FlavorSpec, PodSet, TopologyAssignment, TopologyRequest
from tests.support.tas import BLOCK, RACK, Node

FLAVOR = FlavorSpec("tas", {}, topology="default", levels=(BLOCK, RACK, HOSTNAME))


def _nodes(cpus: Mapping[str, tuple[str, int]]) -> list[Node]:
    return [Node(name, {BLOCK: "b1", RACK: rack, HOSTNAME: name}, {"cpu": n * 1000, "pods": 10_000})
            for name, (rack, n) in cpus.items()]


KUEUE = {"x1": ("r1", 1), "x2": ("r1", 4), "x3": ("r2", 3), "x4": ("r2", 4)}


def _place(nodes: list[Node], count: int, layers: tuple[tuple[str, int], ...]) -> TopologyAssignment | str:
    request = TopologyRequest(BLOCK, True, slice_level=layers[0][0], slice_size=layers[0][1], layers=layers)
    view = TopologyView(nodes, 0.0, lambda _key: True, lambda _name: ())
    return place(view, FLAVOR, PodSet("main", count, {"cpu": 1000}, topology=request), request, ())


CASES: dict[str, tuple[Mapping[str, tuple[str, int]], int, tuple[tuple[str, int], ...], dict[str, int] | str]] = {
    # Kueue: "block required; rack slices of 4; host slices of 2": x1's one cpu holds no group of two
    "rack slices of 4, host groups of 2": (KUEUE, 8, ((RACK, 4), (HOSTNAME, 2)), {"x2": 4, "x3": 2, "x4": 2}),
    # without the inner layer, x3's third cpu counts and x1 is used
    "rack slices of 4 only": (KUEUE, 8, ((RACK, 4),), {"x1": 1, "x2": 3, "x3": 3, "x4": 1}),
    # Kueue: "host slice rounding makes rack slice impossible": two hosts of 3 cpus hold two groups of two, not three
    "host rounding leaves no rack slice": ({"x1": ("r1", 3), "x2": ("r1", 3), "x3": ("r1", 0)}, 6,
                                           ((RACK, 6), (HOSTNAME, 2)),
                                           'topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level '
                                           "cloud.com/topology-rack; 2/3 slice(s) fit on level kubernetes.io/hostname. "
                                           'Total nodes: 3; excluded: resource "cpu": 1'),
    # Kueue: "small host kills rack slices despite enough total capacity"
    "a small host leaves one rack slice of two": ({"x1": ("r1", 7), "x2": ("r1", 4), "x3": ("r2", 7),
                                                   "x4": ("r2", 3)}, 16, ((RACK, 8), (HOSTNAME, 4)),
                                                  'topology "default" doesn\'t allow to fit; 1/2 slice(s) fit on '
                                                  "level cloud.com/topology-rack; 3/4 slice(s) fit on level "
                                                  "kubernetes.io/hostname"),
    "an inner layer above the slice level": (KUEUE, 8, ((HOSTNAME, 4), (RACK, 2)),
                                             "additional slice layer topology cloud.com/topology-rack must be at a "
                                             "lower level than kubernetes.io/hostname"),
    "an inner layer not in the topology": (KUEUE, 8, ((RACK, 4), ("zone", 2)),
                                           "no requested topology level for additional slice layer: zone"),
}


@pytest.mark.parametrize("name", CASES)
def test_multi_layer_slices(name: str) -> None:
    cpus, count, layers, expected = CASES[name]
    placed = _place(_nodes(cpus), count, layers)
    if isinstance(expected, str):
        assert placed == expected
    else:
        assert isinstance(placed, TopologyAssignment), placed
        assert {values[0]: n for values, n in placed.domains} == expected
