"""Balanced placement (Kueue's ``TASBalancedPlacement``), restated from Kueue v0.19's integration test "place the
workers evenly on selected nodes" (test/integration/singlecluster/tas/tas_test.go): nodes x1 and x2 (12 GPUs each)
in rack r1, x3 (14) and x4 (6) in rack r2, all in block b1; sixteen one-GPU pods in slices of four per host,
preferred in one rack. Balanced, they go eight and eight on x1 and x2; BestFit (the gate off) takes the rack with the
least to spare, r2, and fills x3 first. A pod set group's leader is placed with its workers the same way (Kueue's
"balanced placement; leader worker set")."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest

from flexq.scheduler.domains import HOSTNAME, TopologyView, place
from flexq.scheduler.model import FlavorSpec, PodSet, TopologyAssignment, TopologyRequest
from flexq.scheduler.tas_balanced import Domain, balanced_domains, best_set, greedy, optimal_set, prune, spread
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



# Three levels, the slice level below the requested one: blocks b1 (racks r1: hosts of 4 and 4 GPUs, r2: 4 and 2)
# and b2 (r3: 6 and 6, r4: 1). Balanced, sixteen pods in slices of four per rack go two slices to r1 and two to r3
# (the threshold two slices a rack; r2 and r4 hold fewer and are left out), where BestFit fills r3 and takes r2's one
# slice; eight go to r1 whole (the block that holds them with least to spare), BestFit to r3.
THREE_LEVELS = [Node(name, {BLOCK: block, RACK: rack, HOSTNAME: name}, {GPU: gpus * 1000, "pods": 20_000})
                for name, block, rack, gpus in (("h1", "b1", "r1", 4), ("h2", "b1", "r1", 4), ("h3", "b1", "r2", 4),
                                                ("h4", "b1", "r2", 2), ("h5", "b2", "r3", 6), ("h6", "b2", "r3", 6),
                                                ("h7", "b2", "r4", 1))]
BY_RACK = TopologyRequest(level=BLOCK, slice_level=RACK, slice_size=4)
THREE_LEVEL_CASES: dict[str, tuple[bool, TopologyRequest, int, dict[str, int]]] = {
    "balanced: two slices on r1, two on r3": (True, BY_RACK, 16, {"h1": 4, "h2": 4, "h5": 6, "h6": 2}),
    "gate off: r3 filled, r2's slice": (False, BY_RACK, 16, {"h3": 2, "h4": 2, "h5": 6, "h6": 6}),
    "balanced: two slices, the block with least to spare": (True, BY_RACK, 8, {"h1": 4, "h2": 4}),
    "gate off: two slices on the freest rack": (False, BY_RACK, 8, {"h5": 6, "h6": 2}),
    "balanced: one rack holds them": (True, TopologyRequest(level=RACK, slice_level=HOSTNAME, slice_size=2), 12,
                                      {"h5": 6, "h6": 6}),
    # twenty pods, no slices: r3 and r1 take eight each (the threshold), r3 the four left as the freer
    "balanced: pods over two racks": (True, TopologyRequest(level=BLOCK), 20, {"h1": 4, "h2": 4, "h5": 6, "h6": 6}),
}


@pytest.mark.parametrize("name", THREE_LEVEL_CASES)
def test_balanced_placement_above_the_slice_level(name: str) -> None:
    balanced, request, count, expected = THREE_LEVEL_CASES[name]
    view = TopologyView(THREE_LEVELS, 0.0, lambda _key: True, lambda _name: (), balanced)
    placed = place(view, FLAVOR, PodSet("worker", count, {GPU: 1000}, topology=request), request, ())
    assert isinstance(placed, TopologyAssignment), placed
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


def _leaf(values: tuple[str, ...], pods: int, with_leader: int = -1, leaders: int = 0) -> Domain:
    """A domain of slices of one pod (Kueue's state = sliceState): ``pods`` free, ``with_leader`` beside a leader."""
    with_leader = pods if with_leader < 0 else with_leader
    return Domain(values, pods=pods, slices=pods, leaders=leaders, pods_with=with_leader, slices_with=with_leader)


# Kueue's TestSelectOptimalDomainSetToFit (pkg/cache/scheduler/tas_balanced_placement_test.go): the fewest domains
# that hold the workers and the leaders, with the least to spare (slices of one pod, by entropy).
OPTIMAL_DOMAINS = [_leaf(("d1",), 9, 8, leaders=1), _leaf(("d2",), 6), _leaf(("d3",), 4, 3, leaders=1),
                   _leaf(("d4",), 2)]
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


# Kueue's TestSelectOptimalDomainSetToFitStableTieBreak: four hosts that hold the one slice equally well; the one
# whose level values sort first is taken, by entropy or not.
@pytest.mark.parametrize("by_entropy", [False, True])
def test_an_optimal_set_breaks_ties_by_level_values(by_entropy: bool) -> None:
    domains = [_leaf(("block-b", "host-a"), 3), _leaf(("block-b", "host-m"), 3), _leaf(("block-a", "host-z"), 3),
               _leaf(("block-a", "host-zz"), 3)]
    chosen = optimal_set(domains, 1, 1, by_entropy)
    assert chosen is not None and [d.values for d in chosen] == [("block-a", "host-z")]


def _with_children(name: str, leaders: int, with_leader: int, children: tuple[int, ...]) -> Domain:
    kids = [Domain((name, str(i)), pods=pods, slices=pods) for i, pods in enumerate(children)]
    return Domain((name,), kids, pods=sum(children), slices=sum(children), leaders=leaders, pods_with=with_leader,
                  slices_with=with_leader)


# Kueue's TestCompareDomainCapacityAndEntropy, seen through the set it chooses: among domains that would hold a
# leader and one worker with as much to spare, a domain that can hold the leader comes first, then the one whose
# children's free pods are spread more evenly (higher entropy), then the level values.
ENTROPY_CASES: dict[str, tuple[list[Domain], str]] = {
    "equal capacity and entropy: level values": (
        [_with_children("leaf-m", 1, 5, (2, 2)), _with_children("leaf-z", 1, 5, (2, 2)),
         _with_children("leaf-a", 1, 5, (2, 2))], "leaf-a"),
    "higher entropy first": (
        [_with_children("a-low", 1, 5, (4, 0)), _with_children("b-high", 1, 5, (2, 2))], "b-high"),
    "the leader's domain first": (
        [_with_children("a-no-leader", 0, 5, (2, 2)), _with_children("b-leader", 1, 5, (4, 0))], "b-leader"),
}


@pytest.mark.parametrize("name", ENTROPY_CASES)
def test_an_optimal_set_orders_equal_fits_by_leader_then_entropy(name: str) -> None:
    domains, expected = ENTROPY_CASES[name]
    chosen = optimal_set(copy.deepcopy(domains), 1, 1, True, 1)
    assert chosen is not None and [d.values[0] for d in chosen] == [expected]


# Kueue's TestPlaceSlicesOnDomainsBalanced: each domain of the optimal set takes the threshold; the slices left go
# to the freest first.
D18 = [_leaf((f"d{i}",), 18) for i in (1, 2, 3)]
D_ALL = [*D18, _leaf(("d4",), 10), _leaf(("d5",), 2)]
SPREAD_CASES: dict[str, tuple[list[Domain], int, int, dict[str, int]]] = {
    "simple balanced placement on two domains": (D18, 20, 10, {"d1": 10, "d2": 10}),
    "simple placement on three domains": (D18, 40, 13, {"d1": 14, "d2": 13, "d3": 13}),
    "find smallest domain that fits": (D_ALL, 2, 2, {"d5": 2}),
    "correctly select domains": (D_ALL, 25, 10, {"d1": 15, "d4": 10}),
    # a threshold the set cannot give every domain: none
    "threshold above what fits": (D18, 20, 11, {}),
}


@pytest.mark.parametrize("name", SPREAD_CASES)
def test_slices_spread_over_the_optimal_set(name: str) -> None:
    domains, slices, threshold, expected = SPREAD_CASES[name]
    placed = spread(copy.deepcopy(domains), slices, 1, threshold)
    assert {d.values[0]: (d.slices, d.pods) for d in placed or []} == {k: (n, n) for k, n in expected.items()}


def test_slices_of_several_pods_spread_with_their_pods() -> None:
    """Slices of two pods: a domain's pods are its slices times two (Kueue's state after placement)."""
    domains = [Domain(("d1",), pods=20, slices=10), Domain(("d2",), pods=12, slices=6)]
    placed = spread(domains, 14, 2, 6)
    assert placed is not None and {d.values[0]: (d.slices, d.pods) for d in placed} == {"d1": (8, 16), "d2": (6, 12)}


def test_a_leaders_domain_takes_the_threshold_and_what_fits_beside_the_leader() -> None:
    """With a leader: its domain is the one that can hold it, with the slices that fit beside it; the other takes
    the rest (Kueue's leader-aware placeSlicesOnDomainsBalanced)."""
    domains = [_leaf(("d1",), 8, 7, leaders=1), _leaf(("d2",), 8)]
    placed = spread(domains, 12, 1, 5, leaders=1)
    assert placed is not None
    assert [(d.values[0], d.leaders, d.slices, d.slices_with, d.pods_with) for d in placed] == \
        [("d1", 1, 7, 7, 6), ("d2", 0, 5, 5, 5)]


def test_pruning_keeps_a_domain_too_small_beside_the_leader_for_workers() -> None:
    """Kueue's TestPruneDomainsBelowThreshold, "keeps worker only domain": a rack that holds the threshold but not
    beside the leader keeps its workers' room and loses the leader's (down to its hosts); its parent's figures are
    summed again from what is left."""
    leader_leaf = _leaf(("r1", "h1"), 6, 5, leaders=1)
    leader_rack = Domain(("r1",), [leader_leaf], pods=6, slices=6, leaders=1, pods_with=5, slices_with=5)
    worker_leaf = _leaf(("r2", "h1"), 5, 4, leaders=1)
    worker_rack = Domain(("r2",), [worker_leaf], pods=5, slices=5, leaders=1, pods_with=4, slices_with=4)
    top = Domain(("b1",), [leader_rack, worker_rack])
    prune([top], 5, 1, 2, 0, True)

    def state(d: Domain) -> tuple[int, int, int, int, int]:
        return d.pods, d.slices, d.pods_with, d.slices_with, d.leaders

    assert {name: state(d) for name, d in (("leader rack", leader_rack), ("top", top), ("worker rack", worker_rack),
                                           ("worker host", worker_leaf))} == {
        "leader rack": (6, 6, 5, 5, 1), "top": (11, 11, 10, 10, 1), "worker rack": (5, 5, 0, 0, 0),
        "worker host": (5, 5, 0, 0, 0)}


def test_pruning_empties_a_domain_below_the_threshold() -> None:
    """Below the threshold a domain holds nothing, its children too, and its parent counts without it; a slice level
    above the hosts counts slices from its pods (slices of two pods)."""
    small = Domain(("b1", "r1"), [Domain(("b1", "r1", "h1"), pods=3, slices=1)], pods=3, slices=1)
    big = Domain(("b1", "r2"), [Domain(("b1", "r2", "h1"), pods=5, slices=2), Domain(("b1", "r2", "h2"), pods=3,
                                                                                      slices=1)], pods=8, slices=3)
    top = Domain(("b1",), [small, big], pods=11, slices=4)
    prune([top], 2, 2, 1, 0, False)
    assert (small.pods, small.slices, small.children[0].pods) == (0, 0, 0)
    assert (big.pods, big.slices) == (8, 4), "a rack's slices counted from its pods at the slice level"
    assert (top.pods, top.slices) == (8, 4)


def _tree(racks: dict[str, tuple[int, int]]) -> list[list[Domain]]:
    """Blocks (not filled) over racks ``"b/r": (pods, pods beside the leader)``, each rack able to hold the leader."""
    blocks: dict[str, Domain] = {}
    for name, (pods, with_leader) in racks.items():
        block, rack = name.split("/")
        parent = blocks.setdefault(block, Domain((block,)))
        parent.children.append(_leaf((block, rack), pods, with_leader, leaders=1))
    return [list(blocks.values()), [c for b in blocks.values() for c in b.children]]


# Kueue's TestFindBestDomainsForBalancedPlacement (requested level: blocks, slice level: racks; one leader).
BEST_SET_CASES: dict[str, tuple[dict[str, tuple[int, int]], int, tuple[int, int] | None]] = {
    # at threshold 2 the pruned set cannot hold the leader with the rest: tried again at 1, which keeps its room
    "falls back after pruning": ({"b1/r1": (3, 2), "b2/r1": (2, 1), "b2/r2": (4, 2)}, 8, (1, 2)),
    "rejects after fallback": ({"b1/r1": (2, 1), "b2/r1": (3, 1), "b2/r2": (4, 2), "b3/r1": (4, 3)}, 12, None),
    # room enough at the first threshold (two racks of four): b2's racks hold all eight, the leader beside four
    "fits at its threshold": ({"b1/r1": (4, 3), "b2/r1": (4, 4), "b2/r2": (4, 3)}, 8, (4, 2)),
}


@pytest.mark.parametrize("name", BEST_SET_CASES)
def test_the_best_sibling_set_and_its_threshold(name: str) -> None:
    racks, needed, expected = BEST_SET_CASES[name]
    found = best_set(_tree(racks), 0, 1, needed, 1, 1)
    assert (None if found is None else (found[0], len(found[1]))) == expected


def test_the_set_with_the_highest_threshold_wins() -> None:
    """Sibling sets a level up: the racks of block b2 hold the six slices three and three, those of b1 five and
    one; b2's set wins with its threshold 3."""
    blocks = [Domain(("b1",), [_leaf(("b1", "r1"), 5), _leaf(("b1", "r2"), 1)]),
              Domain(("b2",), [_leaf(("b2", "r1"), 3), _leaf(("b2", "r2"), 3)])]
    found = best_set([blocks, [c for b in blocks for c in b.children]], 1, 1, 6, 1, 0)
    assert found is not None and found[0] == 3
    assert [d.values for d in found[1]] == [("b2", "r1"), ("b2", "r2")]


GREEDY_CASES: dict[str, tuple[list[Domain], int, int, tuple[int, str | None, str | None] | None]] = {
    "the freest first": ([_leaf(("a",), 2), _leaf(("b",), 5), _leaf(("c",), 3)], 7, 0, (2, None, "c")),
    "ties by fewer pods then values": ([Domain(("b",), pods=4, slices=2), Domain(("a",), pods=5, slices=2)], 2, 0,
                                       (1, None, "b")),
    "not enough": ([_leaf(("a",), 2), _leaf(("b",), 3)], 6, 0, None),
    "nothing asked": ([_leaf(("a",), 2)], 0, 0, None),
    "a domain of one slice": ([_leaf(("a",), 1)], 1, 0, (1, None, "a")),
    "no domains": ([], 1, 1, None),
    "the leader's domain first": ([_leaf(("a",), 6), _leaf(("b",), 3, 2, leaders=1)], 5, 1, (2, "b", "a")),
    "beside the leader only": ([_leaf(("a",), 3, 3, leaders=1)], 3, 1, (1, "a", None)),
    "no domain for the leader": ([_leaf(("a",), 6)], 2, 1, None),
}


@pytest.mark.parametrize("name", GREEDY_CASES)
def test_a_greedy_fill(name: str) -> None:
    domains, needed, leaders, expected = GREEDY_CASES[name]
    fill = greedy(domains, needed, leaders)
    got = None if fill is None else (fill[0], *(None if d is None else d.values[0] for d in fill[1:]))
    assert got == expected


def test_a_greedy_fill_places_no_leader_unless_asked() -> None:
    assert greedy([_leaf(("a",), 3)], 2) == (1, None, _leaf(("a",), 3))


def _levels(tree: str, slice_idx: int, size: int, leader: bool) -> list[list[Domain]]:
    """A topology's domains by level, filled as Kueue's ``fillInCounts`` fills them: ``tree`` lists the leaves,
    ``"b0/r1=4"`` (four pods free on rack r1 of block b0) or ``"b0/r1=4:3L"`` (it can hold the leader, and three pods
    beside it); whole slices of ``size`` are counted at level ``slice_idx`` and summed above it; with ``leader``, a
    domain holds the leader where a child does, with the pods beside it of the child that loses fewest to it."""
    made: dict[tuple[str, ...], Domain] = {}
    roots: list[Domain] = []
    for token in tree.split():
        path, free = token.split("=")
        values = tuple(path.split("/"))
        for i in range(1, len(values) + 1):
            if values[:i] not in made:
                made[values[:i]] = Domain(values[:i])
                (roots if i == 1 else made[values[:i - 1]].children).append(made[values[:i]])
        pods, _, beside = free.rstrip("L").partition(":")
        leaf = made[values]
        leaf.pods = int(pods)
        if leader:
            leaf.leaders = 1 if beside else 0
            leaf.pods_with = int(beside) if beside else leaf.pods

    def fill(domain: Domain, level: int) -> None:
        if domain.children:
            for child in domain.children:
                fill(child, level + 1)
            domain.pods = sum(c.pods for c in domain.children)
            domain.slices = sum(c.slices for c in domain.children)
            holders = [c for c in domain.children if c.leaders > 0]
            if leader and holders:
                domain.leaders = 1
                domain.pods_with = domain.pods - min(c.pods - c.pods_with for c in holders)
                domain.slices_with = domain.slices - min(c.slices - c.slices_with for c in holders)
        if level == slice_idx:
            domain.slices = domain.pods // size
            domain.slices_with = domain.pods_with // size if leader else 0

    for root in roots:
        fill(root, 0)
    by_level = [roots]
    while by_level[-1][0].children:
        by_level.append([c for d in by_level[-1] for c in d.children])
    return by_level


def _named(domains: Sequence[Domain], slices: bool = True) -> str:
    return " ".join("/".join(d.values) + (f"={d.slices}" if slices else "") + ("L" if slices and d.leaders else "")
                    for d in domains)


# The sibling set chosen on small trees: (leaves, requested level, slice level, slice size, slices needed, with a
# leader, (threshold, the set's domains with the slices each holds once pruned) or None).
SMALL_BEST_SETS: dict[str, tuple[str, int, int, int, int, bool, tuple[int, str] | None]] = {
    "the leader's domain counts first in the fill that sets the threshold": (
        "b0/r0/h0=5:4L b0/r1/h0=3 b0/r1/h1=3 b1/r0/h0=4 b1/r0/h1=4 b1/r1/h0=2", 0, 1, 1, 6, True, (3, "b0=11L b1=8")),
    "a sibling set that cannot hold them is passed over for the next": (
        "b0/r0=0 b0/r1=2 b1/r0=4 b1/r1=6", 1, 1, 2, 4, False, (2, "b1/r0=2 b1/r1=3")),
    "the leader's domain alone: the threshold is what fits beside the leader": (
        "b0/r0=5:3L", 0, 1, 1, 1, True, (1, "b0=5L")),
    "no room beside the leader: a threshold of nothing, no set": (
        "b0/r0=1:0L b0/r1=0 b1/r0=2:0L", 0, 0, 1, 1, True, None),
    "a threshold of one slice": ("b0/r0=3", 0, 1, 1, 1, False, (1, "b0=3")),
    "the same threshold: fewer domains at the requested level win": (
        "b0/r0/h0=2 b0/r0/h1=0 b0/r1/h0=5 b0/r1/h1=0 b1/r0/h0=0 b1/r0/h1=5 b1/r1/h0=5 b1/r1/h1=2", 1, 2, 2, 3, False,
        (1, "b1/r0=2 b1/r1=3")),
    "a set below the best threshold is passed over, and the search goes on": (
        "b0/r0/h0=2 b0/r0/h1=1:0L b1/r0/h0=5:4L", 2, 2, 2, 1, True, (1, "b1/r0/h0=2L")),
    "pruning leaves no room for the leader, and the lower threshold is below the best": (
        "b0/r0/h0=4:3L b0/r1/h0=2 b1/r0/h0=4:3L b1/r0/h1=2 b1/r1/h0=3 b1/r1/h1=4", 1, 1, 1, 8, True, None),
    "a rack short of the threshold beside the leader keeps its workers' room, not the leader's": (
        "b0/r0=5:5L b0/r1=5:1L", 1, 1, 1, 6, True, (3, "b0/r0=5L b0/r1=5")),
    "the same threshold and as many domains: the first set stays": (
        "b0/r0/h0=4 b0/r1/h0=3 b0/r1/h1=1 b1/r0/h0=1 b1/r0/h1=3", 2, 2, 1, 3, False, (3, "b0/r0/h0=4")),
}


@pytest.mark.parametrize("name", SMALL_BEST_SETS)
def test_the_best_sibling_set_on_small_trees(name: str) -> None:
    tree, level, slice_idx, size, needed, leader, expected = SMALL_BEST_SETS[name]
    found = best_set(_levels(tree, slice_idx, size, leader), level, slice_idx, needed, size, int(leader))
    assert (None if found is None else (found[0], _named(found[1]))) == expected


# The optimal set on small trees: (leaves, the level its domains are at, slice level, slice size, slices needed, with
# a leader, ordered by entropy, the domains chosen or None).
SMALL_OPTIMAL_SETS: dict[str, tuple[str, int, int, int, int, bool, bool, str | None]] = {
    "the leader's block, its racks more evenly free": (
        "b0/r0=5:4L b0/r1=4:4L b1/r0=4 b1/r1=6:5L", 0, 0, 1, 5, True, True, "b0"),
    "two blocks, the leader's by entropy first": (
        "b0/r0=2:1L b0/r1=3:1L b1/r0=1 b1/r1=3:3L", 0, 0, 1, 5, True, True, "b0 b1"),
    "blocks that hold the slice alike: the most even": (
        "b0/r0/h0=1 b0/r1/h0=1 b0/r1/h1=4 b0/r2/h0=1 b1/r0/h0=1 b1/r0/h1=1 b1/r1/h0=0 b1/r1/h1=3 b1/r2/h0=3 "
        "b1/r2/h1=1 b2/r0/h0=0 b2/r1/h0=2 b2/r1/h1=1 b2/r2/h0=4", 0, 0, 1, 1, False, True, "b0"),
    "the domains that can hold the leader first": (
        "b0/r0/h0=0 b0/r0/h1=3:1L b1/r0/h0=6 b1/r1/h0=4:4L", 1, 2, 2, 6, True, True, "b1/r1 b0/r0 b1/r0"),
    "the most room beside the leader first": (
        "b0/r0/h0=3:2L b0/r1/h0=4 b0/r1/h1=5:3L b1/r0/h0=4 b1/r1/h0=5:3L", 0, 0, 2, 8, True, True, "b0 b1"),
    "ordered by the room beside the leader, not the room alone": (
        "b0/r0=4:2L b1/r0=4:4L", 1, 1, 1, 7, True, True, "b1/r0 b0/r0"),
    "without a leader, the most room first": (
        "b0/r0/h0=3 b0/r1/h0=1 b0/r1/h1=3 b1/r0/h0=2 b1/r1/h0=3", 1, 2, 1, 6, False, True, "b0/r0 b1/r1"),
    "no combination of the greedy fill's size holds them": (
        "b0/r0=5 b0/r1=5 b1/r0=5 b2/r0=2 b2/r1=3 b2/r2=3", 1, 1, 2, 9, False, True, None),
    "in the order of the level values, the leader's domain second": (
        "b0/r0/h0=6 b1/r0/h0=2 b1/r0/h1=1:1L", 0, 2, 1, 4, True, False, "b0 b1"),
    "slices of two that the fewest racks cannot hold": (
        "b0/r0/h0=3 b0/r0/h1=1 b0/r1/h0=3 b0/r2/h0=3 b0/r2/h1=6 b1/r0/h0=0 b1/r0/h1=6", 0, 1, 2, 8, False, True, None),
    "three racks, the leader's among them": (
        "b0/r0/h0=3:3L b0/r1/h0=4:3L b0/r1/h1=1:1L b1/r0/h0=4 b1/r0/h1=1:1L b1/r1/h0=1 b1/r1/h1=1:0L", 1, 2, 2, 5,
        True, True, "b0/r1 b1/r0 b1/r1"),
    "one slice on one domain": ("b0/r0=1", 1, 1, 1, 1, False, False, "b0/r0"),
    # b1 has no pod free beside or without the leader (its spread of free pods counts as none), b0 one pod (no whole
    # slice of two): as even, so the level values put b0 first, and it takes the leader
    "a domain with nothing free is not the most even": (
        "b0/r0=1:0L b1/r0=0:0L b2/r0=4", 0, 1, 2, 2, True, True, "b0 b2"),
}


@pytest.mark.parametrize("name", SMALL_OPTIMAL_SETS)
def test_the_optimal_set_on_small_trees(name: str) -> None:
    tree, level, slice_idx, size, needed, leader, by_entropy, expected = SMALL_OPTIMAL_SETS[name]
    domains = _levels(tree, slice_idx, size, leader)[level]
    chosen = optimal_set(domains, needed, size, by_entropy, int(leader))
    assert (None if chosen is None else _named(chosen, slices=False)) == expected


# Slices spread on small trees that cannot take them: (leaves, level, slice level, slice size, slices needed, with a
# leader, threshold).
SMALL_SPREADS_THAT_FAIL: dict[str, tuple[str, int, int, int, int, bool, int]] = {
    "no domain for the leader": ("b0/r0=2", 1, 1, 1, 2, True, 1),
    "a threshold the chosen domains cannot all take": (
        "b0/r0/h0=3 b0/r1/h0=1 b0/r1/h1=3 b1/r0/h0=2 b1/r1/h0=3", 1, 2, 1, 6, False, 3),
    "the leader's domain short of the threshold beside the leader": (
        "b0/r0/h0=3 b0/r1/h0=2:2L b0/r1/h1=4:2L b1/r0/h0=1:0L b1/r1/h0=2", 1, 2, 1, 8, True, 4),
    "slices of two: the threshold over the two racks is more than asked": (
        "b0/r0=0 b0/r1=2 b1/r0=4 b1/r1=6", 1, 1, 2, 4, False, 2),
}


@pytest.mark.parametrize("name", SMALL_SPREADS_THAT_FAIL)
def test_a_spread_that_cannot_place(name: str) -> None:
    tree, level, slice_idx, size, needed, leader, threshold = SMALL_SPREADS_THAT_FAIL[name]
    domains = _levels(tree, slice_idx, size, leader)[level]
    assert spread(domains, needed, size, threshold, int(leader)) is None


# Balanced placement on small trees: (leaves, requested level, slice level, slice size, pods, with a leader, (the
# level placed at, its domains with their slices) or None).
SMALL_BALANCED: dict[str, tuple[str, int, int, int, int, bool, tuple[int, str] | None]] = {
    "one slice on one rack": ("b0/r0=1", 1, 1, 1, 1, False, (1, "b0/r0=1")),
    "the block with least to spare, its rack with least to spare": (
        "b0/r0=6 b0/r1=1 b1/r0=4 b1/r1=2", 0, 1, 1, 2, False, (1, "b1/r1=2")),
    "a leader with the workers, three on each rack of its block": (
        "b0/r0/h0=5:4L b0/r1/h0=3 b0/r1/h1=3 b1/r0/h0=4 b1/r0/h1=4 b1/r1/h0=2", 0, 1, 1, 6, True,
        (1, "b0/r0=3L b0/r1=3")),
    "no rack set holds six slices of two at a threshold": (
        "b0/r0/h0=4 b0/r0/h1=5 b0/r1/h0=3 b0/r1/h1=2 b1/r0/h0=1 b1/r1/h0=2 b1/r1/h1=5 b2/r0/h0=1 b2/r0/h1=0", 1, 2, 2,
        12, False, None),
}


@pytest.mark.parametrize("name", SMALL_BALANCED)
def test_balanced_domains_on_small_trees(name: str) -> None:
    tree, level, slice_idx, size, pods, leader, expected = SMALL_BALANCED[name]
    placed = balanced_domains(_levels(tree, slice_idx, size, leader), level, slice_idx, pods, size, int(leader))
    assert (None if placed is None else (placed[0], _named(placed[1]))) == expected


# Pruning small trees: (leaves, slice level, slice size, with a leader, threshold, every domain's pods/slices after,
# with pods/slices beside the leader where it holds one).
SMALL_PRUNES: dict[str, tuple[str, int, int, bool, int, str]] = {
    "a slice level below the leaves' parents counts the leaf's slices again": (
        "b0/r0/h0=5:5L", 2, 2, True, 2, "b0=5/2:5/2L b0/r0=5/2:5/2L b0/r0/h0=5/2:5/2L"),
    "a domain that holds the threshold exactly stays": ("b0/r0/h0=4", 2, 1, True, 4, "b0=4/4 b0/r0=4/4 b0/r0/h0=4/4"),
}


@pytest.mark.parametrize("name", SMALL_PRUNES)
def test_pruning_small_trees(name: str) -> None:
    tree, slice_idx, size, leader, threshold, expected = SMALL_PRUNES[name]
    by_level = _levels(tree, slice_idx, size, leader)
    prune(by_level[0], threshold, size, slice_idx, 0, leader)
    assert " ".join("/".join(d.values) + f"={d.pods}/{d.slices}" + (f":{d.pods_with}/{d.slices_with}L" if d.leaders
                                                                        else "")
                    for level in by_level for d in level) == expected
