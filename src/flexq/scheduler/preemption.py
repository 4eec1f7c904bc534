"""Preemption, as Kueue's classical preemptor chooses victims.

Candidates hold quota in a (flavor, resource) the incoming workload needs to free:

- in its own ClusterQueue, under ``withinClusterQueue`` (LowerPriority, LowerOrNewerEqualPriority);
- elsewhere in its cohort tree, under ``reclaimWithinCohort``, only in queues (and cohorts) that use more
  than their nominal quota. Walking up from the incoming queue, each ancestor's subtree is searched;
  candidates found while the incoming workload would still fit in the subtree below are *hierarchical
  reclaim* targets, the others are reclaimed without borrowing, or while borrowing when
  ``borrowWithinCohort`` allows it (lower priority, at most its ``maxPriorityThreshold``).

They are tried in Kueue's order (already evicted first; hierarchical, then other queues by priority,
then the queue's own; within each, lower priority first and the most recently admitted first), removed
until the workload fits, then put back where not needed, leaving a minimal set. Up to two attempts are
made, with and without allowing the incoming workload to borrow, in the order Kueue makes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from flexq.scheduler.model import ClusterQueueSpec, FlavorResource, Granular, PreemptionPolicy, Workload
from flexq.scheduler.quota import Node, QuotaTree, Trial

__all__ = ["Holders", "PreemptionOracle", "Search", "Target", "Variant", "find_targets", "fits_with_borrowing",
           "minimal", "oracle_for", "policy_allows"]

Holders = Mapping[str, Mapping[str, Workload]]
"""ClusterQueue -> workload key -> the workloads holding quota there."""

Search = Callable[..., "list[Target]"]
"""How victims are chosen: :func:`find_targets` (Kueue's classical preemption), or fair sharing's, called as
``search(incoming, cq, tree, holders, needed, requests, exclude)``."""


class Variant(Enum):
    WITHIN_CLUSTER_QUEUE = "WithinClusterQueue"
    HIERARCHICAL_RECLAIM = "HierarchicalReclaim"
    RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"
    RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"
    FAIR_SHARING = "FairSharing"


_REASON = {
    Variant.WITHIN_CLUSTER_QUEUE: "InClusterQueue",
    Variant.HIERARCHICAL_RECLAIM: "InCohortReclamation",
    Variant.RECLAIM_WITHOUT_BORROWING: "InCohortReclamation",
    Variant.RECLAIM_WHILE_BORROWING: "InCohortReclaimWhileBorrowing",
    Variant.FAIR_SHARING: "InCohortFairSharing",
}


_WHY = {
    Variant.WITHIN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    Variant.HIERARCHICAL_RECLAIM: "reclamation within the cohort",
    Variant.RECLAIM_WITHOUT_BORROWING: "reclamation within the cohort",
    Variant.RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    Variant.FAIR_SHARING: "Fair Sharing within the cohort",
}


@dataclass(frozen=True, slots=True)
class Target:
    workload: Workload
    variant: Variant
    lca: Node | None = None

    @property
    def reason(self) -> str:
        """Kueue's preemption reason: InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing."""
        return _REASON[self.variant]

    @property
    def why(self) -> str:
        return _WHY[self.variant]


def _uses(wl: Workload, needed: set[FlavorResource]) -> bool:
    return wl.admission is not None and not needed.isdisjoint(wl.admission.usage())


def policy_allows(policy: PreemptionPolicy, incoming: Workload, other: Workload) -> bool:
    """Whether ``policy`` (LowerPriority, LowerOrNewerEqualPriority, Any) lets ``incoming`` preempt ``other``."""
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return other.priority < incoming.priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return other.priority < incoming.priority or (
            other.priority == incoming.priority and incoming.queue_time < other.queue_time)
    return policy is PreemptionPolicy.ANY


def _order(t: Target) -> tuple[int, float, str]:
    """Kueue's candidate order within a group: lowest priority first, then the most recently admitted. (Its first
    two keys, those being evicted and those of other queues first, are :func:`find_targets`'s partitions.)"""
    wl = t.workload
    return wl.priority, -(wl.reserved_at if wl.reserved_at is not None else 0.0), wl.uid or wl.key


def _collect(tree: QuotaTree, node: Node, skip: Node | None, own: str, needed: set[FlavorResource],
             holders: Holders, out: list[Workload]) -> None:
    for child in node.children:
        if child is skip or tree.within_nominal(child, needed):
            continue
        if child.is_cohort:
            _collect(tree, child, None, own, needed, holders, out)
        elif child.name != own:
            out.extend(w for w in holders.get(child.name, {}).values() if _uses(w, needed))


def _candidates(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree,
                holders: Holders, needed: set[FlavorResource],
                requests: Mapping[FlavorResource, int], exclude: set[str]) -> tuple[list[Target], list[Target],
                                                                                    list[Target]]:
    own: list[Target] = []
    if cq.within_cluster_queue is not PreemptionPolicy.NEVER:
        own = [Target(w, Variant.WITHIN_CLUSTER_QUEUE) for w in holders.get(cq.name, {}).values()
               if w is not incoming and w.key not in exclude and _uses(w, needed)
               and policy_allows(cq.within_cluster_queue, incoming, w)]
    after = _after_own(tree, cq.name, requests, own)
    if _over_limit(tree, cq.name, after):
        return [], [], []  # no eviction anywhere can let the queue hold this much
    node = tree.queues[cq.name]
    if (node.parent is not None and node.parent.parent is None
            and cq.borrow_within_cohort is PreemptionPolicy.NEVER and _must_borrow(tree, cq.name, after)):
        # In a flat cohort, a queue that must borrow may only reclaim without borrowing: the cohort's
        # workloads can never be its victims, so they are not even collected.
        return own, [], []
    hierarchy: list[Target] = []
    by_priority: list[Target] = []
    node = tree.queues[cq.name]
    if node.parent is not None and cq.reclaim_within_cohort is not PreemptionPolicy.NEVER:
        advantage = all(node.subtree.get(fr, 0) >= node.usage.get(fr, 0) + v for fr, v in requests.items())
        remaining = {fr: v - tree.local_available(node, fr) for fr, v in requests.items()}
        child: Node = node
        ancestor: Node | None = node.parent
        while ancestor is not None:
            found: list[Workload] = []
            _collect(tree, ancestor, child, cq.name, needed, holders, found)
            for w in found:
                if w.key in exclude or not policy_allows(
                        PreemptionPolicy.ANY if cq.reclaim_within_cohort is PreemptionPolicy.ANY
                        else PreemptionPolicy.LOWER_PRIORITY, incoming, w):
                    continue
                if advantage:
                    hierarchy.append(Target(w, Variant.HIERARCHICAL_RECLAIM, ancestor))
                elif cq.borrow_within_cohort is PreemptionPolicy.NEVER or w.priority >= incoming.priority or (
                        cq.borrow_within_cohort_threshold is not None
                        and w.priority > cq.borrow_within_cohort_threshold):
                    by_priority.append(Target(w, Variant.RECLAIM_WITHOUT_BORROWING, ancestor))
                else:
                    by_priority.append(Target(w, Variant.RECLAIM_WHILE_BORROWING, ancestor))
            advantage = advantage or all(
                ancestor.subtree.get(fr, 0) >= ancestor.usage.get(fr, 0) + remaining[fr] for fr in remaining)
            remaining = {fr: r - tree.local_available(ancestor, fr) for fr, r in remaining.items()}
            child, ancestor = ancestor, ancestor.parent
    return own, hierarchy, by_priority


def _fits(tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int], borrow: bool) -> bool:
    return all((borrow or not tree.borrowing(cq, fr, v)) and v <= tree.available(cq, fr)
               for fr, v in requests.items())


