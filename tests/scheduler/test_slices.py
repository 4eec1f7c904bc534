"""Workload slices of elastic jobs: growth admitted for the difference on the same flavor, shrinking frees quota."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.fair_preemption import STRATEGIES
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.model import (
    Admission,
    CheckState,
    FlavorSpec,
    Granular,
    Mode,
    PendingReason,
    PodSetAssignment,
    PreemptionPolicy,
    Workload,
    WorkloadState,
)
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.scheduler import Scheduler
from flexq.scheduler.slices import assign_slice, shrunk, slice_targets
from tests.support import cluster_queue, scheduler, workload

CPU = 1000


def _scheduler(checks: tuple[str, ...] = (), **quotas: int) -> Scheduler:
    """One ClusterQueue ``cq`` with a flavor per keyword (in order), each with that many cpus."""
    cq = cluster_queue().checks(*checks)
    for flavor, cpus in quotas.items():
        cq.flavor(flavor, cpu=cpus)
    return scheduler(cq, instant_eviction=True)


def _job(name: str, workers: int, replaces: str = "") -> Workload:
    return (workload(name).queue("q").podset("head", 1, cpu=1).podset("workers", workers, cpu=1).replaces(replaces)
            .build())


def _usage(s: Scheduler, flavor: str = "f") -> int:
    return s.usage("cq", (flavor, "cpu")) // CPU


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
    found = s.last_assignment[grown.key]  # what the controller writes of the slice's assignment
    assert found.mode is Mode.FIT and found.usage() == {("f", "cpu"): 5 * CPU}


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
    assert (events[1].t, events[1].reason) == (2, "Replaced to accommodate a new workload slice")
    assert old.state is WorkloadState.FINISHED and not s.queued(old)
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
    assert [e.kind for e in events] == [EventKind.EVICTED] and s.queued(grown)


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


# --- the slice's nomination and shrinking, as tables ----------------------------------------------------------


def _holding(name: str, placed: dict[str, tuple[int, str]], priority: int = 0) -> Workload:
    """A workload holding quota in ``cq``: pod set -> (pods of 1 cpu, flavor)."""
    made = workload(name, priority=priority).queue("q").uid(name)
    for p, (n, _f) in placed.items():
        made.podset(p, n, cpu=1)
    wl = made.build()
    wl.admission = Admission.of("cq", tuple(PodSetAssignment(p, {"cpu": f}, {(f, "cpu"): n * CPU}, n)
                                            for p, (n, f) in placed.items()))
    wl.state = WorkloadState.ADMITTED
    return wl


def _nominate(quotas: dict[str, int], old: Workload, grown: dict[str, int], others: tuple[Workload, ...] = (),
              priority: int = 0, within: PreemptionPolicy = PreemptionPolicy.NEVER) -> Assignment:
    queue = cluster_queue().preempt(within=within)
    for flavor, cpus in quotas.items():
        queue.flavor(flavor, cpu=cpus)
    cq = queue.spec()
    tree = QuotaTree([cq])
    holders = {"cq": {w.key: w for w in (old, *others)}}
    for w in (old, *others):
        assert w.admission is not None
        tree.add("cq", w.admission.usage())
    before = {n: dict(node.usage) for n, node in tree.queues.items()}
    made = workload("new", priority=priority).queue("q").replaces(old.key)
    for p, n in grown.items():
        made.podset(p, n, cpu=1)
    wl = made.build()
    assignment = assign_slice(wl, old, cq, tree, {f: FlavorSpec(f) for f in quotas}, holders)
    assert {n: dict(node.usage) for n, node in tree.queues.items()} == before, "the old slice's usage is restored"
    return assignment


def _summary(a: Assignment) -> tuple[object, ...]:
    return (a.mode, a.complete, [(p.name, dict(p.flavors), p.granular, p.reasons) for p in a.podsets], a.usage())


OLD = {"head": (1, "x"), "workers": (2, "y")}
SLICES = [
    ("grows on its flavors", {"x": 4, "y": 4}, OLD, {"head": 1, "workers": 4},
     (Mode.FIT, True, [("head", {"cpu": "x"}, Granular.FIT, ()), ("workers", {"cpu": "y"}, Granular.FIT, ())],
      {("x", "cpu"): 1 * CPU, ("y", "cpu"): 4 * CPU})),
    ("would move to a flavor with room: never", {"x": 8, "y": 3}, OLD, {"head": 1, "workers": 4},
     (Mode.NO_FIT, False, [("head", {"cpu": "x"}, Granular.FIT, ()),
                           ("workers", {}, Granular.NO_FIT, ("couldn't change flavor from: y to: x",))],
      {("x", "cpu"): 1 * CPU})),
    ("no room on its flavor: waits", {"z": 9, "y": 3}, {"workers": (2, "y")}, {"workers": 4},
     (Mode.NO_FIT, False, [("workers", {}, Granular.NO_FIT,
                            ("insufficient quota for cpu in flavor y, previously considered podsets requests (0) + "
                             "current podset request (4) > maximum capacity (3)",))], {})),
    ("a new pod set takes the old flavors only", {"z": 9, "y": 8}, {"workers": (2, "y")}, {"workers": 2, "extra": 1},
     (Mode.FIT, True, [("workers", {"cpu": "y"}, Granular.FIT, ()), ("extra", {"cpu": "y"}, Granular.FIT, ())],
      {("y", "cpu"): 3 * CPU})),
]


@pytest.mark.parametrize(("quotas", "old", "grown", "want"), [c[1:] for c in SLICES], ids=[c[0] for c in SLICES])
def test_assign_slice(quotas: dict[str, int], old: dict[str, tuple[int, str]], grown: dict[str, int],
                      want: tuple[object, ...]) -> None:
    assert _summary(_nominate(quotas, _holding("old", old), grown)) == want


def test_a_slice_preempts_others_but_never_the_slice_it_replaces() -> None:
    old = _holding("old", {"workers": (2, "y")})
    high = _holding("high", {"workers": (3, "y")}, priority=9)
    low = _holding("low", {"workers": (1, "y")}, priority=-1)
    grown = {"workers": 3}
    alone = _nominate({"y": 5}, old, grown, (high,), priority=5, within=PreemptionPolicy.LOWER_PRIORITY)
    assert (alone.mode, alone.podsets[0].granular) == (Mode.PREEMPT, Granular.NO_CANDIDATES), \
        "the old slice (lower priority) is no candidate"
    other = _nominate({"y": 6}, old, grown, (high, low), priority=5, within=PreemptionPolicy.LOWER_PRIORITY)
    assert (other.mode, other.podsets[0].granular) == (Mode.PREEMPT, Granular.PREEMPT)
    cq = cluster_queue().flavor("y", cpu=6).preempt(within=PreemptionPolicy.LOWER_PRIORITY).spec()
    tree = QuotaTree([cq])
    for w in (old, high, low):
        assert w.admission is not None
        tree.add("cq", w.admission.usage())
    wl = workload("new", priority=5).queue("q").podset("workers", 3, cpu=1).replaces(old.key).build()
    targets = slice_targets(wl, old, cq, tree, {"cq": {w.key: w for w in (old, high, low)}}, other)
    assert [t.workload.key for t in targets] == [low.key]
    assert tree.usage("cq", ("y", "cpu")) == 6 * CPU


@pytest.mark.parametrize(("counts", "want"), [
    ({}, [("head", 1, {("x", "cpu"): 1000}), ("workers", 4, {("y", "cpu"): 8000})]),
    ({"workers": 2}, [("head", 1, {("x", "cpu"): 1000}), ("workers", 2, {("y", "cpu"): 4000})]),
    ({"workers": 3, "head": 0}, [("head", 0, {("x", "cpu"): 0}), ("workers", 3, {("y", "cpu"): 6000})]),
    ({"workers": 0, "other": 7}, [("head", 1, {("x", "cpu"): 1000}), ("workers", 0, {("y", "cpu"): 0})]),
])
def test_shrunk(counts: dict[str, int], want: list[tuple[str, int, dict[tuple[str, str], int]]]) -> None:
    admission = Admission.of("cq", (PodSetAssignment("head", {"cpu": "x"}, {("x", "cpu"): 1000}, 1),
                                    PodSetAssignment("workers", {"cpu": "y"}, {("y", "cpu"): 8000}, 4)))
    out = shrunk(admission, counts)
    assert out == Admission.of("cq", tuple(PodSetAssignment(name, {"cpu": "x" if name == "head" else "y"}, usage, n)
                                           for name, n, usage in want))


def test_shrinking_a_pod_set_of_no_pods_keeps_its_usage() -> None:
    admission = Admission.of("cq", (PodSetAssignment("none", {"cpu": "x"}, {("x", "cpu"): 5}, 0),))
    assert shrunk(admission, {"none": 0}) == admission


def test_growing_in_place_is_refused() -> None:
    admission = Admission.of("cq", (PodSetAssignment("workers", {"cpu": "y"}, {("y", "cpu"): 8000}, 4),))
    with pytest.raises(ValueError, match="pod set workers: 5 pods is more than the 4 admitted"):
        shrunk(admission, {"workers": 5})


def _cohort_of_two() -> Scheduler:
    return scheduler(*(cluster_queue(name).flavor("f", cpu=2).cohort("co") for name in ("cq1", "cq2")))


def _slices(s: Scheduler, queue: str = "cq1") -> tuple[Workload, Workload]:
    old = workload("job", pods=2, on=queue).uid("job").build()
    s.add(old, 0.0)
    s.schedule(0.0)
    grown = workload("job-2", pods=4, on=queue).uid("job-2").replaces(old.key).build()
    s.add(grown, 1.0)
    return old, grown


def test_a_slice_that_no_longer_fits_after_another_head_waits() -> None:
    s = _cohort_of_two()
    old, grown = _slices(s)
    s.add(workload("other", pods=2, on="cq2").uid("other").build(), 1.0)
    events, progress = s.cycle(2.0)
    assert events[2:] == [Event(2.0, EventKind.PENDING, grown.key, "cq1",
                                "Workload no longer fits after processing another workload")]
    assert (progress, grown.pending, s.queued(grown), old.state) == (
        True, PendingReason.WAITING_FOR_QUOTA, True, WorkloadState.ADMITTED)


def test_a_slice_that_takes_exactly_what_is_left_replaces_the_old_one() -> None:
    s = _cohort_of_two()
    old, grown = _slices(s)
    events, progress = s.cycle(2.0)
    on_f = {"main": {"cpu": "f"}}
    assert events == [
        Event(2.0, EventKind.FINISHED, old.key, "cq1", "Removed to accommodate a workload (UID: job-2) due to "
              "workload slice aggregation", extra={"finishedReason": "WorkloadSliceReplaced", "replacedBy": grown.key}),
        Event(2.0, EventKind.QUOTA_RESERVED, grown.key, "cq1", "Quota reserved in ClusterQueue cq1", on_f),
        Event(2.0, EventKind.ADMITTED, grown.key, "cq1", "The workload is admitted", on_f)]
    assert (progress, old.finished_at, grown.reserved_at, grown.replaces, s.usage("cq1", ("f", "cpu"))) == (
        True, 2.0, 2.0, "", 4 * CPU)


def _cohort(fair: bool) -> Scheduler:
    """ClusterQueues a, b and c of 4 cpu each in one cohort, reclaiming within it; fair sharing on or off."""
    queues = (cluster_queue(name).flavor("f", cpu=4).cohort("all")
              .preempt(reclaim=PreemptionPolicy.ANY, borrow=PreemptionPolicy.LOWER_PRIORITY) for name in "abc")
    return scheduler(*queues, instant_eviction=True, fair_sharing=STRATEGIES if fair else None)


@pytest.mark.parametrize(("fair", "preempted"), [(False, ["ns/b2"]), (True, [])])
def test_a_growing_slice_preempts_as_its_cohort_preempts_under_fair_sharing_or_not(fair: bool,
                                                                                  preempted: list[str]) -> None:
    """b borrows 2 of the cohort's 12 cpu (three jobs of 2, of a lower priority), a's elastic job holds its own 4
    and grows by 4: 2 are free, 2 must come from b. Kueue's classical preemption takes them from b (a borrows after
    the growth, and borrowWithinCohort lets it preempt lower priorities); under fair sharing a would borrow 4 after
    the growth against b's 2 (a share of 333 against b's 167, 0 once preempted): neither of Kueue's strategies lets
    it preempt b, and the growth waits while a's old slice runs on."""
    s = _cohort(fair)
    for i in range(3):
        job = workload(f"b{i}", cpu=2, priority=-1, on="b").queue("q").uid(f"b{i}").build()
        s.add(job, float(i))
        s.schedule(float(i))
        assert job.state is WorkloadState.ADMITTED
    old = workload("a", on="a").queue("q").podset("head", 1, cpu=1).podset("workers", 3, cpu=1).uid("a").build()
    _admit(s, old, 5)
    grown = (workload("a-2", on="a").queue("q").podset("head", 1, cpu=1).podset("workers", 7, cpu=1).uid("a-2")
             .replaces(old.key).build())
    events = s.add(grown, 6) + s.schedule(6)
    assert [e.workload for e in events if e.kind is EventKind.PREEMPTED] == preempted
    if preempted:
        events = s.complete_eviction(preempted[0], 7) + s.schedule(7)
        assert grown.state is WorkloadState.ADMITTED and old.state is WorkloadState.FINISHED, "grown once b2 is out"
    else:
        assert old.state is WorkloadState.ADMITTED and grown.state is WorkloadState.PENDING


