"""Topology-aware placement, restated from Kueue's ``TestFindTopologyAssignments`` (pkg/cache/scheduler/
tas_cache_test.go, v0.19): the same node trees, requests and expected assignments or messages."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from flexq.scheduler.domains import HOSTNAME, TopologyView, domain_base, fits, place, tas_implied, tas_match
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    Quota,
    ResourceGroup,
    Taint,
    TopologyAssignment,
    TopologyRequest,
)
from flexq.scheduler.tas_groups import place_pair
from tests.support.tas import BLOCK, CPU, RACK, Node

GI = 1024**3 * 1000


def node(name: str, block: str | None, rack: str | None, host: str, cpu: float, memory: int = 1,
         max_pods: int = 10, pods: Mapping[str, Mapping[str, int]] | None = None, is_ready: bool = True) -> Node:
    labels = {k: v for k, v in ((BLOCK, block), (RACK, rack), (HOSTNAME, host)) if v is not None}
    return Node(name, labels, {"cpu": int(cpu * CPU), "memory": memory * GI, "pods": max_pods * 1000},
                    pods=pods or {}, is_ready=is_ready)


# Kueue's defaultNodes: b1 {r1: x3; r2: x5 x1 x6}, b2 {r1: x2; r2: x4 (2 cpu, 4Gi, 40 pods)}
DEFAULT = [node("b1-r1-x3", "b1", "r1", "x3", 1), node("b1-r2-x5", "b1", "r2", "x5", 1),
           node("b1-r2-x1", "b1", "r2", "x1", 1), node("b1-r2-x6", "b1", "r2", "x6", 1),
           node("b2-r2-x2", "b2", "r1", "x2", 1), node("b2-r2-x4", "b2", "r2", "x4", 2, memory=4, max_pods=40)]
# Kueue's binaryTreesNodes: two blocks of two racks of two hosts, 1 cpu each
BINARY = [node(f"{b}-{r}-{x}", b, r, x, 1) for b, r, x in (
    ("b1", "r1", "x3"), ("b1", "r1", "x5"), ("b1", "r2", "x1"), ("b1", "r2", "x6"),
    ("b2", "r1", "x2"), ("b2", "r1", "x4"), ("b2", "r2", "x7"), ("b2", "r2", "x8"))]
# Kueue's scatteredNodes: b1 r1 {x3: 4 cpu, x5, x1}, b2 r1 {x6: 2 cpu, x2}
SCATTERED = [node(f"{b}-r1-{x}", b, "r1", x, cpu) for b, x, cpu in (
    ("b1", "x3", 4), ("b1", "x5", 1), ("b1", "x1", 1), ("b2", "x6", 2), ("b2", "x2", 1))]
THREE_HOSTS = [node(f"b1-r1-{x}", "b1", "r1", x, 3) for x in ("x3", "x5", "x1")]
BLOCKS = [Node("b1", {BLOCK: "b1"}, {"cpu": 2 * CPU, "pods": 20_000}),
          Node("b2", {BLOCK: "b2"}, {"cpu": 1 * CPU, "pods": 10_000}),
          Node("b3", {BLOCK: "b3"}, {"cpu": 4 * CPU, "pods": 40_000})]
EXCLUDED = [
    Node("x1", {HOSTNAME: "x1"}, {"cpu": CPU, "pods": 10_000}, taints=(Taint("key", "value", "NoSchedule"),)),
    Node("x2", {HOSTNAME: "x2", "zone": "zone-b"}, {"cpu": CPU, "pods": 10_000}),
    Node("x3", {HOSTNAME: "x3", "zone": "zone-b"}, {"cpu": 2 * CPU, "pods": 10_000}),
    Node("x4", {HOSTNAME: "x4", "zone": "zone-a"}, {"cpu": 100, "pods": 10_000}),
]
TWO, THREE = (BLOCK, RACK), (BLOCK, RACK, HOSTNAME)


def _view(nodes: list[Node], held: list[tuple[TopologyAssignment, Mapping[str, int]]] | None = None,
          tas_keys: frozenset[str] = frozenset()) -> TopologyView:
    return TopologyView(nodes, 0.0, lambda key: key in tas_keys, lambda _name: list(held or []))


def _domains(levels: tuple[str, ...], *domains: tuple[tuple[str, ...], int]) -> TopologyAssignment:
    return TopologyAssignment(levels, tuple(domains))


CASES = {
    "rack required; single Pod fits in a rack": (
        DEFAULT, TWO, TopologyRequest(RACK, required=True), {"cpu": CPU}, 1,
        _domains(TWO, (("b1", "r1"), 1))),
    "rack required; multiple Pods fit in a rack": (
        DEFAULT, TWO, TopologyRequest(RACK, required=True), {"cpu": CPU}, 3,
        _domains(TWO, (("b1", "r2"), 3))),
    "rack required; multiple Pods fit in some racks": (
        DEFAULT, TWO, TopologyRequest(RACK, required=True), {"cpu": CPU}, 2,
        _domains(TWO, (("b2", "r2"), 2))),
    "rack required; too many pods to fit in any rack": (
        DEFAULT, TWO, TopologyRequest(RACK, required=True), {"cpu": CPU}, 4,
        'topology "default" allows to fit only 3 out of 4 pod(s)'),
    "block required; too many Pods to fit requested": (
        DEFAULT, TWO, TopologyRequest(BLOCK, required=True), {"cpu": CPU}, 5,
        'topology "default" allows to fit only 4 out of 5 pod(s)'),
    "rack required; single Pod requiring memory": (
        DEFAULT, TWO, TopologyRequest(RACK, required=True), {"memory": 1024 * 1000}, 4,
        _domains(TWO, (("b1", "r1"), 4))),
    "block preferred; Pods fit in 2 blocks": (
        BLOCKS, (BLOCK,), TopologyRequest(BLOCK), {"cpu": CPU}, 5,
        _domains((BLOCK,), (("b2",), 1), (("b3",), 4))),
    "rack preferred; but only block can accommodate the workload": (
        DEFAULT, TWO, TopologyRequest(RACK), {"cpu": CPU}, 4,
        _domains(TWO, (("b1", "r1"), 1), (("b1", "r2"), 3))),
    "rack preferred; but only multiple blocks can accommodate the workload": (
        DEFAULT, TWO, TopologyRequest(RACK), {"cpu": CPU}, 6,
        _domains(TWO, (("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2))),
    "block preferred; but only multiple blocks can accommodate the workload": (
        DEFAULT, TWO, TopologyRequest(BLOCK), {"cpu": CPU}, 6,
        _domains(TWO, (("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2))),
    "block preferred; but the workload cannot be accommodate in entire topology": (
        DEFAULT, TWO, TopologyRequest(BLOCK), {"cpu": CPU}, 10,
        'topology "default" allows to fit only 7 out of 10 pod(s)'),
    "block required; 4 pods fit into one host each": (
        BINARY, THREE, TopologyRequest(BLOCK, required=True), {"cpu": CPU}, 4,
        _domains((HOSTNAME,), (("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1))),
    "host required; single Pod fits in the host": (
        DEFAULT, THREE, TopologyRequest(HOSTNAME, required=True), {"cpu": CPU}, 1,
        _domains((HOSTNAME,), (("x3",), 1))),
    "unconstrained; 6 pods fit into hosts scattered across the whole datacenter": (
        SCATTERED, THREE, TopologyRequest(unconstrained=True), {"cpu": CPU}, 6,
        _domains((HOSTNAME,), (("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2))),
    "unconstrained; a single pod fits into each host; LeastFreeCapacity": (
        DEFAULT, THREE, TopologyRequest(unconstrained=True), {"cpu": CPU}, 1, _domains((HOSTNAME,), (("x3",), 1))),
    "block required for podset; host required for slices": (
        THREE_HOSTS, THREE, TopologyRequest(BLOCK, required=True, slice_level=HOSTNAME, slice_size=2),
        {"cpu": CPU}, 6, _domains((HOSTNAME,), (("x1",), 2), (("x3",), 2), (("x5",), 2))),
    "block required for podset; host required for slices; one slice too many": (
        THREE_HOSTS, THREE, TopologyRequest(BLOCK, required=True, slice_level=HOSTNAME, slice_size=2),
        {"cpu": CPU}, 8, 'topology "default" allows to fit only 3 out of 4 slice(s)'),
    "detailed failure message with exclusion stats": (
        EXCLUDED, (HOSTNAME,), TopologyRequest(HOSTNAME, required=True), {"cpu": CPU}, 1,
        'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: nodeSelector: 2, '
        'resource "cpu": 1, taint "key=value:NoSchedule": 1'),
    "no nodes at all": (
        [], TWO, TopologyRequest(RACK, required=True), {"cpu": CPU}, 1, f"no topology domains at level: {RACK}"),
    "a node not ready is not counted": (
        [node("b1-r1-x3", "b1", "r1", "x3", 1, is_ready=False)], TWO, TopologyRequest(RACK, required=True),
        {"cpu": CPU}, 1, f"no topology domains at level: {RACK}"),
}


# Beyond Kueue's table: requests placed down through three levels from the one chosen.
CASES.update({
    "unconstrained at the block level: the tightest block, its hosts tightest first": (
        SCATTERED, THREE, TopologyRequest(BLOCK, unconstrained=True), {"cpu": CPU}, 3,
        _domains((HOSTNAME,), (("x2",), 1), (("x6",), 2))),
    "unconstrained at the rack level: the tightest rack that holds them": (
        SCATTERED, THREE, TopologyRequest(RACK, unconstrained=True), {"cpu": CPU}, 5,
        _domains((HOSTNAME,), (("x1",), 1), (("x3",), 3), (("x5",), 1))),
    "rack preferred over three levels; the block above holds them": (
        DEFAULT, THREE, TopologyRequest(RACK), {"cpu": CPU}, 4,
        _domains((HOSTNAME,), (("x3",), 1), (("x1",), 1), (("x5",), 1), (("x6",), 1))),
    "block required; slices of two per rack": (
        BINARY, THREE, TopologyRequest(BLOCK, required=True, slice_level=RACK, slice_size=2), {"cpu": CPU}, 4,
        _domains((HOSTNAME,), (("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1))),
    "block preferred; slices of two per rack over two blocks": (
        BINARY, THREE, TopologyRequest(BLOCK, slice_level=RACK, slice_size=2), {"cpu": CPU}, 6,
        _domains((HOSTNAME,), (("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1), (("x2",), 1), (("x4",), 1))),
})


def test_assignments_held_on_a_topology_without_hosts_are_taken_by_their_domains() -> None:
    """On a topology of blocks and racks, a holder's assignment names racks: its pods are taken from them."""
    racks = [Node(f"{b}-{r}", {BLOCK: b, RACK: r}, {"cpu": 2 * CPU, "pods": 20_000})
             for b, r in (("b1", "r1"), ("b1", "r2"), ("b2", "r1"))]
    flavor = FlavorSpec("tas", topology="default", levels=TWO)
    request = TopologyRequest(BLOCK, required=True)
    podset = PodSet("main", 3, {"cpu": CPU}, topology=request)
    held = [(TopologyAssignment(TWO, ((("b1", "r1"), 2),)), {"cpu": CPU, "pods": 1000})]
    assert place(_view(racks), flavor, podset, request, ()) == _domains(TWO, (("b1", "r1"), 2), (("b1", "r2"), 1))
    assert place(_view(racks, held), flavor, podset, request, ()) == \
        'topology "default" allows to fit only 2 out of 3 pod(s). Total nodes: 3; excluded: resource "cpu": 1'


