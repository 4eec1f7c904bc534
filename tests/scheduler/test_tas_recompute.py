"""A topology-aware workload's assignment within one scheduling cycle (Kueue's
``TASRecomputeAssignmentWithinSchedulingCycle``, restated from the ``TestScheduleForTASCohorts`` cases of Kueue v0.19's
``pkg/scheduler/scheduler_tas_test.go``).

Every head of a cycle is nominated against the same state; once one is admitted, or preempts and keeps the placement it
will take, a later head's nominated placement may be taken. With the gate on (Kueue's default) the later head's
assignment is computed again against what the cycle has taken so far, its flavors kept, so that it lands elsewhere or
preempts; with it off it is skipped ("Workload no longer fits after processing another workload"). Either way a
preempting workload keeps the placement it will take, so that a lower-priority head of the same cycle cannot take it.
"""

from __future__ import annotations

import dataclasses

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Taint,
    Toleration,
    TopologyAssignment,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import CPU, hosts_of, node, tas_queue, tas_scheduler

FLAVOR = FlavorSpec("tas-default", {}, topology="tas-single-level", levels=(HOSTNAME,))
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


def _job(name: str, cq: str, pods: int, *, priority: int, required: bool = True) -> Workload:
    ps = PodSet("one", pods, {"cpu": CPU}, topology=TopologyRequest(HOSTNAME, required=required))
    return Workload("default", name, "lq", cq, (ps,), priority=priority, uid=f"wl-{name}")


def _admitted(name: str, cq: str, hosts: dict[str, int], *, priority: int) -> Workload:
    """A workload holding quota in ``cq`` with pods (one cpu each) on ``hosts``."""
    pods = sum(hosts.values())
    wl = _job(name, cq, pods, priority=priority)
    placed = TopologyAssignment((HOSTNAME,), tuple(((host,), n) for host, n in sorted(hosts.items())))
    wl.admission = Admission.of(cq, (PodSetAssignment("one", {"cpu": FLAVOR.name}, {(FLAVOR.name, "cpu"): pods * CPU},
                                                      pods, placed),))
    wl.state = WorkloadState.ADMITTED
    return wl


def _reclaim(gate: bool) -> tuple[Scheduler, dict[str, Workload]]:
    """Kueue's "reclaim within cohort; capacity reserved by preempting workload does not allow to schedule last
    workload": hosts x1 (3 cpus) and y1 (5 cpus); queue a borrows, holding a1 (x1: 3, y1: 2), a2 and a3 (y1: 1
    each); b1 (priority 3) needs 3 pods on one host, c1 (priority 1) one pod anywhere. (Kueue's case also has
    memory, which nobody asks for.)"""
    def cq(name: str, within: PreemptionPolicy = PreemptionPolicy.NEVER) -> ClusterQueueSpec:
        return tas_queue(name, [FLAVOR.name], 4, cohort="tas-cohort-main", within_cluster_queue=within,
                         reclaim_within_cohort=PreemptionPolicy.ANY)

    s = tas_scheduler([node("x1", {HOSTNAME: "x1"}, 3), node("y1", {HOSTNAME: "y1"}, 5)], [FLAVOR],
                      [cq("tas-cq-a", PreemptionPolicy.LOWER_PRIORITY), cq("tas-cq-b"), cq("tas-cq-c")],
                      recompute_tas=gate)
    wls = {"a1": _admitted("a1", "tas-cq-a", {"x1": 3, "y1": 2}, priority=2),
           "a2": _admitted("a2", "tas-cq-a", {"y1": 1}, priority=1),
           "a3": _admitted("a3", "tas-cq-a", {"y1": 1}, priority=1),
           "b1": _job("b1", "tas-cq-b", 3, priority=3),
           "c1": _job("c1", "tas-cq-c", 1, priority=1, required=False)}
    for wl in wls.values():
        s.add(wl, 0.0)
    return s, wls


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
def test_the_placement_a_preemptor_reserves_is_not_taken_by_a_later_head(gate: bool) -> None:
    # Kueue: "reclaim within cohort; capacity reserved by preempting workload does not allow to schedule last
    # workload; TASRecomputeAssignmentWithinSchedulingCycle enabled" / "... disabled". b1 preempts a2 and a3 and keeps
    # y1's 3 cpus; c1, nominated on y1's one free cpu, no longer fits there. Enabled, c1 is assigned again and
    # preempts a1 (x1 then holds it); disabled, it is skipped.
    s, wls = _reclaim(gate)
    events = s.cycle(0.0)[0]
    preempted = {e.workload.split("/")[1]: e.reason for e in events if e.kind.value == "Preempted"}
    assert set(preempted) == ({"a1", "a2", "a3"} if gate else {"a2", "a3"})
    assert all("UID: wl-b1" in preempted[name] for name in ("a2", "a3"))
    assert not gate or "UID: wl-c1" in preempted["a1"]
    assert all(w.admission is None and w.state is WorkloadState.PENDING for w in (wls["b1"], wls["c1"]))
    assert wls["b1"].pending_reason.endswith("Pending the preemption of 2 workload(s)")
    if gate:
        assert wls["c1"].pending_reason == (
            'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of 1 '
            'pod(s). Total nodes: 2; excluded: resource "cpu": 2. Pending the preemption of 1 workload(s)')
    else:
        assert wls["c1"].pending_reason == NO_LONGER_FITS


