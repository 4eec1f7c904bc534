"""A Workload's status rendered from the one stored leaves the stored one as it was: the controller compares the two
and writes the new one, and what it read may be shared with what it wrote before."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import pytest

from flexq.controller.object_sync import in_status, render_status, workload_from_object
from flexq.scheduler import Moment, MomentForm, Phrase, PodSet, Workload, WorkloadState

NOW = "2026-01-01T00:00:10Z"
BEFORE = "2026-01-01T00:00:00Z"


def _cond(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": reason, "lastTransitionTime": BEFORE,
            "observedGeneration": 1}


ADMITTED: dict[str, Any] = {
    "conditions": [_cond("QuotaReserved", "True", "QuotaReserved"), _cond("Admitted", "True", "Admitted")],
    "admission": {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
    "admissionChecks": [{"name": "check", "state": "Ready", "message": "ok", "lastTransitionTime": BEFORE}],
}
PENDING: dict[str, Any] = {
    "conditions": [_cond("QuotaReserved", "False", "Pending"), _cond("PodsReady", "False", "WaitForStart")],
    "flavorsConsidered": [{"podSet": "main", "flavor": "default", "mode": "NoFit", "borrowing": False}],
    "requeueState": {"count": 2},
}


def _admitted() -> Workload:
    container = {"name": "c", "resources": {"requests": {"cpu": "1"}}}
    podset = {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
    return workload_from_object({"metadata": {"name": "w", "namespace": "default"},
                                 "spec": {"queueName": "q", "podSets": [podset]},
                                 "status": copy.deepcopy(ADMITTED)}, {("default", "q"): "cq"})


def _finished() -> Workload:
    wl = Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}),))
    wl.state = WorkloadState.FINISHED
    return wl


CASES = {
    "pending, as it was": (lambda: Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}),)), PENDING),
    "admitted, rewritten": (_admitted, ADMITTED),
    "pending, after its admission": (lambda: Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}),)),
                                     ADMITTED),
    "finished, keeping its admission": (_finished, ADMITTED),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendering_leaves_the_stored_status_as_it_was(case: str) -> None:
    make, stored = CASES[case]
    old = copy.deepcopy(stored)
    wl = make()
    new = render_status(wl, old, None, NOW, 1, evicted=("Preempted", "by a higher priority"), pods_ready="WaitForStart")
    assert old == stored, "the stored status was changed"
    assert new != old and [c["type"] for c in new["conditions"]][:1] == [c["type"] for c in old["conditions"]][:1]
    evicted = next(c for c in new["conditions"] if c["type"] == "Evicted")
    assert (evicted["status"], evicted["reason"], evicted["lastTransitionTime"]) == ("True", "Preempted", NOW)
    written = copy.deepcopy(new)
    render_status(wl, new, None, "2026-01-01T00:00:20Z", 2, preempted=("InClusterQueue", "preempted"))
    assert new == written, "a status rendered from the one written before changed it"


def test_a_reason_that_names_a_moment_is_counted_down_in_the_status_with_the_moment_it_ends() -> None:
    # The scheduler keeps the moment as a time; the status says it as the live server's events do, and adds when the
    # wait ends (a status is read long after it is written). An aside (nodes ready at) adds nothing to the words.
    said = datetime.fromisoformat(NOW).timestamp()
    wl = Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}),))
    wl.pending_reason = Phrase(("ProvisioningRequest r waits for room; a slice frees ",
                                Moment(said + 90, MomentForm.AFTER_VERB)))
    status = render_status(wl, {}, None, NOW, 1)
    (quota,) = [c for c in status["conditions"] if c["type"] == "QuotaReserved"]
    assert quota["message"] == ("ProvisioningRequest r waits for room; a slice frees in 1m30s "
                                "(at 2026-01-01T00:01:40Z)")
    booting = Phrase(("waiting for 1 node(s) of od-pool to boot", Moment(said + 8, MomentForm.ASIDE, "ready")))
    assert in_status(booting, NOW) == "waiting for 1 node(s) of od-pool to boot"
