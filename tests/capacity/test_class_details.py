"""A provisioned queued-provisioning request's ``status.provisioningClassDetails`` (what GKE writes: the node pool, its
accelerator and zone) and the node selector a ProvisioningRequestConfig's ``podSetUpdates`` makes of them (Kueue's
``valueFromProvisioningClassDetail``; a detail the request lacks is left out). Run on both clocks (the simulator's
from 0, the live server's from a Unix time): the same answer at the same moment."""

from __future__ import annotations

from typing import Any

import pytest

from flexq.capacity import CapacityConfig, CapacitySpec, EmulatedCloud, NodePoolSpec, RequestNote, machine_type
from flexq.clock import VirtualClock
from flexq.control import ControlPlane, JobHooks, JobQueued
from flexq.scheduler import Event, EventKind, PodSetUpdate
from flexq.timers import Kernel
from tests.support import job

POOL = NodePoolSpec("dws-pool", machine_type("n2-standard-16"), max_nodes=4, queued_provisioning=True,
                    location="us-east5-b")
SELECTOR = [{"key": "cloud.google.com/gke-nodepool", "valueFromProvisioningClassDetail": "NodePoolName"},
            {"key": "example.com/zone", "valueFromProvisioningClassDetail": "SelectedZone"},
            {"key": "example.com/group", "valueFromProvisioningClassDetail": "NodeGroupName"}]


def _objects(selector: list[dict[str, str]] | None) -> dict[str, list[dict[str, Any]]]:
    updates = {"podSetUpdates": {"nodeSelector": selector}} if selector is not None else {}
    return {
        "ResourceFlavor": [{"metadata": {"name": "dws"}, "spec": {
            "nodeLabels": {"cloud.google.com/gke-nodepool": "dws-pool"},
            "tolerations": [{"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}]}}],
        "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
            {"coveredResources": ["cpu"],
             "flavors": [{"name": "dws", "resources": [{"name": "cpu", "nominalQuota": "64"}]}]}],
            "admissionChecks": ["dws-prov"]}}],
        "LocalQueue": [{"metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}],
        "AdmissionCheck": [{"metadata": {"name": "dws-prov"}, "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"}}}],
        "ProvisioningRequestConfig": [{"metadata": {"name": "cfg"}, "spec": {
            "provisioningClassName": "queued-provisioning.gke.io", "managedResources": ["cpu"], **updates}}],
    }


def _run(origin: float, selector: list[dict[str, str]] | None) -> tuple[list[Event], PodSetUpdate | None]:
    kernel = Kernel(VirtualClock(origin))
    told: list[Event] = []
    plane = ControlPlane(kernel, told.append, JobHooks(lambda key, t: None, lambda key: None), virtual=origin == 0.0)
    cloud = EmulatedCloud({"dws-pool": CapacitySpec(boot=5, queued_delay=30)}, origin=origin)
    plane.configure(_objects(selector), CapacityConfig((POOL,), cloud, scale_down_after=3600.0), origin)
    wl = plane.workload_for("Job", "batch", job("a", queue="q", cpu=8, pods=1).uid("a").object(), origin)
    kernel.schedule(origin, lambda: plane.emit(plane.feed(JobQueued(wl, origin))))
    for second in range(61):
        kernel.schedule(origin + second, lambda: None)
    kernel.run_until(origin + 60, plane.settle)
    held = plane.scheduler.workload(wl.key)
    assert held is not None
    updates = held.pod_set_updates.get("dws-prov", {})
    return told, updates.get("main")



@pytest.mark.parametrize("origin", [0.0, 1_764_000_000.0], ids=["virtual", "live"])
def test_the_configs_node_selector_takes_its_values_from_the_requests_class_details(origin: float) -> None:
    told, update = _run(origin, SELECTOR)
    (provisioned,) = [e for e in told if isinstance(e.payload, RequestNote) and e.payload.state.value == "Provisioned"]
    assert isinstance(provisioned.payload, RequestNote)
    assert provisioned.t - origin == 30, "answered after the pool's queued delay"
    assert dict(provisioned.payload.details) == {
        "NodePoolName": "dws-pool", "SelectedZone": "us-east5-b", "NodePoolAutoProvisioned": "false",
        "ProvisioningMode": "resize_request"}
    assert update is not None
    assert dict(update.node_selector) == {"cloud.google.com/gke-nodepool": "dws-pool",
                                          "example.com/zone": "us-east5-b"}, "NodeGroupName: no such detail, skipped"
    assert update.annotations["autoscaling.x-k8s.io/consume-provisioning-request"].endswith("-dws-prov-1")
    assert [e.kind for e in told if e.kind is EventKind.ADMITTED], "its pods select the nodes it was given: admitted"


def test_without_pod_set_updates_the_check_asks_only_to_consume_the_request() -> None:
    _told, update = _run(0.0, None)
    assert update is not None and dict(update.node_selector) == {}
    assert set(update.annotations) == {"autoscaling.x-k8s.io/consume-provisioning-request",
                                       "autoscaling.x-k8s.io/provisioning-class-name"}
