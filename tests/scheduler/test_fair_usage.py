"""Admission fair sharing's usage: Kueue's half-life decay, its sampling (the same read late as sampled on time), the
entry penalty charged at reservation, folded in at admission, dropped for a workload never admitted."""

from __future__ import annotations

import math
from typing import Any

import pytest

from flexq.api import AdmissionFairSharing
from flexq.scheduler import Event, EventKind, Scheduler, UsageLedger, Workload, format_usage
from flexq.scheduler.fair_usage import admitted_usage, decayed
from flexq.scheduler.model import Admission, PodSetAssignment, WorkloadState
from tests.support import workload

LQ = ("team", "lq")
FAIR = frozenset({"cq"})
"""The ClusterQueues whose admissions charge the ledger."""


def test_one_half_life_halves_the_old_sum_and_the_new_sample_fills_the_rest() -> None:
    assert decayed({"cpu": 8.0}, {}, 10.0, 10.0) == {"cpu": 4.0}
    assert decayed({}, {"cpu": 4.0}, 10.0, 10.0) == {"cpu": 2.0}
    assert decayed({"cpu": 8.0}, {"gpu": 2.0}, 20.0, 10.0) == {"cpu": 2.0, "gpu": 1.5}
    assert decayed({"cpu": 8.0}, {"cpu": 8.0}, 3.0, 10.0) == pytest.approx({"cpu": 8.0})
    assert decayed({"cpu": 8.0}, {"cpu": 1.0}, 5.0, 0.0) == {"cpu": 8.0}  # Kueue's alpha of a zero half-life: 0


def test_samples_read_late_are_the_samples_taken_on_time() -> None:
    config = AdmissionFairSharing(half_life=10.0, sampling=1.0)
    on_time, late = UsageLedger(config), UsageLedger(config)
    for ledger in (on_time, late):
        ledger.seed(LQ, {"cpu": 8.0}, 0.0)
        ledger.advance(0.0, {LQ: {"cpu": 2.0}})
    for t in range(1, 8):
        on_time.advance(float(t), {LQ: {"cpu": 2.0}})
    late.advance(7.5, {LQ: {"cpu": 2.0}})
    # Kueue's reconcile, step by step: seven samples of 2 cpu, one a second.
    kueue = {"cpu": 8.0}
    for _ in range(7):
        kueue = decayed(kueue, {"cpu": 2.0}, 1.0, 10.0)
    for ledger in (on_time, late):
        consumed, last = ledger.consumed(LQ) or ({}, -1.0)
        assert last == 7.0
        assert consumed == pytest.approx(kueue)
    assert late.usage(LQ) == pytest.approx(2.0 + 6.0 * 0.5 ** 0.7)


def test_a_zero_half_life_keeps_no_history() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=0.0, sampling=60.0))
    ledger.seed(LQ, {"cpu": 8.0}, 0.0)
    ledger.advance(59.0, {})
    assert ledger.usage(LQ) == 8.0
    ledger.advance(60.0, {})
    assert ledger.consumed(LQ) == ({}, 60.0)


def _workload(name: str, cpu: int, state: WorkloadState) -> Workload:
    usage = {("default", "cpu"): cpu * 1000}
    wl = workload(name, cpu=cpu).namespace("team").build()
    wl.state = state
    wl.admission = Admission.of("cq", (PodSetAssignment("main", {"cpu": "default"}, usage, 1),))
    return wl


def test_the_entry_penalty_is_charged_at_reservation_folded_at_admission_and_dropped_unadmitted() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=1.0, weights={"cpu": 2.0}))
    alpha = 1 - 0.5 ** 0.1
    a, b = _workload("a", 4, WorkloadState.QUOTA_RESERVED), _workload("b", 2, WorkloadState.QUOTA_RESERVED)
    workloads = {w.key: w for w in (a, b)}
    ledger.advance(0.0, {})
    ledger.hear([Event(0.0, EventKind.QUOTA_RESERVED, a.key, "cq"), Event(0.0, EventKind.QUOTA_RESERVED, b.key, "cq"),
                 Event(0.0, EventKind.QUOTA_RESERVED, "team/other-queue", "elsewhere")], workloads, FAIR, 0.0)
    assert ledger.usage(LQ) == pytest.approx(2 * 6 * alpha)
    assert ledger.usage(LQ, weight=3.0) == pytest.approx(2 * 6 * alpha / 3)
    assert ledger.usage(LQ, weight=0.0) == math.inf
    a.state = WorkloadState.ADMITTED
    ledger.advance(0.5, {LQ: {"cpu": 4.0}})
    ledger.hear([Event(0.5, EventKind.ADMITTED, a.key, "cq")], workloads, FAIR, 0.5)
    consumed, last = ledger.consumed(LQ) or ({}, -1.0)
    assert (consumed, last) == (pytest.approx({"cpu": 4.0 * (1 - 0.5 ** 0.05) + 4 * alpha}), 0.5)
    ledger.hear([Event(0.5, EventKind.FINISHED, b.key, "cq")], workloads, FAIR, 0.5)
    assert ledger.usage(LQ) == pytest.approx(2 * consumed["cpu"])