@pytest.mark.parametrize("name", sorted(CASES))
def test_placement(name: str) -> None:
    nodes, levels, request, per_pod, count, want = CASES[name]
    flavor = FlavorSpec("tas", topology="default", levels=levels)
    selector = {"zone": "zone-a"} if nodes is EXCLUDED else {}
    podset = PodSet("main", count, per_pod, node_selector=selector, topology=request)
    assert place(_view(nodes), flavor, podset, request, ()) == want


def test_others_hold_what_their_assignments_name_and_pods_of_others_what_they_use() -> None:
    """Capacity of a domain is net of topology assignments held (by hostname) and of pods not placed by topology."""
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    request = TopologyRequest(BLOCK, required=True)
    podset = PodSet("main", 3, {"cpu": CPU}, topology=request)
    busy = [node(n.name, n.labels[BLOCK], n.labels[RACK], n.labels[HOSTNAME], 1,
                 pods={"ns/other": {"cpu": CPU}} if n.labels[HOSTNAME] == "x3" else {}) for n in BINARY]
    held = [(TopologyAssignment((HOSTNAME,), ((("x1",), 1),)), {"cpu": CPU, "pods": 1000})]
    # b1 has x5 and x6 left: three pods need b2
    assert place(_view(busy, held), flavor, podset, request, ()) == \
        _domains((HOSTNAME,), (("x2",), 1), (("x4",), 1), (("x7",), 1))
    # the pod on x3 belongs to a workload placed by topology: its assignment counts, not its pods
    assert place(_view(busy, held, frozenset({"ns/other"})), flavor, podset, request, ()) == \
        _domains((HOSTNAME,), (("x3",), 1), (("x5",), 1), (("x6",), 1))
    # empty: as if no workload placed by topology held anything (the pod of one that is not still counts)
    assert place(_view(busy, held), flavor, PodSet("main", 4, {"cpu": CPU}), request, (), empty=True) == \
        _domains((HOSTNAME,), (("x2",), 1), (("x4",), 1), (("x7",), 1), (("x8",), 1))