def test_a_growing_slice_that_preempts_takes_only_what_it_adds_from_the_cycle_s_cohort() -> None:
    # cq (6 cpus, no borrowing) runs a (3 cpus, priority 10) and b (2 cpus); its cohort has 2 more cpus in lender.
    # a grows to 5 cpus: 2 more, so b goes. Within the cycle cq holds 5 (a's 3, b out, 2 more), which leaves the
    # cohort 3 cpus for c, borrowing in cq2: c is admitted in the same cycle.
    s = scheduler(cluster_queue("cq").flavor("f", cpu=6, borrowing=0).cohort("co")
                  .preempt(within=PreemptionPolicy.LOWER_PRIORITY),
                  cluster_queue("cq2").flavor("f", cpu=0).cohort("co"),
                  cluster_queue("lender").flavor("f", cpu=2).cohort("co"), instant_eviction=True)
    old, low = _job("a", 2), _job("b", 1)
    old.priority = 10
    _admit(s, old, 0)
    _admit(s, low, 0)
    grown = _job("a-2", 4, replaces=old.key)
    grown.priority = 10
    c = workload("c", cpu=3, on="cq2").queue("q2").build()
    s.add(grown, 1)
    s.add(c, 1)
    events = s.cycle(1)[0]
    assert [e.workload for e in events if e.kind is EventKind.PREEMPTED] == [low.key]
    assert c.state is WorkloadState.ADMITTED