def fits_with_borrowing(tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int]) -> bool:
    """Whether ``requests`` fit in ``cq`` now, borrowing where it may."""
    return _fits(tree, cq, requests, True)


def _valid(t: Target, tree: QuotaTree, cq: str, needed: set[FlavorResource], borrowing: bool) -> bool:
    if t.workload.cluster_queue == cq:
        return True
    if borrowing and t.variant is Variant.RECLAIM_WITHOUT_BORROWING:
        return False
    node: Node | None = tree.queues[t.workload.cluster_queue]
    while node is not None and node is not t.lca:
        if tree.within_nominal(node, needed):
            return False
        node = node.parent
    return True


def find_targets(
    incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
    needed: set[FlavorResource], requests: Mapping[FlavorResource, int], exclude: set[str] | None = None,
) -> list[Target]:
    """The victims whose eviction lets ``incoming`` take ``requests`` in ``cq``; empty if none suffice."""
    if not needed:
        return []
    own, hierarchy, by_priority = _candidates(incoming, cq, tree, holders, needed, requests, exclude or set())
    if (not hierarchy and not by_priority) or (cq.borrow_within_cohort is PreemptionPolicy.NEVER and not all(
            tree.usage(cq.name, fr) < tree.nominal(cq.name, fr) for fr in needed)):
        attempts = [True]
    elif cq.borrow_within_cohort is PreemptionPolicy.NEVER and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    candidates = [*hierarchy, *by_priority, *own]
    attempts = [borrowing for borrowing in attempts if _could_fit(tree, cq.name, requests, candidates, borrowing)]
    if not attempts:
        return []  # no eviction can make room: the candidates need no ordering
    groups = [sorted(g, key=_order) for g in (hierarchy, by_priority, own)]  # other queues' first
    ordered = [t for g in groups for t in g if t.workload.evicting] + [
        t for g in groups for t in g if not t.workload.evicting]
    for borrowing in attempts:
        with tree.trial() as trial:
            removed = _remove_until_fit(trial, tree, cq.name, needed, requests, ordered, borrowing)
            if removed:
                return minimal(trial, tree, cq.name, requests, removed, borrowing)
    return []


