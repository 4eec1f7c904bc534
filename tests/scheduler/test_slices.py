"""Workload slices of elastic jobs: growth admitted for the difference on the same flavor, shrinking frees quota."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.scheduler.events import EventKind
from flexq.scheduler.model import (
    CheckState,
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Config, Scheduler

CPU = 1000


def _scheduler(checks: tuple[str, ...] = (), **quotas: int) -> Scheduler:
    """One ClusterQueue ``cq`` with a flavor per keyword (in order), each with that many cpus."""
    group = ResourceGroup(("cpu",), tuple(quotas), {(f, "cpu"): Quota(n * CPU) for f, n in quotas.items()})
    cq = ClusterQueueSpec("cq", groups=(group,), checks=tuple((c, None) for c in checks))
    return Scheduler(Config({f: FlavorSpec(f) for f in quotas}, {"cq": cq}, {}), instant_eviction=True)


def _job(name: str, workers: int, replaces: str = "") -> Workload:
    return Workload("ns", name, "q", "cq", (PodSet("head", 1, {"cpu": CPU}), PodSet("workers", workers, {"cpu": CPU})),
                    replaces=replaces)


def _usage(s: Scheduler, flavor: str = "f") -> int:
    return s.tree.usage("cq", (flavor, "cpu")) // CPU


def _admit(s: Scheduler, wl: Workload, now: float) -> list[EventKind]:
    s.add(wl, now)
    return [e.kind for e in s.schedule(now) if e.workload == wl.key]


def test_a_slice_is_admitted_with_quota_for_the_difference_and_replaces_the_old_one() -> None:
    s = _scheduler(f=6)
    old = _job("a", 2)
    _admit(s, old, 0)
    assert _usage(s) == 3
    # 5 cpus in all would not fit next to the old slice's 3, but only the 2 it adds are asked.
    grown = _job("a-2", 4, replaces=old.key)
    s.add(grown, 1)
    events = s.schedule(1)
    assert [(e.kind, e.workload) for e in events if e.kind is not EventKind.CREATED] == [
        (EventKind.FINISHED, old.key), (EventKind.QUOTA_RESERVED, grown.key), (EventKind.ADMITTED, grown.key)]
    finished = next(e for e in events if e.kind is EventKind.FINISHED)
    assert finished.extra["finishedReason"] == "WorkloadSliceReplaced" and finished.extra["replacedBy"] == grown.key
    assert "due to workload slice aggregation" in finished.reason
    assert old.state is WorkloadState.FINISHED and old.admission is None
    assert grown.state is WorkloadState.ADMITTED and _usage(s) == 5
    assert grown.admission is not None and [p.count for p in grown.admission.podsets] == [1, 4]


def test_a_slice_that_does_not_fit_waits_while_the_old_one_keeps_running() -> None:
    s = _scheduler(f=6)
    old, other = _job("a", 2), _job("b", 1)
    _admit(s, old, 0)
    _admit(s, other, 0)
    assert _usage(s) == 5
    grown = _job("a-2", 4, replaces=old.key)
    assert _admit(s, grown, 1) == [EventKind.PENDING]
    assert grown.state is WorkloadState.PENDING
    assert "insufficient unused quota for cpu in flavor f, 1 more needed" in grown.pending_reason
    assert old.state is WorkloadState.ADMITTED and _usage(s) == 5, "the old slice holds its quota, untouched"
    # Quota frees: the slice is admitted then.
    events = s.finish(other.key, 2) + s.schedule(2)
    assert (EventKind.ADMITTED, grown.key) in [(e.kind, e.workload) for e in events]
    assert old.state is WorkloadState.FINISHED and _usage(s) == 5


def test_a_slice_keeps_its_flavor_even_when_another_has_room() -> None:
    s = _scheduler(small=3, big=10)
    old = _job("a", 2)
    _admit(s, old, 0)
    assert old.admission is not None and old.admission.flavors() == {"small"}
    grown = _job("a-2", 4, replaces=old.key)
    _admit(s, grown, 1)
    assert grown.state is WorkloadState.PENDING and _usage(s, "big") == 0
    assert "flavor small" in grown.pending_reason and "big" not in grown.pending_reason
    assert old.state is WorkloadState.ADMITTED


def test_shrinking_in_place_frees_quota_for_others() -> None:
    s = _scheduler(f=6)
    old = _job("a", 4)
    _admit(s, old, 0)
    waiting = _job("b", 2)
    assert _admit(s, waiting, 0) == [EventKind.PENDING]
    assert s.resize(old.key, _job("a", 1).podsets, 1) == []
    assert _usage(s) == 2 and old.state is WorkloadState.ADMITTED
    assert old.admission is not None and [p.count for p in old.admission.podsets] == [1, 1]
    assert (EventKind.ADMITTED, waiting.key) in [(e.kind, e.workload) for e in s.schedule(1)]
    assert _usage(s) == 5
    with pytest.raises(ValueError, match="growing needs a new workload slice"):
        s.resize(old.key, _job("a", 3).podsets, 2)


def _growth_waits(s: Scheduler, other_workers: int, grown_workers: int) -> tuple[Workload, Workload, Workload]:
    """Job a (2 workers) and job b admitted at 0; at 1, a's growth to ``grown_workers`` does not fit."""
    old, other = _job("a", 2), _job("b", other_workers)
    _admit(s, old, 0)
    _admit(s, other, 0)
    grown = _job("a-2", grown_workers, replaces=old.key)
    assert _admit(s, grown, 1) == [EventKind.PENDING]
    return old, other, grown


