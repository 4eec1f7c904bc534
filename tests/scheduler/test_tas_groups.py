"""Pod set groups in topology-aware placement, restated from Kueue's ``TestFindTopologyAssignments``
(pkg/cache/scheduler/tas_cache_test.go, v0.19.2): the cases whose pod sets share a ``podSetGroupName``, with the
same node trees, requests and expected assignments or messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from flexq.scheduler.domains import HOSTNAME, TopologyView, place
from flexq.scheduler.model import FlavorSpec, PodSet, Taint, Toleration, TopologyAssignment, TopologyRequest
from flexq.scheduler.tas_groups import leader_and_workers, place_group
from tests.support.tas import BLOCK, CPU, RACK, Node
from tests.support.tas import node as tas_node

GPU = "example.com/gpu"


def node(name: str, path: dict[str, str], cpu: float, gpu: int = 0, used: dict[str, int] | None = None) -> Node:
    return tas_node(name, path, cpu, extra={GPU: gpu * 1000} if gpu else None, used=used)


def blocks(*specs: tuple[str, float, int]) -> list[Node]:
    return [node(b, {BLOCK: b}, cpu, gpu) for b, cpu, gpu in specs]


def hosts(*specs: tuple[str, str, str, float, int]) -> list[Node]:
    return [node(f"{b}-{r}-{x}", {BLOCK: b, RACK: r, HOSTNAME: x}, cpu, gpu) for b, r, x, cpu, gpu in specs]


def rack_hosts(*specs: tuple[str, float, int]) -> list[Node]:
    return [node(x, {RACK: "r1", HOSTNAME: x}, cpu, gpu) for x, cpu, gpu in specs]


def small_and_large() -> list[Node]:
    """Kueue's three-level tree where one small host is mostly used by a pod outside TAS (2.5 of its 2.8 cpu)."""
    return [node("small-used", {BLOCK: "b1", RACK: "small", HOSTNAME: "small-used"}, 2.8, used={"cpu": 2500}),
            node("small-free", {BLOCK: "b1", RACK: "small", HOSTNAME: "small-free"}, 2.8),
            node("large-free", {BLOCK: "b1", RACK: "large", HOSTNAME: "large-free"}, 6)]


ONE, TWO_HOST, THREE = (BLOCK,), (RACK, HOSTNAME), (BLOCK, RACK, HOSTNAME)


def on(levels: tuple[str, ...], *domains: tuple[str, int]) -> TopologyAssignment:
    """An assignment at the lowest level (by host where that is the hostname, as Kueue writes it)."""
    names = (HOSTNAME,) if levels[-1] == HOSTNAME else levels
    return TopologyAssignment(names, tuple(((value,), count) for value, count in domains))


@dataclass(frozen=True)
class Case:
    nodes: list[Node]
    levels: tuple[str, ...]
    request: TopologyRequest
    leader: Mapping[str, int]
    workers: Mapping[str, int]
    count: int
    want: tuple[TopologyAssignment, TopologyAssignment] | str


def required(level: str, **kw: object) -> TopologyRequest:
    return TopologyRequest(level, required=True, group="sameGroup", **kw)  # type: ignore[arg-type]


def preferred(level: str, **kw: object) -> TopologyRequest:
    return TopologyRequest(level, group="sameGroup", **kw)  # type: ignore[arg-type]