def _remove_until_fit(trial: Trial, tree: QuotaTree, cq: str, needed: set[FlavorResource],
                      requests: Mapping[FlavorResource, int], ordered: list[Target], borrowing: bool) -> list[Target]:
    """Take the valid candidates out, in order, until the request fits: those taken (empty if it never fits)."""
    removed: list[Target] = []
    for t in ordered:
        if not _valid(t, tree, cq, needed, borrowing):
            continue
        trial.remove(t.workload.cluster_queue, _usage(t))
        removed.append(t)
        if _fits(tree, cq, requests, borrowing):
            return removed
    return []


def minimal(trial: Trial, tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int],
             removed: list[Target], borrowing: bool) -> list[Target]:
    """Put back each victim but the last, latest first, where the request still fits without evicting it."""
    for i in range(len(removed) - 2, -1, -1):
        t = removed[i]
        mark = trial.mark()
        trial.add(t.workload.cluster_queue, _usage(t))
        if _fits(tree, cq, requests, borrowing):
            removed.pop(i)
        else:
            trial.undo(mark)
    return removed


def _after_own(tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int],
               own: Iterable[Target]) -> dict[FlavorResource, int]:
    """The queue's usage of each requested resource with all of ``own`` (its own candidates) evicted and the
    request added."""
    own = list(own)
    return {fr: tree.usage(cq, fr) - sum(_usage(t).get(fr, 0) for t in own) + wanted
            for fr, wanted in requests.items()}