def test_a_slice_whose_old_slice_is_gone_is_admitted_whole() -> None:
    s = _scheduler(f=6)
    old, other, grown = _growth_waits(s, 0, 5)
    s.finish(old.key, 2, "Succeeded")  # the job ended (or was evicted) before its growth was admitted
    s.finish(other.key, 2)
    events = s.schedule(2)
    assert [e.kind for e in events] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED]
    assert grown.state is WorkloadState.ADMITTED and _usage(s) == 6


def test_a_slice_evicted_while_its_replacement_waits_is_finished_not_queued_again() -> None:
    s = _scheduler(f=6)
    old, other, grown = _growth_waits(s, 1, 4)
    # The old slice loses its nodes (or is preempted): Kueue finishes it, and the job's next admission is the
    # replacement's, with quota for all its pods. Queued again, it would be a second admission of one job.
    events = s.evict(old.key, 2, "node lost", "NodeFailures")
    assert [(e.kind, e.workload) for e in events] == [(EventKind.EVICTED, old.key), (EventKind.FINISHED, old.key)]
    assert events[1].extra["finishedReason"] == "WorkloadSliceReplaced"
    assert old.state is WorkloadState.FINISHED and not s.queues.queued(old)
    s.schedule(2)
    assert grown.state is WorkloadState.PENDING, "5 cpus, all of them quota now, do not fit next to b's 2"
    events = s.finish(other.key, 3) + s.schedule(3)
    assert [e.kind for e in events if e.workload == grown.key] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED]
    assert grown.admission is not None and _usage(s) == 5 and grown.replaces == ""
    assert old.state is WorkloadState.FINISHED


def test_an_old_slice_sent_back_by_a_check_retry_is_finished_when_a_replacement_waits() -> None:
    s = _scheduler(("prov",), f=6)
    s.config.check_retry_delay["prov"] = 60.0
    old = _job("a", 2)
    _admit(s, old, 0)
    s.set_check(old.key, "prov", CheckState.READY, 0)
    grown = _job("a-2", 9, replaces=old.key)  # too big to ever fit: it waits
    _admit(s, grown, 1)
    events = s.set_check(old.key, "prov", CheckState.RETRY, 2)
    assert [e.kind for e in events] == [EventKind.CHECK, EventKind.EVICTED, EventKind.FINISHED]
    assert old.state is WorkloadState.FINISHED and old.requeue_at is None and s.next_requeue() is None


def test_an_evicted_slice_with_no_replacement_waiting_queues_again() -> None:
    s = _scheduler(f=6)
    old = _job("a", 2)
    _admit(s, old, 0)
    grown = _job("a-2", 3, replaces=old.key)
    _admit(s, grown, 1)
    assert old.state is WorkloadState.FINISHED and grown.state is WorkloadState.ADMITTED
    events = s.evict(grown.key, 2, "node lost", "NodeFailures")
    assert [e.kind for e in events] == [EventKind.EVICTED] and s.queues.queued(grown)


def test_a_slice_preempts_a_lower_priority_workload_to_grow_but_never_its_old_slice() -> None:
    s = _scheduler(f=6)
    s.config.cluster_queues["cq"] = dataclasses.replace(
        s.config.cluster_queues["cq"], within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    old = _job("a", 2)
    old.priority = 10
    low = _job("b", 1)
    _admit(s, old, 0)
    _admit(s, low, 0)
    assert _usage(s) == 5
    grown = _job("a-2", 4, replaces=old.key)  # 2 more cpus; 1 free: b must go
    grown.priority = 10
    s.add(grown, 1)
    events = [(e.kind, e.workload) for e in s.schedule(1) if e.kind is not EventKind.CREATED]
    assert (EventKind.PREEMPTED, low.key) in events and (EventKind.PREEMPTED, old.key) not in events
    order = [(EventKind.EVICTED, low.key), (EventKind.FINISHED, old.key), (EventKind.QUOTA_RESERVED, grown.key),
             (EventKind.ADMITTED, grown.key)]
    assert [e for e in events if e in order] == order, "b evicted, then the growth replaces a"
    assert low.state is WorkloadState.PENDING and _usage(s) == 5


def test_a_slice_does_not_preempt_an_equal_priority_workload() -> None:
    s = _scheduler(f=6)
    s.config.cluster_queues["cq"] = dataclasses.replace(
        s.config.cluster_queues["cq"], within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    old, other, grown = _growth_waits(s, 1, 4)
    assert other.state is WorkloadState.ADMITTED and old.state is WorkloadState.ADMITTED
    assert grown.state is WorkloadState.PENDING