@pytest.mark.parametrize(("amount", "written"), [(4.0, "4"), (0.25, "250m"), (2.5e-5, "25u"),
                                                  (0.267949192, "267949192n"), (2.0 ** 31, "2147483648"), (0.0, "0")])
def test_usage_is_written_as_kueues_quantities_to_the_nano_unit(amount: float, written: str) -> None:
    assert format_usage(amount) == written


def test_a_racing_workload_is_charged_once_for_the_variant_that_wins() -> None:
    from flexq.scheduler import Config, Scheduler
    from flexq.scheduler.build import cluster_queue_spec, flavor_spec

    flavors = {name: flavor_spec({"metadata": {"name": name}, "spec": {}}) for name in ("a", "b")}
    cq = cluster_queue_spec({"metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": name, "resources": [{"name": "cpu", "nominalQuota": "4"}]} for name in ("a", "b")]}]}})
    scheduler = Scheduler(Config(flavors, {"cq": cq}, {}, race=True), instant_eviction=True)
    scheduler.start_decides = True  # as with a capacity driver: both variants reserve, the first to start wins
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    scheduler.use_fair_sharing(ledger)
    scheduler.add(workload("w", cpu=4).namespace("team").build(), 0.0)
    reserved = [e.workload for e in scheduler.schedule(0.0) if e.kind is EventKind.QUOTA_RESERVED]
    alpha = 1 - 0.5 ** 0.1
    assert len(reserved) == 2 and ledger.usage(LQ) == pytest.approx(2 * 4 * alpha)  # each variant charged
    scheduler.settle(reserved[0], 10.0)
    consumed, _last = ledger.consumed(LQ) or ({}, -1.0)
    # Both variants held quota admitted until the first started: both penalties were folded in then; the workload
    # taking the winner's admission at 10 s is not charged again, its 4 cpu only sampled in.
    keep = 0.5 ** (10 / 600)
    assert consumed == pytest.approx({"cpu": 2 * 4 * alpha * keep + 4 * (1 - keep)})
    assert ledger.usage(LQ) == pytest.approx(consumed["cpu"])  # nothing pending


@pytest.mark.parametrize(("kind", "state", "kept"), [
    (EventKind.FINISHED, WorkloadState.FINISHED, False),
    (EventKind.DEACTIVATED, WorkloadState.INACTIVE, False),
    (EventKind.EVICTED, WorkloadState.INACTIVE, False),  # evicted as it is deactivated: never admitted now
    (EventKind.EVICTED, WorkloadState.PENDING, True),  # evicted and queued again: it may yet be admitted
    (EventKind.PREEMPTED, WorkloadState.PENDING, True),
])
def test_a_pending_penalty_is_dropped_only_for_a_workload_that_will_never_be_admitted(
        kind: EventKind, state: WorkloadState, kept: bool) -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=1.0))
    wl = _workload("a", 4, WorkloadState.QUOTA_RESERVED)
    ledger.advance(0.0, {})
    ledger.hear([Event(0.0, EventKind.QUOTA_RESERVED, wl.key, "cq")], {wl.key: wl}, FAIR, 0.0)
    charged, version = ledger.usage(LQ), ledger.version
    assert charged > 0
    wl.state = state
    ledger.hear([Event(0.0, kind, wl.key, "cq")], {wl.key: wl}, FAIR, 0.0)
    assert ledger.usage(LQ) == (charged if kept else 0.0)
    assert (ledger.version == version) == kept, "a new version exactly when the penalty went"
    ledger.hear([Event(0.0, kind, wl.key, "cq")], {wl.key: wl}, FAIR, 0.0)
    assert (ledger.version == version) == kept, "nothing more to drop: the same version"


