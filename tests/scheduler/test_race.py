"""Concurrent admission in the scheduling core: variants, the winner, withdrawal, migration, re-racing."""

from __future__ import annotations

import dataclasses
import re

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import (
    CheckState,
    ConcurrentPolicy,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload

CPU = 1000
FLAVORS = {"reservation": 4, "on-demand": 8, "spot": 16}
"""Kueue's documented setup: flavors from most to least preferred, with their cpu quota."""


def _scheduler(policy: ConcurrentPolicy | None = ConcurrentPolicy(), *, race: bool = False,
               checks: tuple[tuple[str, frozenset[str] | None], ...] = ()) -> Scheduler:
    cq = cluster_queue("team-cluster-queue").with_(concurrent=policy, checks=checks)
    for flavor, cpus in FLAVORS.items():
        cq.flavor(flavor, cpu=cpus)
    return scheduler(cq, race=race, instant_eviction=True)


def _job(name: str, cpus: int, priority: int = 0) -> Workload:
    return (workload(name, cpu=cpus, priority=priority, on="team-cluster-queue").namespace("default")
            .queue("team-queue").uid(f"uid-{name}").build())


def _submit(s: Scheduler, wl: Workload, now: float) -> list[Event]:
    return s.add(wl, now) + s.schedule(now)


def _flavor(wl: Workload) -> str | None:
    return None if wl.admission is None else wl.admission.podsets[0].flavors["cpu"]


def _racing(s: Scheduler, wl: Workload) -> list[str]:
    return [s.held(k).flavor for k in s.variants.get(wl.key, [])]


def test_variants_are_made_as_kueue_names_them_one_flavor_each() -> None:
    s = _scheduler()
    wl = _job("sample-job-7f3a1", 2)
    created = [e for e in s.add(wl, 0) if e.kind is EventKind.CREATED and e.extra.get("parent")]
    names = [e.workload.partition("/")[2] for e in created]
    assert [e.extra["flavor"] for e in created] == list(FLAVORS)
    for name, flavor in zip(names, FLAVORS, strict=True):
        assert re.fullmatch(rf"sample-job-variant-{flavor}-[0-9a-f]{{5}}", name), name
    assert all(s.held(e.workload).allowed_flavors() == {e.extra["flavor"]} for e in created)
    assert wl.state is WorkloadState.PENDING and not s.queued(wl), "the parent itself is not queued"


def test_the_first_admitted_variant_wins_the_less_preferred_are_withdrawn_the_preferred_go_on() -> None:
    s = _scheduler()
    wl = _job("b", 6)  # more than the reservation's 4 cpus: on-demand admits it
    events = _submit(s, wl, 0)
    assert wl.state is WorkloadState.ADMITTED and _flavor(wl) == "on-demand"
    finished = {e.workload.partition("/")[2].split("-variant-")[1][:-6]: e.extra["finishedReason"]
                for e in events if e.kind is EventKind.FINISHED}
    assert finished == {"on-demand": "VariantAdmitted", "spot": "VariantWithdrawn"}
    assert _racing(s, wl) == ["reservation"], "TryPreferredFlavors: the reservation variant keeps trying"
    admitted = [e for e in events if e.kind is EventKind.ADMITTED and e.workload == wl.key]
    assert len(admitted) == 1 and admitted[0].extra["flavor"] == "on-demand"
    assert s.usage("team-cluster-queue", ("on-demand", "cpu")) == 6 * CPU
    assert s.usage("team-cluster-queue", ("spot", "cpu")) == 0, "the withdrawn variant's quota is released"


def test_a_preferred_variant_admitted_later_migrates_the_running_workload() -> None:
    s = _scheduler()
    first, second = _job("a", 4), _job("b", 4)
    _submit(s, first, 0)
    assert _flavor(first) == "reservation" and first.key not in s.variants, "the most preferred won: nothing left"
    _submit(s, second, 1)
    assert _flavor(second) == "on-demand" and _racing(s, second) == ["reservation"]
    events = s.finish(first.key, 10) + s.schedule(10)
    evicted = [e for e in events if e.kind is EventKind.EVICTED]
    assert [(e.workload, e.extra["cause"]) for e in evicted] == [(second.key, "FlavorMigration")]
    assert "due to migration to more favorable resource flavor reservation" in evicted[0].reason
    assert _flavor(second) == "reservation" and second.state is WorkloadState.ADMITTED
    assert s.usage("team-cluster-queue", ("on-demand", "cpu")) == 0


def test_an_evicted_workload_withdraws_the_variant_still_trying_a_preferred_flavor() -> None:
    # b runs on on-demand while its reservation variant still tries for the reservation. Evicted from outside, b
    # withdraws that variant at once and races every flavor anew.
    s = _scheduler()
    _submit(s, _job("a", 4), 0)
    second = _job("b", 4)
    _submit(s, second, 1)
    [trying] = s.variants[second.key]
    events = s.evict(second.key, 5, "node lost", "NodeFailures")
    withdrawn = [e for e in events if e.kind is EventKind.FINISHED]
    assert [(e.workload, e.t, e.reason, e.extra["finishedReason"]) for e in withdrawn] == [
        (trying, 5, "Variant withdrawn: its workload was evicted and races anew", "VariantWithdrawn")]
    raced = [e.workload for e in events if e.kind is EventKind.CREATED]
    assert raced == s.variants[second.key] and len(raced) == len(FLAVORS)
    assert events.index(withdrawn[0]) < events.index(next(e for e in events if e.kind is EventKind.CREATED))


def test_last_acceptable_flavor_limits_migration() -> None:
    s = _scheduler(ConcurrentPolicy(last_acceptable="reservation"))
    _submit(s, _job("a", 4), 0)  # reservation
    _submit(s, _job("b", 8), 1)  # on-demand
    third = _job("c", 8)
    _submit(s, third, 2)
    assert _flavor(third) == "spot"
    assert _racing(s, third) == ["reservation"], "on-demand is below the last acceptable flavor: withdrawn"


def test_retain_first_admission_keeps_no_variant() -> None:
    s = _scheduler(ConcurrentPolicy(migrate=False))
    _submit(s, _job("a", 4), 0)
    second = _job("b", 4)
    events = _submit(s, second, 1)
    assert _flavor(second) == "on-demand" and second.key not in s.variants
    won = next(e.workload for e in events if e.kind is EventKind.ADMITTED and e.workload != second.key)
    assert "-variant-on-demand-" in won
    # Both others withdrawn, the more preferred (reservation, full) as well as spot.
    assert sorted((e.workload.split("-variant-")[1][:-6], e.reason) for e in events
                  if e.kind is EventKind.FINISHED and e.extra["finishedReason"] == "VariantWithdrawn") == [
        (flavor, f"Variant withdrawn: {won.partition('/')[2]} won on flavor on-demand")
        for flavor in ("reservation", "spot")]


def test_an_evicted_workload_races_every_flavor_again() -> None:
    s = _scheduler(ConcurrentPolicy(migrate=False))
    wl = _job("a", 6)
    _submit(s, wl, 0)
    events = s.evict(wl.key, 5, "Preempted", "Preempted")
    assert [(e.extra["flavor"], e.t) for e in events if e.kind is EventKind.CREATED] == [
        (flavor, 5) for flavor in FLAVORS]
    s.schedule(5)
    assert wl.state is WorkloadState.ADMITTED and _flavor(wl) == "on-demand"


def test_deactivating_a_racing_workload_withdraws_its_variants() -> None:
    s = _scheduler(checks=(("capacity-check", frozenset({"spot"})),))
    _submit(s, _job("a", 4), 0)
    _submit(s, _job("b", 8), 1)
    wl = _job("c", 8)  # only spot can hold it now, and spot waits for its check
    _submit(s, wl, 2)
    assert wl.state is WorkloadState.PENDING and set(_racing(s, wl)) == set(FLAVORS)
    events = s.deactivate(wl.key, 3)
    assert wl.state is WorkloadState.INACTIVE and wl.key not in s.variants
    assert s.usage("team-cluster-queue", ("spot", "cpu")) == 0
    assert [e.kind for e in events][-1] is EventKind.DEACTIVATED


def test_a_check_reported_on_the_parent_reaches_the_variant_that_has_it() -> None:
    s = _scheduler(checks=(("capacity-check", frozenset({"spot"})),))
    _submit(s, _job("a", 4), 0)
    _submit(s, _job("b", 8), 1)
    wl = _job("c", 8)
    _submit(s, wl, 2)
    s.set_check(wl.key, "capacity-check", CheckState.READY, 3)
    assert wl.state is WorkloadState.ADMITTED and _flavor(wl) == "spot"


def test_a_variant_sent_back_by_a_check_retry_queues_again_alone_once_its_delay_ends() -> None:
    s = _scheduler(checks=(("capacity-check", frozenset({"spot"})),))
    s.config.check_retry_delay["capacity-check"] = 60.0
    _submit(s, _job("a", 4), 0)
    _submit(s, _job("b", 8), 1)
    wl = _job("c", 8)  # only spot can hold it now
    _submit(s, wl, 2)
    spot = s.variants[wl.key][-1]
    events = s.set_check(wl.key, "capacity-check", CheckState.RETRY, 3)
    assert [(e.kind, e.workload) for e in events] == [(EventKind.CHECK, spot), (EventKind.EVICTED, spot)]
    assert s.held(spot).requeue_at == 63.0 and wl.state is WorkloadState.PENDING
    # The variant queues again as itself (it does not race), and reserves spot again; its siblings race on.
    assert [(e.kind, e.workload, e.reason) for e in s.schedule(63)] == [
        (EventKind.REQUEUED, spot, "Backoff finished"),
        (EventKind.QUOTA_RESERVED, spot, "Quota reserved in ClusterQueue team-cluster-queue")]
    assert _racing(s, wl) == list(FLAVORS)


def test_a_retry_reported_on_the_parent_sends_back_every_variant_that_has_the_check() -> None:
    # The check applies to every flavor: the three variants reserve, and a Retry told on the workload the job owns,
    # with its own delay (5 s, not the configured 60), sends each of them back until 8.
    s = _scheduler(checks=(("capacity-check", None),))
    s.config.check_retry_delay["capacity-check"] = 60.0
    wl = _job("a", 2)
    _submit(s, wl, 0)
    variants = s.variants[wl.key]
    events = s.set_check(wl.key, "capacity-check", CheckState.RETRY, 3, retry_after=5)
    assert [(e.kind, e.workload) for e in events] == [
        (kind, key) for key in variants for kind in (EventKind.CHECK, EventKind.EVICTED)]
    assert [s.held(key).requeue_at for key in variants] == [8.0] * len(FLAVORS)


def _won_with_a_check() -> tuple[Scheduler, Workload]:
    """A workload that raced every flavor behind one check, won on the reservation and runs (retaining its first
    admission: nothing races on); its check's retries wait 60 s."""
    s = _scheduler(ConcurrentPolicy(migrate=False), checks=(("capacity-check", None),))
    s.config.check_retry_delay["capacity-check"] = 60.0
    wl = _job("a", 2)
    _submit(s, wl, 0)
    s.set_check(wl.key, "capacity-check", CheckState.READY, 1)
    s.schedule(1)
    assert wl.state is WorkloadState.ADMITTED and _flavor(wl) == "reservation" and wl.key not in s.variants
    return s, wl


def test_a_running_workload_whose_check_retries_races_again_only_once_its_delay_ends() -> None:
    s, wl = _won_with_a_check()
    events = s.set_check(wl.key, "capacity-check", CheckState.RETRY, 3)
    assert [e.kind for e in events] == [EventKind.CHECK, EventKind.EVICTED]
    assert (wl.state, wl.requeue_at, wl.key in s.variants) == (WorkloadState.PENDING, 63.0, False)
    assert s.schedule(4) == [] and s.usage("team-cluster-queue", ("reservation", "cpu")) == 0
    events = s.schedule(63)
    assert [e.kind for e in events][:1 + len(FLAVORS)] == [EventKind.REQUEUED] + [EventKind.CREATED] * len(FLAVORS)
    assert (events[0].t, events[0].reason) == (63, "Backoff finished")
    assert sorted(_racing(s, wl)) == sorted(FLAVORS)


def test_a_running_workload_whose_check_is_rejected_is_deactivated_and_races_no_more() -> None:
    s, wl = _won_with_a_check()
    events = s.set_check(wl.key, "capacity-check", CheckState.REJECTED, 3)
    assert [e.kind for e in events] == [EventKind.CHECK, EventKind.EVICTED, EventKind.DEACTIVATED]
    assert (wl.state, wl.key in s.variants) == (WorkloadState.INACTIVE, False)
    assert s.schedule(4) == [] and all(s.usage("team-cluster-queue", (f, "cpu")) == 0 for f in FLAVORS)


def test_a_variant_rejected_everywhere_deactivates_the_parent() -> None:
    s = _scheduler(ConcurrentPolicy(migrate=False), checks=(("capacity-check", None),))
    wl = _job("a", 2)
    _submit(s, wl, 0)
    events = s.set_check(wl.key, "capacity-check", CheckState.REJECTED, 1, "no capacity")
    assert wl.state is WorkloadState.INACTIVE
    assert [e.workload for e in events if e.kind is EventKind.DEACTIVATED][-1] == wl.key


def test_flexq_races_only_where_more_than_one_flavor_could_hold_the_job() -> None:
    s = _scheduler(None, race=True)
    small, huge = _job("small", 2), _job("huge", 12)  # 12 cpus: only spot could ever hold it
    _submit(s, small, 0)
    _submit(s, huge, 0)
    assert _flavor(small) == "reservation" and _flavor(huge) == "spot"
    assert not any(e for e in s.add(_job("huge-2", 12), 1) if e.extra.get("parent")), "nothing to race"


def test_kueue_compatible_scheduler_makes_no_variants_without_a_policy() -> None:
    s = _scheduler(None)
    wl = _job("a", 2)
    assert [e.kind for e in _submit(s, wl, 0)] == [EventKind.CREATED, EventKind.QUOTA_RESERVED, EventKind.ADMITTED]


def _guide_like(checks: bool = True) -> Scheduler:
    """The guide's shape: a CPU flavor only the head can use (room for three heads), and two flavors for the
    accelerator workers, the second behind an admission check (as DWS is)."""
    cq = (cluster_queue().flavor("default", cpu=6, gpu=0).flavor("a", cpu=100, gpu=4).flavor("b", cpu=100, gpu=8)
          .with_(checks=(("prov", frozenset({"b"})),) if checks else ()))
    flavors = [FlavorSpec(f, {"pool": f}) for f in ("default", "a", "b")]
    return scheduler(cq, flavors=flavors, race=True, instant_eviction=True)


def _guide_job(name: str) -> Workload:
    return Workload("default", name, "q", "cq", (PodSet("head", 1, {"cpu": 2 * CPU}, {"pool": "default"}),
                                               PodSet("workers", 1, {"cpu": CPU, "gpu": 4 * CPU})), uid=name)


def test_variants_share_the_quota_of_the_pod_sets_they_share() -> None:
    s = _guide_like()
    first, second = _guide_job("j1"), _guide_job("j2")
    _submit(s, first, 0)
    _submit(s, second, 1)
    assert _flavor(first) is None or first.state is WorkloadState.ADMITTED
    assert first.admission is not None and first.admission.podsets[1].flavors["gpu"] == "a"
    # Job 2 races: a is full, b waits for its check; its head's 2 cpus are held once, by its b variant.
    assert second.state is WorkloadState.PENDING
    assert s.usage("cq", ("default", "cpu")) == 4 * CPU
    s.set_check(second.key, "prov", CheckState.READY, 2)
    assert second.admission is not None and second.admission.total[("default", "cpu")] == 2 * CPU
    assert s.usage("cq", ("default", "cpu")) == 4 * CPU


def test_quota_stays_consistent_through_random_races() -> None:
    import random

    rng = random.Random(7)
    s = _guide_like()
    jobs: list[Workload] = []
    for step in range(400):
        now = float(step)
        op = rng.random()
        if op < 0.3 or not jobs:
            wl = _guide_job(f"j{step}")
            jobs.append(wl)
            s.add(wl, now)
        elif op < 0.5:
            pending = [w.key for w in s.workloads() if w.parent and w.checks.get("prov") is CheckState.PENDING]
            if pending:
                state = rng.choice([CheckState.READY, CheckState.READY, CheckState.RETRY, CheckState.REJECTED])
                target = rng.choice(pending)
                if rng.random() < 0.5:
                    target = s.held(target).parent  # as a person sets it, on the job's workload
                s.set_check(target, "prov", state, now)
        elif op < 0.7:
            running = [w for w in jobs if w.state is WorkloadState.ADMITTED and s.knows(w.key)]
            if running:
                s.finish(rng.choice(running).key, now)
        elif op < 0.8:
            running = [w for w in jobs if w.state is WorkloadState.ADMITTED and s.knows(w.key)]
            if running:
                s.evict(rng.choice(running).key, now, "Preempted", "Preempted")
        elif op < 0.9:
            live = [w for w in jobs if s.knows(w.key) and w.state is not WorkloadState.FINISHED]
            if live:
                s.delete(rng.choice(live).key, now)
        s.schedule(now)
        held: dict[tuple[str, str], int] = {}
        for wl in s.workloads():
            if wl.admission is not None:
                for fr, v in wl.admission.total.items():
                    held[fr] = held.get(fr, 0) + v
        for fr in [("default", "cpu"), ("a", "gpu"), ("b", "gpu")]:
            assert s.usage("cq", fr) == held.get(fr, 0), (step, fr)
        assert held.get(("default", "cpu"), 0) <= 6 * CPU, step
        for wl in jobs:
            family = [wl, *(s.held(k) for k in s.variants.get(wl.key, ()) if s.knows(k))]
            heads = sum(m.admission.total.get(("default", "cpu"), 0) for m in family if m.admission is not None)
            holding = any(m.admission is not None for m in family)
            assert heads == (2 * CPU if holding else 0), (step, wl.key, "the head's quota is held once")
            if wl.state is WorkloadState.ADMITTED and s.knows(wl.key):
                assert wl.admission is not None and wl.admission.total[("default", "cpu")] == 2 * CPU


def test_one_variant_at_a_time_preempts() -> None:
    # Flavor a's admission check keeps its variant holding quota, not admitted, while b's variant is looked at.
    cq = (cluster_queue().flavor("a", cpu=4).flavor("b", cpu=4).preempt(within=PreemptionPolicy.LOWER_PRIORITY)
          .with_(concurrent=ConcurrentPolicy(migrate=False), checks=(("prov", frozenset({"a"})),)))
    s = scheduler(cq, instant_eviction=True)
    low = [workload(f"low-{i}", cpu=4).namespace("default").queue("q").uid(f"low-{i}").build() for i in range(2)]
    for i, wl in enumerate(low):
        _submit(s, wl, i)
        s.set_check(wl.key, "prov", CheckState.READY, i)
    assert {_flavor(w) for w in low} == {"a", "b"}
    high = workload("high", cpu=4, priority=10).namespace("default").queue("q").uid("high").build()
    events = _submit(s, high, 5)
    preempted = [e.workload for e in events if e.kind is EventKind.PREEMPTED]
    assert len(preempted) == 1, "both variants could preempt: only one does"
    gated = [e.reason for e in events if e.kind is EventKind.PENDING and "another variant" in e.reason]
    assert len(gated) == 1 and gated[0].endswith(
        ". It preempts nobody: another variant of its workload holds quota or is preempting"), gated
    s.set_check(high.key, "prov", CheckState.READY, 6)
    assert high.state is WorkloadState.ADMITTED and _flavor(high) == "a"
    assert sum(w.admission is not None for w in low) == 1, "the job on b was never preempted"


def test_the_flavors_a_workload_could_race_on_whether_or_not_it_races() -> None:
    """What a what-if shows under each flavor: the variants flexq's race would make (each with the flavors its pod
    sets may take there), asked of a scheduler that does not race; none for a workload that only one flavor could
    hold, nor for one of a ClusterQueue it does not know."""
    s = _guide_like()
    s.configure(dataclasses.replace(s.config, race=False), 0.0)
    plans = s.flavor_plans(_guide_job("j"))
    assert [(p.flavor, dict(p.allowed)) for p in plans] == [
        ("a", {"head": frozenset({"default"}), "workers": frozenset({"a"})}),
        ("b", {"head": frozenset({"default"}), "workers": frozenset({"b"})})]
    only_b = Workload("default", "big", "q", "cq", (PodSet("workers", 1, {"gpu": 8 * CPU}),), uid="big")
    assert s.flavor_plans(only_b) == [], "8 gpus: only b could ever hold it"
    elsewhere = Workload("default", "x", "q", "nowhere", _guide_job("x").podsets, uid="x")
    assert s.flavor_plans(elsewhere) == []
    assert s.variants == {}, "asking makes no variants"


def test_a_variant_of_a_running_workload_or_beside_a_sibling_holding_quota_preempts_nobody() -> None:
    """Kueue's gate, as flexq keeps it: a workload that is not a variant may preempt; a variant may not while its
    workload runs (migrating is no reason to preempt), nor while a sibling holds quota."""
    s = _scheduler()
    first, second = _job("a", 4), _job("b", 4)
    _submit(s, first, 0)
    _submit(s, second, 1)
    (preferred,) = s.variants[second.key]
    assert second.state is WorkloadState.ADMITTED and s.held(preferred).flavor == "reservation"
    assert s.may_preempt(first) and not s.may_preempt(s.held(preferred))
    third = _job("c", 2)
    s.add(third, 2)
    variants = [s.held(k) for k in s.variants[third.key]]
    assert [v.flavor for v in variants] == ["reservation", "on-demand", "spot"]
    assert all(s.may_preempt(v) for v in variants), "pending, none holding quota: each may"
    s.schedule(2)
    # The on-demand variant won (reservation is full); the reservation variant goes on, the workload running.
    assert third.state is WorkloadState.ADMITTED and not s.may_preempt(s.held(s.variants[third.key][0]))
    guide = _guide_like()
    j1, j2 = _guide_job("j1"), _guide_job("j2")
    _submit(guide, j1, 0)
    _submit(guide, j2, 1)
    by_flavor = {guide.held(k).flavor: guide.held(k) for k in guide.variants[j2.key]}
    assert by_flavor["b"].state is WorkloadState.QUOTA_RESERVED and by_flavor["a"].admission is None
    assert not guide.may_preempt(by_flavor["a"]), "its sibling on b holds quota, waiting for its check"


def test_a_variant_a_slice_replacement_or_a_workload_already_held_to_flavors_never_races() -> None:
    s = _guide_like()
    assert len(s.flavor_plans(_guide_job("j"))) == 2
    for change in ({"parent": "default/other"}, {"replaces": "default/old"},
                   {"allowed": (("head", frozenset({"default"})), ("workers", frozenset({"a"})))}):
        assert s.flavor_plans(dataclasses.replace(_guide_job("j"), **change)) == [], change
    two_groups = (cluster_queue().flavor("a", cpu=4).flavor("b", cpu=4)
                  .with_(groups=(ResourceGroup(("cpu",), ("a", "b"), {("a", "cpu"): Quota(4000),
                                                                     ("b", "cpu"): Quota(4000)}),
                                 ResourceGroup(("gpu",), ("g",), {("g", "gpu"): Quota(4000)}))))
    one_group = cluster_queue().flavor("a", cpu=4).flavor("b", cpu=4)
    assert len(scheduler(one_group, race=True).flavor_plans(workload("k", cpu=1).build())) == 2
    assert scheduler(two_groups, race=True).flavor_plans(workload("k", cpu=1).build()) == [], \
        "Kueue races a single resource group"


def test_a_resource_the_queue_does_not_cover_keeps_no_flavor_from_racing() -> None:
    job = _guide_job("j")
    asks_memory = dataclasses.replace(job, podsets=tuple(
        dataclasses.replace(ps, requests={**ps.requests, "memory": 1000}) for ps in job.podsets))
    assert [p.flavor for p in _guide_like().flavor_plans(asks_memory)] == ["a", "b"]
