"""A workload's life from outside the cycle (deactivated, deleted, evicted, resized), each step compared as the
whole list of events it returns and the state it leaves, for a plain workload and for one racing a variant per
flavor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import (
    CheckState,
    ConcurrentPolicy,
    FlavorSpec,
    PendingReason,
    PodSet,
    PodSetUpdate,
    Workload,
    WorkloadState,
)
from flexq.scheduler.race import variant_name
from flexq.scheduler.scheduler import Config, Scheduler
from tests.support import QueueBuilder, cluster_queue, scheduler, workload

KEY = "ns/w"
PODSETS = {"main": {"cpu": "a"}}


def _queue(name: str = "cq") -> QueueBuilder:
    """A ClusterQueue of flavors a and b, 2 cpus each."""
    return cluster_queue(name).flavor("a", cpu=2).flavor("b", cpu=2)


def _scheduler(race: bool = False, checks: tuple[str, ...] = ()) -> Scheduler:
    return scheduler(_queue().checks(*checks), check_retry_delay={"prov": 60.0}, race=race)


def _workload(name: str = "w", cpu: float = 1) -> Workload:
    wl = workload(name, cpu=cpu).uid(name).build()
    wl.owner = "RayJob ns/w"
    return wl


def _admitted(race: bool = False) -> Scheduler:
    sched = _scheduler(race)
    sched.add(_workload(), 0.0)
    sched.schedule(1.0)
    assert sched.held(KEY).state is WorkloadState.ADMITTED
    return sched


def _withdrawn(variant: str, reason: str, t: float) -> Event:
    return Event(t, EventKind.FINISHED, variant, "cq", reason, extra={"finishedReason": "VariantWithdrawn",
                                                                       "parent": KEY})


def _created(variant: str, flavor: str, t: float) -> Event:
    return Event(t, EventKind.CREATED, variant, "cq", f"Variant of {KEY} for flavor {flavor}",
                 extra={"parent": KEY, "flavor": flavor})


def _state(sched: Scheduler) -> tuple[Any, ...]:
    wl = sched.workload(KEY)
    if wl is None:
        return (None, sched.usage("cq", ("a", "cpu")))
    return (wl.state, sched.queued(wl), sched.usage("cq", ("a", "cpu")), wl.evictions)


def test_adding_a_workload() -> None:
    sched = _scheduler()
    assert sched.add(_workload(), 0.0) == [Event(0.0, EventKind.CREATED, KEY, "cq", extra={"job": "RayJob ns/w"})]
    assert sched.schedule(1.0) == [
        Event(1.0, EventKind.QUOTA_RESERVED, KEY, "cq", "Quota reserved in ClusterQueue cq", PODSETS),
        Event(1.0, EventKind.ADMITTED, KEY, "cq", "The workload is admitted", PODSETS)]


@pytest.mark.parametrize(("queue", "cq", "reason"), [
    ("lq", "", "LocalQueue lq doesn't exist"), ("lq", "gone", "ClusterQueue gone doesn't exist")])
def test_a_workload_whose_queue_does_not_exist_says_so(queue: str, cq: str, reason: str) -> None:
    sched = _scheduler()
    wl = workload("w", on=cq).queue(queue).build()
    assert sched.add(wl, 0.0) == [Event(0.0, EventKind.CREATED, KEY, cq),
                                  Event(0.0, EventKind.PENDING, KEY, cq, reason)]
    assert (wl.state, wl.pending_reason, wl.pending, sched.queued(wl)) == (
        WorkloadState.PENDING, reason, PendingReason.MISCONFIGURED, False)


def test_deactivating_an_admitted_workload() -> None:
    sched = _admitted()
    assert sched.deactivate(KEY, 2.0) == [
        Event(2.0, EventKind.EVICTED, KEY, "cq", "The workload is deactivated", extra={"cause": "Deactivated"}),
        Event(2.0, EventKind.DEACTIVATED, KEY, "cq", "The workload is deactivated")]
    assert _state(sched) == (WorkloadState.INACTIVE, False, 0, 1)
    assert sched.deactivate(KEY, 3.0) == [], "already inactive"
    assert sched.schedule(4.0) == []


def test_reactivating_a_deactivated_workload_queues_it_again() -> None:
    sched = _admitted()
    sched.deactivate(KEY, 2.0)
    assert sched.activate(KEY, 3.0) == [Event(3.0, EventKind.REQUEUED, KEY, "cq", "The workload was reactivated")]
    assert _state(sched) == (WorkloadState.PENDING, True, 0, 1)
    assert sched.activate(KEY, 3.5) == [], "already active"
    assert [e.kind for e in sched.schedule(4.0)] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED]


def test_reactivating_a_racing_workload_races_it_anew() -> None:
    sched = _scheduler(race=True)
    sched.add(_workload(), 0.0)
    sched.deactivate(KEY, 2.0)
    events = sched.activate(KEY, 3.0)
    assert events[0] == Event(3.0, EventKind.REQUEUED, KEY, "cq", "The workload was reactivated")
    assert [e.kind for e in events[1:]] == [EventKind.CREATED, EventKind.CREATED]
    assert len(sched.variants[KEY]) == 2


def test_deactivating_a_pending_workload() -> None:
    sched = _scheduler()
    sched.add(_workload(cpu=9000), 0.0)
    sched.schedule(1.0)
    assert sched.deactivate(KEY, 2.0, "by hand") == [Event(2.0, EventKind.DEACTIVATED, KEY, "cq", "by hand")]
    assert _state(sched) == (WorkloadState.INACTIVE, False, 0, 0)


# A racing workload ended from outside before any variant is admitted: (the call, the reason its variants are
# withdrawn with, its own last event).
ENDED: dict[str, tuple[Callable[[Scheduler], list[Event]], str, Event]] = {
    "deactivated": (lambda s: s.deactivate(KEY, 2.0), "Variant withdrawn: its workload is deactivated",
                    Event(2.0, EventKind.DEACTIVATED, KEY, "cq", "The workload is deactivated")),
    "finished": (lambda s: s.finish(KEY, 2.0), "Variant withdrawn: its workload finished",
                 Event(2.0, EventKind.FINISHED, KEY, "cq", "JobFinished")),
}


@pytest.mark.parametrize("how", ENDED)
def test_a_racing_workload_ended_from_outside_withdraws_its_variants(how: str) -> None:
    end, reason, last = ENDED[how]
    sched = _scheduler(race=True)
    sched.add(_workload(), 0.0)
    va, vb = sched.variants[KEY]
    assert end(sched) == [_withdrawn(va, reason, 2.0), _withdrawn(vb, reason, 2.0), last]
    assert (KEY in sched.variants, sched.knows(va), sched.knows(vb)) == (False, False, False)


def test_evicting_from_outside_requeues() -> None:
    sched = _admitted()
    assert sched.evict(KEY, 2.0, "node lost") == [
        Event(2.0, EventKind.EVICTED, KEY, "cq", "node lost", extra={"cause": "Evicted"})]
    wl = sched.held(KEY)
    assert _state(sched) == (WorkloadState.PENDING, True, 0, 1)
    assert (wl.ordering_time, wl.reserved_at, wl.admitted_at, wl.checks) == (2.0, None, None, {})
    assert sched.evict(KEY, 3.0, "again") == [], "holds no quota"


@pytest.mark.parametrize(("limit", "past"), [(None, 0), (100, 5 + 3)], ids=["no maximum", "a maximum"])
def test_the_seconds_admitted_count_towards_a_maximum_execution_time_over_evictions(limit: int | None,
                                                                                   past: int) -> None:
    # Admitted at 1.0, evicted at 6.5 (5 whole seconds), admitted again at 7.0 and evicted at 10.0 (3): Kueue's
    # accumulatedPastExecutionTimeSeconds, kept only for a workload with a maximum.
    sched = _scheduler()
    wl = _workload()
    wl.max_exec_seconds = limit
    sched.add(wl, 0.0)
    sched.schedule(1.0)
    sched.evict(KEY, 6.5, "node lost")
    sched.schedule(7.0)
    assert wl.state is WorkloadState.ADMITTED
    sched.evict(KEY, 10.0, "node lost")
    assert wl.past_exec_seconds == past


def test_deleting() -> None:
    sched = _admitted()
    assert sched.delete(KEY, 2.0) == []
    assert _state(sched) == (None, 0)
    assert (sched.delete(KEY, 3.0), KEY in sched.last_assignment) == ([], False)


def test_deleting_a_workload_waiting_out_a_retry_delay() -> None:
    sched = _scheduler(checks=("prov",))
    sched.add(_workload(), 0.0)
    sched.schedule(1.0)
    sched.set_check(KEY, "prov", CheckState.RETRY, 2.0)
    assert sched.next_requeue() == 62.0
    sched.delete(KEY, 3.0)
    assert (sched.next_requeue(), sched.schedule(62.0)) == (None, [])


def test_deleting_a_racing_workload_withdraws_its_variants() -> None:
    sched = _scheduler(race=True)
    sched.add(_workload(), 0.0)
    va, vb = sched.variants[KEY]
    reason = "Variant withdrawn: its workload was deleted"
    assert sched.delete(KEY, 2.0) == [_withdrawn(va, reason, 2.0), _withdrawn(vb, reason, 2.0)]
    assert sched.workloads() == []


def test_resizing_a_racing_workload_races_anew() -> None:
    sched = _scheduler(race=True)
    sched.add(_workload(), 0.0)
    va, vb = sched.variants[KEY]
    reason = "Variant withdrawn: its workload was resized"
    podsets = (PodSet("main", 2, {"cpu": 1000}),)
    assert sched.resize(KEY, podsets, 1.0) == [_withdrawn(va, reason, 1.0), _withdrawn(vb, reason, 1.0),
                                               _created(va, "a", 1.0), _created(vb, "b", 1.0)]
    assert (sched.held(KEY).podsets, sched.held(va).podsets) == (podsets, podsets)


def test_resizing_a_pending_workload_queues_it_with_its_new_shape() -> None:
    sched = _scheduler()
    sched.add(_workload(cpu=1), 0.0)
    podsets = (PodSet("main", 3, {"cpu": 1000}),)
    assert sched.resize(KEY, podsets, 1.0) == []
    wl = sched.held(KEY)
    assert (wl.podsets, sched.queued(wl)) == (podsets, True)
    assert [e.kind for e in sched.schedule(2.0)] == [EventKind.PENDING]
    assert wl.pending_reason.startswith("couldn't assign flavors to pod set main")


def test_resizing_an_admitted_workload_shrinks_its_quota() -> None:
    sched = _scheduler()
    sched.add(workload("w", pods=2).build(), 0.0)
    sched.schedule(1.0)
    assert sched.resize(KEY, (PodSet("main", 1, {"cpu": 1000}),), 2.0) == []
    wl = sched.held(KEY)
    assert wl.admission is not None
    assert (wl.admission.usage(), sched.usage("cq", ("a", "cpu"))) == ({("a", "cpu"): 1000}, 1000)


def _race_state(sched: Scheduler) -> tuple[Any, ...]:
    wl = sched.held(KEY)
    return (wl.state, wl.won, wl.evictions, wl.reserved_at, wl.admitted_at, wl.pending_reason,
            sorted(sched.workload_keys()), {cq: sorted(held) for cq, held in sched.holding.items()},
            sorted(sched.last_assignment), dict(sched.variants),
            (sched.usage("cq", ("a", "cpu")), sched.usage("cq", ("b", "cpu"))))


def test_a_race_is_won_then_the_workload_migrates_to_its_preferred_flavor() -> None:
    sched = scheduler(_queue().with_(concurrent=ConcurrentPolicy(migrate=True, last_acceptable=None)),
                      instant_eviction=True)
    sched.add(workload("blocker", cpu=2).uid("blocker").build(), 0.0)
    sched.schedule(0.0)
    sched.add(_workload(), 1.0)
    va, vb = sched.variants[KEY]
    on_a, on_b = {"main": {"cpu": "a"}}, {"main": {"cpu": "b"}}
    waits = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor a, 1 more needed"
    assert sched.schedule(1.0) == [
        Event(1.0, EventKind.PENDING, va, "cq", waits),
        Event(1.0, EventKind.QUOTA_RESERVED, vb, "cq", "Quota reserved in ClusterQueue cq", on_b),
        Event(1.0, EventKind.ADMITTED, vb, "cq", "The workload is admitted", on_b),
        Event(1.0, EventKind.FINISHED, vb, "cq", f"The variant won: {KEY} runs on flavor b",
              extra={"finishedReason": "VariantAdmitted", "parent": KEY}),
        Event(1.0, EventKind.QUOTA_RESERVED, KEY, "cq", "Quota reserved in ClusterQueue cq", on_b),
        Event(1.0, EventKind.ADMITTED, KEY, "cq", f"The variant {vb[3:]} is admitted", on_b,
              extra={"variant": vb, "flavor": "b"})]
    assert _race_state(sched) == (
        WorkloadState.ADMITTED, vb[3:], 0, 1.0, 1.0, "", sorted(["ns/blocker", KEY, va]),
        {"cq": ["ns/blocker", KEY]}, [va], {KEY: [va]}, (2000, 1000))
    sched.finish("ns/blocker", 2.0)
    assert sched.schedule(3.0) == [
        Event(3.0, EventKind.QUOTA_RESERVED, va, "cq", "Quota reserved in ClusterQueue cq", on_a),
        Event(3.0, EventKind.ADMITTED, va, "cq", "The workload is admitted", on_a),
        Event(3.0, EventKind.EVICTED, KEY, "cq", "Evicted to accommodate a workload (UID: w) due to migration to "
              "more favorable resource flavor a", extra={"cause": "FlavorMigration"}),
        Event(3.0, EventKind.FINISHED, va, "cq", f"The variant won: {KEY} runs on flavor a",
              extra={"finishedReason": "VariantAdmitted", "parent": KEY}),
        Event(3.0, EventKind.QUOTA_RESERVED, KEY, "cq", "Quota reserved in ClusterQueue cq", on_a),
        Event(3.0, EventKind.ADMITTED, KEY, "cq", f"The variant {va[3:]} is admitted", on_a,
              extra={"variant": va, "flavor": "a"})]
    assert _race_state(sched) == (
        WorkloadState.ADMITTED, va[3:], 1, 3.0, 3.0, "", ["ns/blocker", KEY], {"cq": [KEY]}, [], {}, (1000, 0))
    assert sched.settle(va, 4.0) == [], "the variant is gone"


def test_a_racing_workload_whose_every_variant_is_rejected_is_deactivated() -> None:
    sched = scheduler(_queue().checks("prov"), race=True)
    sched.add(_workload(), 0.0)
    sched.schedule(1.0)
    va, vb = sched.variants[KEY]
    rejected = 'AdmissionCheck in Rejected state: "prov" (no)'

    def lost(variant: str, t: float) -> list[Event]:
        return [Event(t, EventKind.CHECK, variant, "cq", "no", extra={"check": "prov", "state": "Rejected"}),
                Event(t, EventKind.EVICTED, variant, "cq", rejected, extra={"cause": "AdmissionCheck"}),
                Event(t, EventKind.DEACTIVATED, variant, "cq", rejected)]

    assert sched.set_check(va, "prov", CheckState.REJECTED, 2.0, "no") == lost(va, 2.0)
    assert sched.held(KEY).state is WorkloadState.PENDING, "another variant still races"
    withdrawn = "Variant withdrawn: its workload is deactivated"
    assert sched.set_check(vb, "prov", CheckState.REJECTED, 3.0, "no") == [
        *lost(vb, 3.0), _withdrawn(va, withdrawn, 3.0), _withdrawn(vb, withdrawn, 3.0),
        Event(3.0, EventKind.DEACTIVATED, KEY, "cq", rejected)]
    wl = sched.held(KEY)
    assert (wl.state, wl.pending_reason, sched.variants, sorted(sched.workload_keys())) == (
        WorkloadState.INACTIVE, rejected, {}, [KEY])


def test_a_migration_refused_withdraws_the_variant() -> None:
    sched = scheduler(_queue().with_(concurrent=ConcurrentPolicy(migrate=True, last_acceptable=None)),
                      instant_eviction=True)
    asked: list[tuple[str, str, float]] = []

    def check(parent: Workload, variant: Workload, now: float) -> str | None:
        asked.append((parent.key, variant.key, now))
        return "it would not finish sooner"

    sched.migration_check = check
    sched.add(workload("blocker", cpu=2).uid("blocker").build(), 0.0)
    sched.schedule(0.0)
    sched.add(_workload(), 1.0)
    va, vb = sched.variants[KEY]
    sched.schedule(1.0)
    assert asked == []
    sched.finish("ns/blocker", 2.0)
    events = sched.schedule(3.0)
    assert asked == [(KEY, va, 3.0)]
    refused = "Variant withdrawn: no migration to flavor a: it would not finish sooner"
    assert events[2:] == [_withdrawn(va, refused, 3.0)]
    assert [(e.kind, e.workload) for e in events[:2]] == [(EventKind.QUOTA_RESERVED, va), (EventKind.ADMITTED, va)]
    assert (sched.variants, sched.held(KEY).won, sched.knows(va)) == ({}, vb[3:], False)


def _config(*names: str, race: bool = False) -> Config:
    return Config({"a": FlavorSpec("a"), "b": FlavorSpec("b")}, {n: _queue(n).spec() for n in names}, {}, race=race)


def test_a_new_configuration_keeps_usage_and_queues_what_can_now_queue() -> None:
    sched = Scheduler(_config("cq"))
    sched.add(_workload(), 0.0)
    sched.schedule(0.0)
    waiting = workload("later", cpu=0.5, on="new").uid("later").build()
    sched.add(waiting, 1.0)
    assert (waiting.pending_reason, sched.queued(waiting)) == ("ClusterQueue new doesn't exist", False)
    sched.configure(_config("cq", "new"), 1.5)
    assert (sched.usage("cq", ("a", "cpu")), sched.queued(waiting)) == (1000, True)
    assert [(e.kind, e.workload) for e in sched.schedule(2.0)] == [
        (EventKind.QUOTA_RESERVED, waiting.key), (EventKind.ADMITTED, waiting.key)]
    assert sched.usage("new", ("a", "cpu")) == 500
    sched.configure(_config("new"), 2.5)
    assert (sched.cluster_queue_names(), sched.usage("new", ("a", "cpu"))) == (["new"], 500)


def test_a_new_configuration_that_races_starts_the_race_on_the_next_pass() -> None:
    # The variants are made when the configuration changes (1.0), told with the next pass's events.
    sched = Scheduler(_config("other"))
    sched.add(_workload(), 0.0)
    sched.configure(_config("cq", race=True), 1.0)
    va, vb = sched.variants[KEY]
    assert [(e.t, e.kind, e.workload) for e in sched.schedule(2.0)][:2] == [
        (1.0, EventKind.CREATED, va), (1.0, EventKind.CREATED, vb)]
    assert sched.schedule(3.0) == []


@pytest.mark.parametrize(("name", "uid", "want"), [
    ("job-abc12", "u1", "job-variant-dws-93aa1"),  # the parent's own hash suffix is dropped
    ("job-ab_12", "", "job-ab_12-variant-dws-825b2"),  # not a hash suffix: kept; no uid, the key is hashed
    ("job-abc123", "u", "job-abc123-variant-dws-1c1c7"),
    ("-abc12", "u", "-abc12-variant-dws-1c1c7"),
    ("x" * 300, "u", "x" * 247 + "-1c1c7"),  # at most 253 characters
])
def test_variant_name(name: str, uid: str, want: str) -> None:
    assert variant_name(Workload("ns", name, "lq", "cq", (), uid=uid), "dws") == want


def test_a_check_reported_for_a_racing_workload_reaches_its_variants() -> None:
    sched = scheduler(_queue().checks("prov"), race=True)
    sched.add(_workload(cpu=1.5), 0.0)
    va, vb = sched.variants[KEY]
    assert (sched.held(KEY).pending_reason, sched.race_reason(KEY), sched.race_reason("ns/none")) == (
        "racing: a: Pending; b: Pending", "racing: a: Pending; b: Pending", "")
    sched.schedule(1.0)
    waits = "The workload has not all checks ready"
    assert sched.race_reason(KEY) == f"racing: a: {waits}; b: {waits}"
    sched.held(vb).state = WorkloadState.ADMITTED
    assert sched.race_reason(KEY) == f"racing: b: {waits}; a: {waits}", "the nearest to starting first"
    sched.held(vb).state = WorkloadState.QUOTA_RESERVED
    events = sched.set_check(KEY, "prov", CheckState.READY, 2.0, "ok", retry_after=None,
                             pod_set_updates={"main": PodSetUpdate({"k": "v"})})
    on_a = {"main": {"cpu": "a"}}
    assert events[:2] == [
        Event(2.0, EventKind.CHECK, va, "cq", "ok", extra={"check": "prov", "state": "Ready"}),
        Event(2.0, EventKind.ADMITTED, va, "cq", "The workload is admitted", on_a)]
    assert [(e.kind, e.workload) for e in events[2:]] == [
        (EventKind.FINISHED, vb), (EventKind.FINISHED, va), (EventKind.QUOTA_RESERVED, KEY),
        (EventKind.ADMITTED, KEY)]
    assert sched.held(KEY).pod_set_updates == {"prov": {"main": PodSetUpdate({"k": "v"})}}


def test_resizing_a_workload_waiting_out_a_retry_delay_leaves_it_waiting() -> None:
    sched = _scheduler(checks=("prov",))
    sched.add(_workload(), 0.0)
    sched.schedule(1.0)
    sched.set_check(KEY, "prov", CheckState.RETRY, 2.0, retry_after=0.5)
    wl = sched.held(KEY)
    assert (wl.requeue_at, sched.queued(wl)) == (2.5, False)
    sched.resize(KEY, (PodSet("main", 1, {"cpu": 500}),), 2.1)
    assert sched.queued(wl) is False
    assert [e.kind for e in sched.schedule(2.5)] == [EventKind.REQUEUED, EventKind.QUOTA_RESERVED]


def test_a_workload_resized_after_it_found_no_room_is_nominated_with_its_new_shape() -> None:
    """Nomination keeps the shape of pod sets it has seen (and the answer for a shape that found no way in, while
    the quota tree is unchanged): pod sets replaced by a resize are a new shape, looked at anew."""
    sched = _scheduler()
    sched.add(workload("w", pods=3).uid("w").build(), 0.0)
    assert [e.kind for e in sched.schedule(1.0)] == [EventKind.PENDING]
    assert sched.resize(KEY, (PodSet("main", 2, {"cpu": 1000}),), 2.0) == []
    assert [e.kind for e in sched.schedule(3.0)] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED]


def test_reactivating_clears_why_it_waited() -> None:
    sched = _scheduler()
    wl = _workload(cpu=9000)
    sched.add(wl, 0.0)
    sched.schedule(1.0)
    assert wl.pending_reason.startswith("couldn't assign flavors") and wl.pending is not None
    sched.deactivate(KEY, 2.0)
    sched.activate(KEY, 3.0)
    assert (wl.pending, wl.pending_reason) == (None, "")


def test_an_admitted_workload_no_longer_says_why_it_waited() -> None:
    sched = _scheduler()
    first, second = _workload("first", cpu=2), _workload("second", cpu=2)
    wl = _workload(cpu=2)
    for i, each in enumerate((first, second, wl)):
        sched.add(each, float(i))
    for t in (3.0, 4.0, 5.0):
        sched.schedule(t)
    assert wl.pending_reason.startswith("couldn't assign flavors") and wl.pending is not None
    sched.finish(first.key, 6.0)
    sched.schedule(7.0)
    assert (wl.state, wl.pending, wl.pending_reason) == (WorkloadState.ADMITTED, None, "")
