"""Kueue's metrics' parts: eviction labels as Kueue names them, histograms with Kueue's buckets as its Go client
writes them, and a deleted queue's series dropped while the others stay."""

from __future__ import annotations

from flexq.control import SHORT_WAIT_BUCKETS, WAIT_BUCKETS, Histogram, KueueCounts, eviction_labels


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
