"""Classical preemption's victims in order, with their reasons and where they are reclaimed from.

Cases restated from Kueue's preemption tests (``preemption_test.go``, ``preemption_hierarchical_test.go``): several
resources and flavors, lending limits, borrowing within the cohort, cohorts of cohorts, admission fair sharing's
LocalQueue usage, topologies. Each case is asked alone, through a nomination phase's :class:`CohortScan` (twice:
the second reads what the first collected), with a topology that places the workload anywhere, and, for one
resource, through the flavor assigner's oracle; each must give the same victims in the same order, and the quota
tree is left as it was."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from flexq.scheduler.preemption import (
    CohortScan,
    LocalQueueUsage,
    Target,
    Variant,
    find_targets,
    fits_with_borrowing,
    oracle_for,
    policy_allows,
    usage_first,
)
from flexq.scheduler.quota import QuotaTree

CPU: FlavorResource = ("f", "cpu")
MEM: FlavorResource = ("f", "mem")
GPU_CPU: FlavorResource = ("g", "cpu")
RESOURCES = ("cpu", "mem")
FLAVORS = ("f", "g")
NEVER, LOWER, NEWER, ANY = (PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY,
                            PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, PreemptionPolicy.ANY)

QuotaOf = int | tuple[int, int | None, int | None]
"""A nominal quota, or (nominal, borrowing limit, lending limit)."""


@dataclass(frozen=True)
class Q:
    """A ClusterQueue: its quotas (each flavor and resource not named has none) and preemption policies."""

    name: str
    quota: Mapping[FlavorResource, QuotaOf]
    cohort: str | None = None
    within: PreemptionPolicy = NEVER
    reclaim: PreemptionPolicy = NEVER
    borrow: PreemptionPolicy = NEVER
    threshold: int | None = None
    sparse: bool = False
    """Only the flavors and resources named have a quota (no entry at all for the others)."""


@dataclass(frozen=True)
class C:
    """A cohort with a parent or a quota of its own."""

    name: str
    parent: str | None = None
    quota: Mapping[FlavorResource, QuotaOf] = field(default_factory=dict)


@dataclass(frozen=True)
class W:
    """A workload holding quota."""

    name: str
    cq: str
    usage: Mapping[FlavorResource, int]
    priority: int = 0
    reserved: float = 0.0
    queued: float = 0.0
    evicting: bool = False
    lq: str = "lq"
    uid: str = ""
    """Its UID (its name unless told)."""


@dataclass(frozen=True)
class Case:
    name: str
    queues: tuple[Q, ...]
    holders: tuple[W, ...]
    request: Mapping[FlavorResource, int]
    want: tuple[tuple[str, str, str | None], ...]
    """The victims in the order they are chosen: (name, reason, the node they are reclaimed from)."""
    priority: int = 0
    queued: float = 10.0
    cq: str = "a"
    cohorts: tuple[C, ...] = ()
    exclude: frozenset[str] = frozenset()
    lq_usage: Mapping[str, float] | None = None
    """Admission fair sharing: each LocalQueue's usage (None: the ClusterQueue is not ordered by it)."""
    needed: frozenset[FlavorResource] | None = None
    """The resources to free (None: all of the request's)."""


def _quota(q: QuotaOf) -> Quota:
    return Quota(q) if isinstance(q, int) else Quota(*q)


def _groups(quota: Mapping[FlavorResource, QuotaOf], cohort: bool = False,
            sparse: bool = False) -> tuple[ResourceGroup, ...]:
    if cohort and not quota:
        return ()
    if sparse:
        return (ResourceGroup(tuple(sorted({r for _, r in quota})), tuple(sorted({f for f, _ in quota})),
                              {fr: _quota(q) for fr, q in quota.items()}),)
    quotas = {(f, r): _quota(quota.get((f, r), 0)) for f in FLAVORS for r in RESOURCES}
    return (ResourceGroup(RESOURCES, FLAVORS, quotas),)


def _holder(w: W) -> Workload:
    flavors = {r: f for f, r in w.usage}
    wl = Workload("ns", w.name, w.lq, w.cq, (PodSet("main", 1, {r: v for (_, r), v in w.usage.items()}),),
                  priority=w.priority, uid=w.uid or w.name, created=w.queued, state=WorkloadState.ADMITTED,
                  reserved_at=w.reserved,
                  admission=Admission.of(w.cq, (PodSetAssignment("main", flavors, dict(w.usage), 1),)))
    wl.evicting = w.evicting
    return wl


def _setup(case: Case) -> tuple[dict[str, ClusterQueueSpec], QuotaTree, dict[str, dict[str, Workload]]]:
    specs = {q.name: ClusterQueueSpec(q.name, q.cohort, _groups(q.quota, sparse=q.sparse),
                                      within_cluster_queue=q.within, reclaim_within_cohort=q.reclaim,
                                      borrow_within_cohort=q.borrow, borrow_within_cohort_threshold=q.threshold)
             for q in case.queues}
    tree = QuotaTree(specs.values(), [CohortSpec(c.name, c.parent, _groups(c.quota, True)) for c in case.cohorts])
    holders: dict[str, dict[str, Workload]] = {}
    for w in case.holders:
        wl = _holder(w)
        holders.setdefault(w.cq, {})[wl.key] = wl
        assert wl.admission is not None
        tree.add(w.cq, wl.admission.usage())
    return specs, tree, holders


def _incoming(case: Case) -> Workload:
    return Workload("ns", "in", "lq-in", case.cq, (PodSet("main", 1, {r: v for (_, r), v in case.request.items()}),),
                    priority=case.priority, created=case.queued, uid="in")


def _got(targets: list[Target]) -> tuple[tuple[str, str, str | None], ...]:
    return tuple((t.workload.name, t.reason, t.lca.name if t.lca is not None else None) for t in targets)


def _usages(tree: QuotaTree) -> dict[str, dict[FlavorResource, int]]:
    return {n: dict(node.usage) for n, node in {**tree.queues, **tree.cohorts}.items()}