def _holding(nodes: list[Node], held: list[tuple[TopologyAssignment, Mapping[str, int]]]) -> TopologyView:
    return TopologyView(nodes, 0.0, lambda _key: False, lambda _name: held)


def _request(rng: random.Random, levels: tuple[str, ...]) -> tuple[TopologyRequest, int]:
    level = rng.choice(levels)
    kind = rng.choice(["required", "preferred", "unconstrained", "slices"])
    if kind == "unconstrained":
        return TopologyRequest(unconstrained=True), rng.randint(1, 32)
    if kind == "slices":
        size = rng.randint(1, 3)
        return TopologyRequest(levels[0], required=True, slice_level=level, slice_size=size), size * rng.randint(1, 8)
    return TopologyRequest(level, required=kind == "required"), rng.randint(1, 32)


def test_a_base_with_holders_put_back_places_as_a_tree_built_without_them() -> None:
    """Preemption asks a placement with each set of victims gone: the leaves built once with every holder off, and
    the victims' assignments put back, give the very answer (assignment, or message with its counts) of a tree built
    from a view without them, for random trees, holders, requests and victims."""
    rng = random.Random(19)
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    placed = 0
    for trial in range(100):
        nodes = [node(f"n{i:02d}", f"b{i // 8}", f"r{i // 4}", f"x{i:02d}", rng.choice([1, 2, 4]),
                      pods={"ns/plain": {"cpu": CPU // 2}} if rng.random() < 0.2 else None) for i in range(16)]
        nodes[rng.randrange(16)].taints = (Taint("key", "value", "NoSchedule"),)
        holders = {f"h{i}": [(TopologyAssignment((HOSTNAME,), (((f"x{rng.randrange(16):02d}",), 1),)),
                              {"cpu": rng.choice([CPU // 2, CPU]), "pods": 1000})] for i in range(12)}
        request, count = _request(rng, THREE)
        podset = PodSet("main", count, {"cpu": CPU}, topology=request)

        base = domain_base(_holding(nodes, [h for hs in holders.values() for h in hs]), flavor, podset, ())
        for _ in range(5):
            gone = set(rng.sample(sorted(holders), rng.randint(0, len(holders))))
            back = [(a, {r: -v for r, v in per_pod.items()}) for k in sorted(gone) for a, per_pod in holders[k]]
            rest = [h for k, hs in holders.items() if k not in gone for h in hs]
            got = place(_holding(nodes, back), flavor, podset, request, (), base=base)
            assert got == place(_holding(nodes, rest), flavor, podset, request, ()), (trial, request, count, gone)
            placed += isinstance(got, TopologyAssignment)
    assert 150 < placed < 350, ("both placements and refusals are compared", placed)


def test_fits_checks_each_domain_again() -> None:
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    podset = PodSet("main", 2, {"cpu": CPU})
    mine = _domains((HOSTNAME,), (("x3",), 1), (("x5",), 1))
    assert fits(_view(BINARY), flavor, podset, mine)
    taken = [(_domains((HOSTNAME,), (("x5",), 1)), {"cpu": CPU, "pods": 1000})]
    assert not fits(_view(BINARY, taken), flavor, podset, mine)


def test_flavor_and_pod_set_must_agree_on_topology() -> None:
    """Kueue's checkPodSetAndFlavorMatchForTAS, with its messages."""
    tas = FlavorSpec("tas", topology="default", levels=TWO)
    plain = FlavorSpec("plain")
    missing = FlavorSpec("gone", topology="nope")
    asks = PodSet("main", 1, {"cpu": CPU}, topology=TopologyRequest(RACK, required=True))
    asks_host = PodSet("main", 1, {"cpu": CPU}, topology=TopologyRequest(HOSTNAME, required=True))
    asks_nothing = PodSet("main", 1, {"cpu": CPU})
    assert {
        "tas, asks": tas_match(asks, tas, False),
        "plain, asks": tas_match(asks, plain, False),
        "missing, asks": tas_match(asks, missing, False),
        "tas, level it lacks": tas_match(asks_host, tas, False),
        "tas, asks nothing": tas_match(asks_nothing, tas, False),
        "tas, asks nothing, implied": tas_match(asks_nothing, tas, True),
        "missing, asks nothing, implied": tas_match(asks_nothing, missing, True),
        "plain, asks nothing": tas_match(asks_nothing, plain, False),
    } == {
        "tas, asks": "",
        "plain, asks": 'Flavor "plain" does not support TopologyAwareScheduling',
        "missing, asks": 'Flavor "gone" information missing in TAS cache',
        "tas, level it lacks": 'Flavor "tas" does not contain the requested level',
        "tas, asks nothing": 'Flavor "tas" supports only TopologyAwareScheduling',
        "tas, asks nothing, implied": "",
        "missing, asks nothing, implied": 'Flavor "gone" information missing in TAS cache',
        "plain, asks nothing": "",
    }
    quota = {("tas", "cpu"): Quota(1000)}
    only_tas = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("tas",), quota),))
    mixed = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("tas", "plain"), quota),))
    flavors = {"tas": tas, "plain": plain}
    assert (tas_implied(only_tas, flavors), tas_implied(mixed, flavors)) == (True, False)


ZONE_A_X3 = [Node("x3", {"zone": "zone-a", HOSTNAME: "x3"}, {"cpu": CPU, "memory": GI, "pods": 10_000},
                  taints=(Taint("example.com/gpu", "present", "NoSchedule"),)),
             Node("x3", {"zone": "zone-a", HOSTNAME: "x3"}, {"cpu": CPU, "memory": GI, "pods": 10_000}),
             Node("x3", {"zone": "zone-a", HOSTNAME: "x3", "custom-label-1": "value-1"},
                  {"cpu": CPU, "memory": GI, "pods": 10_000})]


@pytest.mark.parametrize(("name", "node", "selector", "want"), [
    ("skip node which has untolerated taint; BestFit", ZONE_A_X3[0], {},
     'taint "example.com/gpu=present:NoSchedule": 1'),
    ("skip node which doesn't match node selector, missing label; BestFit", ZONE_A_X3[1],
     {"custom-label-1": "custom-value-1"}, "nodeSelector: 1"),
    ("skip node which doesn't match node selector, label exists, value doesn't match; BestFit", ZONE_A_X3[2],
     {"custom-label-1": "value-2"}, "nodeSelector: 1"),
])
def test_every_node_left_out_counts_them(name: str, node: Node, selector: dict[str, str], want: str) -> None:
    # Kueue's TestFindTopologyAssignments cases of one node the per-node check leaves out: Kueue's tree keeps the
    # node (with room for no pod), so the message is its notFitMessage with the nodes left out counted, not "no
    # topology domains at level".
    flavor = FlavorSpec("tas", {"zone": "zone-a"}, topology="default", levels=(HOSTNAME,))
    request = TopologyRequest(HOSTNAME, required=True)
    podset = PodSet("main", 1, {"cpu": 300}, node_selector=selector, topology=request)
    assert place(_view([node]), flavor, podset, request, ()) == \
        f'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 1; excluded: {want}'


@pytest.mark.parametrize("request_", [TopologyRequest(RACK), TopologyRequest(unconstrained=True),
                                      TopologyRequest(RACK, required=True, slice_level=HOSTNAME, slice_size=2)],
                         ids=["preferred", "unconstrained", "slices"])
def test_every_node_left_out_says_so_for_any_request(request_: TopologyRequest) -> None:
    # Kueue's findLevelWithFitDomains on a tree of nodes that hold no pod: every kind of request ends in its
    # notFitMessage with nothing fitting (preferred: after the levels above; unconstrained: after its spread).
    nodes = [Node(x, {BLOCK: "b1", RACK: "r1", HOSTNAME: x}, {"cpu": CPU, "pods": 10_000}) for x in ("x1", "x2")]
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    podset = PodSet("main", 2, {"cpu": CPU}, node_selector={"gpu": "a100"}, topology=request_)
    unit = "slice" if request_.slice_size > 1 else "pod"
    count = 1 if request_.slice_size > 1 else 2
    assert place(_view(nodes), flavor, podset, request_, ()) == \
        f'topology "default" doesn\'t allow to fit any of {count} {unit}(s). Total nodes: 2; excluded: nodeSelector: 2'


def test_every_node_left_out_under_slice_layers_counts_no_slice_of_any_layer() -> None:
    # Kueue's multiLayerNotFitMessage: its best domain is one of the nodes left out, holding no slice of any layer.
    nodes = [Node(x, {BLOCK: "b1", RACK: "r1", HOSTNAME: x}, {"cpu": CPU, "pods": 10_000}) for x in ("x1", "x2")]
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    request = TopologyRequest(BLOCK, required=True, slice_level=RACK, slice_size=4,
                              layers=((RACK, 4), (HOSTNAME, 2)))
    podset = PodSet("main", 4, {"cpu": CPU}, node_selector={"gpu": "a100"}, topology=request)
    assert place(_view(nodes), flavor, podset, request, ()) == (
        f'topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level {RACK}; 0/2 slice(s) fit on level '
        f"{HOSTNAME}. Total nodes: 2; excluded: nodeSelector: 2")


def test_every_node_left_out_of_a_pod_set_group_counts_them() -> None:
    # The leader-aware path (Kueue places a group's leader with its workers): nothing fits, counted as the workers'.
    nodes = [Node(x, {BLOCK: "b1", RACK: "r1", HOSTNAME: x}, {"cpu": CPU, "pods": 10_000}) for x in ("x1", "x2")]
    flavor = FlavorSpec("tas", topology="default", levels=THREE)
    request = TopologyRequest(RACK, required=True, group="lws")
    leader = PodSet("leader", 1, {"cpu": CPU}, node_selector={"gpu": "a100"}, topology=request)
    workers = PodSet("workers", 3, {"cpu": CPU}, node_selector={"gpu": "a100"}, topology=request)
    assert place_pair(_view(nodes), flavor, leader, workers) == \
        'topology "default" doesn\'t allow to fit any of 3 pod(s). Total nodes: 2; excluded: nodeSelector: 2'


def test_a_preferred_rack_no_rack_holds_falls_back_to_the_block_that_does() -> None:
    """Four pods preferring a rack: no rack holds them; the level above is tried before spreading, and block b1
    (two racks of two) holds them all, where a spread by racks would start from b2's larger rack."""
    nodes = [node(f"{b}-{r}-{x}", b, r, x, 1) for b, r, x in (
        ("b1", "r1", "x1"), ("b1", "r1", "x2"), ("b1", "r2", "x3"), ("b1", "r2", "x4"),
        ("b2", "r3", "x5"), ("b2", "r3", "x6"), ("b2", "r3", "x7"))]
    levels = (BLOCK, RACK, HOSTNAME)
    flavor = FlavorSpec("tas", topology="default", levels=levels)
    placed = place(_view(nodes), flavor, PodSet("main", 4, {"cpu": CPU}, topology=TopologyRequest(RACK)),
                   TopologyRequest(RACK), ())
    assert isinstance(placed, TopologyAssignment)
    assert sorted(v[-1] for v, _ in placed.domains) == ["x1", "x2", "x3", "x4"]
