"""Preemption for topology (Kueue's TAS preemption, restated from its ``scheduler_tas_test.go`` cases): a workload
whose quota fits but whose required topology does not, because lower-priority workloads hold the domains, preempts
the candidates Kueue's order tries first until its pod sets are placed (the quota and the placement both checked, as
Kueue's ``workloadFits`` does), then the fewest of them; once they are gone it is placed where they were.

Under fair sharing the same: Kueue's fair-sharing search asks the same ``workloadFits`` of each victim it takes and of
each it puts back, so the cases hold with fair sharing on too; in a cohort, a queue within its nominal quota reclaims
a placement from a borrowing queue, and a borrowing one takes it only where the fair-sharing strategies let it."""

from __future__ import annotations

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.fair_preemption import STRATEGIES
from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import CPU, Node, hosts_of, node, tas_job, tas_queue, tas_scheduler

FLAVOR = FlavorSpec("tas", {}, topology="default", levels=(HOSTNAME,))


def _hosts_5_cpus(names: tuple[str, ...]) -> list[Node]:
    return [node(name, {HOSTNAME: name}, 5, pods=110_000) for name in names]


def _scheduler(policy: PreemptionPolicy, fair: bool = False, hosts: tuple[str, ...] = ("x1", "y1")) -> Scheduler:
    return tas_scheduler(_hosts_5_cpus(hosts), [FLAVOR], [tas_queue("cq", ["tas"], 50, within_cluster_queue=policy)],
                         fair_sharing=STRATEGIES if fair else None)


def _job(name: str, priority: int, pods: int, cpus: int, cq: str = "cq") -> Workload:
    return tas_job(name, pods, cpus, HOSTNAME, priority=priority, cq=cq, podset="one")


def _hosts(wl: Workload) -> tuple[str, ...]:
    return hosts_of(wl)["one"]


def _story(s: Scheduler, incoming: Workload) -> dict[str, object]:
    """Two admitted workloads, 4 of each host's 5 cpus (``mid`` on x1, ``low`` on y1); then ``incoming``."""
    mid, low = _job("mid", 2, 1, 4), _job("low", 1, 1, 4)
    for t, wl in enumerate((mid, low)):
        s.add(wl, float(t))
        s.schedule(float(t))
    assert (_hosts(mid), _hosts(low)) == (("x1",), ("y1",))
    s.add(incoming, 10.0)
    events = s.schedule(10.0)
    return {"preempted": sorted(e.workload.split("/")[1] for e in events if e.kind.value == "Preempted"),
            "evictions": {w.name: w.evictions for w in (mid, low)},
            "incoming": incoming.state, "hosts": _hosts(incoming) if incoming.admission is not None else (),
            "reason": incoming.pending_reason}


CASES = {
    # Kueue: "low priority workload is preempted even though there is enough capacity, but fragmented": 2 free cpus
    # in all, one per host, and both pods must share a host: the lowest-priority candidate goes, mid survives.
    "fragmented": (PreemptionPolicy.LOWER_PRIORITY, ("foo", 3, 2, 1), {
        "preempted": ["low"], "evictions": {"mid": 0, "low": 1}, "incoming": WorkloadState.ADMITTED,
        "hosts": ("y1",), "reason": ""}),
    # All 5 cpus of one host: freeing low's host is enough; mid, of higher priority than the incoming, is no
    # candidate at all.
    "a whole host": (PreemptionPolicy.LOWER_PRIORITY, ("big", 2, 1, 5), {
        "preempted": ["low"], "evictions": {"mid": 0, "low": 1}, "incoming": WorkloadState.ADMITTED,
        "hosts": ("y1",), "reason": ""}),
    # No holder is of lower priority: nobody is preempted, it waits for quota (Kueue's Preempt with no candidates).
    "no lower-priority holder": (PreemptionPolicy.LOWER_PRIORITY, ("wide", 1, 1, 5), {
        "preempted": [], "evictions": {"mid": 0, "low": 0}, "incoming": WorkloadState.PENDING, "hosts": (),
        "reason": 'couldn\'t assign flavors to pod set one: topology "default" doesn\'t allow to fit any of 1 pod(s). '
                  'Total nodes: 2; excluded: resource "cpu": 2'}),
    # Without preemption in the ClusterQueue it waits, as before.
    "never": (PreemptionPolicy.NEVER, ("foo", 3, 2, 1), {
        "preempted": [], "evictions": {"mid": 0, "low": 0}, "incoming": WorkloadState.PENDING, "hosts": (),
        "reason": 'couldn\'t assign flavors to pod set one: topology "default" allows to fit only 1 out of 2 '
                  "pod(s)"}),
}


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair sharing"])
@pytest.mark.parametrize("case", CASES)
def test_preemption_frees_a_domain_where_the_required_topology_fits(case: str, fair: bool) -> None:
    policy, (name, priority, pods, cpus), expected = CASES[case]
    got = _story(_scheduler(policy, fair), _job(name, priority, pods, cpus))
    assert set(got) == set(expected)
    assert {k: got[k] for k in expected} == expected