C1, G1 = {"cpu": CPU}, {"cpu": CPU, GPU: 1000}
CASES = {
    "find topology assignment for two podsets with the same group": Case(
        blocks(("b1", 2, 2), ("b2", 5, 4), ("b3", 2, 2)), ONE, required(BLOCK), C1, G1, 4,
        (on(ONE, ("b2", 1)), on(ONE, ("b2", 4)))),
    "find topology assignment for grouped podsets preserves worker capacity when placing leader": Case(
        rack_hosts(("h1", 2, 0), ("h2", 4, 0), ("h3", 3, 0)), TWO_HOST, required(RACK), C1, {"cpu": 2 * CPU}, 4,
        (on(TWO_HOST, ("h3", 1)), on(TWO_HOST, ("h1", 1), ("h2", 2), ("h3", 1)))),
    "find topology assignment for sliced grouped podsets preserves worker capacity when placing leader": Case(
        rack_hosts(("h1", 2, 0), ("h2", 4, 0), ("h3", 3, 0)), TWO_HOST,
        required(RACK, slice_level=HOSTNAME, slice_size=2), C1, C1, 8,
        (on(TWO_HOST, ("h3", 1)), on(TWO_HOST, ("h1", 2), ("h2", 4), ("h3", 2)))),
    "find topology assignment for preferred grouped podsets preserves capacity across domains": Case(
        [node("h1", {HOSTNAME: "h1"}, 8), node("h2", {HOSTNAME: "h2"}, 3)], (HOSTNAME,), preferred(HOSTNAME),
        C1, {"cpu": 2 * CPU}, 5, (on((HOSTNAME,), ("h2", 1)), on((HOSTNAME,), ("h1", 4), ("h2", 1)))),
    "find topology assignment for grouped podsets preserves leader below the slice level": Case(
        rack_hosts(("leader-host", 1, 0), ("worker-host", 0, 1)), TWO_HOST,
        required(RACK, slice_level=RACK, slice_size=1), C1, {GPU: 1000}, 1,
        (on(TWO_HOST, ("leader-host", 1)), on(TWO_HOST, ("worker-host", 1)))),
    "find topology assignment for two podsets with the same group with domains that can tightly fit leader and "
    "workers": Case(
        blocks(("b1", 2, 2), ("b2", 8, 8), ("b3", 2, 2)), ONE, required(BLOCK), C1, {"cpu": CPU, GPU: 2000}, 4,
        (on(ONE, ("b2", 1)), on(ONE, ("b2", 4)))),
    "find topology assignment for grouped podsets skips domain where only workers fit without leader": Case(
        small_and_large(), THREE, required(RACK), {"cpu": 2500}, {"cpu": 2500}, 1,
        (on(THREE, ("large-free", 1)), on(THREE, ("large-free", 1)))),
    "find topology assignment for grouped podsets skips domain where mixed-size workers only fit without leader":
        Case(small_and_large(), THREE, required(RACK), {"cpu": 2500}, {"cpu": 500}, 2,
             (on(THREE, ("large-free", 1)), on(THREE, ("large-free", 2)))),
    "find topology assignment for grouped podsets keeps tight domain when leader and workers fit together": Case(
        small_and_large(), THREE, required(RACK), C1, C1, 1,
        (on(THREE, ("small-free", 1)), on(THREE, ("small-free", 1)))),
    "find topology assignment for two podsets with the same group - no fit": Case(
        blocks(("b1", 1, 0), ("b2", 4, 4)), ONE, required(BLOCK), C1, G1, 4,
        'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: resource '
        '"example.com/gpu": 1'),
    "find topology assignment for two podsets with the same group - optimizes domain for both leader and workers":
        Case(blocks(("b1", 11, 8), ("b2", 4, 4)), ONE, required(BLOCK), C1, G1, 4,
             (on(ONE, ("b1", 1)), on(ONE, ("b1", 4)))),
    "BestFit: podset group workers spread across hosts": Case(
        hosts(("b1", "r1", "x1", 20, 4), ("b1", "r1", "x2", 20, 2), ("b1", "r1", "x3", 20, 2),
              ("b1", "r1", "x4", 20, 2)), THREE, preferred(BLOCK, slice_level=HOSTNAME, slice_size=2), C1, G1, 6,
        (on(THREE, ("x1", 1)), on(THREE, ("x1", 4), ("x2", 2)))),
    "find topology assignment for two podsets with the same group - leader does not fit anywhere": Case(
        blocks(("b1", 4, 4), ("b2", 4, 4)), ONE, required(BLOCK), {"cpu": 10 * CPU}, G1, 4,
        'topology "default" allows to fit only 4 out of 4 pod(s)'),
    "find topology assignment for two podsets with the same group - multiple hosts": Case(
        hosts(("b1", "r1", "x3", 2, 1), ("b1", "r1", "x5", 2, 1), ("b1", "r1", "x1", 2, 1),
              ("b2", "r4", "x6", 1, 1), ("b2", "r5", "x2", 2, 1), ("b2", "r6", "x4", 2, 1)),
        THREE, required(BLOCK), {"cpu": 2 * CPU}, G1, 2,
        (on(THREE, ("x1", 1)), on(THREE, ("x3", 1), ("x5", 1)))),
    "find topology assignment for two podsets with the same group requesting same resources and nodes in the same "
    "rack": Case(
        hosts(*((b, r, x, 1, 1) for b, r, x in (("b1", "r1", "x3"), ("b1", "r1", "x5"), ("b1", "r2", "x1"),
                                                  ("b1", "r2", "x6"), ("b2", "r3", "x2"), ("b2", "r3", "x4"),
                                                  ("b2", "r4", "x7"), ("b2", "r4", "x8")))),
        THREE, required(BLOCK), G1, G1, 2, (on(THREE, ("x3", 1)), on(THREE, ("x5", 1), ("x1", 1)))),
}


def two_blocks() -> list[Node]:
    """Racks r1 (hosts of 2 and 2 cpu) and r2 (2) in block b1, r3 (1) in b2."""
    return hosts(("b1", "r1", "x1", 2, 0), ("b1", "r1", "x2", 2, 0), ("b1", "r2", "x3", 2, 0), ("b2", "r3", "x4", 1, 0))


