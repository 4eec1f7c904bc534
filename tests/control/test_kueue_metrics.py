"""Kueue's metrics' parts: eviction labels as Kueue names them, histograms with Kueue's buckets as its Go client
writes them, and a deleted queue's series dropped while the others stay."""

from __future__ import annotations

import dataclasses

from flexq.clock import VirtualClock
from flexq.control import (
    SHORT_WAIT_BUCKETS,
    WAIT_BUCKETS,
    ControlPlane,
    Histogram,
    JobQueued,
    KueueCounts,
    eviction_labels,
)
from flexq.timers import TimerHeap
from tests.support import job

START = 1_764_000_000.0


def _team_job(name: str, priority: str | None) -> dict[str, object]:
    """A Job of 8 cpu in namespace ``ml`` on LocalQueue ``team``, of the given WorkloadPriorityClass."""
    return job(name, queue="team", cpu=8, pods=1).namespace("ml").priority_class(priority).object()


def test_eviction_reasons_and_underlying_causes_are_kueues() -> None:
    expected = {
        "Preempted": ("Preempted", ""),
        "AdmissionCheck": ("AdmissionCheck", ""),
        "ClusterQueueStopped": ("ClusterQueueStopped", ""),
        "DeactivatedDueToMaximumExecutionTimeExceeded": ("Deactivated", "MaximumExecutionTimeExceeded"),
        "DeactivatedDueToRequeuingLimitExceeded": ("Deactivated", "RequeuingLimitExceeded"),
        "DeactivatedDueToAdmissionCheck": ("Deactivated", "AdmissionCheck"),
        "Deactivated": ("Deactivated", ""),
    }
    assert {cause: eviction_labels(cause) for cause in expected} == expected


def test_buckets_are_kueues_and_written_as_its_go_client_writes_them() -> None:
    assert WAIT_BUCKETS[:4] == (1.0, 2.5, 5.0, 10.0) and len(WAIT_BUCKETS) == 16 and WAIT_BUCKETS[-1] == 40960.0
    assert WAIT_BUCKETS[:14] == SHORT_WAIT_BUCKETS
    waits = Histogram(SHORT_WAIT_BUCKETS)
    for seconds in (0.5, 2.5, 3.0, 1e6):
        waits.observe(seconds)
    buckets = waits.cumulative()
    assert buckets[:4] == [("1", 1), ("2.5", 2), ("5", 3), ("10", 3)]
    assert buckets[-2:] == [("10240", 3), ("+Inf", 4)]
    assert (waits.count, waits.total) == (4, 0.5 + 2.5 + 3.0 + 1e6)
    assert Histogram((0.005, 0.01)).cumulative() == [("0.005", 0), ("0.01", 0), ("+Inf", 0)]


def test_a_deleted_queues_series_go_and_the_others_stay() -> None:
    counts = KueueCounts()
    counts.admitted = {("gone", ""): 1, ("kept", "urgent"): 2}
    counts.preempted = {("gone", "InClusterQueue"): 1, ("kept", "InClusterQueue"): 1}
    counts.replaced_slices = {"gone": 1, "kept": 1}
    counts.lq_admitted = {("q", "ns", ""): 1, ("old", "ns", ""): 1}
    counts.cohort_admitted = {("team", ""): 3, ("old-team", ""): 1}
    counts.keep({"kept"}, {("q", "ns")}, {"team"})
    assert (counts.admitted, counts.preempted, counts.replaced_slices, counts.lq_admitted, counts.cohort_admitted) == (
        {("kept", "urgent"): 2}, {("kept", "InClusterQueue"): 1}, {"kept": 1}, {("q", "ns", ""): 1}, {("team", ""): 3})


_OBJECTS: dict[str, list[dict[str, object]]] = {
    "ResourceFlavor": [{"metadata": {"name": "od"}, "spec": {}}],
    "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "od", "resources": [{"name": "cpu", "nominalQuota": "20"}]}]}
    ]}}],
    "LocalQueue": [{"metadata": {"name": "team", "namespace": "ml"}, "spec": {"clusterQueue": "cq"}}],
    "WorkloadPriorityClass": [{"metadata": {"name": "urgent"}, "value": 1000}],
}





def test_the_plane_names_priority_classes_for_the_metrics_and_a_grown_slice_keeps_its_jobs() -> None:
    plane = ControlPlane(TimerHeap(VirtualClock(START)), lambda _e: None)
    plane.configure(_OBJECTS, None)
    unheard = plane.workload_for("Job", "batch", _team_job("before", "urgent"), START)
    counts = KueueCounts().attach(plane)
    urgent = plane.workload_for("Job", "batch", _team_job("train", "urgent"), START)
    plain = plane.workload_for("Job", "batch", _team_job("plain", None), START)
    grown = dataclasses.replace(urgent, name="train-2", replaces=urgent.key)
    for wl in (urgent, plain, grown):
        plane.emit(plane.feed(JobQueued(wl, START)))
    plane.settle(START + 5)
    workloads = {"before": unheard, "train": urgent, "plain": plain, "grown": grown}
    names = {job: plane.priority_class_name(wl.key) for job, wl in workloads.items()}
    assert names == {"before": "", "train": "urgent", "plain": "", "grown": "urgent"}
    # The grown slice is admitted in the room its job's first slice held with its own, and replaces it.
    assert counts.quota_reserved == {("cq", "urgent"): 2, ("cq", ""): 1}
    assert counts.lq_admitted == {("team", "ml", "urgent"): 2, ("team", "ml", ""): 1}
    assert counts.replaced_slices == {"cq": 1}
    assert counts.finished == {("cq", "urgent"): 1}, "the replaced slice is finished"
    assert set(counts.attempts) == {"success"} and counts.attempts["success"] >= 1