FILL_BACK = {
    # Kueue's order takes ``small`` first (lowest priority), which frees no host for the 5-cpu pod; ``big`` then
    # frees y1, and ``small`` is put back. ``top`` is of higher priority than the incoming workload.
    "put back": ([("top", 9, "x1", 3), ("small", 1, "x1", 2), ("big", 2, "y1", 4)], (1, "one host"),
                 ([("big", "InClusterQueue")], ("y1",))),
    # The same pod asking no topology: every flavor of the ClusterQueue is topology-aware, so it is placed
    # unconstrained (Kueue's implied TAS), and its placement is asked of the victims all the same.
    "put back, asking nothing": ([("top", 9, "x1", 3), ("small", 1, "x1", 2), ("big", 2, "y1", 4)], (1, None),
                                 ([("big", "InClusterQueue")], ("y1",))),
    # Two 5-cpu pods anywhere need both hosts whole: putting ``small`` back would leave the quota fitting and the
    # placement not, so it stays a victim (``fillBackWorkloads`` asks the placement too).
    "kept": ([("small", 1, "x1", 4), ("big", 2, "y1", 4)], (2, "anywhere"),
             ([("big", "InClusterQueue"), ("small", "InClusterQueue")], ("x1", "y1"))),
}


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair sharing"])
@pytest.mark.parametrize("case", FILL_BACK)
def test_victims_are_put_back_only_where_the_placement_stays(case: str, fair: bool) -> None:
    held, (pods, asked), expected = FILL_BACK[case]
    s = _scheduler(PreemptionPolicy.LOWER_PRIORITY, fair)
    for t, (name, priority, host, cpus) in enumerate(held):
        wl = _job(name, priority, 1, cpus)
        s.add(wl, float(t))
        s.schedule(float(t))
        assert _hosts(wl) == (host,), name
    requests = {"one host": TopologyRequest(HOSTNAME, required=True), "anywhere": TopologyRequest(unconstrained=True),
                None: None}
    request = requests[asked]
    incoming = Workload("default", "whole", "lq", "cq", (PodSet("one", pods, {"cpu": 5 * CPU}, topology=request),),
                        priority=5, uid="whole")
    s.add(incoming, 10.0)
    events = s.schedule(10.0)
    preempted = sorted((e.workload.split("/")[1], e.extra["preemptionReason"]) for e in events
                       if e.kind.value == "Preempted")
    # All at once: the first search chose them all (a second search would preempt the rest a cycle later).
    pending = [e.reason for e in events if e.kind.value == "Pending" and e.workload == incoming.key]
    assert (preempted, incoming.state, _hosts(incoming)) == (*expected[:1], WorkloadState.ADMITTED, expected[1])
    assert pending[0].endswith(f"Pending the preemption of {len(preempted)} workload(s)"), pending


def _cohort(b_nominal: int, b_weight: float = 1.0) -> Scheduler:
    """Three ClusterQueues of cohort ``co`` on one topology-aware flavor over hosts x1 and y1 (5 cpus each): ``a``
    (nominal 2 cpus) and ``b``, which reclaim from borrowing queues, and ``lender`` (20 cpus), which runs nothing: the
    quota is always there, the hosts are what is short."""
    def queue(name: str, nominal: int, weight: float = 1.0) -> ClusterQueueSpec:
        return tas_queue(name, ["tas"], nominal, cohort="co", within_cluster_queue=PreemptionPolicy.NEVER,
                         reclaim_within_cohort=PreemptionPolicy.ANY, fair_weight=weight)

    queues = [queue("a", 2), queue("b", b_nominal, b_weight), queue("lender", 20)]
    return tas_scheduler(_hosts_5_cpus(("x1", "y1")), [FLAVOR], queues, fair_sharing=STRATEGIES)


