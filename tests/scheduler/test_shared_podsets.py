"""The guide's race, told whole: a Ray head that only the CPU flavor holds and TPU workers that on-demand and DWS
both could hold. Both variants reserve with the head's quota held once (the first to reserve carries it, the other
shares it); the DWS variant's check comes first, it wins, and the workload runs with the head on the CPU flavor and
its workers on DWS, the on-demand variant withdrawn and its quota back."""

from __future__ import annotations

from flexq.scheduler.events import EventKind
from flexq.scheduler.model import CheckState, PodSetAssignment, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload

HEAD, OD, DWS = ("default-cpu", "cpu"), ("od", "tpu"), ("dws", "tpu")


def _scheduler() -> Scheduler:
    """The head's flavor holds 1 cpu (no tpu); on-demand and DWS 4 tpu each (no cpu), each behind its own check."""
    cq = (cluster_queue().flavor("default-cpu", cpu=1).flavor("od", tpu=4).flavor("dws", tpu=4)
          .with_(checks=(("prov-od", frozenset({"od"})), ("prov-dws", frozenset({"dws"})))))
    return scheduler(cq, race=True)


def _usage(sched: Scheduler) -> tuple[int, int, int]:
    return sched.usage("cq", HEAD), sched.usage("cq", OD), sched.usage("cq", DWS)


def test_variants_share_the_head_and_the_first_check_ready_wins() -> None:
    sched = _scheduler()
    wl = workload("job").podset("head", 1, cpu=1).podset("workers", 4, tpu=1).uid("job").build()
    created = sched.add(wl, 0.0)
    od, dws = sched.variants["ns/job"]
    assert [(e.kind, e.workload) for e in created] == [
        (EventKind.CREATED, "ns/job"), (EventKind.CREATED, od), (EventKind.CREATED, dws)]
    reserved = sched.schedule(0.0)
    assert [(e.kind, e.workload) for e in reserved] == [(EventKind.QUOTA_RESERVED, od), (EventKind.QUOTA_RESERVED, dws)]
    assert _usage(sched) == (1000, 4000, 4000), "the head's 1 cpu held once, by the first to reserve"
    held = sched.held(dws).admission
    assert held is not None and held.total == {HEAD: 0, DWS: 4000}, "the other holds only what is its own"
    won = sched.set_check(dws, "prov-dws", CheckState.READY, 1.0) + sched.schedule(1.0)
    assert [(e.kind, e.workload) for e in won] == [
        (EventKind.CHECK, dws), (EventKind.ADMITTED, dws), (EventKind.FINISHED, od),
        (EventKind.FINISHED, dws), (EventKind.QUOTA_RESERVED, "ns/job"), (EventKind.ADMITTED, "ns/job")]
    assert (wl.state, sched.variants, _usage(sched)) == (WorkloadState.ADMITTED, {}, (1000, 0, 4000))
    assert wl.admission is not None and wl.admission.podsets == (
        PodSetAssignment("head", {"cpu": "default-cpu"}, {HEAD: 1000}, 1),
        PodSetAssignment("workers", {"tpu": "dws"}, {DWS: 4000}, 4))
    assert sched.workload(od) is None and sched.workload(dws) is None


def test_the_head_s_quota_passes_to_the_other_variant_when_its_carrier_goes() -> None:
    sched = _scheduler()
    wl = workload("job").podset("head", 1, cpu=1).podset("workers", 4, tpu=1).uid("job").build()
    sched.add(wl, 0.0)
    od, dws = sched.variants["ns/job"]
    sched.schedule(0.0)
    assert _usage(sched) == (1000, 4000, 4000)
    sched.set_check(od, "prov-od", CheckState.REJECTED, 1.0)  # the carrier goes: DWS takes the head on
    sched.schedule(1.0)
    rejected = sched.held(od)
    assert (rejected.state, rejected.admission) == (WorkloadState.INACTIVE, None)
    assert _usage(sched) == (1000, 0, 4000), "the head's 1 cpu still held once"
    carried = sched.held(dws).admission
    assert carried is not None and carried.total == {HEAD: 1000, DWS: 4000}
    assert carried.podsets[0] == PodSetAssignment("head", {"cpu": "default-cpu"}, {HEAD: 1000}, 1)
    sched.set_check(dws, "prov-dws", CheckState.READY, 2.0)
    sched.schedule(2.0)
    assert (wl.state, _usage(sched)) == (WorkloadState.ADMITTED, (1000, 0, 4000))
    sched.finish("ns/job", 3.0)
    assert _usage(sched) == (0, 0, 0), "nothing left held by anyone"