@pytest.mark.parametrize(("half_life", "share"), [(0.0, 0.0), (1.0, 1 - 0.5), (10.0, 1 - 0.5 ** 0.1)])
def test_the_entry_penalty_is_the_share_of_its_request_one_sample_would_add(half_life: float, share: float) -> None:
    # Kueue's alpha: 1 - 0.5^(sampling / half-life); 0 with a zero half-life (as its decay's).
    ledger = UsageLedger(AdmissionFairSharing(half_life=half_life, sampling=1.0))
    wl = _workload("a", 4, WorkloadState.QUOTA_RESERVED)
    ledger.advance(0.0, {})
    before = ledger.version
    ledger.hear([Event(0.0, EventKind.QUOTA_RESERVED, wl.key, "cq")], {wl.key: wl}, FAIR, 0.0)
    assert ledger.usage(LQ) == pytest.approx(4 * share)
    assert ledger.version != before


def test_every_change_to_the_ledger_gives_it_a_version_not_seen_before() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=1.0))
    wl, ended, gone = (_workload(name, 4, WorkloadState.QUOTA_RESERVED) for name in ("a", "b", "c"))
    every = {w.key: w for w in (wl, ended, gone)}

    def heard(kind: EventKind, of: Workload, now: float) -> None:
        ledger.hear([Event(now, kind, of.key, "cq")], every, FAIR, now)

    seen = [ledger.version]
    for change in (lambda: ledger.seed(LQ, {"cpu": 1.0}, 0.0), lambda: ledger.know([("team", "other")], 0.0),
                   lambda: ledger.seed(("team", "seeded"), {"cpu": 2.0}, 0.0),
                   lambda: ledger.know([("team", "known")], 0.0),
                   lambda: heard(EventKind.QUOTA_RESERVED, wl, 0.0), lambda: heard(EventKind.ADMITTED, wl, 0.5),
                   lambda: heard(EventKind.QUOTA_RESERVED, ended, 0.5), lambda: heard(EventKind.FINISHED, ended, 0.6),
                   lambda: heard(EventKind.QUOTA_RESERVED, gone, 0.6), lambda: ledger.drop(gone),
                   lambda: ledger.advance(2.0, {})):
        change()
        assert ledger.version not in seen, len(seen)
        seen.append(ledger.version)
    ledger.seed(LQ, {"cpu": 9.0}, 0.0)  # known already: no change
    ledger.know([LQ], 2.0)
    assert ledger.version == seen[-1]


def test_an_admission_folds_its_penalty_into_the_sum_decayed_since_the_last_sample() -> None:
    # The sum was last sampled at 10 s (8 memory), the admission comes at 10.5 s with nothing admitted meanwhile: the
    # memory decays over half a second, the cpu penalty is added to no cpu.
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=1.0))
    ledger.seed(LQ, {"memory": 8.0}, 10.0)
    wl = _workload("a", 4, WorkloadState.QUOTA_RESERVED)
    ledger.hear([Event(10.0, EventKind.QUOTA_RESERVED, wl.key, "cq")], {wl.key: wl}, FAIR, 10.0)
    ledger.hear([Event(10.5, EventKind.ADMITTED, wl.key, "cq")], {wl.key: wl}, FAIR, 10.5)
    consumed, last = ledger.consumed(LQ) or ({}, -1.0)
    assert last == 10.5
    assert consumed == pytest.approx({"memory": 8.0 * 0.5 ** 0.05, "cpu": 4 * (1 - 0.5 ** 0.1)})


def test_a_one_second_half_life_halves_the_sum_each_second() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=1.0, sampling=1.0))
    ledger.seed(LQ, {"cpu": 8.0}, 0.0)
    ledger.advance(1.0, {})
    assert ledger.consumed(LQ) == ({"cpu": 4.0}, 1.0)


def test_an_empty_ledger_samples_nothing_and_is_next_due_a_sampling_interval_on() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=60.0))
    ledger.advance(5.0, {})
    assert (ledger.consumed(LQ), ledger.usage(LQ), ledger.next_due(5.0)) == (None, 0.0, 65.0)


@pytest.mark.parametrize(("now", "due"), [(0.0, 1.0), (0.5, 1.0), (5.0, 5.001)])
def test_the_next_sample_is_due_a_sampling_interval_after_the_last_and_never_before_now(now: float,
                                                                                         due: float) -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=1.0))
    ledger.seed(LQ, {"cpu": 1.0}, 0.0)
    assert ledger.next_due(now) == pytest.approx(due)


