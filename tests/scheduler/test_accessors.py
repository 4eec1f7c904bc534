"""What the scheduler tells its readers (usage, quota, who waits) and what a new configuration does to the
workloads it holds: each answer compared whole, for a known queue and for one it does not know."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.scheduler.events import EventKind
from flexq.scheduler.model import CohortSpec, FlavorSpec, Quota, ResourceGroup, Workload, WorkloadState
from flexq.scheduler.scheduler import Config, Scheduler
from tests.support import cluster_queue, milli, workload


def _config(cpu: float = 2, cohort_cpu: float = 0, race: bool = False) -> Config:
    """ClusterQueue ``cq`` of ``cpu`` cpus in flavor ``a``; with ``cohort_cpu``, in cohort ``co`` that has as many
    cpus of its own."""
    cq = cluster_queue().flavor("a", cpu=cpu)
    if not cohort_cpu:
        return Config({"a": FlavorSpec("a")}, {"cq": cq.spec()}, {}, race=race)
    group = ResourceGroup(("cpu",), ("a",), {("a", "cpu"): Quota(milli(cohort_cpu))})
    cohorts = {"co": CohortSpec("co", groups=(group,))}
    return Config({"a": FlavorSpec("a")}, {"cq": cq.cohort("co").spec()}, cohorts, race=race)


def _wl(name: str, cpu: float = 1, cq: str = "cq") -> Workload:
    return workload(name, cpu=cpu, on=cq).uid(name).build()


def _states(sched: Scheduler) -> dict[str, str]:
    return {wl.name: wl.state.value for wl in sched.workloads()}


def test_usage_quota_and_waiting_for_a_known_queue_and_an_unknown_one() -> None:
    sched = Scheduler(_config())
    admitted, waiting, too_big = _wl("admitted", 1.5), _wl("waiting", 1), _wl("big", 5)
    for wl in (admitted, waiting, too_big):
        sched.add(wl, 0.0)
    sched.schedule(1.0)
    assert sched.waiting(too_big), "behind one set aside: tried by the next pass"
    sched.schedule(1.0)
    assert _states(sched) == {"admitted": "Admitted", "waiting": "Pending", "big": "Pending"}
    assert (sched.usage("cq", ("a", "cpu")), sched.nominal("cq", ("a", "cpu"))) == (1500, 2000)
    assert sched.queue_usage("cq") == {("a", "cpu"): 1500}
    assert (sched.usage("nowhere", ("a", "cpu")), sched.nominal("nowhere", ("a", "cpu"))) == (0, 0)
    assert sched.queue_usage("nowhere") == {}
    assert {wl.name: sched.waiting(wl) for wl in (admitted, waiting, too_big)} == {
        "admitted": False, "waiting": False, "big": False}, "both pending ones were tried and set aside"
    late = _wl("late", 0.1)
    sched.add(late, 2.0)
    assert sched.waiting(late), "queued, not tried yet"
    assert (sched.has_cluster_queue("cq"), sched.has_cluster_queue("nowhere")) == (True, False)
    assert sched.workload_keys() == ["ns/admitted", "ns/waiting", "ns/big", "ns/late"], "in the order they came"


def test_a_new_configuration_keeps_usage_wakes_workloads_set_aside_and_keeps_the_cohorts_quota() -> None:
    sched = Scheduler(_config(cpu=1, cohort_cpu=2))
    sched.add(_wl("first", 2.5), 0.0)
    sched.add(_wl("second", 2), 0.5)
    sched.schedule(1.0)
    assert _states(sched) == {"first": "Admitted", "second": "Pending"}, "first borrows the cohort's own quota"
    sched.configure(_config(cpu=1, cohort_cpu=2), 1.5)
    assert sched.usage("cq", ("a", "cpu")) == 2500, "usage carried over"
    sched.schedule(2.0)
    assert _states(sched)["second"] == "Pending", "still no room"
    sched.configure(_config(cpu=3, cohort_cpu=2), 2.5)
    assert sched.waiting(sched.held("ns/second")), "the set-aside workload queues again"
    sched.schedule(3.0)
    assert _states(sched) == {"first": "Admitted", "second": "Admitted"}, "5 cpu of nominal and cohort quota"
    assert sched.usage("cq", ("a", "cpu")) == 4500


@pytest.mark.parametrize("guard", ["admitted", "retry delay", "variant", "unknown queue", "already queued"])
def test_enqueue_queues_only_a_pending_workload_not_queued_in_a_known_queue(guard: str) -> None:
    sched = Scheduler(_config(cpu=1))
    blocker = _wl("blocker", 1)
    sched.add(blocker, 0.0)
    sched.schedule(0.5)
    wl = _wl("w", 0.5, cq="nowhere" if guard == "unknown queue" else "cq")
    sched.add(wl, 1.0)
    sched.schedule(1.5)  # set aside: no room while blocker runs
    if guard != "unknown queue":
        assert not sched.waiting(wl)
    if guard == "admitted":
        wl.state = WorkloadState.ADMITTED
    elif guard == "retry delay":
        wl.requeue_at = 100.0
    elif guard == "variant":
        sched.variants[wl.key] = []
    elif guard == "already queued":
        sched.configure(_config(cpu=1), 1.5)  # woken: queued again, not twice
    sched.enqueue(wl, 2.0)
    if guard == "already queued":
        assert sched.waiting(wl)
        sched.finish(blocker.key, 3.0, "JobFinished")
        events = sched.schedule(3.0)
        assert [e.workload for e in events if e.kind is EventKind.ADMITTED] == [wl.key], "admitted once"
    else:
        assert not sched.waiting(wl)


def test_a_queue_configured_under_racing_starts_a_race_for_each_workload_waiting_for_it() -> None:
    sched = Scheduler(_config())
    for name in ("x", "y"):
        sched.add(_wl(name, cq="later"), 0.0)
    assert sched.schedule(1.0) == [] and sched.variants == {}, "no such ClusterQueue yet"
    later = cluster_queue("later").flavor("a", cpu=4).flavor("b", cpu=4).spec()
    config = _config(race=True)
    sched.configure(dataclasses.replace(config, flavors={"a": FlavorSpec("a"), "b": FlavorSpec("b")},
                                        cluster_queues={**config.cluster_queues, "later": later}), 1.5)
    assert sorted(sched.variants) == ["ns/x", "ns/y"]
    sched.note_race_reasons()
    reasons = {key: sched.held(key).pending_reason for key in ("ns/x", "ns/y")}
    assert reasons == {key: "racing: a: Pending; b: Pending" for key in reasons}, "neither variant tried yet"
    created = [e.extra["parent"] for e in sched.schedule(2.0) if e.kind is EventKind.CREATED]
    assert sorted(created) == ["ns/x", "ns/x", "ns/y", "ns/y"], "both races' variants are told by the next pass"


def test_a_reason_explained_from_outside_and_the_root_of_a_queues_cohort_tree() -> None:
    sched = Scheduler(_config(cpu=1, cohort_cpu=2))
    wl = _wl("w")
    sched.add(wl, 0.0)
    sched.explain("ns/w", "waiting for its nodes")
    sched.explain("ns/nobody", "ignored")
    assert (wl.pending_reason, sched.workload("ns/nobody")) == ("waiting for its nodes", None)
    assert (sched.cohort_root("cq"), sched.cohort_root("nowhere")) == ("co", None)
    assert Scheduler(_config()).cohort_root("cq") == "cq", "a queue in no cohort is its own root"


def test_a_flavor_marked_unavailable_is_skipped_until_the_moment_it_expires() -> None:
    sched = Scheduler(_config(cpu=4))
    sched.mark_unavailable("a", 5.0, "stocked out")
    wl = _wl("w")
    sched.add(wl, 0.0)
    sched.schedule(1.0)
    assert (wl.state, sched.waiting(wl), sched.next_requeue()) == (WorkloadState.PENDING, False, 5.0)
    assert "stocked out" in wl.pending_reason
    sched.schedule(4.999)
    assert wl.state is WorkloadState.PENDING
    events = sched.schedule(5.0)
    assert [e.kind for e in events] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED], "expired at 5 s: woken"
    assert (sched.unavailable, sched.next_requeue()) == ({}, None)


def test_a_reservation_clears_the_reason_and_stamps_both_times() -> None:
    sched = Scheduler(_config(cpu=1))
    first, second = _wl("first"), _wl("second")
    sched.add(first, 0.0)
    sched.add(second, 0.0)
    sched.schedule(1.0)
    sched.schedule(1.0)
    assert second.pending_reason and second.pending is not None, "waits, and says why"
    sched.finish("ns/first", 2.0)
    sched.schedule(3.0)
    assert (second.state, second.pending_reason, second.pending, second.reserved_at, second.admitted_at) == (
        WorkloadState.ADMITTED, "", None, 3.0, 3.0)
    assert (first.admission, first.evicting) == (None, False)