def _same_node(gate: bool) -> tuple[Scheduler, Workload, Workload]:
    """Kueue's "two workloads in cohort nominated to the same node; enough capacity to admit both": two hosts of 8
    cpus, two queues of 8 cpus in a cohort, a1 (priority 10) and b1 (priority 5) each one pod of 8 cpus."""
    nodes = [node("node-1", {HOSTNAME: "node-1"}, 8), node("node-2", {HOSTNAME: "node-2"}, 8)]
    queues = [tas_queue(name, [FLAVOR.name], 8, cohort="tas-cohort-main") for name in ("tas-cq-a", "tas-cq-b")]
    s = tas_scheduler(nodes, [FLAVOR], queues, recompute_tas=gate)
    a1 = Workload("default", "a1", "lq", "tas-cq-a",
                  (PodSet("one", 1, {"cpu": 8 * CPU}, topology=TopologyRequest(HOSTNAME, required=True)),),
                  priority=10, uid="wl-a1")
    b1 = Workload("default", "b1", "lq", "tas-cq-b",
                  (PodSet("one", 1, {"cpu": 8 * CPU}, topology=TopologyRequest(HOSTNAME, required=True)),),
                  priority=5, uid="wl-b1")
    s.add(a1, 0.0)
    s.add(b1, 0.0)
    return s, a1, b1


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
def test_a_later_head_nominated_on_a_taken_node_is_placed_again(gate: bool) -> None:
    # Kueue: "two workloads in cohort nominated to the same node; enough capacity to admit both;
    # TASRecomputeAssignmentWithinSchedulingCycle enabled" / "... disabled". Both are nominated on node-1; a1 takes
    # it. Enabled, b1 is placed again, on node-2, in the same cycle; disabled, it is skipped (and admitted by a later
    # cycle).
    s, a1, b1 = _same_node(gate)
    s.cycle(0.0)
    assert hosts_of(a1) == {"one": ("node-1",)}
    if gate:
        assert hosts_of(b1) == {"one": ("node-2",)}
    else:
        assert b1.admission is None and b1.pending_reason == NO_LONGER_FITS
        s.cycle(1.0)
        assert hosts_of(b1) == {"one": ("node-2",)}


def _no_borrowing(cq: ClusterQueueSpec) -> ClusterQueueSpec:
    """``cq`` with a borrowing limit of 0 on every quota."""
    return dataclasses.replace(cq, groups=tuple(dataclasses.replace(g, quotas={fr: Quota(q.nominal, 0) for fr, q in
                                                                             g.quotas.items()}) for g in cq.groups))