def test_admitted_usage_counts_only_admitted_holders_of_the_local_queues_asked() -> None:
    def held(name: str, queue: str, cpu: int, state: WorkloadState) -> Workload:
        wl = _workload(name, cpu, state)
        wl.queue = queue
        return wl

    holding = {"cq": {w.key: w for w in (held("other", "lq2", 1, WorkloadState.ADMITTED),
                                          held("reserved", "lq", 2, WorkloadState.QUOTA_RESERVED),
                                          held("a", "lq", 4, WorkloadState.ADMITTED))},
               "cq2": {w.key: w for w in (held("c", "lq3", 8, WorkloadState.ADMITTED),)}}
    assert admitted_usage(holding) == {("team", "lq2"): {"cpu": 1.0}, LQ: {"cpu": 4.0}, ("team", "lq3"): {"cpu": 8.0}}
    assert admitted_usage(holding, {LQ: "cq", ("team", "idle"): "cq-without-holders"}) == {
        LQ: {"cpu": 4.0}, ("team", "idle"): {}}


def test_a_deleted_workload_s_pending_penalty_is_dropped_once() -> None:
    ledger = UsageLedger(AdmissionFairSharing(half_life=10.0, sampling=1.0))
    wl, other = _workload("a", 4, WorkloadState.QUOTA_RESERVED), _workload("b", 2, WorkloadState.QUOTA_RESERVED)
    ledger.advance(0.0, {})
    ledger.hear([Event(0.0, EventKind.QUOTA_RESERVED, w.key, "cq") for w in (wl, other)],
                {w.key: w for w in (wl, other)}, FAIR, 0.0)
    version, alpha = ledger.version, 1 - 0.5 ** 0.1
    assert ledger.usage(LQ) == pytest.approx(6 * alpha)
    ledger.drop(wl)
    assert ledger.usage(LQ) == pytest.approx(2 * alpha) and ledger.version == version + 1
    ledger.drop(wl)
    assert ledger.version == version + 1, "nothing left to drop: the same version"
    ledger.drop(workload("c", cpu=1).namespace("elsewhere").build())
    assert ledger.version == version + 1 and ledger.usage(LQ) == pytest.approx(2 * alpha)


def test_a_workload_deleted_before_its_admission_takes_its_penalty_with_it() -> None:
    from flexq.scheduler import Config, Scheduler
    from flexq.scheduler.build import cluster_queue_spec, flavor_spec

    cq = cluster_queue_spec({"metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "admissionChecks": ["prov"],
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "a", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}})
    sched = Scheduler(Config({"a": flavor_spec({"metadata": {"name": "a"}})}, {"cq": cq}, {}))
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    sched.use_fair_sharing(ledger)
    sched.add(workload("w", cpu=4).namespace("team").build(), 0.0)
    assert [e.kind for e in sched.schedule(0.0)] == [EventKind.QUOTA_RESERVED], "reserved, waiting for its check"
    assert ledger.usage(LQ) > 0
    sched.delete("team/w", 1.0)
    assert ledger.usage(LQ) == 0.0 and sched.usage("cq", ("a", "cpu")) == 0


def _heavy_and_light(priorities: tuple[int, int], **config: Any) -> tuple[Scheduler, UsageLedger, Workload,
                                                                            Workload]:
    """A ClusterQueue of 2 cpu under admission fair sharing that preempts lower priorities within it (``config``: the
    scheduler's other settings), with its ledger in use; ``heavy`` of heavy-lq and ``light`` of light-lq, one cpu
    each of ``priorities``, admitted at 0 s and 1 s."""
    from flexq.scheduler import PreemptionPolicy
    from tests.support import cluster_queue, scheduler

    cq = cluster_queue("cq").flavor("default", cpu=2).preempt(within=PreemptionPolicy.LOWER_PRIORITY).with_(
        fair_admission=True)
    sched = scheduler(cq, **config)
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    sched.use_fair_sharing(ledger)
    heavy = workload("heavy", cpu=1, priority=priorities[0]).namespace("team").queue("heavy-lq").on("cq").build()
    light = workload("light", cpu=1, priority=priorities[1]).namespace("team").queue("light-lq").on("cq").build()
    for i, wl in enumerate((heavy, light)):
        sched.add(wl, float(i))
        sched.schedule(float(i))
    return sched, ledger, heavy, light


