"""GKE's topology labels on emulated nodes: a slot per node, the lowest free, four hosts a sub-block and four
sub-blocks a block; a TPU slice's hosts consecutive and in one sub-block; a slot freed by scale-down is taken
again; labels the same however often it is run (both clocks make the same nodes)."""

from __future__ import annotations

import copy

from flexq.capacity import CapacityConfig, CapacityDriver, EmulatedCloud, NodePoolSpec, machine_type
from flexq.capacity.cluster import Cluster
from flexq.capacity.node_topology import BLOCK_LABEL, HOST_LABEL, HOSTNAME_LABEL, SUBBLOCK_LABEL, free_slot
from flexq.clock import VirtualClock
from flexq.scheduler import Config, Scheduler
from flexq.timers import Kernel


def _places(cluster: Cluster, pool: str) -> dict[str, tuple[str, str, str, str]]:
    return {n.name: (n.labels[BLOCK_LABEL], n.labels[SUBBLOCK_LABEL], n.labels[HOST_LABEL], n.labels[HOSTNAME_LABEL])
            for n in cluster.nodes.values() if n.pool == pool}


def _cluster() -> Cluster:
    cpu = NodePoolSpec("cpu", machine_type("n2-standard-16"), initial_nodes=5, autoscaling=True, max_nodes=40)
    tpu = NodePoolSpec("tpu", machine_type("ct6e-standard-4t"), topology="4x4", max_nodes=16)
    return Cluster([cpu, tpu], EmulatedCloud())


def test_slots_make_blocks_and_sub_blocks() -> None:
    cluster = _cluster()
    cluster.start_with_initial_nodes(0.0)
    places = _places(cluster, "cpu")
    assert places == {
        f"gke-cpu-{i + 1}-0": ("cpu-b0", f"cpu-b0-s{i // 4}", f"cpu-h{i}", f"gke-cpu-{i + 1}-0") for i in range(5)}
    assert cluster.nodes["gke-cpu-1-0"].labels["cloud.google.com/gke-nodepool"] == "cpu"


def test_a_tpu_slice_shares_a_sub_block_and_keeps_its_tpu_labels() -> None:
    cluster = _cluster()
    created, why = cluster.scale_up("tpu", 8, 0.0)
    assert why == ""
    places = _places(cluster, "tpu")
    assert sorted(places.values()) == sorted(
        [("tpu-b0", "tpu-b0-s0", f"tpu-h{i}", n.name) for i, n in enumerate(created[:4])] +
        [("tpu-b0", "tpu-b0-s1", f"tpu-h{i + 4}", n.name) for i, n in enumerate(created[4:])])
    assert {(n.labels["cloud.google.com/gke-tpu-topology"], n.labels["cloud.google.com/gke-tpu-accelerator"])
            for n in created} == {("4x4", "tpu-v6e-slice")}


def test_a_freed_slot_is_taken_again_and_runs_agree() -> None:
    one, two = _cluster(), _cluster()
    for cluster in (one, two):
        cluster.start_with_initial_nodes(0.0)
        cluster.remove(["gke-cpu-2-0"])
        cluster.scale_up("cpu", 2, 10.0)
    assert _places(one, "cpu") == _places(two, "cpu")
    slots = {name: place[2] for name, place in _places(one, "cpu").items()}
    assert {k: v for k, v in slots.items() if k not in ("gke-cpu-1-0", "gke-cpu-3-0", "gke-cpu-4-0",
                                                         "gke-cpu-5-0")} == {
        "gke-cpu-6-0": "cpu-h1", "gke-cpu-7-0": "cpu-h5"}


def test_free_slot_aligns_a_slice() -> None:
    assert [free_slot([], 4), free_slot([0, 1], 4), free_slot([0, 5], 1), free_slot([4], 4)] == [0, 4, 1, 0]


def test_the_scheduler_reads_its_drivers_nodes_and_a_copy_reads_the_copys() -> None:
    """A forecast deep-copies the scheduler and the driver together: the copy places topology on the copy's nodes."""
    pool = NodePoolSpec("cpu", machine_type("n2-standard-16"), initial_nodes=2, autoscaling=False)
    scheduler = Scheduler(Config({}, {}, {}))
    driver = CapacityDriver(CapacityConfig((pool,), EmulatedCloud()), scheduler, Kernel(VirtualClock(0.0)),
                            lambda _events: None, lambda _key, _t: None, {})
    assert scheduler.nodes is not None and sorted(n.name for n in scheduler.nodes()) == ["gke-cpu-1-0", "gke-cpu-2-0"]
    copied_scheduler, copied_driver = copy.deepcopy((scheduler, driver))
    copied_driver.cluster.remove(["gke-cpu-1-0"])
    assert copied_scheduler.nodes is not None
    assert [n.name for n in copied_scheduler.nodes()] == ["gke-cpu-2-0"]
    assert len(list(scheduler.nodes())) == 2


def test_a_tpu_slice_of_pods_lands_on_one_slice_of_hosts() -> None:
    """Two 4-host slices of pods (``podset-slice-required-topology`` on the sub-block, slice size 4) on a v6e 4x4
    pool: each group of four pods on the four hosts of one TPU slice; a slice with a busy host is passed over."""
    from flexq.scheduler import FlavorSpec, PodSet, Toleration, TopologyRequest
    from flexq.scheduler.domains import TopologyView, place

    cluster = _cluster()
    cluster.scale_up("tpu", 16, 0.0)
    busy = next(n for n in cluster.nodes.values() if n.pool == "tpu" and n.slot == 1)
    busy.pods["default/other"] = {"google.com/tpu": 4000}
    levels = (BLOCK_LABEL, SUBBLOCK_LABEL, HOSTNAME_LABEL)
    flavor = FlavorSpec("v6e", {"cloud.google.com/gke-nodepool": "tpu"}, topology="gke", levels=levels)
    request = TopologyRequest(BLOCK_LABEL, slice_level=SUBBLOCK_LABEL, slice_size=4)
    tpu = (Toleration("google.com/tpu", "Exists", effect="NoSchedule"),)  # as GKE adds to TPU pods
    podset = PodSet("workers", 8, {"google.com/tpu": 4000}, tolerations=tpu, topology=request)
    view = TopologyView(list(cluster.nodes.values()), 3600.0, lambda _key: False, lambda _name: [])  # booted
    placed = place(view, flavor, podset, request, tpu)
    assert not isinstance(placed, str), placed
    slices = [{cluster.nodes[values[0]].slice_id for values, _ in placed.domains[i:i + 4]} for i in (0, 4)]
    assert [len(s) for s in slices] == [1, 1] and slices[0] != slices[1], "each group of four on one TPU slice"
    assert busy.slice_id not in slices[0] | slices[1]
    assert [count for _, count in placed.domains] == [1] * 8