COHORT_CASES: dict[str, tuple[int, float, dict[str, object]]] = {
    # b stays within its nominal quota with the incoming workload: it reclaims from the borrowing a whatever the
    # shares (FairSharingPreemptWithinNominal), the most recently admitted first.
    "within nominal": (6, 1.0, {"preempted": [("a2", "InCohortReclamation")], "incoming": WorkloadState.ADMITTED,
                                "hosts": ("y1",)}),
    # b borrows 5 cpus where a borrows 6: no victim leaves a's share at or above b's (first strategy), but b's is
    # below a's as it is (LessThanInitialShare): one victim of a.
    "fair share": (0, 1.0, {"preempted": [("a2", "InCohortFairSharing")], "incoming": WorkloadState.ADMITTED,
                            "hosts": ("y1",)}),
    # At half the weight b's share is twice as high, above a's: no strategy lets it preempt; it waits.
    "share too high": (0, 0.5, {"preempted": [], "incoming": WorkloadState.PENDING, "hosts": ()}),
}


@pytest.mark.parametrize("case", COHORT_CASES)
def test_fair_sharing_reclaims_a_placement_in_the_cohort(case: str) -> None:
    b_nominal, weight, expected = COHORT_CASES[case]
    s = _cohort(b_nominal, weight)
    held = [_job("a1", 1, 1, 4, "a"), _job("a2", 1, 1, 4, "a")]
    for t, wl in enumerate(held):
        s.add(wl, float(t))
        s.schedule(float(t))
    assert [_hosts(wl) for wl in held] == [("x1",), ("y1",)]
    incoming = _job("whole", 1, 1, 5, "b")
    s.add(incoming, 10.0)
    events = s.schedule(10.0)
    got = {"preempted": [(e.workload.split("/")[1], e.extra["preemptionReason"]) for e in events
                         if e.kind.value == "Preempted"],
           "incoming": incoming.state, "hosts": _hosts(incoming) if incoming.admission is not None else ()}
    assert got == expected


def _holding(s: Scheduler, name: str, priority: int, host: str, cpus: int, pods: int = 1) -> Workload:
    """A workload of ``priority`` admitted with ``pods`` pods of ``cpus`` cpus each, all on ``host``."""
    holder = _job(name, priority, pods, cpus)
    holder.admission = Admission.of("cq", (PodSetAssignment(
        "one", {"cpu": FLAVOR.name}, {(FLAVOR.name, "cpu"): pods * cpus * CPU}, pods,
        TopologyAssignment((HOSTNAME,), (((host,), pods),))),))
    holder.state = WorkloadState.ADMITTED
    s.add(holder, 0.0)
    return holder


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair sharing"])
def test_each_pod_set_s_place_is_asked_of_the_victims_with_the_others_held(fair: bool) -> None:
    # Hosts of 5 cpus. x and y (one 3-cpu pod each, each on one host) need a host apiece. low (priority 0, 3 cpus of
    # x1) going leaves x1 whole for x, but y, with x held there, then finds 2 cpus on x1 and 2 on y1 beside mid's 3:
    # mid (priority 1) goes too. Asked alone, y would fit x1 beside nothing and spare mid.
    s = tas_scheduler(_hosts_5_cpus(("x1", "y1")), [FLAVOR],
                      [tas_queue("cq", ["tas"], 50, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)],
                      fair_sharing=STRATEGIES if fair else None)
    for t, (name, priority, cpus) in enumerate((("low", 0, 3), ("mid", 1, 3))):
        holder = _job(name, priority, 1, cpus)
        s.add(holder, float(t))
        s.schedule(float(t))
    request = TopologyRequest(HOSTNAME, required=True)
    incoming = Workload("default", "pair", "lq", "cq",
                        tuple(PodSet(name, 1, {"cpu": 3 * CPU}, topology=request) for name in ("x", "y")),
                        priority=5, uid="pair")
    s.add(incoming, 10.0)
    events = s.schedule(10.0)
    assert sorted(e.workload.split("/")[1] for e in events if e.kind.value == "Preempted") == ["low", "mid"]
    assert incoming.state is WorkloadState.ADMITTED
    assert sorted(hosts_of(incoming).values()) == [("x1",), ("y1",)]


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair sharing"])
def test_a_pod_set_group_s_place_is_asked_of_the_victims_whole(fair: bool) -> None:
    # x1 has 3 cpus, low (priority 0) holding 1; y1 has 5, mid (priority 1) holding 2. The group's workers (3 cpus)
    # and leader (1 cpu) go to one host together: x1 is too small, so low's going does not help; mid goes, low is put
    # back, and both land on y1. Asked apart, the workers would fit y1 and the leader x1 once low was gone.
    nodes = [node("x1", {HOSTNAME: "x1"}, 3, pods=110_000), node("y1", {HOSTNAME: "y1"}, 5, pods=110_000)]
    s = tas_scheduler(nodes, [FLAVOR],
                      [tas_queue("cq", ["tas"], 50, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)],
                      fair_sharing=STRATEGIES if fair else None)
    _holding(s, "low", 0, "x1", 1)
    _holding(s, "mid", 1, "y1", 2)
    grouped = TopologyRequest(HOSTNAME, required=True, group="g")
    incoming = Workload("default", "group", "lq", "cq", (PodSet("workers", 1, {"cpu": 3 * CPU}, topology=grouped),
                                                         PodSet("leader", 1, {"cpu": CPU}, topology=grouped)),
                        priority=5, uid="group")
    s.add(incoming, 10.0)
    events = s.schedule(10.0)
    assert [e.workload.split("/")[1] for e in events if e.kind.value == "Preempted"] == ["mid"]
    assert incoming.state is WorkloadState.ADMITTED
    assert hosts_of(incoming) == {"workers": ("y1",), "leader": ("y1",)}


