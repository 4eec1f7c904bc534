"""Kueue's ``check-capacity.autoscaling.x-k8s.io`` class: the cluster autoscaler provisions nothing and answers whether
the pods fit on the nodes there now; capacity not found is looked at again until it is (or fails at once with
``noRetry``). Each case runs the control plane on both clocks (the simulator's from 0, the live server's from a Unix
time) and compares the story it tells with the one written here (times from the clock's start)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from flexq.capacity import (
    CapacityConfig,
    CapacitySpec,
    EmulatedCloud,
    NodePoolSpec,
    PoolNote,
    ProvisioningState,
    RequestNote,
    machine_type,
)
from flexq.clock import VirtualClock
from flexq.control import ControlPlane, JobFinished, JobHooks, JobQueued
from flexq.scheduler import Event, EventKind
from flexq.timers import Kernel
from tests.support import job

START = 1_764_000_000.0
"""The live clock's start: a Unix time, as the server's clock gives."""
POOL = NodePoolSpec("pool", machine_type("n2-standard-16"), initial_nodes=1, max_nodes=3)


def _objects(no_retry: bool) -> dict[str, list[dict[str, Any]]]:
    parameters = {"parameters": {"noRetry": "true"}} if no_retry else {}
    return {
        "ResourceFlavor": [{"metadata": {"name": "f"},
                            "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "pool"}}}],
        "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
            {"coveredResources": ["cpu"],
             "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "64"}]}]}],
            "admissionChecks": ["sample-prov"]}}],
        "LocalQueue": [{"metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}],
        "AdmissionCheck": [{"metadata": {"name": "sample-prov"}, "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov"}}}],
        "ProvisioningRequestConfig": [{"metadata": {"name": "prov"}, "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io", "managedResources": ["cpu"],
            **parameters}}],
    }





@dataclass(frozen=True)
class Case:
    jobs: tuple[tuple[str, float, int, float], ...]
    """(name, submitted at, cpu, run time)"""
    until: float
    story: tuple[str, ...]
    no_retry: bool = False


def _line(event: Event, origin: float) -> str:
    subject = event.workload.split("/")[-1].split("-")[1] if event.workload else ""
    match event.payload:
        case RequestNote(state=state):
            assert isinstance(state, ProvisioningState)
            detail = state.value
        case PoolNote(pool=pool):
            detail = pool
        case _:
            detail = str(event.extra.get("state", ""))
    return " ".join(p for p in (f"{event.t - origin:g}", event.kind.value, subject, detail) if p)


def run(case: Case, origin: float) -> tuple[list[str], list[Event], ControlPlane]:
    kernel = Kernel(VirtualClock(origin))
    told: list[Event] = []
    runs: dict[str, float] = {}
    planes: list[ControlPlane] = []

    def start(key: str, t: float) -> None:
        kernel.schedule(t + runs[key], lambda: planes[0].emit(planes[0].feed(
            JobFinished(key, kernel.now(), "JobFinished", "Succeeded"))))

    plane = ControlPlane(kernel, told.append, JobHooks(start, runs.get), virtual=origin == 0.0)
    planes.append(plane)
    cloud = EmulatedCloud({"pool": CapacitySpec(boot=5)}, origin=origin)
    plane.configure(_objects(case.no_retry), CapacityConfig((POOL,), cloud, scale_down_after=3600.0), origin)
    for name, at, cpu, run_for in case.jobs:
        def submit(name: str = name, at: float = at, cpu: int = cpu, run_for: float = run_for) -> None:
            made = job(name, queue="q", cpu=cpu, pods=1).uid(name).object()
            wl = plane.workload_for("Job", "batch", made, origin + at)
            runs[wl.key] = run_for
            plane.emit(plane.feed(JobQueued(wl, origin + at)))

        kernel.schedule(origin + at, submit)
    for second in range(int(case.until) + 1):  # the scheduler's own wake-ups (a retry's backoff) come on a tick
        kernel.schedule(origin + second, lambda: None)
    kernel.run_until(origin + case.until, plane.settle)
    events = [e for e in told if e.kind is not EventKind.CREATED]
    return [_line(e, origin) for e in events], events, plane


CASES: dict[str, Case] = {
    "the capacity is there: the node is booked and the job runs on it, nothing provisioned": Case(
        jobs=(("a", 0, 8, 100),), until=200,
        story=("0 QuotaReserved a", "0 ProvisioningRequest a Provisioned", "0 AdmissionCheck a Ready",
               "0 Admitted a", "0 Started a", "100 Finished a")),
    "the node is taken: the second job's request waits, looked at again until the first job ends": Case(
        jobs=(("a", 0, 8, 100), ("b", 1, 12, 50)), until=300,
        story=("0 QuotaReserved a", "0 ProvisioningRequest a Provisioned", "0 AdmissionCheck a Ready",
               "0 Admitted a", "0 Started a", "1 QuotaReserved b", "1 ProvisioningRequest b Accepted",
               "100 Finished a", "101 ProvisioningRequest b Provisioned", "101 AdmissionCheck b Ready",
               "101 Admitted b", "101 Started b", "151 Finished b")),
    "noRetry: capacity not found fails the request at once, and Kueue's backoff retries it": Case(
        jobs=(("a", 0, 8, 100), ("b", 1, 12, 50)), until=250, no_retry=True,
        story=("0 QuotaReserved a", "0 ProvisioningRequest a Provisioned", "0 AdmissionCheck a Ready",
               "0 Admitted a", "0 Started a", "1 QuotaReserved b", "1 ProvisioningRequest b Failed",
               "1 AdmissionCheck b Retry", "1 Evicted b", "61 Requeued b", "61 QuotaReserved b",
               "61 ProvisioningRequest b Failed", "61 AdmissionCheck b Retry", "61 Evicted b", "100 Finished a",
               "181 Requeued b", "181 QuotaReserved b", "181 ProvisioningRequest b Provisioned",
               "181 AdmissionCheck b Ready", "181 Admitted b", "181 Started b", "231 Finished b")),
}


@pytest.mark.parametrize("origin", [0.0, START], ids=["simulator", "live"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_check_capacity_tells_the_story_of_each_case(name: str, origin: float) -> None:
    story, events, plane = run(CASES[name], origin)
    assert story == list(CASES[name].story)
    assert not [e for e in events if e.kind is EventKind.SCALED_UP], "check-capacity provisions nothing"
    assert plane.driver is not None and len(plane.driver.cluster.nodes) == 1


@pytest.mark.parametrize("origin", [0.0, START], ids=["simulator", "live"])
def test_capacity_not_found_says_why_and_is_told_once(origin: float) -> None:
    _story, events, _plane = run(CASES["the node is taken: the second job's request waits, looked at again until the "
                                      "first job ends"], origin)
    (accepted,) = [e for e in events if isinstance(e.payload, RequestNote) and
                   e.payload.state is ProvisioningState.ACCEPTED]
    name = f"{accepted.workload.split('/')[1]}-sample-prov-1"
    assert accepted.reason == (f"ProvisioningRequest {name} is Accepted: capacity is not found in the cluster (1 more "
                               "node(s) of node pool pool needed); the autoscaler will try to find it later")
    assert accepted.to_json()["request"] == name and accepted.to_json()["eta"] is None


@pytest.mark.parametrize("origin", [0.0, START], ids=["simulator", "live"])
def test_a_check_that_waited_with_no_capacity_modelled_gets_its_request_once_a_pool_is(origin: float) -> None:
    """Kueue's provisioning example on a server with no GKE cluster yet: the job reserves quota and its check waits;
    once a cluster (a node pool) is there, its ProvisioningRequest is made and answered."""
    kernel = Kernel(VirtualClock(origin))
    told: list[Event] = []
    started: list[str] = []
    plane = ControlPlane(kernel, told.append, JobHooks(lambda key, _t: started.append(key), lambda _k: None),
                         virtual=origin == 0.0)
    plane.configure(_objects(no_retry=False), None, origin)
    wl = plane.workload_for("Job", "batch", job("a", queue="q", cpu=8, pods=1).uid("a").object(), origin)
    plane.emit(plane.feed(JobQueued(wl, origin)))
    plane.settle(origin)
    assert [e.kind for e in told if e.kind is not EventKind.CREATED] == [EventKind.QUOTA_RESERVED]
    kernel.schedule(origin + 60, lambda: None)
    kernel.run_until(origin + 60, plane.settle)
    assert kernel.now() == origin + 60
    assert not [e for e in told if e.kind is EventKind.PROVISIONING_REQUEST], "no one answers it without capacity"
    told.clear()
    cloud = EmulatedCloud({"pool": CapacitySpec(boot=5)}, origin=origin)
    plane.configure(_objects(no_retry=False), CapacityConfig((POOL,), cloud), origin + 60)
    plane.settle(origin + 60)
    assert [_line(e, origin) for e in told] == ["60 ProvisioningRequest a Provisioned", "60 AdmissionCheck a Ready",
                                                "60 Admitted a", "60 Started a"]
    assert started == [wl.key]


@pytest.mark.parametrize("origin", [0.0, START], ids=["simulator", "live"])
def test_the_requests_conditions_take_the_cluster_autoscalers_reasons(origin: float) -> None:
    """What the autoscaler's check-capacity class sets on the request (``checkcapacity/provisioningclass.go``):
    Provisioned False ``CapacityIsNotFound`` while it will look again, Provisioned True ``CapacityIsFound``, and with
    ``noRetry`` Failed ``CapacityIsNotFound``."""
    def said(case: str) -> list[tuple[str, str, str]]:
        _story, events, _plane = run(CASES[case], origin)
        return [(e.payload.state.value, e.payload.reason, e.payload.message) for e in events
                if isinstance(e.payload, RequestNote) and e.workload.split("-")[1] == "b"]

    later = ("Accepted", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
    found = ("Provisioned", "CapacityIsFound", "Capacity is found in the cluster")
    failed = ("Failed", "CapacityIsNotFound", "CA could not find requested capacity")
    got = {case: said(case) for case in CASES if "b" in {job[0] for job in CASES[case].jobs}}
    assert got == {
        "the node is taken: the second job's request waits, looked at again until the first job ends": [later, found],
        "noRetry: capacity not found fails the request at once, and Kueue's backoff retries it": [
            failed, failed, found],
    }
