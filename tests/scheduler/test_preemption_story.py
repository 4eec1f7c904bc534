"""Preemption told whole: the Preempted event (who, why, the paths of both queues), the victim evicted only once it
has stopped (the live server's clock), with the preemption's message, then queued again; and the preemptor admitted
in the quota the victim left."""

from __future__ import annotations

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import PreemptionPolicy, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload


def _scheduler() -> Scheduler:
    """A lender of 2 cpus and a borrower of none in cohort ``co``, each reclaiming its quota from anyone."""
    return scheduler(*(cluster_queue(name).flavor("a", cpu=cpu).cohort("co").preempt(reclaim=PreemptionPolicy.ANY)
                       for name, cpu in (("lender", 2), ("borrower", 0))))


WHY = ("Preempted to accommodate a workload (UID: uid-owner) due to reclamation within the cohort; "
       "preemptor path: /co/lender; preemptee path: /co/borrower")


def test_a_lender_reclaims_its_quota_from_a_borrower() -> None:
    sched = _scheduler()
    sched.add(workload("guest", cpu=2, on="borrower").uid("uid-guest").build(), 0.0)
    sched.schedule(0.0)
    assert sched.held("ns/guest").state is WorkloadState.ADMITTED, "borrows the lender's unused 2 cpu"
    sched.add(workload("owner", cpu=2, on="lender").uid("uid-owner").build(), 1.0)
    preempted = [e for e in sched.schedule(1.0) if e.kind is not EventKind.PENDING]
    assert preempted == [Event(1.0, EventKind.PREEMPTED, "ns/guest", "borrower", WHY,
                               extra={"preemptor": "ns/owner", "preemptionReason": "InCohortReclamation"})]
    guest = sched.held("ns/guest")
    assert (guest.state, guest.evicting, guest.pending_reason) == (WorkloadState.ADMITTED, True, WHY)
    assert sched.complete_eviction("ns/owner", 2.0) == [], "not being evicted: nothing to complete"
    assert sched.complete_eviction("ns/nobody", 2.0) == []
    assert sched.complete_eviction("ns/guest", 2.0) == [
        Event(2.0, EventKind.EVICTED, "ns/guest", "borrower", WHY, extra={"cause": "Preempted"})]
    assert (guest.state, guest.evictions, guest.pending_reason, sched.usage("borrower", ("a", "cpu"))) == (
        WorkloadState.PENDING, 1, "", 0), "evicted: its reason is the next pass's to give"
    admitted = [e.workload for e in sched.schedule(2.0) if e.kind is EventKind.ADMITTED]
    assert admitted == ["ns/owner"] and sched.waiting(guest) is False, "the guest waits, set aside"
    sched.finish("ns/owner", 3.0)
    assert [e.workload for e in sched.schedule(3.0) if e.kind is EventKind.ADMITTED] == ["ns/guest"]
    sched.add(workload("again", cpu=2, on="lender").uid("uid-again").build(), 4.0)
    sched.schedule(4.0)
    sched.complete_eviction("ns/guest", 5.0)
    assert guest.evictions == 2, "each eviction counts"


def test_without_uids_the_preemptor_is_named_by_its_key_and_a_cleared_reason_reads_preempted() -> None:
    sched = _scheduler()
    sched.add(workload("guest", cpu=2, on="borrower").build(), 0.0)
    sched.schedule(0.0)
    sched.add(workload("owner", cpu=2, on="lender").build(), 1.0)
    reasons = [e.reason for e in sched.schedule(1.0) if e.kind is EventKind.PREEMPTED]
    assert reasons == [WHY.replace("uid-owner", "ns/owner")], "a preemptor without a uid is named by its key"
    sched.held("ns/guest").pending_reason = ""
    assert sched.complete_eviction("ns/guest", 2.0) == [
        Event(2.0, EventKind.EVICTED, "ns/guest", "borrower", "Preempted", extra={"cause": "Preempted"})]


def test_a_head_whose_victims_another_head_took_this_cycle_says_so_then() -> None:
    # Kueue's "overlapping preemption targets": a1 and b1 both reclaim their 2 cpus from c1, the one borrower (4 of
    # their cohort's 4). a1 comes first and preempts c1; b1 is skipped for the cycle, and the event says when.
    s = scheduler(*(cluster_queue(name).flavor("f", cpu=2).cohort("root").preempt(reclaim=PreemptionPolicy.ANY)
                    for name in ("cq-a", "cq-b")),
                  cluster_queue("cq-c").flavor("f", cpu=0).cohort("root"))
    c1 = workload("c1", cpu=4, on="cq-c").uid("c1").build()
    s.add(c1, 0.0)
    s.schedule(0.0)
    assert c1.state is WorkloadState.ADMITTED
    for n, (name, cq) in enumerate((("a1", "cq-a"), ("b1", "cq-b"))):
        s.add(workload(name, cpu=2, on=cq).uid(name).created(float(n)).build(), 1.0)
    events = s.schedule(2.0)
    assert [(e.kind, e.workload) for e in events if e.kind is EventKind.PREEMPTED] == [(EventKind.PREEMPTED, c1.key)]
    skipped = [e for e in events if e.workload == "ns/b1"]
    assert [(e.t, e.kind, e.reason) for e in skipped] == [
        (2.0, EventKind.PENDING, "Workload has overlapping preemption targets with another workload")]