def test_a_variant_nominated_while_its_sibling_holds_the_head_asks_only_for_its_own() -> None:
    # DWS is full when the job comes: on-demand reserves with the head's cpu, and the DWS variant waits. Once DWS
    # frees (and is back in stock), the DWS variant is nominated with the head's cpu already held by its sibling (the
    # queue's only cpu): it is assigned the head's flavor all the same, and reserves its workers' tpu alone.
    sched = _scheduler()
    other = workload("other").podset("main", 1, tpu=4).uid("other").build()
    other.allowed = (("main", frozenset({"dws"})),)
    sched.add(other, 0.0)
    sched.schedule(0.0)
    assert _usage(sched) == (0, 0, 4000)
    wl = workload("job").podset("head", 1, cpu=1).podset("workers", 4, tpu=1).uid("job").build()
    sched.add(wl, 1.0)
    od, dws = sched.variants["ns/job"]
    assert [(e.kind, e.workload) for e in sched.schedule(1.0) if e.kind is EventKind.QUOTA_RESERVED] == [
        (EventKind.QUOTA_RESERVED, od)]
    assert _usage(sched) == (1000, 4000, 4000)
    # DWS frees while it is out of stock until 3.0: the variant waits for it, then reserves.
    sched.mark_unavailable("dws", 3.0, "stocked out")
    sched.finish(other.key, 2.0)
    assert [e.kind for e in sched.schedule(2.0) if e.kind is EventKind.QUOTA_RESERVED] == []
    assert _usage(sched) == (1000, 4000, 0)
    assert [(e.kind, e.workload) for e in sched.schedule(3.0) if e.kind is EventKind.QUOTA_RESERVED] == [
        (EventKind.QUOTA_RESERVED, dws)]
    assert _usage(sched) == (1000, 4000, 4000), "the head's 1 cpu still held once"
    held = sched.held(dws).admission
    assert held is not None and held.total == {HEAD: 0, DWS: 4000}
    assigned = sched.last_assignment[dws]  # what the controller writes of the variant's assignment
    assert [dict(p.flavors) for p in assigned.podsets] == [{"cpu": "default-cpu"}, {"tpu": "dws"}]


def test_the_head_s_quota_passes_on_each_time_its_carrier_goes() -> None:
    # Three variants share the head's 1 cpu; on-demand reserved first and carries it. Its check is rejected: DWS
    # carries it on; DWS's is rejected too: spot carries it, and wins with the head on the cpu flavor.
    cq = (cluster_queue().flavor("default-cpu", cpu=1).flavor("od", tpu=4).flavor("dws", tpu=4).flavor("spot", tpu=4)
          .with_(checks=tuple((f"prov-{f}", frozenset({f})) for f in ("od", "dws", "spot"))))
    sched = scheduler(cq, race=True)
    wl = workload("job").podset("head", 1, cpu=1).podset("workers", 4, tpu=1).uid("job").build()
    sched.add(wl, 0.0)
    od, dws, spot = sched.variants["ns/job"]
    sched.schedule(0.0)

    def head_held() -> list[tuple[str, int | None]]:
        """Each variant still racing: its state, and the head's cpu it holds."""
        return [(sched.held(k).state.value, None if sched.held(k).admission is None
                 else sched.held(k).admission.total.get(HEAD)) for k in (od, dws, spot)]

    assert head_held() == [("QuotaReserved", 1000), ("QuotaReserved", 0), ("QuotaReserved", 0)]
    sched.set_check(od, "prov-od", CheckState.REJECTED, 1.0)
    sched.schedule(1.0)
    assert head_held() == [("Inactive", None), ("QuotaReserved", 1000), ("QuotaReserved", 0)]
    sched.set_check(dws, "prov-dws", CheckState.REJECTED, 2.0)
    sched.schedule(2.0)
    assert head_held() == [("Inactive", None), ("Inactive", None), ("QuotaReserved", 1000)]
    assert sched.usage("cq", HEAD) == 1000, "held once all along"
    sched.set_check(spot, "prov-spot", CheckState.READY, 3.0)
    sched.schedule(3.0)
    assert wl.state is WorkloadState.ADMITTED and wl.admission is not None
    assert wl.admission.total == {HEAD: 1000, ("spot", "tpu"): 4000} and sched.usage("cq", HEAD) == 1000
