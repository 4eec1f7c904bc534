"""Preemption's choice of victims, as tables (Kueue's preemption_test.go in spirit): who is a candidate under
each policy, in which order they are tried, and the minimal set kept."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    CohortSpec,
    FlavorResource,
    Granular,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import CohortScan, find_targets, oracle_for
from flexq.scheduler.quota import QuotaTree

FR: FlavorResource = ("f", "cpu")
NEVER, LOWER, NEWER, ANY = (PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY,
                            PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, PreemptionPolicy.ANY)


@dataclass(frozen=True)
class Holder:
    name: str
    cq: str
    cpu: int
    priority: int = 0
    reserved: float = 0.0
    queued: float = 0.0
    evicting: bool = False
    flavor: str = "f"


@dataclass(frozen=True)
class Queue:
    name: str
    nominal: int
    cohort: str | None = None
    within: PreemptionPolicy = NEVER
    reclaim: PreemptionPolicy = NEVER
    borrow: PreemptionPolicy = NEVER
    threshold: int | None = None
    borrowing_limit: int | None = None


@dataclass(frozen=True)
class Case:
    name: str
    queues: tuple[Queue, ...]
    holders: tuple[Holder, ...]
    incoming: int
    priority: int = 0
    queued: float = 10.0
    want: list[tuple[str, str]] = field(default_factory=list)
    exclude: frozenset[str] = frozenset()
    cohorts: tuple[tuple[str, str | None, int], ...] = ()
    """Cohorts with a parent or quota of their own: (name, parent, cpu)."""


def _holder(h: Holder) -> Workload:
    wl = Workload("ns", h.name, "lq", h.cq, (PodSet("main", 1, {"cpu": h.cpu}),), priority=h.priority, uid=h.name,
                  created=h.queued, state=WorkloadState.ADMITTED, reserved_at=h.reserved,
                  admission=Admission.of(h.cq, (PodSetAssignment("main", {"cpu": h.flavor},
                                                                 {(h.flavor, "cpu"): h.cpu}, 1),)))
    wl.evicting = h.evicting
    return wl


def _setup(case: Case) -> tuple[dict[str, ClusterQueueSpec], QuotaTree, dict[str, dict[str, Workload]]]:
    specs = {q.name: ClusterQueueSpec(
        q.name, q.cohort, (ResourceGroup(("cpu",), ("f", "g"), {FR: Quota(q.nominal, q.borrowing_limit),
                                                                ("g", "cpu"): Quota(0)}),),
        within_cluster_queue=q.within, reclaim_within_cohort=q.reclaim, borrow_within_cohort=q.borrow,
        borrow_within_cohort_threshold=q.threshold) for q in case.queues}
    cohorts = [CohortSpec(name, parent, (ResourceGroup(("cpu",), ("f",), {FR: Quota(cpu)}),) if cpu else ())
               for name, parent, cpu in case.cohorts]
    tree = QuotaTree(specs.values(), cohorts)
    holders: dict[str, dict[str, Workload]] = {}
    for h in case.holders:
        wl = _holder(h)
        holders.setdefault(h.cq, {})[wl.key] = wl
        assert wl.admission is not None
        tree.add(h.cq, wl.admission.usage())
    return specs, tree, holders


CASES = [
    Case("never preempts", (Queue("a", 4),), (Holder("low", "a", 4, -1),), 2, want=[]),
    Case("lower priority first", (Queue("a", 4, within=LOWER),),
         (Holder("mid", "a", 2, 1), Holder("low", "a", 2, 0)), 2, priority=2, want=[("low", "InClusterQueue")]),
    Case("equal priority is no candidate under LowerPriority", (Queue("a", 4, within=LOWER),),
         (Holder("same", "a", 4, 2),), 2, priority=2, want=[]),
    Case("the most recently admitted first", (Queue("a", 4, within=LOWER),),
         (Holder("old", "a", 2, 0, reserved=1.0), Holder("new", "a", 2, 0, reserved=5.0)), 2, priority=1,
         want=[("new", "InClusterQueue")]),
    Case("already evicting first", (Queue("a", 4, within=LOWER),),
         (Holder("low", "a", 2, 0), Holder("going", "a", 2, 1, evicting=True)), 2, priority=2,
         want=[("going", "InClusterQueue")]),
    Case("newer equal priority", (Queue("a", 4, within=NEWER),),
         (Holder("older", "a", 2, 1, queued=1.0), Holder("newer", "a", 2, 1, queued=20.0)), 2, priority=1,
         want=[("newer", "InClusterQueue")]),
    Case("older equal priority is no candidate", (Queue("a", 4, within=NEWER),),
         (Holder("older", "a", 4, 1, queued=1.0),), 2, priority=1, want=[]),
    Case("equal priority queued at the same time is no candidate", (Queue("a", 4, within=NEWER),),
         (Holder("same", "a", 4, 1, queued=10.0),), 2, priority=1, queued=10.0, want=[]),
    Case("minimal: the small one put back", (Queue("a", 4, within=LOWER),),
         (Holder("small", "a", 1, 0), Holder("big", "a", 3, 1)), 3, priority=2, want=[("big", "InClusterQueue")]),
    Case("both needed", (Queue("a", 4, within=LOWER),),
         (Holder("x", "a", 2, 0), Holder("y", "a", 2, 1)), 4, priority=2,
         want=[("x", "InClusterQueue"), ("y", "InClusterQueue")]),
    Case("not enough: nobody", (Queue("a", 4, within=LOWER),),
         (Holder("x", "a", 2, 0), Holder("y", "a", 2, 5)), 4, priority=2, want=[]),
    Case("excluded", (Queue("a", 4, within=LOWER),), (Holder("x", "a", 4, 0),), 2, priority=1, want=[],
         exclude=frozenset({"ns/x"})),
    Case("another flavor's holders are no candidates", (Queue("a", 4, within=LOWER),),
         (Holder("other", "a", 4, 0, flavor="g"), Holder("x", "a", 4, 0)), 2, priority=1,
         want=[("x", "InClusterQueue")]),
    Case("reclaim from a borrowing queue", (Queue("a", 4, "co", reclaim=ANY), Queue("b", 4, "co")),
         (Holder("lent", "b", 8, 9),), 4, priority=0, want=[("lent", "InCohortReclamation")]),
    Case("reclaim the lowest priority first",
         (Queue("a", 12, "co", reclaim=ANY), Queue("b", 0, "co"), Queue("c", 0, "co")),
         (Holder("b1", "b", 4, 5), Holder("c1", "c", 4, 1), Holder("b2", "b", 4, 1, reserved=1.0)), 4,
         want=[("b2", "InCohortReclamation")]),
    Case("reclaim only lower priority", (Queue("a", 4, "co", reclaim=LOWER), Queue("b", 4, "co")),
         (Holder("lent", "b", 8, 0),), 4, priority=0, want=[]),
    Case("no reclaim from a queue within its quota", (Queue("a", 4, "co", reclaim=ANY), Queue("b", 4, "co")),
         (Holder("own", "b", 4, -5), Holder("mine", "a", 4, 0)), 2, priority=5, want=[]),
    Case("reclaim while borrowing", (Queue("a", 2, "co", reclaim=ANY, borrow=LOWER), Queue("b", 4, "co")),
         (Holder("lent", "b", 6, 0),), 4, priority=3, want=[("lent", "InCohortReclaimWhileBorrowing")]),
    Case("reclaim while borrowing: above the threshold", (Queue("a", 2, "co", reclaim=ANY, borrow=LOWER, threshold=0),
                                                          Queue("b", 4, "co")),
         (Holder("lent", "b", 6, 1),), 4, priority=3, want=[]),
    Case("reclaim while borrowing: at the threshold", (Queue("a", 2, "co", reclaim=ANY, borrow=LOWER, threshold=1),
                                                       Queue("b", 4, "co")),
         (Holder("lent", "b", 6, 1),), 4, priority=3, want=[("lent", "InCohortReclaimWhileBorrowing")]),
    Case("reclaim while borrowing: equal priority is no candidate",
         (Queue("a", 2, "co", reclaim=ANY, borrow=LOWER), Queue("b", 4, "co")),
         (Holder("lent", "b", 6, 3),), 4, priority=3, want=[]),
    Case("reclaim while borrowing needs borrowWithinCohort", (Queue("a", 2, "co", reclaim=ANY), Queue("b", 4, "co")),
         (Holder("lent", "b", 6, 0),), 4, priority=3, want=[]),
    Case("reclaim across a cohort tree", (Queue("a", 4, "left", reclaim=ANY), Queue("b", 0, "right")),
         (Holder("far", "b", 4, 0),), 4, want=[("far", "InCohortReclamation")],
         cohorts=(("left", "root", 0), ("right", "root", 0), ("root", None, 0))),
    Case("reclaim from a sibling and across the tree",
         (Queue("a", 4, "left", reclaim=ANY), Queue("near", 0, "left"), Queue("b", 0, "right")),
         (Holder("far", "b", 2, 0), Holder("sib", "near", 2, 0)), 4,
         want=[("far", "InCohortReclamation"), ("sib", "InCohortReclamation")],
         cohorts=(("left", "root", 0), ("right", "root", 0), ("root", None, 0))),
    Case("a cohort's own quota is no one's to reclaim", (Queue("a", 2, "left", reclaim=ANY), Queue("b", 0, "right")),
         (Holder("guest", "b", 4, 0),), 4, want=[],
         cohorts=(("left", "root", 0), ("right", "root", 0), ("root", None, 4))),
    Case("over its borrowing limit: nobody", (Queue("a", 2, "co", within=LOWER, reclaim=ANY, borrowing_limit=1),
                                              Queue("b", 4, "co")),
         (Holder("lent", "b", 6, 0), Holder("mine", "a", 1, 0)), 4, priority=3, want=[]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_find_targets(case: Case) -> None:
    specs, tree, holders = _setup(case)
    before = {n: dict(node.usage) for n, node in {**tree.queues, **tree.cohorts}.items()}
    incoming = Workload("ns", "in", "lq", "a", (PodSet("main", 1, {"cpu": case.incoming}),), priority=case.priority,
                        created=case.queued, uid="in")
    targets = find_targets(incoming, specs["a"], tree, holders, {FR}, {FR: case.incoming}, set(case.exclude))
    assert sorted((t.workload.name, t.reason) for t in targets) == case.want
    assert {n: dict(node.usage) for n, node in {**tree.queues, **tree.cohorts}.items()} == before


SCANNED = [*CASES,
           Case("each reclaims from the other", (Queue("a", 0, "co", reclaim=ANY, borrow=LOWER),
                                                 Queue("b", 4, "co", reclaim=ANY, borrow=LOWER), Queue("c", 8, "co")),
                (Holder("a1", "a", 4, 0), Holder("b1", "b", 6, 0)), 4, priority=1),
           Case("each reclaims across the tree", (Queue("a", 0, "left", reclaim=ANY, borrow=LOWER),
                                                  Queue("b", 0, "right", reclaim=ANY, borrow=LOWER),
                                                  Queue("c", 4, "right")),
                (Holder("a1", "a", 6, 0), Holder("b1", "b", 6, 0)), 4, priority=1,
                cohorts=(("left", "root", 4), ("right", "root", 0), ("root", None, 0))),
           # Its own quota short: the other queues' victims are taken as a whole, each queue's only down to its
           # nominal quota, then its own in turn.
           Case("its own quota short: the cohort's victims as a whole",
                (Queue("a", 4, "co", within=LOWER, reclaim=ANY), Queue("b", 2, "co", within=LOWER, reclaim=ANY),
                 Queue("c", 2, "co", within=LOWER, reclaim=ANY)),
                (Holder("a1", "a", 1, 0), Holder("a2", "a", 1, 1), Holder("b1", "b", 1, 0, reserved=1.0),
                 Holder("b2", "b", 1, 0, reserved=2.0), Holder("b3", "b", 2, 3), Holder("c1", "c", 3, 9)), 4,
                priority=5),
           # The same with priority ties: reclaim under LowerPriority leaves equal priority alone.
           Case("its own quota short: equal priority is no candidate",
                (Queue("a", 4, "co", within=LOWER, reclaim=LOWER), Queue("b", 2, "co", within=LOWER, reclaim=LOWER)),
                (Holder("a1", "a", 2, 0), Holder("b1", "b", 2, 5), Holder("b2", "b", 2, 1)), 4, priority=5),
           # A victim being evicted already is taken first, its own queue's too: no victims taken as a whole.
           Case("its own quota short, a victim being evicted",
                (Queue("a", 4, "co", within=LOWER, reclaim=ANY), Queue("b", 2, "co", within=LOWER, reclaim=ANY)),
                (Holder("a1", "a", 2, 0, evicting=True), Holder("b1", "b", 2, 0), Holder("b2", "b", 2, 1)), 4,
                priority=5),
           # Its own quota not short: a victim of another queue may be the one that makes it fit.
           Case("its own quota not short: the cohort's victims one by one",
                (Queue("a", 6, "co", within=LOWER, reclaim=ANY), Queue("b", 0, "co", within=LOWER, reclaim=ANY)),
                (Holder("a1", "a", 1, 0), Holder("b1", "b", 2, 0), Holder("b2", "b", 3, 1)), 4, priority=5),
           # Borrowing within the cohort: the attempt that may borrow takes no victim reclaimed without borrowing.
           Case("its own quota short, reclaim while borrowing",
                (Queue("a", 4, "co", within=LOWER, reclaim=ANY, borrow=LOWER), Queue("b", 2, "co")),
                (Holder("a1", "a", 2, 0), Holder("b1", "b", 2, 0), Holder("b2", "b", 2, 9)), 4, priority=5)]


@pytest.mark.parametrize("case", SCANNED, ids=[c.name for c in SCANNED])
def test_one_scan_serves_every_preemptor_of_a_phase(case: Case) -> None:
    """The cohorts' candidates collected once for a nomination phase give each queue's preemptor the victims that a
    search collecting its own finds, the second time round too (read from what the first collected)."""
    specs, tree, holders = _setup(case)
    scan = CohortScan()
    found = 0
    for name in [*specs, *specs]:
        incoming = Workload("ns", "in", name, name, (PodSet("main", 1, {"cpu": case.incoming}),),
                            priority=case.priority, created=case.queued, uid="in")
        alone = find_targets(incoming, specs[name], tree, holders, {FR}, {FR: case.incoming}, set(case.exclude))
        scanned = find_targets(incoming, specs[name], tree, holders, {FR}, {FR: case.incoming}, set(case.exclude),
                               scan=scan)
        assert [(t.workload.key, t.variant, t.lca) for t in scanned] == [
            (t.workload.key, t.variant, t.lca) for t in alone]
        found += len(alone)
    assert found or not case.want


def test_nothing_needed_preempts_nobody() -> None:
    case = Case("", (Queue("a", 4, within=LOWER),), (Holder("x", "a", 4, 0),), 2, priority=1)
    specs, tree, holders = _setup(case)
    incoming = Workload("ns", "in", "lq", "a", (PodSet("main", 1, {"cpu": 2}),), priority=1)
    assert find_targets(incoming, specs["a"], tree, holders, set(), {FR: 2}) == []


@pytest.mark.parametrize(("case", "want"), [
    (Case("", (Queue("a", 4, within=LOWER),), (Holder("x", "a", 4, 0),), 2, priority=1), (Granular.PREEMPT, 0)),
    (Case("", (Queue("a", 4, within=LOWER),), (Holder("x", "a", 4, 3),), 2, priority=1),
     (Granular.NO_CANDIDATES, 0)),
    (Case("", (Queue("a", 4, "co", reclaim=ANY), Queue("b", 4, "co")), (Holder("lent", "b", 8, 9),), 4),
     (Granular.RECLAIM, 0)),
    (Case("", (Queue("a", 2, "co", reclaim=ANY, borrow=LOWER), Queue("b", 4, "co")), (Holder("lent", "b", 6, 0),),
          4, priority=3), (Granular.RECLAIM, 1)),
])
def test_oracle(case: Case, want: tuple[Granular, int]) -> None:
    specs, tree, holders = _setup(case)
    incoming = Workload("ns", "in", "lq", "a", (PodSet("main", 1, {"cpu": case.incoming}),), priority=case.priority)
    before = {n: dict(node.usage) for n, node in {**tree.queues, **tree.cohorts}.items()}
    assert oracle_for(incoming, specs["a"], tree, holders)(FR, case.incoming) == want
    assert {n: dict(node.usage) for n, node in {**tree.queues, **tree.cohorts}.items()} == before
