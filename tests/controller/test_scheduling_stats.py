"""A Workload's ``status.schedulingStats`` as the queue controller writes it, and read back from it (after a restart
the counts go on from what the status says)."""

from __future__ import annotations

from flexq.controller.object_sync import render_status, workload_from_object
from flexq.scheduler import PodSet, Workload, eviction_reason


def test_evictions_are_counted_by_reason_and_cause_and_survive_a_reread() -> None:
    wl = Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}),))
    for cause, underlying in [("Preempted", ""), ("PodsReadyTimeout", "WaitForRecovery"), ("Preempted", ""),
                              ("DeactivatedDueToMaximumExecutionTimeExceeded", "")]:
        wl.count_eviction(cause, underlying)
    status = render_status(wl, {}, None, "2026-01-01T00:00:00Z", 1)
    expected = [{"reason": "Preempted", "underlyingCause": "", "count": 2},
                {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForRecovery", "count": 1},
                {"reason": "Deactivated", "underlyingCause": "MaximumExecutionTimeExceeded", "count": 1}]
    assert status["schedulingStats"] == {"evictions": expected}
    assert wl.evictions == 4
    again = workload_from_object({"metadata": {"name": "w", "namespace": "default"}, "spec": {"queueName": "q"},
                                  "status": status}, {("default", "q"): "cq"})
    again.count_eviction("Preempted")
    assert again.scheduling_stats()["evictions"][0] == {"reason": "Preempted", "underlyingCause": "", "count": 3}
    assert render_status(Workload("default", "x", "q", "cq", ()), {}, None, "2026-01-01T00:00:00Z", 1).get(
        "schedulingStats") is None, "never evicted: no stats"


def test_eviction_reasons_split_as_kueue_names_them() -> None:
    expected = {"Preempted": ("Preempted", ""), "Deactivated": ("Deactivated", ""),
                "DeactivatedDueToRequeuingLimitExceeded": ("Deactivated", "RequeuingLimitExceeded"),
                "DeactivatedDueToMaximumExecutionTimeExceeded": ("Deactivated", "MaximumExecutionTimeExceeded")}
    assert {cause: eviction_reason(cause) for cause in expected} == expected