def _reserving(reclaim: PreemptionPolicy, gate: bool) -> tuple[Scheduler, dict[str, Workload]]:
    """Kueue's "preempting workload with(out) targets reserves capacity so that lower priority workload cannot use
    it": one host y1 of 5 cpus; queue a (8 cpus, no borrowing, preempting lower priorities within it and reclaiming
    ``reclaim``) holds a1 (2 pods on y1); a2 (priority 2, 4 pods, preferred on one host) in a, b1 (priority 1, 3
    pods, preferred) in b (4 cpus)."""
    a = _no_borrowing(tas_queue("tas-cq-a", [FLAVOR.name], 8, cohort="tas-cohort-main",
                                within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY, reclaim_within_cohort=reclaim))
    b = tas_queue("tas-cq-b", [FLAVOR.name], 4, cohort="tas-cohort-main", reclaim_within_cohort=PreemptionPolicy.ANY)
    s = tas_scheduler([node("y1", {HOSTNAME: "y1"}, 5)], [FLAVOR], [a, b], recompute_tas=gate)
    holder_priority = 1 if reclaim is PreemptionPolicy.ANY else 2
    wls = {"a1": _admitted("a1", "tas-cq-a", {"y1": 2}, priority=holder_priority),
           "a2": _job("a2", "tas-cq-a", 4, priority=2, required=False),
           "b1": _job("b1", "tas-cq-b", 3, priority=1, required=False)}
    for wl in wls.values():
        s.add(wl, 0.0)
    return s, wls


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
@pytest.mark.parametrize("targets", [True, False], ids=["with targets", "without targets"])
def test_a_preemptor_keeps_its_placement_from_a_lower_priority_head(targets: bool, gate: bool) -> None:
    # Kueue: "preempting workload with targets reserves capacity so that lower priority workload cannot use it;
    # TASRecomputeAssignmentWithinSchedulingCycle enabled" / "... disabled", and the same "without targets". a2's 4
    # pods fit y1 only once a1 is gone: with targets (a1 of lower priority) it preempts a1 and keeps 4 cpus of y1;
    # without (a1 of its own priority, queue a not reclaiming from anyone) it keeps 4 cpus of y1 as if y1 were empty.
    # b1, nominated on y1's 3 free cpus, does not get them: assigned again (enabled) it finds no room and nobody to
    # preempt; disabled, it is skipped.
    s, wls = _reserving(PreemptionPolicy.ANY if targets else PreemptionPolicy.LOWER_PRIORITY, gate)
    events = s.cycle(0.0)[0]
    preempted = [e.workload.split("/")[1] for e in events if e.kind.value == "Preempted"]
    assert preempted == (["a1"] if targets else [])
    assert wls["a2"].admission is None and wls["b1"].admission is None
    assert wls["a2"].pending_reason == ('couldn\'t assign flavors to pod set one: topology "tas-single-level" allows '
                                        'to fit only 3 out of 4 pod(s)'
                                        + (". Pending the preemption of 1 workload(s)" if targets else ""))
    assert wls["b1"].pending_reason == (
        'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of 3 pod(s). '
        'Total nodes: 1; excluded: resource "cpu": 1' if gate else NO_LONGER_FITS)


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
def test_assigned_again_a_head_keeps_its_nominated_flavor(gate: bool) -> None:
    # Kueue: "two flavors in cohort; re-evaluation is sticky and does not switch to second flavor;
    # TASRecomputeAssignmentWithinSchedulingCycle enabled" / "... disabled". node-1 is tas-flavor-1's, node-2
    # tas-flavor-2's; queue a has tas-flavor-1 only, queue b both. a1 and b1 (one pod of 8 cpus each) are both
    # nominated on tas-flavor-1's node-1; a1 takes it. Enabled, b1 is assigned again on tas-flavor-1 only (the quota
    # the cycle checked for it stays right) and finds no node; disabled, it is skipped. Neither lands on node-2. (In
    # flexq, whose flavor assigner does not resume a scan where the last one stopped, the quota alone picks
    # tas-flavor-1 again; the nominated flavors are kept all the same.)
    flavors = [FlavorSpec(f"tas-flavor-{n}", {"tas-flavor": f"f{n}"}, topology="tas-single-level", levels=(HOSTNAME,))
               for n in (1, 2)]
    nodes = [node(f"node-{n}", {HOSTNAME: f"node-{n}", "tas-flavor": f"f{n}"}, 8) for n in (1, 2)]
    queues = [tas_queue("tas-cq-a", ["tas-flavor-1"], 8, cohort="tas-cohort-main"),
              tas_queue("tas-cq-b", ["tas-flavor-1", "tas-flavor-2"], 8, cohort="tas-cohort-main")]
    s = tas_scheduler(nodes, flavors, queues, recompute_tas=gate)
    a1, b1 = (Workload("default", name, "lq", cq,
                       (PodSet("one", 1, {"cpu": 8 * CPU}, topology=TopologyRequest(HOSTNAME, required=True)),),
                       priority=priority, uid=f"wl-{name}")
              for name, cq, priority in (("a1", "tas-cq-a", 10), ("b1", "tas-cq-b", 5)))
    s.add(a1, 0.0)
    s.add(b1, 0.0)
    s.cycle(0.0)
    assert hosts_of(a1) == {"one": ("node-1",)}
    assert b1.admission is None
    assert b1.pending_reason == (
        'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
        'Total nodes: 1; excluded: resource "cpu": 1' if gate else NO_LONGER_FITS)


