"""Admission checks, as tables: what each report of a check's state does to a workload holding quota (and that
reports about a workload not holding quota, or about a check it does not have, change nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import CheckState, PendingReason, PodSetUpdate, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload

KEY = "default/w"
RESERVED = "Quota reserved in ClusterQueue cq"
PODSETS = {"main": {"cpu": "f"}}


def _scheduler(checks: tuple[str, ...], retry_delay: float = 0.0) -> Scheduler:
    return scheduler(cluster_queue().flavor("f", cpu=4).checks(*checks),
                     check_retry_delay={c: retry_delay for c in checks})


def _reserved(checks: tuple[str, ...] = ("a", "b"), retry_delay: float = 0.0) -> Scheduler:
    sched = _scheduler(checks, retry_delay)
    sched.add(workload("w").namespace("default").uid("w").build(), 0.0)
    assert [e.kind for e in sched.schedule(1.0)] == [EventKind.QUOTA_RESERVED]
    return sched


@dataclass
class Case:
    name: str
    reports: list[tuple[str, CheckState]]
    events: list[Event]
    state: WorkloadState
    checks: dict[str, CheckState] = field(default_factory=dict)
    queued: bool = False
    usage: int = 1000


def _check(check: str, state: CheckState, message: str = "") -> Event:
    return Event(10.0, EventKind.CHECK, KEY, "cq", message or state.value, extra={"check": check, "state": state.value})


P, R, T, X = CheckState.PENDING, CheckState.READY, CheckState.RETRY, CheckState.REJECTED
CASES = [
    Case("one of two ready", [("a", R)], [_check("a", R)], WorkloadState.QUOTA_RESERVED, {"a": R, "b": P}),
    Case("both ready: admitted", [("a", R), ("b", R)],
         [_check("a", R), _check("b", R), Event(10.0, EventKind.ADMITTED, KEY, "cq", "The workload is admitted",
                                                PODSETS)],
         WorkloadState.ADMITTED, {"a": R, "b": R}),
    Case("a check it does not have", [("c", R)], [], WorkloadState.QUOTA_RESERVED, {"a": P, "b": P}),
    Case("pending again", [("a", P)], [_check("a", P)], WorkloadState.QUOTA_RESERVED, {"a": P, "b": P}),
    Case("retry: evicted and queued again", [("a", T)],
         [_check("a", T), Event(10.0, EventKind.EVICTED, KEY, "cq", 'Evicted due to AdmissionCheck in Retry state: "a"',
                                extra={"cause": "AdmissionCheck"})],
         WorkloadState.PENDING, {}, queued=True, usage=0),
    Case("rejected: evicted and deactivated", [("b", X)],
         [_check("b", X),
          Event(10.0, EventKind.EVICTED, KEY, "cq", 'AdmissionCheck in Rejected state: "b"',
                extra={"cause": "AdmissionCheck"}),
          Event(10.0, EventKind.DEACTIVATED, KEY, "cq", 'AdmissionCheck in Rejected state: "b"')],
         WorkloadState.INACTIVE, {}, usage=0),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_check_reports(case: Case) -> None:
    sched = _reserved()
    events = [e for check, state in case.reports for e in sched.set_check(KEY, check, state, 10.0)]
    wl = sched.held(KEY)
    assert events == case.events
    assert (wl.state, wl.checks, sched.queued(wl), sched.usage("cq", ("f", "cpu"))) == (
        case.state, case.checks, case.queued, case.usage)


def test_admitted_when_the_last_check_is_ready() -> None:
    sched = _reserved()
    sched.set_check(KEY, "a", R, 10.0)
    sched.set_check(KEY, "b", R, 12.0, message="b provisioned", pod_set_updates={"main": PodSetUpdate({"x": "y"})})
    wl = sched.held(KEY)
    assert (wl.admitted_at, wl.reserved_at, wl.pending_reason, wl.pod_set_updates) == (
        12.0, 1.0, "", {"b": {"main": PodSetUpdate({"x": "y"})}})


def test_a_report_about_a_workload_without_quota_changes_nothing() -> None:
    sched = _scheduler(("a",))
    wl = workload("w", on="missing").namespace("default").build()
    wl.checks = {"a": P}
    sched.add(wl, 0.0)
    assert sched.set_check(KEY, "a", R, 1.0) == []
    assert (wl.state, wl.checks) == (WorkloadState.PENDING, {"a": P})


def test_pod_set_updates_are_kept_only_from_ready_checks() -> None:
    sched = _reserved()
    sched.set_check(KEY, "a", P, 10.0, pod_set_updates={"main": PodSetUpdate({"x": "1"})})
    sched.set_check(KEY, "a", R, 11.0)
    assert sched.held(KEY).pod_set_updates == {}


@pytest.mark.parametrize(("config_delay", "retry_after", "requeue_at", "queued"), [
    (0.0, None, None, True),
    (30.0, None, 40.0, False),
    (30.0, 5.0, 15.0, False),
    (30.0, 0.0, None, True),
])
def test_retry_waits_out_its_delay(config_delay: float, retry_after: float | None, requeue_at: float | None,
                                   queued: bool) -> None:
    sched = _reserved(("a",), retry_delay=config_delay)
    sched.set_check(KEY, "a", T, 10.0, retry_after=retry_after)
    wl = sched.held(KEY)
    assert (wl.requeue_at, sched.queued(wl), sched.next_requeue()) == (requeue_at, queued, requeue_at)
    if requeue_at is not None:
        assert sched.schedule(requeue_at - 1) == []
        events = sched.schedule(requeue_at)
        assert [e.kind for e in events] == [EventKind.REQUEUED, EventKind.QUOTA_RESERVED]
        assert events[0] == Event(requeue_at, EventKind.REQUEUED, KEY, "cq", "Backoff finished")
        assert wl.ordering_time == requeue_at, "queued again behind those that came while it waited"


def test_rejected_with_a_message_says_so() -> None:
    sched = _reserved(("a",))
    events = sched.set_check(KEY, "a", X, 10.0, message="no capacity")
    assert [e.reason for e in events] == ["no capacity", 'AdmissionCheck in Rejected state: "a" (no capacity)',
                                          'AdmissionCheck in Rejected state: "a" (no capacity)']


def test_a_head_restored_with_a_failed_check_waits_without_a_flavor_search() -> None:
    # Two workloads read back waiting, each with a check its controller last answered Retry or Rejected (Kueue's
    # nominate skips such a head: "The workload has failed admission checks"). Each of the two queues' heads says so.
    sched = scheduler(cluster_queue("cq").flavor("f", cpu=4).checks("a"),
                      cluster_queue("cq2").flavor("f", cpu=4).checks("a"))
    for name, cq, state in (("w", "cq", CheckState.RETRY), ("w2", "cq2", CheckState.REJECTED)):
        wl = workload(name, on=cq).namespace("default").uid(name).build()
        wl.checks = {"a": state}
        sched.add(wl, 0.0)
    events = sched.schedule(1.0)
    assert sorted((e.t, e.kind, e.workload, e.reason) for e in events) == [
        (1.0, EventKind.PENDING, key, "The workload has failed admission checks")
        for key in ("default/w", "default/w2")]
    assert all(sched.held(key).pending is PendingReason.PENDING_EVALUATION and sched.held(key).admission is None
               for key in ("default/w", "default/w2"))