@pytest.mark.parametrize("fair_sharing", [False, True], ids=["classic", "fair-sharing"])
def test_a_workload_already_being_evicted_is_the_first_victim_under_admission_fair_sharing(fair_sharing: bool) -> None:
    """Kueue's CandidatesOrdering puts a workload being evicted first, before admission fair sharing's order of the
    LocalQueues: a second preemptor waits for the eviction under way instead of preempting the workload of the
    LocalQueue that used more."""
    from flexq.scheduler.fair_preemption import STRATEGIES

    sched, ledger, heavy, light = _heavy_and_light((6, 1), fair_sharing=STRATEGIES if fair_sharing else None)
    ledger.advance(120.0, {("team", "heavy-lq"): {"cpu": 50.0}, ("team", "light-lq"): {"cpu": 1.0}})
    first = workload("first", cpu=1, priority=5).namespace("team").queue("light-lq").on("cq").build()
    sched.add(first, 120.0)
    assert [e.workload for e in sched.schedule(120.0) if e.kind is EventKind.PREEMPTED] == [light.key]
    second = workload("second", cpu=1, priority=10).namespace("team").queue("light-lq").on("cq").build()
    sched.add(second, 121.0)
    assert [e.workload for e in sched.schedule(121.0) if e.kind is EventKind.PREEMPTED] == []
    assert light.evicting and not heavy.evicting


def test_fair_sharing_switched_on_orders_the_workloads_already_waiting_and_a_copy_keeps_that_order() -> None:
    """The LocalQueue that used less goes first once admission fair sharing is on, for workloads queued before it
    was; a copied scheduler (a forecast's fork) has the same order, and each goes on alone."""
    import copy

    from tests.support import cluster_queue, scheduler

    sched = scheduler(cluster_queue("cq").flavor("default", cpu=1).with_(fair_admission=True))
    running = workload("running", cpu=1).namespace("team").queue("heavy-lq").on("cq").build()
    sched.add(running, 0.0)
    sched.schedule(0.0)
    for i, (name, lq) in enumerate((("first", "heavy-lq"), ("second", "light-lq")), start=1):
        sched.add(workload(name, cpu=1).namespace("team").queue(lq).on("cq").created(float(i)).build(), float(i))
        sched.schedule(float(i))
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    sched.use_fair_sharing(ledger)
    for now in (60.0, 120.0):  # heavy-lq's running workload sampled in
        sched.fair_tick(now)
    twin = copy.deepcopy(sched)
    for s in (sched, twin):
        events = s.finish("team/running", 130.0) + s.schedule(130.0)
        assert [e.workload for e in events if e.kind is EventKind.ADMITTED] == ["team/second"]
    assert sched.held("team/second") is not twin.held("team/second")
    assert sched.held("team/first").admission is None and twin.held("team/first").admission is None


@pytest.mark.parametrize(("weights", "first"), [({}, "quiet"), ({("team", "busy-lq"): 60.0}, "busy")],
                         ids=["no weights", "busy-lq weighs 60"])
def test_workloads_queued_before_admission_fair_sharing_is_on_are_ordered_by_it(
        weights: dict[tuple[str, str], float], first: str) -> None:
    """Turned on with workloads already queued (a restart reads the ledger after the queues), it orders them too: the
    LocalQueue that used less for its weight goes first, though its workload is the newer. busy-lq used fifty times
    as much as quiet-lq; weighing sixty times as much (quiet-lq weighs 1, as a LocalQueue that says no weight), it
    goes first."""
    from tests.support import cluster_queue, scheduler

    sched = scheduler(cluster_queue("cq").flavor("default", cpu=1).with_(fair_admission=True), queue_weights=weights)
    busy = workload("busy", cpu=1).namespace("team").queue("busy-lq").on("cq").build()
    quiet = workload("quiet", cpu=1).namespace("team").queue("quiet-lq").on("cq").build()
    sched.add(busy, 0.0)
    sched.add(quiet, 1.0)
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    for t in (60.0, 120.0):  # sampled twice: the first sample starts the clock
        ledger.advance(t, {("team", "busy-lq"): {"cpu": 50.0}, ("team", "quiet-lq"): {"cpu": 1.0}})
    sched.use_fair_sharing(ledger)
    assert [wl.name for wl in sched.in_line("cq") or []] == ([first, "quiet" if first == "busy" else "busy"])
    admitted = [e.workload for e in sched.schedule(121.0) if e.kind is EventKind.ADMITTED]
    assert admitted == [f"team/{first}"]