def _keeping(a2: Workload, hosts: dict[str, int], held: dict[str, int], b1_pods: int,
             taint: str = "") -> tuple[Scheduler, Workload]:
    """Queue a (no borrowing, preempting lower priorities only) holds a1 (priority 2, one cpu a pod on ``held``);
    ``a2`` (priority 2) does not fit beside it and preempts nobody, so it keeps its placement as if the nodes were
    empty (Kueue's simulateEmpty); b1 (priority 1, ``b1_pods`` pods required on one host) in queue b comes after it.
    ``taint``: a host tainted NoSchedule (a2's pod sets tolerate it, b1 does not)."""
    a = _no_borrowing(tas_queue("tas-cq-a", [FLAVOR.name], 8, cohort="tas-cohort-main",
                                within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY))
    b = tas_queue("tas-cq-b", [FLAVOR.name], 4, cohort="tas-cohort-main")
    nodes = [node(host, {HOSTNAME: host}, cpus) for host, cpus in hosts.items()]
    for n in nodes:
        if n.name == taint:
            n.taints = (Taint("dedicated", "a", "NoSchedule"),)
    s = tas_scheduler(nodes, [FLAVOR], [a, b])
    b1 = _job("b1", "tas-cq-b", b1_pods, priority=1)
    for wl in (_admitted("a1", "tas-cq-a", held, priority=2), a2, b1):
        s.add(wl, 0.0)
    s.cycle(0.0)
    assert a2.admission is None and "Pending the preemption" not in a2.pending_reason
    return s, b1


def test_a_preemptor_that_preempts_nobody_keeps_every_pod_set_s_place_each_beside_the_others() -> None:
    # a2's two pod sets (3 pods each, each on one host) take both hosts once empty, the second placed with the first
    # held: h1 (tainted, tolerated by a2) and h2 are kept whole, so b1's one pod finds no room. Placed as if the first
    # held nothing, both would go to one host and leave the other to b1.
    tolerated = (Toleration("dedicated", "Equal", "a", "NoSchedule"),)
    request = TopologyRequest(HOSTNAME, required=True)
    a2 = Workload("default", "a2", "lq", "tas-cq-a",
                  tuple(PodSet(name, 3, {"cpu": CPU}, tolerations=tolerated, topology=request) for name in ("x", "y")),
                  priority=2, uid="wl-a2")
    _, b1 = _keeping(a2, {"h1": 3, "h2": 3}, {"h2": 1}, 1, taint="h1")
    assert b1.admission is None