R_CQ, R_RECLAIM, R_BORROW = "InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing"

CASES = [
    # --- within the ClusterQueue ---
    Case("Any preempts a higher priority in its own queue", (Q("a", {CPU: 4}, within=ANY),),
         (W("high", "a", {CPU: 4}, priority=9),), {CPU: 2}, (("high", R_CQ, None),)),
    Case("LowerOrNewerEqualPriority: lower priority before newer equal priority",
         (Q("a", {CPU: 4}, within=NEWER),),
         (W("newer", "a", {CPU: 2}, priority=1, queued=20.0), W("lower", "a", {CPU: 2}, priority=0, reserved=1.0)),
         {CPU: 4}, (("lower", R_CQ, None), ("newer", R_CQ, None)), priority=1),
    Case("LowerOrNewerEqualPriority: a higher priority is no candidate", (Q("a", {CPU: 4}, within=NEWER),),
         (W("higher", "a", {CPU: 4}, priority=2, queued=20.0),), {CPU: 2}, (), priority=1),
    Case("victims in the order taken: lowest priority, then the latest admitted", (Q("a", {CPU: 6}, within=LOWER),),
         (W("p1", "a", {CPU: 2}, priority=1), W("p0-old", "a", {CPU: 2}, reserved=1.0),
          W("p0-new", "a", {CPU: 2}, reserved=2.0)), {CPU: 6},
         (("p0-new", R_CQ, None), ("p0-old", R_CQ, None), ("p1", R_CQ, None)), priority=2),
    Case("equal priority and admission time: by uid", (Q("a", {CPU: 4}, within=LOWER),),
         (W("y", "a", {CPU: 2}, reserved=1.0), W("x", "a", {CPU: 2}, reserved=1.0)), {CPU: 2},
         (("x", R_CQ, None),), priority=1),
    Case("some free quota: only what is missing is freed", (Q("a", {CPU: 6}, within=LOWER),),
         (W("low", "a", {CPU: 2}, reserved=2.0), W("mid", "a", {CPU: 2}, priority=1)), {CPU: 4},
         (("low", R_CQ, None),), priority=2),
    Case("the minimal set puts the small low-priority one back", (Q("a", {CPU: 6}, within=LOWER),),
         (W("small", "a", {CPU: 1}), W("big", "a", {CPU: 5}, priority=1)), {CPU: 5},
         (("big", R_CQ, None),), priority=2),
    Case("two resources: each victim frees what the other cannot", (Q("a", {CPU: 4, MEM: 4}, within=LOWER),),
         (W("cpu", "a", {CPU: 4}), W("mem", "a", {MEM: 4}, priority=1)), {CPU: 2, MEM: 2},
         (("cpu", R_CQ, None), ("mem", R_CQ, None)), priority=2),
    Case("two resources: a victim using neither is no candidate", (Q("a", {CPU: 4, MEM: 4}, within=LOWER),),
         (W("other", "a", {GPU_CPU: 1}), W("cpu", "a", {CPU: 4, MEM: 4}, priority=1)), {CPU: 2, MEM: 2},
         (("cpu", R_CQ, None),), priority=2),
    Case("a victim using only one of the resources needed", (Q("a", {CPU: 4, MEM: 4}, within=LOWER),),
         (W("mem", "a", {MEM: 4}), W("cpu", "a", {CPU: 2}, priority=1)), {CPU: 2, MEM: 2},
         (("mem", R_CQ, None),), priority=2),
    Case("being evicted first, even of a higher priority", (Q("a", {CPU: 4}, within=LOWER),),
         (W("low", "a", {CPU: 2}), W("going", "a", {CPU: 2}, priority=1, evicting=True)), {CPU: 2},
         (("going", R_CQ, None),), priority=2),
    Case("excluded: the next candidate instead", (Q("a", {CPU: 4}, within=LOWER),),
         (W("x", "a", {CPU: 2}, reserved=2.0), W("y", "a", {CPU: 2}, reserved=1.0)), {CPU: 4},
         (), priority=1, exclude=frozenset({"ns/x"})),
    Case("excluded, with room for the rest", (Q("a", {CPU: 4}, within=LOWER),),
         (W("x", "a", {CPU: 2}, reserved=2.0), W("y", "a", {CPU: 2}, reserved=1.0)), {CPU: 2},
         (("y", R_CQ, None),), priority=1, exclude=frozenset({"ns/x"})),
    Case("equal priority and admission time: by uid, not by name", (Q("a", {CPU: 4}, within=LOWER),),
         (W("x", "a", {CPU: 2}, reserved=1.0, uid="2"), W("y", "a", {CPU: 2}, reserved=1.0, uid="1")), {CPU: 2},
         (("y", R_CQ, None),), priority=1),
    # --- reclaim within the cohort (a flat cohort) ---
    Case("reclaimWithinCohort Never: another queue's borrowed quota is not reclaimed",
         (Q("a", {CPU: 4}, "co", within=LOWER), Q("b", {CPU: 0}, "co")), (W("b1", "b", {CPU: 4}),), {CPU: 4}, (),
         priority=1),
    Case("a lender's victim frees only what it lent: one short",
         (Q("a", {CPU: 3}, "co", reclaim=ANY, borrow=LOWER), Q("b", {CPU: (4, None, 2)}, "co")),
         (W("b1", "b", {CPU: 5}, reserved=2.0), W("b2", "b", {CPU: 1}, reserved=1.0)), {CPU: 6}, (), priority=1),
    Case("other queues' victims before its own", (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY),
                                                 Q("b", {CPU: 4}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 3}, reserved=1.0), W("b2", "b", {CPU: 3}, reserved=2.0)),
         {CPU: 4}, (("b2", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=1),
    Case("its own quota enough: other queues reclaimed, lowest priority first",
         (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: 0}, "co"), Q("c", {CPU: 0}, "co")),
         (W("b1", "b", {CPU: 2}, priority=3), W("c1", "c", {CPU: 2}, priority=2)), {CPU: 4},
         (("c1", R_RECLAIM, "co"), ("b1", R_RECLAIM, "co"))),
    Case("a queue reclaimed down to its nominal quota, not below", (Q("a", {CPU: 4}, "co", reclaim=ANY),
                                                                   Q("b", {CPU: 2}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=1.0), W("b2", "b", {CPU: 2}, reserved=2.0),
          W("b3", "b", {CPU: 2}, reserved=3.0)), {CPU: 4},
         (("b3", R_RECLAIM, "co"), ("b2", R_RECLAIM, "co"))),
    Case("a queue at its nominal quota for the resource needed is no candidate",
         (Q("a", {CPU: 4, MEM: 4}, "co", reclaim=ANY), Q("b", {CPU: 4, MEM: 0}, "co")),
         (W("b1", "b", {CPU: 4, MEM: 4}),), {CPU: 2}, ()),
    Case("a queue over its nominal quota in another flavor is no candidate",
         (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: 0}, "co")),
         (W("b1", "b", {GPU_CPU: 4}), W("b2", "b", {CPU: 4})), {CPU: 4}, (("b2", R_RECLAIM, "co"),)),
    Case("reclaim under LowerPriority: only lower priority", (Q("a", {CPU: 4}, "co", reclaim=LOWER),
                                                             Q("b", {CPU: 0}, "co")),
         (W("same", "b", {CPU: 2}, priority=1), W("lower", "b", {CPU: 2})), {CPU: 4}, (), priority=1),
    Case("reclaim under LowerPriority: enough of lower priority", (Q("a", {CPU: 4}, "co", reclaim=LOWER),
                                                                  Q("b", {CPU: 0}, "co")),
         (W("same", "b", {CPU: 2}, priority=1), W("lower", "b", {CPU: 2})), {CPU: 2},
         (("lower", R_RECLAIM, "co"),), priority=1),
    Case("reclaim under LowerOrNewerEqualPriority: only lower priority",
         (Q("a", {CPU: 4}, "co", reclaim=NEWER), Q("b", {CPU: 0}, "co")),
         (W("newer", "b", {CPU: 4}, priority=1, queued=20.0),), {CPU: 4}, (), priority=1),
    Case("reclaim excluded", (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: 0}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=2.0), W("b2", "b", {CPU: 2}, reserved=1.0)), {CPU: 2},
         (("b2", R_RECLAIM, "co"),), exclude=frozenset({"ns/b1"})),
    Case("must borrow without borrowWithinCohort: its own victims only",
         (Q("a", {CPU: 2}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 6}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 2})), {CPU: 4}, (("a1", R_CQ, None),), priority=1),
    Case("must borrow without borrowWithinCohort: the cohort's victims are none",
         (Q("a", {CPU: 2}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co"), Q("c", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 4})), {CPU: 4}, (), priority=1),
    Case("its own queue above nominal, within its own quota after its own victims",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 4}, "co")),
         (W("a1", "a", {CPU: 4}, priority=1), W("a2", "a", {CPU: 2}), W("b1", "b", {CPU: 2})), {CPU: 2},
         (("a2", R_CQ, None),), priority=2),
    Case("below its nominal quota: the cohort's first, then its own",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 5}, "co")),
         (W("a1", "a", {CPU: 3}), W("b1", "b", {CPU: 4}, reserved=1.0), W("b2", "b", {CPU: 2}, reserved=2.0)),
         {CPU: 3}, (("a1", R_CQ, None),), priority=1),
    Case("below its nominal quota: the cohort's victims stay out where its own do not suffice",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 4}, "co")),
         (W("a1", "a", {CPU: 1}), W("b1", "b", {CPU: 4}, reserved=1.0), W("b2", "b", {CPU: 3}, reserved=2.0)),
         {CPU: 4}, (("b2", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=1),
    Case("the borrowing limit: nothing can make room",
         (Q("a", {CPU: (2, 1, None)}, "co", within=LOWER, reclaim=ANY, borrow=LOWER), Q("b", {CPU: 4}, "co")),
         (W("b1", "b", {CPU: 6}),), {CPU: 4}, (), priority=3),
    Case("the borrowing limit: its own victims bring it within",
         (Q("a", {CPU: (2, 2, None)}, "co", within=LOWER, reclaim=ANY, borrow=LOWER), Q("b", {CPU: 6}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 4})), {CPU: 4}, (("a1", R_CQ, None),), priority=3),
    Case("the borrowing limit reached exactly", (Q("a", {CPU: (2, 2, None)}, "co", reclaim=ANY, borrow=LOWER),
                                                 Q("b", {CPU: 4}, "co")),
         (W("b1", "b", {CPU: 6}),), {CPU: 4}, (("b1", R_BORROW, "co"),), priority=3),
    # --- the attempts with and without borrowing, and their order ---
    Case("no other queue's victims: only the attempt that may borrow", (Q("a", {CPU: 4}, "co", within=LOWER),
                                                                        Q("b", {CPU: 4}, "co"), Q("c", {CPU: 2}, "co")),
         (W("x", "a", {CPU: 1}), W("y", "a", {CPU: 2}, priority=1), W("b1", "b", {CPU: 4})), {CPU: 4},
         (("x", R_CQ, None),), priority=2),
    Case("at its nominal quota, borrowWithinCohort Never: its own victims only",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co"), Q("c", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 4}), W("b1", "b", {CPU: 4})), {CPU: 2}, (("a1", R_CQ, None),), priority=5),
    Case("at its nominal quota, borrowWithinCohort Never: the cohort's free room borrowed, fewer of its own",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co"), Q("c", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 1}), W("a2", "a", {CPU: 1}, priority=1), W("a3", "a", {CPU: 2}, priority=9),
          W("b1", "b", {CPU: 3})), {CPU: 2}, (("a1", R_CQ, None),), priority=5),
    Case("below its nominal quota, borrowWithinCohort Never: first without borrowing, reclaiming",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co"), Q("c", {CPU: 1}, "co")),
         (W("a1", "a", {CPU: 1}), W("a2", "a", {CPU: 1}), W("b1", "b", {CPU: 4})), {CPU: 3},
         (("b1", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=5),
    Case("below its nominal quota, borrowWithinCohort allowed: first while borrowing",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY, borrow=LOWER), Q("b", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 4})), {CPU: 4}, (("b1", R_BORROW, "co"),), priority=5),
    Case("while borrowing nothing suffices: without borrowing, above the threshold",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY, borrow=LOWER, threshold=0), Q("b", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 4}, priority=1)), {CPU: 4},
         (("b1", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=5),
    Case("its own being evicted first, then the cohort's that makes it fit exactly in its quota",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 1}, evicting=True), W("a2", "a", {CPU: 2}, priority=9), W("b1", "b", {CPU: 3})),
         {CPU: 2}, (("a1", R_CQ, None), ("b1", R_RECLAIM, "co")), priority=5),
    Case("its own quota short: two of another queue's, then its own until it fits in its quota",
         (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 0}, "co")),
         (W("a1", "a", {CPU: 1}, reserved=2.0), W("a2", "a", {CPU: 1}, reserved=1.0),
          W("b1", "b", {CPU: 1}, reserved=2.0), W("b2", "b", {CPU: 1}, reserved=1.0)), {CPU: 3},
         (("b1", R_RECLAIM, "co"), ("b2", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=5),
    # --- lending limits ---
    Case("a lender's kept quota is not lent: nobody to reclaim",
         (Q("a", {CPU: 2}, "co", reclaim=ANY), Q("b", {CPU: (6, None, 2)}, "co")),
         (W("b1", "b", {CPU: 6}),), {CPU: 4}, ()),
    Case("reclaimed from a lender that borrows beyond its lending",
         (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: (4, None, 2)}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=1.0), W("b2", "b", {CPU: 4}, reserved=2.0)), {CPU: 4},
         (("b2", R_RECLAIM, "co"),)),
    # --- borrowing within the cohort ---
    Case("while borrowing: below the threshold reclaimed, above it not",
         (Q("a", {CPU: 2}, "co", reclaim=ANY, borrow=LOWER, threshold=1), Q("b", {CPU: 2}, "co"),
          Q("c", {CPU: 2}, "co")),
         (W("b1", "b", {CPU: 2}, priority=2, reserved=2.0), W("b2", "b", {CPU: 2}, priority=1, reserved=1.0)),
         {CPU: 4}, (("b2", R_BORROW, "co"),), priority=5),
    Case("while borrowing: above the threshold it needs its own quota, so it is not reclaimed",
         (Q("a", {CPU: 2}, "co", reclaim=ANY, borrow=LOWER, threshold=0), Q("b", {CPU: 2}, "co")),
         (W("b1", "b", {CPU: 4}, priority=2),), {CPU: 4}, (), priority=5),
    Case("while borrowing, a priority above the threshold reclaimed where it need not borrow",
         (Q("a", {CPU: 4}, "co", reclaim=ANY, borrow=LOWER, threshold=0), Q("b", {CPU: 0}, "co")),
         (W("b1", "b", {CPU: 4}, priority=2),), {CPU: 4}, (("b1", R_RECLAIM, "co"),), priority=5),
    Case("while borrowing: lower priority only", (Q("a", {CPU: 0}, "co", reclaim=ANY, borrow=LOWER),
                                                  Q("b", {CPU: 2}, "co")),
         (W("b1", "b", {CPU: 2}, priority=5), W("b2", "b", {CPU: 2}, priority=6)), {CPU: 2}, (), priority=5),
    Case("while borrowing: the queue's own lower priority first-class too",
         (Q("a", {CPU: 0}, "co", within=LOWER, reclaim=ANY, borrow=LOWER), Q("b", {CPU: 2}, "co"),
          Q("c", {CPU: 4}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 2}, priority=1, reserved=1.0),
          W("b2", "b", {CPU: 2}, priority=1, reserved=2.0)),
         {CPU: 4}, (("b2", R_BORROW, "co"), ("a1", R_CQ, None)), priority=5),
    Case("while borrowing: a victim reclaimed without borrowing is not taken while borrowing",
         (Q("a", {CPU: 2}, "co", within=LOWER, reclaim=ANY, borrow=LOWER, threshold=0), Q("b", {CPU: 0}, "co"),
          Q("c", {CPU: 4}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 2}, priority=1), W("b2", "b", {CPU: 2})), {CPU: 4},
         (("b2", R_BORROW, "co"), ("a1", R_CQ, None)), priority=5),
    # --- cohorts of cohorts ---
    Case("hierarchical reclaim first, whatever the priority",
         (Q("a", {CPU: 0}, "left", reclaim=ANY), Q("s", {CPU: 0}, "left"), Q("b", {CPU: 0}, "right")),
         (W("s1", "s", {CPU: 2}), W("b1", "b", {CPU: 4}, priority=5)), {CPU: 4}, (("b1", R_RECLAIM, "root"),),
         priority=1, cohorts=(C("root"), C("left", "root", {CPU: 6}), C("right", "root"))),
    Case("a sibling reclaimed before a queue across the tree",
         (Q("a", {CPU: 0}, "left", reclaim=ANY, borrow=LOWER), Q("s", {CPU: 0}, "left"),
          Q("b", {CPU: 0}, "right")),
         (W("s1", "s", {CPU: 2}, priority=3), W("b1", "b", {CPU: 2})), {CPU: 2}, (("b1", R_BORROW, "root"),),
         priority=5, cohorts=(C("root", None, {CPU: 4}), C("left", "root"), C("right", "root"))),
    Case("a cohort within its quota keeps its queues' workloads",
         (Q("a", {CPU: 0}, "left", reclaim=ANY), Q("b", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 4}),), {CPU: 4}, (),
         cohorts=(C("root"), C("left", "root", {CPU: 4}), C("right", "root", {CPU: 4}))),
    Case("below a cohort over its quota, a queue within its own is no candidate",
         (Q("a", {CPU: 0}, "left", reclaim=ANY), Q("b", {CPU: 4}, "right"), Q("c", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 4}, reserved=2.0), W("c1", "c", {CPU: 4}, reserved=1.0)), {CPU: 4},
         (("c1", R_RECLAIM, "root"),), cohorts=(C("root"), C("left", "root", {CPU: 4}), C("right", "root"))),
    Case("a cohort brought within its quota: its queue's next workload stays",
         (Q("a", {CPU: 0}, "left", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 2}, reserved=1.0), W("b2", "b", {CPU: 2}, reserved=2.0)), {CPU: 6}, (),
         priority=5, cohorts=(C("root"), C("left", "root", {CPU: 4}), C("right", "root", {CPU: 2}))),
    Case("a cohort above its quota until the last: both its queue's workloads",
         (Q("a", {CPU: 0}, "left", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 2}, reserved=1.0), W("b2", "b", {CPU: 2}, reserved=2.0)), {CPU: 4},
         (("b2", R_BORROW, "root"), ("b1", R_BORROW, "root")),
         priority=5, cohorts=(C("root", None, {CPU: 2}), C("left", "root", {CPU: 2}), C("right", "root"))),
    Case("reclaimed two levels down", (Q("a", {CPU: 4}, "top", reclaim=ANY), Q("b", {CPU: 0}, "inner")),
         (W("b1", "b", {CPU: 4}),), {CPU: 4}, (("b1", R_RECLAIM, "top"),),
         cohorts=(C("top"), C("mid", "top"), C("inner", "mid"))),
    Case("the incoming's own cohort's sibling cohorts, each reclaimed in priority order",
         (Q("a", {CPU: 0}, "left", reclaim=ANY, borrow=ANY), Q("b", {CPU: 0}, "mid"), Q("c", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 2}, priority=2), W("c1", "c", {CPU: 2}, priority=1)), {CPU: 4},
         (("c1", R_BORROW, "root"), ("b1", R_BORROW, "root")), priority=5,
         cohorts=(C("root", None, {CPU: 4}), C("left", "root"), C("mid", "root"), C("right", "root"))),
    # --- several resources ---
    Case("its own quota short: the cohort's victims as a whole, a requested resource they do not use",
         (Q("a", {CPU: 4, MEM: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co", sparse=True)),
         (W("a1", "a", {CPU: 2, MEM: 1}), W("b1", "b", {CPU: 2}), W("b2", "b", {CPU: 2})), {CPU: 4, MEM: 2},
         (("b1", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=1, needed=frozenset({CPU})),
    Case("a queue without quota for one of the resources needed, at its nominal quota for the other",
         (Q("a", {CPU: 4, MEM: 4}, "co", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 2}, "co", sparse=True),
          Q("c", {CPU: 0, MEM: 0}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=1.0), W("b2", "b", {CPU: 2}, reserved=2.0), W("c1", "c", {MEM: 4})),
         {CPU: 4, MEM: 4}, (("b2", R_RECLAIM, "co"), ("c1", R_RECLAIM, "co")), priority=1),
    Case("a sibling's workload reclaimed once, through the cohort both queues are in",
         (Q("a", {CPU: 0}, "left", reclaim=LOWER, borrow=LOWER), Q("s", {CPU: 0}, "left")),
         (W("s1", "s", {CPU: 2}), W("s2", "s", {CPU: 2}, priority=9)), {CPU: 4}, (), priority=5,
         cohorts=(C("root", None, {CPU: 4}), C("left", "root"))),
    Case("the room a lender keeps for itself counts before its cohort's",
         (Q("a", {CPU: (4, None, 2)}, "left", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 2}),), {CPU: 6}, (("b1", R_RECLAIM, "root"),), priority=5,
         cohorts=(C("root"), C("left", "root", {CPU: 2}), C("right", "root"))),
    Case("what a cohort keeps for itself counts before reclaiming two levels above it",
         (Q("a", {CPU: 0}, "left", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 0}, "right")),
         (W("b1", "b", {CPU: 4}),), {CPU: 4}, (("b1", R_RECLAIM, "root"),), priority=5,
         cohorts=(C("root", None, {CPU: 2}), C("mid", "root", {CPU: 2}), C("left", "mid", {CPU: (2, None, 0)}),
                  C("right", "root"))),
    Case("a cohort's usage counts before reclaiming above it",
         (Q("a", {CPU: 0}, "left", reclaim=ANY, borrow=LOWER), Q("s", {CPU: 2}, "left"), Q("b", {CPU: 0}, "right")),
         (W("s1", "s", {CPU: 2}), W("b1", "b", {CPU: 4})), {CPU: 4}, (("b1", R_BORROW, "root"),), priority=5,
         cohorts=(C("root", None, {CPU: 2}), C("left", "root", {CPU: 2}), C("right", "root"))),
    Case("a second victim of a queue above its quota in the other resource",
         (Q("a", {CPU: 4, MEM: 4}, "co", within=LOWER, reclaim=ANY, borrow=LOWER), Q("b", {CPU: 2, MEM: 0}, "co")),
         (W("a9", "a", {CPU: 4, MEM: 3}, priority=9), W("b1", "b", {CPU: 2}, reserved=2.0),
          W("b2", "b", {MEM: 1}, reserved=1.0)), {CPU: 2, MEM: 1},
         (("b1", R_BORROW, "co"), ("b2", R_BORROW, "co")), priority=5),
    Case("its own victim using one of the requested resources only",
         (Q("a", {CPU: 4, MEM: 4}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 2}), W("b1", "b", {CPU: 2}), W("b2", "b", {CPU: 2})), {CPU: 4, MEM: 1},
         (("b1", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=1, needed=frozenset({CPU})),
    Case("its own victim put back, its quota of a requested resource it does not use exactly enough",
         (Q("a", {CPU: 4, MEM: 1}, "co", within=LOWER, reclaim=ANY), Q("b", {CPU: 2, MEM: 0}, "co")),
         (W("a1", "a", {CPU: 1}, reserved=2.0), W("a2", "a", {CPU: 2}, reserved=1.0), W("b1", "b", {CPU: 3})),
         {CPU: 3, MEM: 1}, (("b1", R_RECLAIM, "co"), ("a2", R_CQ, None)), priority=5, needed=frozenset({CPU})),
    Case("a queue at its nominal quota of one resource, with a quota of none of the other it never used",
         (Q("a", {CPU: 4, MEM: 4}, "co", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 2, MEM: 0}, "co"),
          Q("c", {CPU: 0, MEM: 0}, "co")),
         (W("a9", "a", {CPU: 2, MEM: 2}, priority=9), W("b1", "b", {CPU: 2}, reserved=2.0),
          W("b2", "b", {CPU: 2}, reserved=1.0), W("c1", "c", {MEM: 2})), {CPU: 4, MEM: 2}, (), priority=5),
    # --- admission fair sharing ---
    Case("admission fair sharing: the LocalQueue that used more first", (Q("a", {CPU: 4}, within=LOWER),),
         (W("x", "a", {CPU: 2}, reserved=2.0, lq="light"), W("y", "a", {CPU: 2}, reserved=1.0, lq="heavy")),
         {CPU: 2}, (("y", R_CQ, None),), priority=1, lq_usage={"light": 1.0, "heavy": 5.0}),
    Case("admission fair sharing: equal usage, Kueue's order", (Q("a", {CPU: 4}, within=LOWER),),
         (W("y", "a", {CPU: 2}, reserved=1.0, lq="two"), W("x", "a", {CPU: 2}, reserved=2.0, lq="one")),
         {CPU: 2}, (("x", R_CQ, None),), priority=1, lq_usage={"one": 3.0, "two": 3.0}),
    Case("admission fair sharing: priority after usage", (Q("a", {CPU: 4}, within=LOWER),),
         (W("x", "a", {CPU: 2}, priority=0, lq="light"), W("y", "a", {CPU: 2}, priority=1, lq="heavy")),
         {CPU: 2}, (("y", R_CQ, None),), priority=2, lq_usage={"light": 1.0, "heavy": 5.0}),
    Case("admission fair sharing: a LocalQueue without usage, Kueue's order", (Q("a", {CPU: 4}, within=LOWER),),
         (W("x", "a", {CPU: 2}, reserved=2.0, lq="unknown"), W("y", "a", {CPU: 2}, reserved=1.0, lq="heavy")),
         {CPU: 2}, (("x", R_CQ, None),), priority=1, lq_usage={"heavy": 5.0}),
    Case("admission fair sharing: not between ClusterQueues",
         (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: 0}, "co"), Q("c", {CPU: 0}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=2.0, lq="light"), W("c1", "c", {CPU: 2}, reserved=1.0, lq="heavy")),
         {CPU: 2}, (("b1", R_RECLAIM, "co"),), lq_usage={"light": 1.0, "heavy": 5.0}),
    Case("admission fair sharing: another queue's workloads reclaimed by their LocalQueues' usage",
         (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: 0}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=2.0, lq="light"), W("b2", "b", {CPU: 2}, reserved=1.0, lq="heavy")),
         {CPU: 2}, (("b2", R_RECLAIM, "co"),), lq_usage={"light": 1.0, "heavy": 5.0}),
    Case("admission fair sharing: another queue's workloads reclaimed while borrowing, by their LocalQueues' usage",
         (Q("a", {CPU: 2}, "co", reclaim=ANY, borrow=LOWER), Q("b", {CPU: 2}, "co"), Q("c", {CPU: 2}, "co")),
         (W("b1", "b", {CPU: 2}, reserved=2.0, lq="light"), W("b2", "b", {CPU: 2}, reserved=1.0, lq="heavy")),
         {CPU: 4}, (("b2", R_BORROW, "co"),), priority=5, lq_usage={"light": 1.0, "heavy": 5.0}),
    Case("admission fair sharing: the other queues' first still", (Q("a", {CPU: 4}, "co", within=LOWER, reclaim=ANY),
                                                                   Q("b", {CPU: 2}, "co")),
         (W("a1", "a", {CPU: 2}, lq="heavy"), W("b1", "b", {CPU: 2}, lq="light"), W("b2", "b", {CPU: 2}, lq="light")),
         {CPU: 4}, (("b1", R_RECLAIM, "co"), ("a1", R_CQ, None)), priority=1, lq_usage={"light": 1.0, "heavy": 5.0}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_victims(case: Case) -> None:
    specs, tree, holders = _setup(case)
    before = _usages(tree)
    incoming = _incoming(case)
    lq_usage = case.lq_usage
    usage: LocalQueueUsage | None = None if lq_usage is None else (lambda wl: lq_usage.get(wl.queue))
    needed = set(case.request if case.needed is None else case.needed)

    def search(scan: CohortScan | None) -> tuple[tuple[str, str, str | None], ...]:
        return _got(find_targets(incoming, specs[case.cq], tree, holders, needed, case.request,
                                 set(case.exclude), usage, scan=scan))

    assert search(None) == case.want
    assert _usages(tree) == before
    scan = CohortScan()
    assert search(scan) == case.want
    assert search(scan) == case.want  # read from what the scan collected
    assert _usages(tree) == before
    placed = find_targets(incoming, specs[case.cq], tree, holders, needed, case.request, set(case.exclude), usage,
                          topology=lambda _: True)
    assert _got(placed) == case.want  # a topology that places it anywhere changes nothing
    assert _usages(tree) == before
    if len(case.request) == 1 and case.needed is None:
        [(fr, val)] = case.request.items()
        oracle = oracle_for(incoming, specs[case.cq], tree, holders, set(case.exclude), usage)
        mode, _ = oracle(fr, val)
        own = any(w.cq == case.cq for w in case.holders if w.name in {name for name, _, _ in case.want})
        assert mode is (Granular.NO_CANDIDATES if not case.want else Granular.PREEMPT if own else Granular.RECLAIM)
        found = oracle.found(needed, case.request)
        assert (None if found is None else _got(found)) == (case.want or None)
        assert _usages(tree) == before


def test_the_scan_of_one_phase_serves_each_queue_of_a_cohort() -> None:
    """One scan, asked by preemptors of different queues of one cohort in turn, gives each the victims that a search
    of its own finds (the queue each comes through is left out of what the scan collected)."""
    case = Case("", (Q("a", {CPU: 2}, "co", within=LOWER, reclaim=ANY),
                     Q("b", {CPU: 2}, "co", within=LOWER, reclaim=ANY),
                     Q("c", {CPU: 3}, "co", within=LOWER, reclaim=ANY)),
                (W("a1", "a", {CPU: 3}, reserved=1.0), W("a2", "a", {CPU: 1}, reserved=2.0), W("b1", "b", {CPU: 2}),
                 W("c1", "c", {CPU: 1})), {CPU: 2}, (), priority=1)
    specs, tree, holders = _setup(case)
    scan = CohortScan()
    got = {}
    for name in ("a", "b", "c", "a"):
        incoming = Workload("ns", "in-" + name, "lq", name, (PodSet("main", 1, {"cpu": 2}),), priority=1, uid="in")
        alone = find_targets(incoming, specs[name], tree, holders, {CPU}, {CPU: 2})
        shared = find_targets(incoming, specs[name], tree, holders, {CPU}, {CPU: 2}, scan=scan)
        assert _got(shared) == _got(alone)
        got[name] = _got(shared)
    assert got == {"a": (("a1", R_CQ, None),), "b": (("b1", R_CQ, None),), "c": (("a1", R_RECLAIM, "co"),)}


@pytest.mark.parametrize(("policy", "incoming", "other", "allowed"), [
    (NEVER, (5, 10.0), (0, 20.0), False),
    (ANY, (0, 10.0), (5, 1.0), True),
    (LOWER, (1, 10.0), (0, 1.0), True),
    (LOWER, (1, 10.0), (1, 20.0), False),
    (LOWER, (1, 10.0), (2, 20.0), False),
    (NEWER, (1, 10.0), (0, 1.0), True),
    (NEWER, (1, 10.0), (1, 20.0), True),
    (NEWER, (1, 10.0), (1, 10.0), False),
    (NEWER, (1, 10.0), (1, 5.0), False),
    (NEWER, (1, 10.0), (2, 20.0), False),
])
def test_policy_allows(policy: PreemptionPolicy, incoming: tuple[int, float], other: tuple[int, float],
                       allowed: bool) -> None:
    def wl(name: str, priority: int, queued: float) -> Workload:
        return Workload("ns", name, "lq", "a", (), priority=priority, created=queued)

    assert policy_allows(policy, wl("in", *incoming), wl("other", *other)) is allowed


@pytest.mark.parametrize(("x", "y", "usage", "first"), [
    (("a", "l1"), ("a", "l2"), {"l1": 2.0, "l2": 1.0}, -1),
    (("a", "l1"), ("a", "l2"), {"l1": 1.0, "l2": 2.0}, 1),
    (("a", "l1"), ("a", "l2"), {"l1": 1.0, "l2": 1.0}, 0),
    (("a", "l1"), ("a", "l2"), {"l1": 1.0}, 0),
    (("a", "l1"), ("a", "l2"), {"l2": 1.0}, 0),
    (("a", "l1"), ("a", "l1"), {"l1": 1.0}, 0),
    (("a", "l1"), ("b", "l2"), {"l1": 2.0, "l2": 1.0}, 0),
])
def test_usage_first(x: tuple[str, str], y: tuple[str, str], usage: dict[str, float], first: int) -> None:
    def wl(cq: str, lq: str) -> Workload:
        return Workload("ns", lq, lq, cq, ())

    assert usage_first(wl(*x), wl(*y), lambda w: usage.get(w.queue)) == first


@pytest.mark.parametrize(("variant", "reason", "why"), [
    (Variant.WITHIN_CLUSTER_QUEUE, "InClusterQueue", "prioritization in the ClusterQueue"),
    (Variant.HIERARCHICAL_RECLAIM, "InCohortReclamation", "reclamation within the cohort"),
    (Variant.RECLAIM_WITHOUT_BORROWING, "InCohortReclamation", "reclamation within the cohort"),
    (Variant.RECLAIM_WHILE_BORROWING, "InCohortReclaimWhileBorrowing",
     "reclamation within the cohort while borrowing"),
    (Variant.FAIR_SHARING, "InCohortFairSharing", "Fair Sharing within the cohort"),
])
def test_reasons(variant: Variant, reason: str, why: str) -> None:
    target = Target(Workload("ns", "w", "lq", "a", ()), variant)
    assert (target.reason, target.why) == (reason, why)


@pytest.mark.parametrize(("request_", "fits"), [({CPU: 4}, True), ({CPU: 5}, False), ({CPU: 1, MEM: 3}, False),
                                                ({CPU: 1, MEM: 2}, True), ({}, True)])
def test_fits_with_borrowing(request_: dict[FlavorResource, int], fits: bool) -> None:
    case = Case("", (Q("a", {CPU: 2, MEM: 2}, "co"), Q("b", {CPU: 4}, "co")), (W("b1", "b", {CPU: 2}),), {}, ())
    _, tree, _ = _setup(case)
    assert fits_with_borrowing(tree, "a", request_) is fits


def test_the_oracle_keeps_its_last_victims_while_the_tree_is_unchanged() -> None:
    case = Case("", (Q("a", {CPU: 4}, within=LOWER),), (W("x", "a", {CPU: 2}, reserved=2.0), W("y", "a", {CPU: 2})),
                {CPU: 2}, (), priority=1)
    specs, tree, holders = _setup(case)
    oracle = oracle_for(_incoming(case), specs["a"], tree, holders)
    assert oracle.found({CPU}, {CPU: 2}) is None
    assert oracle(CPU, 2) == (Granular.PREEMPT, 0)
    assert oracle(CPU, 6) == (Granular.NO_CANDIDATES, 0)  # (no victims: the last answer that found some stays)
    found = oracle.found({CPU}, {CPU: 2})
    assert found is not None and [t.workload.name for t in found] == ["x"]
    assert oracle.found({CPU}, {CPU: 4}) is None
    assert oracle.found({CPU, MEM}, {CPU: 2}) is None
    assert oracle.found({CPU}, {CPU: 2, MEM: 0}) is None
    tree.add("a", {CPU: 0})
    assert oracle.found({CPU}, {CPU: 2}) is None


@pytest.mark.parametrize(("request_", "want"), [(4, (Granular.RECLAIM, 1)), (6, (Granular.RECLAIM, 2)),
                                                (8, (Granular.NO_CANDIDATES, 0))])
def test_the_oracle_tells_how_high_the_request_borrows_once_the_victims_are_gone(
        request_: int, want: tuple[Granular, int]) -> None:
    case = Case("", (Q("a", {CPU: 2}, "left", reclaim=ANY, borrow=ANY), Q("s", {CPU: 2}, "left"),
                     Q("b", {CPU: 2}, "right")),
                (W("s1", "s", {CPU: 4}), W("b1", "b", {CPU: 2})), {}, (),
                priority=1, cohorts=(C("root", None, {CPU: 2}), C("left", "root"), C("right", "root")))
    specs, tree, holders = _setup(case)
    before = _usages(tree)
    incoming = Workload("ns", "in", "lq", "a", (PodSet("main", 1, {"cpu": request_}),), priority=1)
    assert oracle_for(incoming, specs["a"], tree, holders)(CPU, request_) == want
    assert _usages(tree) == before


def _freed(least: int) -> Callable[[list[Target]], bool]:
    """A topology on which the incoming workload is placed once its victims free ``least`` CPUs (on one node)."""
    def placed(victims: list[Target]) -> bool:
        return sum(t.workload.podsets[0].requests.get("cpu", 0) for t in victims) >= least
    return placed


def _without(*names: str) -> Callable[[list[Target]], bool]:
    """A topology on which the incoming workload is placed only where ``names`` are all among its victims."""
    def placed(victims: list[Target]) -> bool:
        return set(names) <= {t.workload.name for t in victims}
    return placed


@pytest.mark.parametrize(("name", "case", "topology"), [
    ("each victim put back where the quota and the placement allow it",
     Case("", (Q("a", {CPU: 4}, within=LOWER),), (W("x", "a", {CPU: 1}), W("y", "a", {CPU: 1}, priority=1),
                                                  W("z", "a", {CPU: 2}, priority=2)), {CPU: 1},
          (("x", R_CQ, None), ("z", R_CQ, None)), priority=3), _freed(3)),
    ("no victim put back where the placement needs them all",
     Case("", (Q("a", {CPU: 4}, within=LOWER),), (W("x", "a", {CPU: 1}), W("y", "a", {CPU: 1}, priority=1),
                                                  W("z", "a", {CPU: 2}, priority=2)), {CPU: 1},
          (("x", R_CQ, None), ("y", R_CQ, None), ("z", R_CQ, None)), priority=3), _freed(4)),
    ("the first victim put back too",
     Case("", (Q("a", {CPU: 4}, within=LOWER),), (W("x", "a", {CPU: 1}), W("y", "a", {CPU: 1}, priority=1),
                                                  W("z", "a", {CPU: 2}, priority=2)), {CPU: 1},
          (("y", R_CQ, None), ("z", R_CQ, None)), priority=3), _without("y", "z")),
    ("a victim the quota does not need, taken for the placement",
     Case("", (Q("a", {CPU: 4}, within=LOWER),), (W("x", "a", {CPU: 2}), W("y", "a", {CPU: 2}, priority=1)),
          {CPU: 2}, (("y", R_CQ, None),), priority=3), _without("y")),
    ("put back while borrowing: its own quota does not count",
     Case("", (Q("a", {CPU: 2}, "co", within=LOWER), Q("b", {CPU: 4}, "co")),
          (W("x", "a", {CPU: 2}), W("y", "a", {CPU: 2}, priority=1)), {CPU: 3}, (("y", R_CQ, None),), priority=3),
     _without("y")),
    ("never placed: nobody", Case("", (Q("a", {CPU: 4}, within=LOWER),), (W("x", "a", {CPU: 4}),), {CPU: 2}, (),
                                  priority=3), _without("nobody")),
    ("another queue's victim taken for the placement",
     Case("", (Q("a", {CPU: 4}, "co", reclaim=ANY), Q("b", {CPU: 0}, "co")),
          (W("b1", "b", {CPU: 2}, reserved=1.0), W("b2", "b", {CPU: 2}, reserved=2.0)), {CPU: 2},
          (("b1", R_RECLAIM, "co"),)), _without("b1")),
])
def test_victims_on_a_topology(name: str, case: Case, topology: Callable[[list[Target]], bool]) -> None:
    """Where the incoming workload is placed on a topology, victims are taken until it fits and is placed, and put
    back, latest first, where it still fits and is still placed without them."""
    specs, tree, holders = _setup(case)
    before = _usages(tree)
    for scan in (None, CohortScan()):
        got = find_targets(_incoming(case), specs[case.cq], tree, holders, set(case.request), case.request,
                           topology=topology, scan=scan)
        assert _got(got) == case.want, name
        assert _usages(tree) == before