def _over_limit(tree: QuotaTree, cq: str, after: Mapping[FlavorResource, int]) -> bool:
    """Whether usage ``after`` (see :func:`_after_own`) passes the queue's nominal quota plus borrowing limit."""
    node = tree.queues[cq]
    return any((limit := node.borrowing_limit(fr)) is not None and used > tree.nominal(cq, fr) + limit
               for fr, used in after.items())


def _must_borrow(tree: QuotaTree, cq: str, after: Mapping[FlavorResource, int]) -> bool:
    """Whether usage ``after`` (see :func:`_after_own`) passes the queue's nominal quota for some resource."""
    return any(used > tree.nominal(cq, fr) for fr, used in after.items())


def _could_fit(tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int], candidates: list[Target],
               borrowing: bool) -> bool:
    """A necessary condition for an attempt to succeed, to spare the one-by-one search when it cannot (the
    order of ``candidates`` does not matter).

    Evicting a workload frees at most its usage; an attempt without borrowing must fit within the nominal
    quota once its own victims are gone; an attempt with borrowing cannot use victims that may only be
    reclaimed without borrowing. (The borrowing limit was checked when the candidates were collected.)
    """
    if not borrowing and _must_borrow(
            tree, cq, _after_own(tree, cq, requests, (t for t in candidates if t.workload.cluster_queue == cq))):
        return False
    for fr, wanted in requests.items():
        room = tree.available(cq, fr)
        if room >= wanted:
            continue
        for t in candidates:
            if borrowing and t.variant is Variant.RECLAIM_WITHOUT_BORROWING:
                continue
            room += _usage(t).get(fr, 0)
            if room >= wanted:
                break
        else:
            return False
    return True


def _usage(t: Target) -> Mapping[FlavorResource, int]:
    assert t.workload.admission is not None
    return t.workload.admission.usage()


class PreemptionOracle:
    """The flavor assigner's question for one incoming workload: can preemption free ``val`` of ``fr``, and how?

    It keeps the victims of its last answer: the cycle then takes them (:meth:`found`) rather than searching for
    the same victims again, in the same quota tree, once the workload is nominated.
    """

    def __init__(self, incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
                 exclude: set[str] | None = None, search: Search | None = None) -> None:
        self.incoming, self.cq, self.tree, self.holders, self.exclude = incoming, cq, tree, holders, exclude
        self.search: Search = search or find_targets
        self._last: tuple[FlavorResource, int, int, list[Target]] | None = None
        """(fr, val, the tree's version after the answer, the victims) of the last answer that found victims."""

    def __call__(self, fr: FlavorResource, val: int) -> tuple[Granular, int]:
        cq, tree = self.cq, self.tree
        targets = self.search(self.incoming, cq, tree, self.holders, {fr}, {fr: val}, self.exclude)
        if not targets:
            return Granular.NO_CANDIDATES, 0
        with tree.without([(t.workload.cluster_queue, _usage(t)) for t in targets]):
            level, _ = tree.borrow_level(cq.name, fr, val)
        self._last = (fr, val, tree.root(cq.name).version, targets)
        own = any(t.workload.cluster_queue == cq.name for t in targets)
        return (Granular.PREEMPT if own else Granular.RECLAIM), level

    def found(self, needed: set[FlavorResource], requests: Mapping[FlavorResource, int]) -> list[Target] | None:
        """The victims :func:`find_targets` would choose for ``needed`` and ``requests``, when they are those of the
        last answer: the same single resource and amount, the quota tree unchanged since (its version is bumped by
        every change of usage). None when they must be searched for."""
        if self._last is None:
            return None
        fr, val, version, targets = self._last
        if needed != {fr} or dict(requests) != {fr: val} or self.tree.root(self.cq.name).version != version:
            return None
        return targets


def oracle_for(
    incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
    exclude: set[str] | None = None, search: Search | None = None,
) -> PreemptionOracle:
    """The flavor assigner's question: can preemption free ``val`` of ``fr``, and how?"""
    return PreemptionOracle(incoming, cq, tree, holders, exclude, search)