def test_a_preemptor_that_preempts_nobody_keeps_its_pod_set_group_s_place_together() -> None:
    # a2's workers (2 pods) and leader (1 pod) are one group: once empty they take h2 (3 cpus) together, which h1 (2
    # cpus) cannot hold; a1 holds one cpu of h2, so a2 waits. Kept on h2, they leave h1 to b1's two pods. Placed
    # apart, the workers would take h1 whole and the leader a cpu of h2, leaving b1 no host with two cpus free.
    grouped = TopologyRequest(HOSTNAME, required=True, group="g")
    a2 = Workload("default", "a2", "lq", "tas-cq-a", (PodSet("workers", 2, {"cpu": CPU}, topology=grouped),
                                                      PodSet("leader", 1, {"cpu": CPU}, topology=grouped)),
                  priority=2, uid="wl-a2")
    _, b1 = _keeping(a2, {"h1": 2, "h2": 3}, {"h2": 1}, 2)
    assert hosts_of(b1) == {"one": ("h1",)}


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
def test_a_head_assigned_again_preempts_where_its_placement_was_taken(gate: bool) -> None:
    # h1 and h2 have two cpus each; l1 (priority 0) holds h2 in queue b. p1 (priority 5, queue a) and p2 (priority 4,
    # queue b) are both nominated on h1, each needing two pods on one host; p1 takes it. Enabled, p2 is assigned
    # again: h1 is taken and h2 is held by l1, of lower priority in its own queue, so p2 preempts l1 and keeps h2.
    # Disabled, it is skipped, and preempts l1 in the next cycle.
    queues = [tas_queue("tas-cq-a", [FLAVOR.name], 4),
              tas_queue("tas-cq-b", [FLAVOR.name], 4, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)]
    s = tas_scheduler([node("h1", {HOSTNAME: "h1"}, 2), node("h2", {HOSTNAME: "h2"}, 2)], [FLAVOR], queues,
                      recompute_tas=gate)
    l1, p1, p2 = (_admitted("l1", "tas-cq-b", {"h2": 2}, priority=0), _job("p1", "tas-cq-a", 2, priority=5),
                  _job("p2", "tas-cq-b", 2, priority=4))
    for wl in (l1, p1, p2):
        s.add(wl, 0.0)
    events = s.cycle(0.0)[0]
    assert hosts_of(p1) == {"one": ("h1",)} and p2.admission is None
    preempted = [e.workload for e in events if e.kind.value == "Preempted"]
    assert preempted == (["default/l1"] if gate else [])
    assert p2.pending_reason == ('couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow '
                                 'to fit any of 2 pod(s). Total nodes: 2; excluded: resource "cpu": 2. Pending the '
                                 'preemption of 1 workload(s)' if gate else NO_LONGER_FITS)
    s.cycle(1.0)  # disabled, p2 preempts l1 only now, a cycle later
    assert (p2.admission is not None) == gate
    s.cycle(2.0)
    assert hosts_of(p2) == {"one": ("h2",)}


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
def test_a_head_s_pod_sets_are_checked_together_against_what_the_cycle_took(gate: bool) -> None:
    # One host of 4 cpus. b's two pod sets (2 cpus each) were both nominated on it; a (priority 5) takes 2 cpus
    # first. Each of b's pod sets alone still fits the 2 left, both together do not (Kueue checks a workload's topology
    # usage whole): b is not admitted, which would hold 6 cpus on a host of 4.
    s = tas_scheduler([node("h", {HOSTNAME: "h"}, 4)], [FLAVOR],
                      [tas_queue("tas-cq-a", [FLAVOR.name], 8), tas_queue("tas-cq-b", [FLAVOR.name], 8)],
                      recompute_tas=gate)
    request = TopologyRequest(HOSTNAME, required=True)
    a = _job("a", "tas-cq-a", 2, priority=5)
    b = Workload("default", "b", "lq", "tas-cq-b",
                 tuple(PodSet(name, 1, {"cpu": 2 * CPU}, topology=request) for name in ("x", "y")), priority=1)
    for wl in (a, b):
        s.add(wl, 0.0)
    s.cycle(0.0)
    assert hosts_of(a) == {"one": ("h",)} and b.admission is None
    assert b.pending_reason == ('couldn\'t assign flavors to pod set y: topology "tas-single-level" doesn\'t allow to '
                                'fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1'
                                if gate else NO_LONGER_FITS)


@pytest.mark.parametrize("gate", [True, False], ids=["enabled", "disabled"])
def test_a_head_s_later_pod_set_on_a_topology_is_checked_against_what_the_cycle_took(gate: bool) -> None:
    # Each job: a head asking memory of a flavor of no topology, then 2 workers of a cpu each on one host of the
    # topology-aware flavor. One host of 2 cpus; a and b, in two queues, are both nominated on it; a takes it. b's
    # head, first, is placed on no topology; its workers no longer fit: b waits.
    plain = FlavorSpec("plain")
    groups = (ResourceGroup(("memory",), ("plain",), {("plain", "memory"): Quota(8 * CPU)}),
              ResourceGroup(("cpu",), (FLAVOR.name,), {(FLAVOR.name, "cpu"): Quota(8 * CPU)}))
    s = tas_scheduler([node("h1", {HOSTNAME: "h1"}, 2)], [plain, FLAVOR],
                      [ClusterQueueSpec(name, groups=groups) for name in ("tas-cq-a", "tas-cq-b")], recompute_tas=gate)
    jobs = [Workload("default", name, "lq", cq, (PodSet("head", 1, {"memory": CPU}),
                                                 PodSet("workers", 2, {"cpu": CPU},
                                                        topology=TopologyRequest(HOSTNAME, required=True))),
                     priority=priority, uid=name)
            for name, cq, priority in (("a", "tas-cq-a", 5), ("b", "tas-cq-b", 1))]
    for wl in jobs:
        s.add(wl, 0.0)
    s.cycle(0.0)
    a, b = jobs
    assert hosts_of(a) == {"workers": ("h1",)} and b.admission is None