def unconstrained(level: str, **kw: object) -> TopologyRequest:
    return TopologyRequest(level, unconstrained=True, group="sameGroup", **kw)  # type: ignore[arg-type]


# Beyond Kueue's table: where no domain of the requested level holds the group.
CASES.update({
    # preferred: the level above is tried, and its block b1 holds the leader and the five workers
    "a preferred rack too small: the block above": Case(
        two_blocks(), THREE, preferred(RACK), C1, C1, 5,
        (on(THREE, ("x1", 1)), on(THREE, ("x1", 1), ("x2", 2), ("x3", 2)))),
    "a preferred rack too small, in slices of one host: the block above": Case(
        two_blocks(), THREE, preferred(RACK, slice_level=HOSTNAME, slice_size=1), C1, C1, 5,
        (on(THREE, ("x1", 1)), on(THREE, ("x1", 1), ("x2", 2), ("x3", 2)))),
    # required: Kueue's message counts the workers the best rack holds without the leader (four in r1)
    "a required rack too small": Case(two_blocks(), THREE, required(RACK), C1, C1, 5,
                                      'topology "default" allows to fit only 4 out of 5 pod(s)'),
    # preferred at the top level: the leader where most workers fit beside it (b3), the rest by free slices
    "a preferred block too small: spread, the leader's block first": Case(
        blocks(("b1", 3, 0), ("b2", 2, 0), ("b3", 5, 0)), ONE, preferred(BLOCK), C1, C1, 8,
        (on(ONE, ("b3", 1)), on(ONE, ("b1", 3), ("b2", 1), ("b3", 4)))),
    "spread: one worker short": Case(blocks(("b1", 3, 0), ("b2", 2, 0), ("b3", 5, 0)), ONE, preferred(BLOCK), C1, C1,
                                     10, 'topology "default" allows to fit only 9 out of 10 pod(s)'),
    # unconstrained (Kueue's LeastFreeCapacity): the tightest block that holds the group, else spread tightest first
    "unconstrained: the tightest block that holds them": Case(
        blocks(("b1", 3, 0), ("b2", 2, 0), ("b3", 5, 0)), ONE, unconstrained(BLOCK), C1, C1, 2,
        (on(ONE, ("b1", 1)), on(ONE, ("b1", 2)))),
    "unconstrained: spread, tightest first": Case(
        blocks(("b1", 3, 0), ("b2", 2, 0), ("b3", 5, 0)), ONE, unconstrained(BLOCK), C1, C1, 6,
        (on(ONE, ("b2", 1)), on(ONE, ("b1", 3), ("b2", 1), ("b3", 2)))),
})


def six_hosts() -> list[Node]:
    """Block b1: rack r1 (hosts of 3 and 2 cpu), r2 (4 and 1); block b2: r3 (2 and 2)."""
    return hosts(("b1", "r1", "x1", 3, 0), ("b1", "r1", "x2", 2, 0), ("b1", "r2", "x3", 4, 0), ("b1", "r2", "x4", 1, 0),
                 ("b2", "r3", "x5", 2, 0), ("b2", "r3", "x6", 2, 0))


# Placed down through the levels below the one chosen: slices of a rack, then hosts, as Kueue's
# updateCountsToMinimum does level by level (each level's domains chosen among all the children of the last).
CASES.update({
    "slices of two per rack in a required block": Case(
        six_hosts(), THREE, required(BLOCK, slice_level=RACK, slice_size=2), C1, C1, 6,
        (on(THREE, ("x2", 1)), on(THREE, ("x1", 3), ("x2", 1), ("x3", 1), ("x4", 1)))),
    "slices of two per rack in a preferred block": Case(
        six_hosts(), THREE, preferred(BLOCK, slice_level=RACK, slice_size=2), C1, C1, 8,
        (on(THREE, ("x2", 1)), on(THREE, ("x1", 3), ("x2", 1), ("x3", 3), ("x4", 1)))),
    "slices of two per host in a required block": Case(
        six_hosts(), THREE, required(BLOCK, slice_level=HOSTNAME, slice_size=2), C1, C1, 6,
        (on(THREE, ("x3", 1)), on(THREE, ("x1", 2), ("x2", 2), ("x3", 2)))),
    "unconstrained slices of two per rack: the tightest block": Case(
        six_hosts(), THREE, unconstrained(BLOCK, slice_level=RACK, slice_size=2), C1, C1, 2,
        (on(THREE, ("x5", 1)), on(THREE, ("x5", 1), ("x6", 1)))),
})