def test_a_local_queues_weight_divides_its_usage_when_victims_are_chosen() -> None:
    """Of two LocalQueues' workloads, the victim is the one whose LocalQueue used more for its weight: heavy-lq
    used fifty times as much, but weighs sixty times as much."""
    sched, ledger, _heavy, light = _heavy_and_light((1, 1), queue_weights={("team", "heavy-lq"): 60.0})
    for t in (60.0, 120.0):
        ledger.advance(t, {("team", "heavy-lq"): {"cpu": 50.0}, ("team", "light-lq"): {"cpu": 1.0}})
    incoming = workload("incoming", cpu=1, priority=5).namespace("team").queue("other-lq").on("cq").build()
    sched.add(incoming, 120.0)
    assert [e.workload for e in sched.schedule(120.0) if e.kind is EventKind.PREEMPTED] == [light.key]


def test_a_workload_admitted_once_its_check_is_ready_is_sampled_into_its_local_queues_usage() -> None:
    """Reserved at 0 s while its admission check waits, admitted at 60 s: its 4 cpu are its LocalQueue's admitted
    usage from then on (as Kueue samples only admitted workloads), so after ten minutes more, half of them are in
    what the LocalQueue consumed, with its penalty, decayed."""
    from flexq.scheduler import CheckState
    from tests.support import cluster_queue, scheduler

    sched = scheduler(cluster_queue("cq").flavor("default", cpu=4).checks("prov").with_(fair_admission=True))
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    sched.use_fair_sharing(ledger)
    sched.add(workload("w", cpu=4).namespace("team").build(), 0.0)
    assert [e.kind for e in sched.schedule(0.0)] == [EventKind.QUOTA_RESERVED]
    assert [e.kind for e in sched.set_check("team/w", "prov", CheckState.READY, 60.0)] == [
        EventKind.CHECK, EventKind.ADMITTED]
    sched.schedule(60.0)
    sched.schedule(660.0)
    consumed, _last = ledger.consumed(LQ) or ({}, -1.0)
    alpha = 1 - 0.5 ** 0.1  # the penalty taken on reservation, folded in at admission and halved since
    assert consumed == pytest.approx({"cpu": 4 * alpha * 0.5 + 4 * 0.5})


def test_a_copied_scheduler_charges_the_copy_of_its_ledger() -> None:
    """A forecast copies the plane with its ledger in one go: the copied scheduler charges the copied ledger (the one
    the copy of the plane reads), and the original is left as it was."""
    import copy

    from tests.support import cluster_queue, scheduler

    sched = scheduler(cluster_queue("cq").flavor("default", cpu=4).with_(fair_admission=True))
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    sched.use_fair_sharing(ledger)
    sched.add(workload("w", cpu=4).namespace("team").build(), 0.0)
    ledger_copy, sched_copy = copy.deepcopy((ledger, sched))
    assert [e.kind for e in sched_copy.schedule(0.0)] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED]
    assert (ledger_copy.usage(LQ) > 0, ledger.usage(LQ)) == (True, 0.0)


def test_a_strict_fifo_queue_blocked_on_one_local_queues_head_tries_another_that_comes() -> None:
    """Under admission fair sharing a StrictFIFO ClusterQueue's head is the head of the LocalQueue that used least: a
    workload that comes to a LocalQueue that used less than the blocking head's is tried, and fits."""
    from flexq.scheduler.model import Strategy
    from tests.support import cluster_queue, scheduler

    sched = scheduler(cluster_queue("cq").flavor("default", cpu=1).with_(fair_admission=True,
                                                                         strategy=Strategy.STRICT_FIFO))
    ledger = UsageLedger(AdmissionFairSharing(half_life=600.0, sampling=60.0))
    for t in (0.0, 60.0):
        ledger.advance(t, {("team", "busy-lq"): {"cpu": 50.0}})
    sched.use_fair_sharing(ledger)
    big = workload("big", cpu=2).namespace("team").queue("busy-lq").on("cq").build()
    sched.add(big, 60.0)
    assert not [e for e in sched.schedule(60.0) if e.kind is EventKind.ADMITTED]
    small = workload("small", cpu=1).namespace("team").queue("quiet-lq").on("cq").build()
    sched.add(small, 61.0)
    assert [e.workload for e in sched.schedule(61.0) if e.kind is EventKind.ADMITTED] == [small.key]
