"""The capacity driver, case by case: node pools that scale from zero and back, Plan A racing a DWS flex-start pool,
a stock-out, capacity taken back. Each case runs the control plane in virtual time and compares every event the
driver and the scheduler tell with the story written here (``t kind subject [detail]``; a racing variant is
``job/flavor``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from flexq.capacity import (
    CapacityConfig,
    CapacitySpec,
    EmulatedCloud,
    FallbackNote,
    NodePoolSpec,
    PoolNote,
    ProvisioningState,
    RequestNote,
    StartedNote,
    WorkloadNote,
    machine_type,
)
from flexq.clock import VirtualClock
from flexq.control import ControlPlane, JobFinished, JobHooks, JobQueued
from flexq.scheduler import Event, EventKind
from flexq.timers import Kernel
from tests.support import job

N2 = machine_type("n2-standard-16")
PLAN_A = NodePoolSpec("a-pool", N2, max_nodes=1)
PLAN_B = NodePoolSpec("b-pool", N2, max_nodes=2, queued_provisioning=True, flex_start=True)
QUEUED = {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"}


def _objects(a_cpu: int) -> dict[str, list[dict[str, Any]]]:
    """Flavor ``a`` on a-pool (``a_cpu`` of quota), flavor ``b`` on b-pool behind a DWS check, in that order."""
    def flavor(name: str, pool: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": pool}}}

    return {
        "ResourceFlavor": [flavor("a", "a-pool"), flavor("b", "b-pool")],
        "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [
                {"name": "a", "resources": [{"name": "cpu", "nominalQuota": str(a_cpu)}]},
                {"name": "b", "resources": [{"name": "cpu", "nominalQuota": "1000"}]}]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "dws-prov", "onFlavors": ["b"]}]}}}],
        "LocalQueue": [{"metadata": {"name": "q", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}],
        "AdmissionCheck": [{"metadata": {"name": "dws-prov"}, "spec": {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "dws"}}}],
        "ProvisioningRequestConfig": [{"metadata": {"name": "dws"}, "spec": {
            "provisioningClassName": "queued-provisioning.gke.io", "managedResources": ["cpu"]}}],
    }





@dataclass(frozen=True)
class Case:
    cloud: dict[str, CapacitySpec]
    jobs: tuple[tuple[str, float, int, float], ...]
    """(name, submitted at, cpu, run time)"""
    until: float
    story: tuple[str, ...]
    pools: tuple[NodePoolSpec, ...] = (PLAN_A, PLAN_B)
    settings: dict[str, float] = field(default_factory=lambda: {"scale_down_after": 60.0})
    a_cpu: int = 16


def _subject(event: Event) -> str:
    name = event.workload.split("/")[-1]
    if not name.startswith("job-"):
        return name or (event.payload.pool if isinstance(event.payload, PoolNote) else "")
    job = name.split("-")[1]
    return f"{job}/{name.split('-variant-')[1].split('-')[0]}" if "-variant-" in name else job


def _detail(event: Event) -> str:
    """What a story line says of an event beyond its kind and subject: read from its typed payload, the same as the
    event log writes it."""
    payload = event.payload
    if not event.kind.capacity:
        assert payload is None, "the scheduler's events say what they say in extra"
        return str(event.extra.get("state", ""))
    assert payload is not None, f"every capacity event carries a payload: {event}"
    assert event.extra == payload.fields() and json.loads(json.dumps(event.to_json()))["event"] == event.kind.value
    match payload:
        case RequestNote(state=state):
            assert isinstance(state, ProvisioningState)
            return state.value
        case PoolNote(pool=pool, nodes=nodes) if event.kind in (EventKind.SCALED_UP, EventKind.SCALED_DOWN):
            return f"{pool}:{nodes}"
        case PoolNote() | StartedNote() | WorkloadNote() | FallbackNote():
            return ""
    raise AssertionError(f"a payload the story does not know: {payload!r}")


def _line(event: Event) -> str:
    detail = _detail(event)
    return " ".join(part for part in (f"{event.t:g}", event.kind.value, _subject(event), str(detail)) if part)


def run(case: Case) -> list[str]:
    """The story the plane tells (jobs' Created events left out), each job ending its run time after it started,
    unless its run was cut short first."""
    kernel = Kernel(VirtualClock(0.0))
    told: list[Event] = []
    runs: dict[str, float] = {}
    began: dict[str, float] = {}
    planes: list[ControlPlane] = []

    def start(key: str, t: float) -> None:
        began[key] = t

        def finish() -> None:
            if began.get(key) == t:  # not a run that was evicted and started again since
                planes[0].emit(planes[0].feed(JobFinished(key, kernel.now(), "JobFinished", "Succeeded")))

        kernel.schedule(t + runs[key], finish)

    plane = ControlPlane(kernel, told.append, JobHooks(start, runs.get), virtual=True)
    planes.append(plane)
    plane.configure(_objects(case.a_cpu), CapacityConfig(case.pools, EmulatedCloud(case.cloud), **case.settings), 0.0)
    for name, at, cpu, run_for in case.jobs:
        def submit(name: str = name, at: float = at, cpu: int = cpu, run_for: float = run_for) -> None:
            made = job(name, queue="q", cpu=cpu, pods=1).uid(name).tolerate(QUEUED).object()
            wl = plane.workload_for("Job", "batch", made, at)
            runs[wl.key] = run_for
            plane.emit(plane.feed(JobQueued(wl, at)))

        kernel.schedule(at, submit)
    kernel.run_until(case.until, plane.settle)
    return [_line(e) for e in told if e.kind is not EventKind.CREATED]


CASES: dict[str, Case] = {
    "plan A's node boots first: the DWS request is withdrawn, the idle node goes after scale-down-after": Case(
        cloud={"a-pool": CapacitySpec(boot=10), "b-pool": CapacitySpec(queued_delay=3600)},
        jobs=(("j0", 0, 8, 100),), until=400,
        story=("0 QuotaReserved j0/a", "0 Admitted j0/a", "0 ScaledUp j0 a-pool:1", "0 QuotaReserved j0/b",
               "0 ProvisioningRequest j0 Accepted", "10 RaceWon j0", "10 Finished j0/b",
               "10 ProvisioningRequest j0 Withdrawn", "10 Finished j0/a", "10 QuotaReserved j0", "10 Admitted j0",
               "10 Started j0", "110 Finished j0", "170 ScaledDown a-pool a-pool:0")),
    "plan A is busy: DWS answers first and the job runs there; each pool scales down once idle": Case(
        cloud={"a-pool": CapacitySpec(boot=10), "b-pool": CapacitySpec(queued_delay=30)},
        jobs=(("j0", 0, 8, 100), ("j1", 1, 12, 50)), until=400,
        story=("0 QuotaReserved j0/a", "0 Admitted j0/a", "0 ScaledUp j0 a-pool:1", "0 QuotaReserved j0/b",
               "0 ProvisioningRequest j0 Accepted", "1 Pending j1/a", "1 QuotaReserved j1/b",
               "1 ProvisioningRequest j1 Accepted", "10 RaceWon j0", "10 Finished j0/b",
               "10 ProvisioningRequest j0 Withdrawn", "10 Finished j0/a", "10 QuotaReserved j0", "10 Admitted j0",
               "10 Started j0", "31 ProvisioningRequest j1 Provisioned", "31 AdmissionCheck j1/b Ready",
               "31 Admitted j1/b", "31 RaceWon j1", "31 Finished j1/a", "31 Finished j1/b", "31 QuotaReserved j1",
               "31 Admitted j1", "31 Started j1", "81 Finished j1", "110 Finished j0", "141 ScaledDown b-pool b-pool:0",
               "170 ScaledDown a-pool a-pool:0")),
    "plan A is stocked out: its variant holds quota without nodes, DWS provisions and wins": Case(
        cloud={"a-pool": CapacitySpec(available=0), "b-pool": CapacitySpec(queued_delay=30)},
        jobs=(("j0", 0, 8, 100),), until=400,
        story=("0 QuotaReserved j0/a", "0 Admitted j0/a", "0 NodesUnavailable j0", "0 QuotaReserved j0/b",
               "0 ProvisioningRequest j0 Accepted", "30 ProvisioningRequest j0 Provisioned",
               "30 AdmissionCheck j0/b Ready", "30 Admitted j0/b", "30 RaceWon j0", "30 Finished j0/a",
               "30 Finished j0/b", "30 QuotaReserved j0", "30 Admitted j0", "30 Started j0", "130 Finished j0",
               "190 ScaledDown b-pool b-pool:0")),
    "capacity taken back mid-run: the job is evicted and races again from the start": Case(
        cloud={"a-pool": CapacitySpec(available=0), "b-pool": CapacitySpec(queued_delay=30, revoke_after=50)},
        jobs=(("j0", 0, 8, 100),), until=120,
        story=("0 QuotaReserved j0/a", "0 Admitted j0/a", "0 NodesUnavailable j0", "0 QuotaReserved j0/b",
               "0 ProvisioningRequest j0 Accepted", "30 ProvisioningRequest j0 Provisioned",
               "30 AdmissionCheck j0/b Ready", "30 Admitted j0/b", "30 RaceWon j0", "30 Finished j0/a",
               "30 Finished j0/b", "30 QuotaReserved j0", "30 Admitted j0", "30 Started j0",
               "80 ProvisioningRequest j0 CapacityRevoked", "80 Evicted j0", "80 QuotaReserved j0/a",
               "80 Admitted j0/a", "80 NodesUnavailable j0", "80 QuotaReserved j0/b",
               "80 ProvisioningRequest j0 Accepted", "110 ProvisioningRequest j0 Provisioned",
               "110 AdmissionCheck j0/b Ready", "110 Admitted j0/b", "110 RaceWon j0", "110 Finished j0/a",
               "110 Finished j0/b", "110 QuotaReserved j0", "110 Admitted j0", "110 Started j0")),
    "no pool for a flavor: its DWS request fails at once and the job runs on plan A": Case(
        pools=(PLAN_A,), cloud={"a-pool": CapacitySpec(boot=10)}, jobs=(("j0", 0, 8, 100),), until=200,
        story=("0 QuotaReserved j0/a", "0 Admitted j0/a", "0 ScaledUp j0 a-pool:1", "0 QuotaReserved j0/b",
               "0 ProvisioningRequest j0 Failed", "0 AdmissionCheck j0/b Retry", "0 Evicted j0/b", "10 RaceWon j0",
               "10 Finished j0/b", "10 Finished j0/a", "10 QuotaReserved j0", "10 Admitted j0", "10 Started j0",
               "110 Finished j0", "170 ScaledDown a-pool a-pool:0")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_driver_tells_the_story_of_each_case(name: str) -> None:
    assert run(CASES[name]) == list(CASES[name].story)


def test_every_case_field_is_one_the_runner_reads() -> None:
    known = {"cloud", "jobs", "until", "story", "pools", "settings", "a_cpu"}
    for name, case in CASES.items():
        assert set(vars(case)) == known, name
        assert case.story and case.jobs, name