@pytest.mark.parametrize("tolerated", [False, True])
def test_a_tainted_host_holds_the_group_only_where_the_workers_tolerate_it(tolerated: bool) -> None:
    taint = Taint("gpu", "", "NoSchedule")
    nodes = [dataclasses.replace(n, taints=(taint,)) if n.name.endswith("t1") else n
             for n in hosts(("b1", "r1", "t1", 5, 0), ("b1", "r2", "t2", 2, 0))]
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    tolerations = (Toleration("gpu", "Exists", "", "NoSchedule"),) if tolerated else ()
    placed = place_group(_view(nodes), flavor, PodSet("workers", 3, C1, topology=required(RACK)),
                         PodSet("leader", 1, C1, topology=required(RACK)), required(RACK), tolerations)
    assert placed == ((on(THREE, ("t1", 1)), on(THREE, ("t1", 3))) if tolerated else
                      'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 2; excluded: taint '
                      '"gpu:NoSchedule": 1')

def _view(nodes: list[Node]) -> TopologyView:
    return TopologyView(nodes, 0.0, lambda _key: False, lambda _name: [])


@pytest.mark.parametrize("name", sorted(CASES))
def test_group_placement(name: str) -> None:
    case = CASES[name]
    flavor = FlavorSpec("tas", topology="default", levels=case.levels)
    leader = PodSet("leader", 1, case.leader, topology=case.request)
    workers = PodSet("workers", case.count, case.workers, topology=case.request)
    assert place_group(_view(case.nodes), flavor, workers, leader, case.request, ()) == case.want


def test_the_leader_is_the_pod_set_of_fewer_pods_else_the_later_one() -> None:
    one, four, other_one = PodSet("a", 1, {}), PodSet("b", 4, {}), PodSet("c", 1, {})
    assert [leader_and_workers(one, four), leader_and_workers(four, one), leader_and_workers(one, other_one)] == \
        [(one, four), (one, four), (other_one, one)]


def test_without_the_leader_the_workers_alone_would_go_elsewhere() -> None:
    """What grouping changes: b3 fits the 2 workers tightest, but only b2 has room for the leader beside them."""
    nodes = blocks(("b1", 8, 8), ("b2", 4, 3), ("b3", 2, 2))
    flavor = FlavorSpec("tas", topology="default", levels=ONE)
    workers = PodSet("workers", 2, G1, topology=required(BLOCK))
    alone = place(_view(nodes), flavor, workers, required(BLOCK), ())
    grouped = place_group(_view(nodes), flavor, workers, PodSet("leader", 1, C1), required(BLOCK), ())
    assert (alone, grouped) == (on(ONE, ("b3", 2)), (on(ONE, ("b2", 1)), on(ONE, ("b2", 2))))


SPREAD = blocks(("b1", 3, 2), ("b2", 3, 3), ("b3", 2, 2))
"""No block holds the leader and four workers: b1 holds the leader and two workers beside it, b2 three workers (two
beside the leader), b3 two."""


@pytest.mark.parametrize(("count", "leader", "want"), [
    # The leader's block first (b1, its two workers), then of the others, most free first, the tightest that holds
    # the rest: b3's two, not b2's three.
    (4, C1, (on(ONE, ("b1", 1)), on(ONE, ("b1", 2), ("b3", 2)))),
    # None holds the rest alone: most free first (b2's three), then b3.
    (7, C1, (on(ONE, ("b1", 1)), on(ONE, ("b1", 2), ("b2", 3), ("b3", 2)))),
    (8, C1, 'topology "default" allows to fit only 7 out of 8 pod(s)'),
    (2, {"cpu": 4 * CPU}, 'topology "default" doesn\'t allow to fit any of 2 pod(s)'),  # the leader fits nowhere
])
def test_a_preferred_group_that_no_domain_holds_spreads_from_the_leader_s(
        count: int, leader: Mapping[str, int], want: object) -> None:
    flavor = FlavorSpec("tas", topology="default", levels=ONE)
    placed = place_group(_view(SPREAD), flavor, PodSet("workers", count, G1, topology=preferred(BLOCK)),
                         PodSet("leader", 1, leader, topology=preferred(BLOCK)), preferred(BLOCK), ())
    assert placed == want


def test_the_rest_of_a_spread_group_takes_the_tightest_domain_whether_or_not_it_could_hold_a_leader() -> None:
    """b3 cannot hold the 3-cpu leader, and need not: the leader is in b1; b3's two workers fit the rest tightest."""
    nodes = blocks(("b1", 5, 2), ("b2", 3.5, 3), ("b3", 2.5, 2))
    flavor = FlavorSpec("tas", topology="default", levels=ONE)
    placed = place_group(_view(nodes), flavor, PodSet("workers", 4, G1, topology=preferred(BLOCK)),
                         PodSet("leader", 1, {"cpu": 3 * CPU}, topology=preferred(BLOCK)), preferred(BLOCK), ())
    assert placed == (on(ONE, ("b1", 1)), on(ONE, ("b1", 2), ("b3", 2)))
