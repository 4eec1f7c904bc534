"""Kueue's metrics' parts: eviction labels as Kueue names them, histograms with Kueue's buckets as its Go client
writes them, and a deleted queue's series dropped while the others stay."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.api import KueueConfig, PodsReadyConfig
from flexq.clock import VirtualClock
from flexq.control import (
    SHORT_WAIT_BUCKETS,
    WAIT_BUCKETS,
    ControlPlane,
    Histogram,
    JobQueued,
    KueueCounts,
    PodsReady,
    eviction_labels,
)
from flexq.timers import Kernel, TimerHeap
from tests.support import job

START = 1_764_000_000.0


def _team_job(name: str, priority: str | None, cpu: str = "8") -> dict[str, object]:
    """A Job of ``cpu`` in namespace ``ml`` on LocalQueue ``team``, of the given WorkloadPriorityClass."""
    return job(name, queue="team", cpu=cpu, pods=1).namespace("ml").priority_class(priority).object()


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
    plane.configure(_OBJECTS, None, START)
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


def _pods_ready_run(live: bool, config: PodsReadyConfig | None) -> KueueCounts:
    """Three 6-cpu jobs admitted at 0 s (timeout 30 s, recovery timeout 60 s). ``steady`` is ready at 5 s, loses a
    pod at 20 s, is ready again at 50 s (Kueue's Recovered) and is preempted at 70 s; ``stuck`` is never ready
    (evicted at 30 s, back at 90 s after the 60 s backoff); ``gone`` is ready at 5 s, loses a pod at 20 s and is
    evicted when its recovery timeout ends, at 80 s."""
    timers: TimerHeap = TimerHeap(VirtualClock(START)) if live else Kernel(VirtualClock(START))
    plane = ControlPlane(timers, lambda _e: None, kueue=KueueConfig(pods_ready=config))
    plane.configure(_OBJECTS, None, START)
    counts = KueueCounts().attach(plane)
    keys = {}
    for name in ("steady", "stuck", "gone"):
        wl = plane.workload_for("Job", "batch", _team_job(name, None, "6"), START)
        keys[name] = wl.key
        plane.emit(plane.feed(JobQueued(wl, START)))
    plane.settle(START)
    for at, name, ready in ((5, "steady", True), (5, "gone", True), (20, "steady", False), (20, "gone", False),
                            (50, "steady", True)):
        timers.schedule(START + at, lambda n=name, r=ready, t=START + at: plane.feed(  # type: ignore[misc]
            PodsReady(keys[n], t, r)))
    timers.schedule(START + 70, lambda: plane.emit(plane.scheduler.evict(keys["steady"], START + 70, "preempted",
                                                                         "Preempted")))
    if isinstance(timers, Kernel):
        timers.run_until(START + 95, plane.settle)
    else:
        while (wake := plane.next_wake()) is not None and wake <= START + 95:
            timers.clock.advance_to(max(wake, timers.clock.now()))  # type: ignore[attr-defined]
            timers.run_due()
            plane.settle(timers.clock.now())
    return counts


def _observed(histograms: dict[tuple[str, ...], Histogram]) -> dict[tuple[str, ...], tuple[int, float]]:
    return {key: (h.count, h.total) for key, h in histograms.items()}


@pytest.mark.parametrize("live", [True, False], ids=["live", "virtual"])
def test_the_pods_ready_metrics_move_as_kueues_do(live: bool) -> None:
    counts = _pods_ready_run(live, PodsReadyConfig(timeout=30.0, recovery_timeout=60.0))
    got = {
        "ready_wait": _observed(counts.ready_wait),  # type: ignore[arg-type]
        "admitted_until_ready": _observed(counts.admitted_until_ready),  # type: ignore[arg-type]
        "lq_ready_wait": _observed(counts.lq_ready_wait),  # type: ignore[arg-type]
        "lq_admitted_until_ready": _observed(counts.lq_admitted_until_ready),  # type: ignore[arg-type]
        "ready_to_evicted": _observed(counts.ready_to_evicted),  # type: ignore[arg-type]
        "evicted": counts.evicted,
        "evicted_once": counts.evicted_once,
    }
    expected = {
        # Timed when first ready in an admission (steady and gone at 5 s), not again when steady recovers at 50 s.
        "ready_wait": {("cq", ""): (2, 10.0)},
        "admitted_until_ready": {("cq", ""): (2, 10.0)},
        "lq_ready_wait": {("team", "ml", ""): (2, 10.0)},
        "lq_admitted_until_ready": {("team", "ml", ""): (2, 10.0)},
        # Only steady was ready when evicted: 20 s since it recovered (the condition's last transition).
        "ready_to_evicted": {("cq", "Preempted", ""): (1, 20.0)},
        # A PodsReady timeout's underlying cause says which wait ran out, as Kueue labels it.
        "evicted": {("cq", "PodsReadyTimeout", "WaitForStart", ""): 1,
                    ("cq", "PodsReadyTimeout", "WaitForRecovery", ""): 1, ("cq", "Preempted", "", ""): 1},
        "evicted_once": {("cq", "PodsReadyTimeout", "WaitForStart", ""): 1,
                         ("cq", "PodsReadyTimeout", "WaitForRecovery", ""): 1, ("cq", "Preempted", "", ""): 1},
    }
    assert got == expected


def test_without_wait_for_pods_ready_no_pods_ready_metric_moves() -> None:
    """Kueue writes no PodsReady condition where waitForPodsReady is off: nothing to time."""
    counts = _pods_ready_run(live=False, config=None)
    assert (counts.ready_wait, counts.admitted_until_ready, counts.lq_ready_wait, counts.ready_to_evicted) == (
        {}, {}, {}, {})
    assert counts.evicted == {("cq", "Preempted", "", ""): 1}
