"""Kueue's delayed topology request, restated from its ``pkg/scheduler/scheduler_tas_test.go`` cases (and the
integration test ``uses exponential second-pass backoff for the workload admission``): a topology-aware flavor that a
ProvisioningRequest check applies to reserves quota with ``delayedTopologyRequest: Pending`` and no placement; once
every check is Ready the second pass places it on the nodes then there (``Ready``) and only then admits it; a
second pass that finds no placement keeps the quota, says so (``SecondPassFailed``) and is tried again after 1 s,
2 s, 4 s..."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import (
    CheckState,
    ConcurrentPolicy,
    DelayedTopology,
    FlavorSpec,
    PodSet,
    PodSetUpdate,
    Taint,
    Toleration,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import BLOCK, CPU, RACK, Node, node, tas_queue, tas_scheduler

PROV = "prov-check"


def _scheduler(nodes: list[Node], *, check: str = PROV, on: frozenset[str] | None = None,
               second: bool = False) -> Scheduler:
    """Kueue's ``clusterQueueWithProvReq``: one flavor (``tas-default``, nodes labelled ``tas-node``) on a single
    hostname level, 50 cpus, the check on every flavor (or ``on`` those); ``second``: ``tas-second`` too."""
    flavors = [FlavorSpec("tas-default", {"tas-node": "true"}, topology="single", levels=(HOSTNAME,))]
    if second:
        flavors.append(FlavorSpec("tas-second", {"tas-node-second": "true"}, topology="single", levels=(HOSTNAME,)))
    cq = tas_queue("tas-main", [f.name for f in flavors], 50, checks=((check, on),))
    return tas_scheduler(nodes, flavors, [cq], instant_eviction=False, provisioning_checks=frozenset({PROV}))


def _node(name: str, label: str = "tas-node", ready: bool = True, booked: str | None = None) -> Node:
    return node(name, {label: "true", HOSTNAME: name}, ready=ready, booked_for=booked)


def _job(*podsets: PodSet) -> Workload:
    return Workload("default", "foo", "lq", "tas-main", podsets or (_podset("one"),), uid="foo")


def _podset(name: str, topology: bool = True, cpus: int = 1) -> PodSet:
    return PodSet(name, 1, {"cpu": cpus * CPU}, topology=TopologyRequest(HOSTNAME, required=True) if topology else None)


def _assigned(wl: Workload) -> dict[str, tuple[str, str | None, tuple[str, ...] | None]]:
    """Per pod set: its flavor, its ``delayedTopologyRequest`` and the hosts it is placed on."""
    assert wl.admission is not None
    return {ps.name: (ps.flavors["cpu"], ps.delayed.value if ps.delayed else None,
                      tuple(v[-1] for v, _ in ps.topology.domains) if ps.topology else None)
            for ps in wl.admission.podsets}


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind.value for e in events if e.kind is not EventKind.CHECK]


def test_gets_quota_reserved_only_with_its_topology_request_pending() -> None:
    # "workload in CQ with ProvisioningRequest gets QuotaReserved only": no nodes yet, nothing is placed.
    s = _scheduler([])
    wl = _job()
    s.add(wl, 0.0)
    events = s.schedule(0.0)
    assert _kinds(events) == ["QuotaReserved"]
    assert wl.state is WorkloadState.QUOTA_RESERVED
    assert _assigned(wl) == {"one": ("tas-default", "Pending", None)}
    assert events[-1].extra == {"delayedTopologyRequests": {"one": "Pending"}}


def test_implicit_topology_of_a_tas_only_queue_is_delayed_too() -> None:
    # "workload in CQ with ProvisioningRequest gets QuotaReserved only; implicit defaulting"
    s = _scheduler([])
    wl = _job(_podset("one", topology=False))
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert _assigned(wl) == {"one": ("tas-default", "Pending", None)}


def test_a_check_that_is_not_a_provisioning_request_places_at_once() -> None:
    # "workload with a custom AdmissionCheck gets TAS assigned"
    s = _scheduler([_node("x1")], check="custom-check")
    wl = _job()
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert wl.state is WorkloadState.QUOTA_RESERVED
    assert _assigned(wl) == {"one": ("tas-default", None, ("x1",))}


def test_second_pass_places_on_the_provisioned_nodes_then_admits() -> None:
    # "workload in CQ with ProvisioningRequest; second pass; baseline scenario": the second pass comes a second after
    # the check is Ready (Kueue's first backoff), places the pod set and admits; the quota is not counted twice
    # ("large workload in CQ with ProvisioningRequest; second pass", "... multi-resource workload fully consumes
    # quota": the workload takes all 50 cpus of the queue).
    nodes: list[Node] = []
    s = _scheduler(nodes)
    wl = _job(PodSet("one", 1, {"cpu": 50 * CPU}, topology=TopologyRequest(HOSTNAME, required=True)))
    s.add(wl, 0.0)
    s.schedule(0.0)
    nodes.append(node("x1", {"tas-node": "true", HOSTNAME: "x1"}, 50, pods=50_000, booked_for=wl.key))
    assert _kinds(s.set_check(wl.key, PROV, CheckState.READY, 60.0)) == []
    assert wl.state is WorkloadState.QUOTA_RESERVED and wl.pending_reason == \
        "There are pending delayed topology requests"
    assert s.next_requeue() == 61.0
    assert s.schedule(60.5) == []
    events = s.schedule(61.0)
    assert _kinds(events) == ["Admitted"]
    assert wl.state is WorkloadState.ADMITTED and wl.admitted_at == 61.0
    assert _assigned(wl) == {"one": ("tas-default", "Ready", ("x1",))}
    assert events[0].extra["topologyAssignments"]["one"]["domains"] == [{"values": ["x1"], "count": 1}]
    assert s.usage("tas-main", ("tas-default", "cpu")) == 50 * CPU
    assert s.next_requeue() is None


def test_a_workload_restored_while_its_delayed_placement_waited_is_tried_again() -> None:
    # A restart finds the workload as it was stored: its quota reserved, its check Ready, its pod set not yet placed.
    # Restored into a fresh scheduler at 100, it gets its second pass a second later, as after the check.
    nodes = [node("x1", {"tas-node": "true", HOSTNAME: "x1"}, 50, pods=50_000)]
    before = _scheduler([])
    wl = _job()
    before.add(wl, 0.0)
    before.schedule(0.0)
    before.set_check(wl.key, PROV, CheckState.READY, 60.0)
    assert wl.state is WorkloadState.QUOTA_RESERVED and _assigned(wl) == {"one": ("tas-default", "Pending", None)}
    s = _scheduler(nodes)
    restored = copy.deepcopy(wl)
    assert _kinds(s.add(restored, 100.0)) == ["Created"]
    assert s.next_requeue() == 101.0 and s.schedule(100.5) == []
    assert _kinds(s.schedule(101.0)) == ["Admitted"]
    assert restored.state is WorkloadState.ADMITTED
    assert _assigned(restored) == {"one": ("tas-default", "Ready", ("x1",))}


def test_only_the_flavor_the_check_applies_to_is_delayed() -> None:
    # "workload in CQ with two TAS flavors, only the second is using Provisioning Admission Check" and "... one with
    # ProvisioningRequest, one regular; second pass": pod set one on tas-default is placed at once, two (on
    # tas-second, which the check's onFlavors names) once the check is Ready.
    s = _scheduler([_node("x1"), _node("y1", "tas-node-second")], on=frozenset({"tas-second"}), second=True)
    wl = _job(_podset("one"), _podset("two"))
    wl.allowed = (("one", frozenset({"tas-default"})), ("two", frozenset({"tas-second"})))
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert _assigned(wl) == {"one": ("tas-default", None, ("x1",)), "two": ("tas-second", "Pending", None)}
    s.set_check(wl.key, PROV, CheckState.READY, 5.0)
    s.schedule(6.0)
    assert wl.state is WorkloadState.ADMITTED
    assert _assigned(wl) == {"one": ("tas-default", None, ("x1",)), "two": ("tas-second", "Ready", ("y1",))}


def test_no_placement_keeps_the_quota_and_retries_with_a_doubling_backoff() -> None:
    # Kueue's integration test "uses exponential second-pass backoff for the workload admission": the provisioned
    # node is not Ready; each second pass fails (SecondPassFailed), the quota stays reserved, the next is tried
    # after 2 s, 4 s, ...; once the node is Ready the next pass admits.
    node = _node("x1", ready=False)
    s = _scheduler([node])
    wl = _job()
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 10.0)
    tried = []
    while (at := s.next_requeue()) is not None and at < 30.0:
        events = s.schedule(at)
        assert _kinds(events) == ["SecondPassFailed"]
        tried.append(at)
    assert tried == [11.0, 13.0, 17.0, 25.0]
    assert (events[0].t, events[0].workload, events[0].cluster_queue) == (25.0, wl.key, "tas-main")
    assert events[0].reason == f"couldn't assign flavors to pod set one: no topology domains at level: {HOSTNAME}"
    assert wl.state is WorkloadState.QUOTA_RESERVED and wl.pending_reason == events[0].reason
    assert s.usage("tas-main", ("tas-default", "cpu")) == CPU
    node.is_ready = True
    assert s.next_requeue() == 41.0
    assert _kinds(s.schedule(41.0)) == ["Admitted"]
    assert _assigned(wl) == {"one": ("tas-default", "Ready", ("x1",))}


def test_a_partly_admitted_pod_set_is_placed_with_the_pods_it_reserved() -> None:
    # 8 pods of 10 cpus, at least 2, in a queue of 50 cpus: 5 reserved, their placement delayed. The provisioned node
    # holds 50 cpus: the second pass places the 5, not the 8 the pod set asks for.
    nodes: list[Node] = []
    s = _scheduler(nodes)
    wl = _job(PodSet("one", 8, {"cpu": 10 * CPU}, min_count=2, topology=TopologyRequest(HOSTNAME, required=True)))
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert wl.admission is not None and [p.count for p in wl.admission.podsets] == [5]
    nodes.append(node("x1", {"tas-node": "true", HOSTNAME: "x1"}, 50, booked_for=wl.key))
    s.set_check(wl.key, PROV, CheckState.READY, 10.0)
    assert _kinds(s.schedule(11.0)) == ["Admitted"]
    assert _assigned(wl) == {"one": ("tas-default", "Ready", ("x1",))}
    assert wl.admission.podsets[0].topology is not None
    assert wl.admission.podsets[0].topology.domains == ((("x1",), 5),)


def test_nodes_booked_for_another_workload_are_not_its_own() -> None:
    # flexq's emulated capacity: a ProvisioningRequest's nodes are booked for the workload that asked; another
    # workload's second pass (or first placement) does not take them.
    s = _scheduler([_node("x1", booked="default/other")])
    wl = _job()
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    assert _kinds(s.schedule(1.0)) == ["SecondPassFailed"]


def test_an_eviction_drops_its_second_pass() -> None:
    # Kueue's NeedsSecondPass is false once the workload is evicted: a Retry of the check ends the wait.
    s = _scheduler([_node("x1", ready=False)])
    wl = _job()
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    s.schedule(1.0)
    events = s.set_check(wl.key, PROV, CheckState.RETRY, 2.0)
    assert EventKind.EVICTED in [e.kind for e in events]
    assert wl.state is WorkloadState.PENDING and wl.admission is None
    assert s.next_requeue() is None
    assert DelayedTopology.PENDING.value == "Pending"


def test_a_racing_variant_wins_once_its_delayed_placement_admits_it() -> None:
    # Kueue's Concurrent Admission (flexq's racing): the variant on the flavor behind the check reserves unplaced;
    # its second pass admits it, and the workload takes its admission with its placement.
    nodes = [_node("x1")]
    flavors = [FlavorSpec("tas-default", {"tas-node": "true"}, topology="single", levels=(HOSTNAME,)),
               FlavorSpec("tas-second", {"tas-node-second": "true"}, topology="single", levels=(HOSTNAME,))]
    cq = tas_queue("tas-main", ["tas-default", "tas-second"], 50, checks=((PROV, frozenset({"tas-second"})),),
                   concurrent=ConcurrentPolicy())
    s = tas_scheduler(nodes, flavors, [cq], provisioning_checks=frozenset({PROV}))
    first, wl = _job(PodSet("one", 1, {"cpu": CPU}, topology=TopologyRequest(HOSTNAME, required=True))), \
        Workload("default", "bar", "lq", "tas-main", (_podset("one"),), uid="bar")
    for t, job in enumerate((first, wl)):
        s.add(job, float(t))
        s.schedule(float(t))
    assert first.state is WorkloadState.ADMITTED  # x1 is taken: bar's tas-default variant waits
    (variant,) = [s.held(k) for k in s.variants[wl.key] if s.held(k).flavor == "tas-second"]
    assert _assigned(variant) == {"one": ("tas-second", "Pending", None)}
    nodes.append(_node("y1", "tas-node-second", booked=variant.key))
    s.set_check(variant.key, PROV, CheckState.READY, 5.0)
    events = s.schedule(6.0)
    assert [e.kind.value for e in events][:2] == ["Admitted", "Finished"]
    assert {e.t for e in events} == {6.0}, "the variant's win and what follows it, dated now"
    # under TryPreferredFlavors the more preferred flavor's variant races on
    assert [s.held(k).flavor for k in s.variants[wl.key]] == ["tas-default"]
    assert wl.state is WorkloadState.ADMITTED
    assert _assigned(wl) == {"one": ("tas-second", "Ready", ("y1",))}


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "alone"])
def test_a_delayed_pod_set_group_is_placed_together_by_the_second_pass(grouped: bool) -> None:
    # Kueue's second pass takes a pod set group's podSetGroupName as its first pass does: other pods use 4 of x1's 5
    # cpus (rack r1), so the two 4-cpu workers go to r2; the 1-cpu leader alone fits tightest on x1, grouped it goes
    # with its workers.
    rack = "rack"
    nodes = [node("x1", {"tas-node": "true", rack: "r1", HOSTNAME: "x1"}, 5, used={"cpu": 4 * CPU}),
             *(node(h, {"tas-node": "true", rack: "r2", HOSTNAME: h}, 5) for h in ("y1", "y2"))]
    flavor = FlavorSpec("tas-default", {"tas-node": "true"}, topology="two", levels=(rack, HOSTNAME))
    cq = tas_queue("tas-main", ["tas-default"], 50, checks=((PROV, None),))
    s = tas_scheduler(nodes, [flavor], [cq], instant_eviction=False, provisioning_checks=frozenset({PROV}))
    request = TopologyRequest(rack, required=True, group="lws" if grouped else "")
    wl = _job(PodSet("leader", 1, {"cpu": CPU}, topology=request), PodSet("workers", 2, {"cpu": 4 * CPU},
                                                                          topology=request))
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert _assigned(wl) == {"leader": ("tas-default", "Pending", None), "workers": ("tas-default", "Pending", None)}
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    assert _kinds(s.schedule(1.0)) == ["Admitted"]
    assert _assigned(wl) == {"leader": ("tas-default", "Ready", ("y1",) if grouped else ("x1",)),
                             "workers": ("tas-default", "Ready", ("y1", "y2"))}


def _dedicated() -> tuple[Scheduler, Workload]:
    """Kueue's integration test "should admit workload targeting the dedicated newly provisioned nodes"
    (test/integration/singlecluster/tas/tas_test.go): a three-level topology, ``tas-flavor`` (nodes labelled
    ``node-group: tas``), 5 cpus behind the ProvisioningRequest check; one pod of 1 cpu prefers a rack. Provisioned:
    x2 (rack r1, 1 cpu, ``dedicated-selector-key: dedicated-selector-value-abc``) and x1 (rack r2, 2 cpus, ``...-xyz``).
    """
    nodes = [node("x2", {"node-group": "tas", "dedicated-selector-key": "dedicated-selector-value-abc", BLOCK: "b1",
                         RACK: "r1", HOSTNAME: "x2"}, 1),
             node("x1", {"node-group": "tas", "dedicated-selector-key": "dedicated-selector-value-xyz", BLOCK: "b1",
                         RACK: "r2", HOSTNAME: "x1"}, 2)]
    flavor = FlavorSpec("tas-flavor", {"node-group": "tas"}, topology="default", levels=(BLOCK, RACK, HOSTNAME))
    cq = tas_queue("cq", ["tas-flavor"], 5, checks=((PROV, None),))
    s = tas_scheduler(nodes, [flavor], [cq], instant_eviction=False, provisioning_checks=frozenset({PROV}))
    wl = Workload("default", "wl1", "lq", "cq", (PodSet("main", 1, {"cpu": CPU}, topology=TopologyRequest(RACK)),),
                  uid="wl1")
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert _assigned(wl) == {"main": ("tas-flavor", "Pending", None)}
    return s, wl


def _hosts(wl: Workload) -> tuple[str, ...] | None:
    return _assigned(wl)["main"][2]


def test_second_pass_places_on_the_nodes_the_checks_pod_set_updates_select() -> None:
    # The ProvisioningRequestConfig's podSetUpdates.nodeSelector (dedicated-selector-key, from the request's
    # provisioningClassDetails) is the check's podSetUpdate: the pod goes to x1, the node it selects, not to x2 (the
    # tighter fit of the two racks, where it goes with no podSetUpdates: the next test).
    s, wl = _dedicated()
    update = PodSetUpdate({"autoscaling.x-k8s.io/consume-provisioning-request": "wl1-provisioning-1"},
                          node_selector={"dedicated-selector-key": "dedicated-selector-value-xyz"})
    s.set_check(wl.key, PROV, CheckState.READY, 10.0, pod_set_updates={"main": update})
    assert _kinds(s.schedule(11.0)) == ["Admitted"]
    assert _hosts(wl) == ("x1",)


def test_without_pod_set_updates_the_second_pass_takes_the_tightest_fit() -> None:
    s, wl = _dedicated()
    s.set_check(wl.key, PROV, CheckState.READY, 10.0,
                pod_set_updates={"main": PodSetUpdate({"autoscaling.x-k8s.io/consume-provisioning-request": "p"})})
    assert _kinds(s.schedule(11.0)) == ["Admitted"]
    assert _hosts(wl) == ("x2",)


def test_a_selector_no_node_matches_leaves_the_second_pass_failing() -> None:
    s, wl = _dedicated()
    s.set_check(wl.key, PROV, CheckState.READY, 10.0,
                pod_set_updates={"main": PodSetUpdate(node_selector={"dedicated-selector-key": "other"})})
    (failed,) = s.schedule(11.0)
    assert failed.kind is EventKind.SECOND_PASS_FAILED and wl.state is WorkloadState.QUOTA_RESERVED


def test_second_pass_tolerates_the_taints_the_checks_pod_set_updates_tolerate() -> None:
    # Kueue merges an update's tolerations into the pod set's (PodSetInfo.Merge): a node tainted NoSchedule (as
    # GKE's queued provisioning taints its nodes) is the pods' once the check's update tolerates it.
    taint = Taint("cloud.google.com/gke-queued", "true", "NoSchedule")
    tainted = dataclasses.replace(_node("x1"), taints=(taint,))
    for updates, kinds in (({}, ["SecondPassFailed"]),
                           ({"one": PodSetUpdate(tolerations=(Toleration("cloud.google.com/gke-queued", "Exists",
                                                                         effect="NoSchedule"),))}, ["Admitted"])):
        s = _scheduler([tainted])
        wl = _job()
        s.add(wl, 0.0)
        s.schedule(0.0)
        s.set_check(wl.key, PROV, CheckState.READY, 10.0, pod_set_updates=updates)
        assert _kinds(s.schedule(11.0)) == kinds


def test_a_pod_set_update_that_contradicts_the_template_says_so() -> None:
    # Kueue's findTopologyAssignment: "invalid podSetUpdate for PodSet ..." where a check's nodeSelector gives a key
    # of the template's nodeSelector another value.
    s = _scheduler([_node("x1")])
    wl = _job(dataclasses.replace(_podset("one"), node_selector={"tas-node": "true"}))
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 10.0,
                pod_set_updates={"one": PodSetUpdate(node_selector={"tas-node": "false"})})
    (failed,) = s.schedule(11.0)
    assert failed.kind is EventKind.SECOND_PASS_FAILED
    assert failed.reason == ("couldn't assign flavors to pod set one: invalid podSetUpdate for PodSet one, error: "
                             "invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for "
                             "key=tas-node, value1=true, value2=false")


def test_every_second_pass_due_is_made_in_one_step() -> None:
    # Three workloads whose checks turned Ready together, one host with room for two: the first two in key order are
    # placed and admitted, the third's pass fails, all in the one step their passes came due.
    s = _scheduler([node("x1", {"tas-node": "true", HOSTNAME: "x1"}, 2)])
    jobs = [dataclasses.replace(_job(), name=name, uid=name) for name in ("a", "b", "c")]
    for wl in jobs:
        s.add(wl, 0.0)
    s.schedule(0.0)
    for wl in jobs:
        s.set_check(wl.key, PROV, CheckState.READY, 10.0)
    events = s.schedule(11.0)
    assert [(e.kind.value, e.workload) for e in events] == [
        ("Admitted", "default/a"), ("Admitted", "default/b"), ("SecondPassFailed", "default/c")]
    assert [wl.state for wl in jobs] == [WorkloadState.ADMITTED, WorkloadState.ADMITTED, WorkloadState.QUOTA_RESERVED]


def test_the_second_pass_places_an_implicit_topology_request_too() -> None:
    nodes: list[Node] = []
    s = _scheduler(nodes)
    wl = _job(_podset("one", topology=False))
    s.add(wl, 0.0)
    s.schedule(0.0)
    nodes.append(_node("x1"))
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    assert _kinds(s.schedule(1.0)) == ["Admitted"]
    assert _assigned(wl) == {"one": ("tas-default", "Ready", ("x1",))}


def test_delayed_pod_sets_placed_in_one_pass_do_not_take_the_same_room() -> None:
    """One then two, 2 cpus each: one takes x1 (the most free); two, placed alone, would too, but finds only 1 cpu
    left there beside one and goes to y1."""
    nodes = [node("x1", {"tas-node": "true", HOSTNAME: "x1"}, 3), node("y1", {"tas-node": "true", HOSTNAME: "y1"}, 2)]
    s = _scheduler(nodes)
    wl = _job(_podset("one", cpus=2), _podset("two", cpus=2))
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    assert _kinds(s.schedule(1.0)) == ["Admitted"]
    assert _assigned(wl) == {"one": ("tas-default", "Ready", ("x1",)), "two": ("tas-default", "Ready", ("y1",))}
    assert wl.admission is not None and wl.admission.cluster_queue == "tas-main"


def test_a_pod_set_after_a_delayed_group_is_placed_by_the_same_pass() -> None:
    """The group (leader and workers, placed together) fills one host; the pod set after it takes the other."""
    nodes = [node(h, {"tas-node": "true", HOSTNAME: h}, 4) for h in ("x1", "y1")]
    s = _scheduler(nodes)
    grouped = TopologyRequest(HOSTNAME, required=True, group="lws")
    wl = _job(PodSet("leader", 1, {"cpu": CPU}, topology=grouped), PodSet("workers", 1, {"cpu": 3 * CPU},
                                                                          topology=grouped), _podset("extra", cpus=4))
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    assert _kinds(s.schedule(1.0)) == ["Admitted"]
    placed = _assigned(wl)
    assert placed["leader"] == placed["workers"] and placed["leader"][1:] in (("Ready", ("x1",)), ("Ready", ("y1",)))
    assert placed["extra"][1] == "Ready" and placed["extra"][2] not in (None, placed["leader"][2])


def test_a_flavor_no_longer_topology_aware_admits_its_delayed_pod_set_without_a_placement() -> None:
    """The flavor lost its topology while the workload waited for its check: no topology is configured any more, so
    there is nothing to place the pod set by; it is Ready as it is, and the workload admitted."""
    s = _scheduler([_node("x1")])
    wl = _job()
    s.add(wl, 0.0)
    s.schedule(0.0)
    s.configure(dataclasses.replace(s.config, flavors={"tas-default": FlavorSpec("tas-default", {"tas-node": "true"})}),
                0.0)
    s.set_check(wl.key, PROV, CheckState.READY, 0.0)
    assert _kinds(s.schedule(1.0)) == ["Admitted"]
    assert _assigned(wl) == {"one": ("tas-default", "Ready", None)}