@pytest.mark.parametrize(("held", "admitted"), [(1, True), (2, False)])
def test_the_pods_a_host_holds_count_against_its_allocatable_pods(held: int, admitted: bool) -> None:
    # A host of 10 cpus that takes 2 pods: with one pod of another workload on it a third-party pod still fits, with
    # two it does not (Kueue's TAS counts each pod against the node's allocatable "pods").
    s = tas_scheduler([node("h", {HOSTNAME: "h"}, 10, pods=2000)], [FLAVOR], [tas_queue("cq", ["tas"], 50)])
    _holding(s, "holder", 0, "h", 1, pods=held)
    incoming = _job("one-more", 0, 1, 1)
    s.add(incoming, 1.0)
    s.schedule(1.0)
    assert (incoming.state is WorkloadState.ADMITTED) is admitted


def test_a_partially_admitted_pod_set_asks_its_victims_for_the_pods_it_was_given() -> None:
    # One host of 4 cpus and a queue of 4: top (priority 9) holds 1 cpu, low (priority 0) 2. The incoming 4 pods (at
    # least 2) cannot all fit, top staying; 3 can, once low goes (Kueue's partial admission: the most pods that fit,
    # preemption counted). Its victims are asked for a place for those 3 pods, not for all 4.
    s = tas_scheduler([node("h", {HOSTNAME: "h"}, 4)], [FLAVOR],
                      [tas_queue("cq", ["tas"], 4, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)])
    _holding(s, "top", 9, "h", 1)
    low = _holding(s, "low", 0, "h", 2)
    incoming = Workload("default", "wide", "lq", "cq", (PodSet("one", 4, {"cpu": CPU}, min_count=2,
                                                               topology=TopologyRequest(HOSTNAME, required=True)),),
                        priority=5, uid="wide")
    s.add(incoming, 1.0)
    events = s.schedule(1.0)
    assert [e.workload for e in events if e.kind.value == "Preempted"] == [low.key]
    assert incoming.state is WorkloadState.ADMITTED and incoming.admission is not None
    assert incoming.admission.podsets[0].count == 3


def test_a_tainted_host_its_pods_tolerate_is_a_place_victims_can_free() -> None:
    # The one host is tainted; low (priority 0) holds 2 of its 3 cpus. high (priority 5) tolerates the taint and
    # needs 2 cpus on one host: low goes, and high takes the host.
    tainted = node("h", {HOSTNAME: "h"}, 3)
    tainted.taints = (Taint("dedicated", "a", "NoSchedule"),)
    s = tas_scheduler([tainted], [FLAVOR],
                      [tas_queue("cq", ["tas"], 50, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)])
    low = _holding(s, "low", 0, "h", 2)
    tolerating = (Toleration("dedicated", "Equal", "a", "NoSchedule"),)
    high = Workload("default", "high", "lq", "cq", (PodSet("one", 2, {"cpu": CPU}, tolerations=tolerating,
                                                           topology=TopologyRequest(HOSTNAME, required=True)),),
                    priority=5, uid="high")
    s.add(high, 1.0)
    events = s.schedule(1.0)
    assert [e.workload for e in events if e.kind.value == "Preempted"] == [low.key]
    assert high.state is WorkloadState.ADMITTED and _hosts(high) == ("h",)
