"""A delayed topology request in a Workload's status as the queue controller writes it (Kueue's
``delayedTopologyRequest`` on the pod set's assignment, ``PendingDelayedTopologyRequests`` on ``Admitted``), and
read back after a restart: a workload whose checks are Ready and whose placement still waits gets its second pass
(Kueue's integration test ``should admit workload when nodes are provisioned; manager restart``)."""

from __future__ import annotations

import dataclasses

from flexq.controller.object_sync import render_status, workload_from_object
from flexq.scheduler import (
    Admission,
    CheckState,
    ClusterQueueSpec,
    Config,
    DelayedTopology,
    FlavorSpec,
    PodSet,
    PodSetAssignment,
    Quota,
    ResourceGroup,
    Scheduler,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.model import PodSetUpdate, Taint, Toleration
from tests.support.tas import node

HOSTNAME = "kubernetes.io/hostname"


def _reserved(delayed: DelayedTopology, placed: TopologyAssignment | None, checks: CheckState) -> Workload:
    wl = Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}, topology=TopologyRequest(
        HOSTNAME, required=True)),), state=WorkloadState.QUOTA_RESERVED, admission=Admission.of("cq", (
            PodSetAssignment("main", {"cpu": "tas"}, {("tas", "cpu"): 1000}, 1, placed, delayed),)))
    wl.checks = {"prov": checks}
    return wl


def _conditions(status: dict[str, object]) -> dict[str, tuple[str, str]]:
    rows = status["conditions"]
    assert isinstance(rows, list)
    return {c["type"]: (c["status"], c["reason"]) for c in rows}


def test_pending_then_ready_as_kueue_writes_them() -> None:
    waiting = render_status(_reserved(DelayedTopology.PENDING, None, CheckState.PENDING), {}, None,
                            "2026-01-01T00:00:00Z", 1)
    (psa,) = waiting["admission"]["podSetAssignments"]
    assert psa["delayedTopologyRequest"] == "Pending" and "topologyAssignment" not in psa
    assert _conditions(waiting)["Admitted"] == ("False", "UnsatisfiedAdmissionChecks")
    ready = render_status(_reserved(DelayedTopology.PENDING, None, CheckState.READY), waiting, None,
                          "2026-01-01T00:01:00Z", 1)
    assert _conditions(ready)["Admitted"] == ("False", "PendingDelayedTopologyRequests")
    placed = _reserved(DelayedTopology.READY, TopologyAssignment((HOSTNAME,), ((("x1",), 1),)), CheckState.READY)
    placed.state = WorkloadState.ADMITTED
    done = render_status(placed, ready, None, "2026-01-01T00:01:01Z", 1)
    (psa,) = done["admission"]["podSetAssignments"]
    assert psa["delayedTopologyRequest"] == "Ready" and psa["topologyAssignment"]["levels"] == [HOSTNAME]
    assert _conditions(done)["Admitted"] == ("True", "Admitted")


def test_a_restart_reads_it_back_and_the_second_pass_follows() -> None:
    status = render_status(_reserved(DelayedTopology.PENDING, None, CheckState.READY), {}, None,
                           "2026-01-01T00:00:00Z", 1)
    again = workload_from_object({"metadata": {"name": "w", "namespace": "default"}, "spec": {
        "queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
            "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": HOSTNAME}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": status}, {("default", "q"): "cq"})
    assert again.state is WorkloadState.QUOTA_RESERVED and again.admission is not None
    assert [(ps.delayed, ps.topology) for ps in again.admission.podsets] == [(DelayedTopology.PENDING, None)]
    flavor = FlavorSpec("tas", topology="single", levels=(HOSTNAME,))
    cq = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("tas",), {("tas", "cpu"): Quota(8000)}),),
                          checks=(("prov", None),))
    s = Scheduler(Config({"tas": flavor}, {"cq": cq}, {}, provisioning_checks=frozenset({"prov"})))
    s.add(again, 100.0)
    assert s.next_requeue() == 101.0, "its second pass, a second after it is known again"


def test_a_checks_pod_set_updates_are_written_read_back_and_select_the_nodes_of_the_second_pass() -> None:
    # A check's podSetUpdates (annotations, nodeSelector, tolerations) in the status as Kueue writes them; read back
    # after a restart, the second pass places the pod set on the node they select (x2), not the other (x1).
    wl = _reserved(DelayedTopology.PENDING, None, CheckState.READY)
    toleration = Toleration("cloud.google.com/gke-queued", "Exists", effect="NoSchedule")
    wl.pod_set_updates = {"prov": {"main": PodSetUpdate({"autoscaling.x-k8s.io/consume-provisioning-request": "w-1"},
                                                        node_selector={"pool": "dedicated"},
                                                        tolerations=(toleration,))}}
    status = render_status(wl, {}, None, "2026-01-01T00:00:00Z", 1)
    assert status["admissionChecks"][0]["podSetUpdates"] == [{
        "name": "main", "annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "w-1"},
        "nodeSelector": {"pool": "dedicated"},
        "tolerations": [{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}]}]
    again = workload_from_object({"metadata": {"name": "w", "namespace": "default"}, "spec": {
        "queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {
            "metadata": {"annotations": {"kueue.x-k8s.io/podset-required-topology": HOSTNAME}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
        "status": status}, {("default", "q"): "cq"})
    assert again.pod_set_updates == wl.pod_set_updates
    flavor = FlavorSpec("tas", topology="single", levels=(HOSTNAME,))
    cq = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("tas",), {("tas", "cpu"): Quota(8000)}),),
                          checks=(("prov", None),))
    s = Scheduler(Config({"tas": flavor}, {"cq": cq}, {}, provisioning_checks=frozenset({"prov"})))
    queued = Taint("cloud.google.com/gke-queued", "true", "NoSchedule")
    nodes = [node("x1", {HOSTNAME: "x1"}, 2), dataclasses.replace(
        node("x2", {"pool": "dedicated", HOSTNAME: "x2"}, 4), taints=(queued,))]
    s.nodes = lambda: nodes
    s.add(again, 100.0)
    s.schedule(101.0)
    assert again.state is WorkloadState.ADMITTED and again.admission is not None
    (placed,) = again.admission.podsets
    assert placed.topology is not None and placed.topology.domains == ((("x2",), 1),)
