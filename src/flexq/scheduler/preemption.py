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

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from flexq.scheduler.model import ClusterQueueSpec, FlavorResource, Granular, PreemptionPolicy, Workload
from flexq.scheduler.quota import Node, QuotaTree, Trial

__all__ = ["CohortScan", "Holders", "LocalQueueUsage", "PreemptionOracle", "Search", "Target", "Variant",
           "find_targets", "fits_with_borrowing", "minimal", "nobody_locally", "oracle_for", "policy_allows",
           "usage_first"]

Holders = Mapping[str, Mapping[str, Workload]]
"""ClusterQueue -> workload key -> the workloads holding quota there."""

Search = Callable[..., "list[Target]"]
"""How victims are chosen: :func:`find_targets` (Kueue's classical preemption), or fair sharing's, called as
``search(incoming, cq, tree, holders, needed, requests, exclude, usage)``."""


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


LocalQueueUsage = Callable[[Workload], float | None]
"""Kueue's admission fair sharing: a workload's LocalQueue usage, where its ClusterQueue is ordered by it (None:
not)."""


def usage_first(x: Workload, y: Workload, usage: LocalQueueUsage) -> int:
    """Admission fair sharing's step of Kueue's ``CandidatesOrdering``: of two workloads of one ClusterQueue from
    different LocalQueues, that of the LocalQueue that used more first (-1: ``x``; 1: ``y``; 0: this step does not
    tell)."""
    if x.cluster_queue == y.cluster_queue and x.queue != y.queue:
        ux, uy = usage(x), usage(y)
        if ux is not None and uy is not None and ux != uy:
            return -1 if ux > uy else 1
    return 0


def _ordered(group: list[Target], usage: LocalQueueUsage | None) -> list[Target]:
    """A group in Kueue's candidate order; with admission fair sharing, of two workloads of one ClusterQueue from
    different LocalQueues, that of the LocalQueue that used more first (Kueue's ``CandidatesOrdering``)."""
    if usage is None:
        return sorted(group, key=_order)

    def compare(a: Target, b: Target) -> int:
        first = usage_first(a.workload, b.workload, usage)
        if first:
            return first
        kx, ky = _order(a), _order(b)
        return (kx > ky) - (kx < ky)

    return sorted(group, key=functools.cmp_to_key(compare))


def _collect(tree: QuotaTree, node: Node, skip: Node | None, own: str, needed: set[FlavorResource],
             holders: Holders, out: list[Workload], children: list[Node] | None = None) -> None:
    for child in node.children if children is None else children:
        if child is skip or tree.within_nominal(child, needed):
            continue
        if child.is_cohort:
            _collect(tree, child, None, own, needed, holders, out)
        elif child.name != own:
            out.extend(w for w in holders.get(child.name, {}).values() if _uses(w, needed))


class CohortScan:
    """The victims the other queues of a cohort offer, collected once for all the searches of one nomination phase.

    While a cycle nominates its heads the quota tree's usage and the workloads holding quota do not change (what a
    search tries is undone before the next): which queues below a cohort use more than their nominal quota, and what
    their workloads could give up, is the same for every preemptor of the cohort. Only the queue the preemptor comes
    through (``skip``) and the workloads it excludes differ; they are left out when the collection is read."""

    __slots__ = ("_found", "_segments", "_targets")

    def __init__(self) -> None:
        self._segments: dict[tuple[tuple[object, ...], bool], _Segment | None] = {}
        """(targets' key, borrowing) -> the victims a search takes of them in turn (:meth:`segment`)."""
        self._found: dict[tuple[Node, frozenset[FlavorResource]], list[tuple[Node, list[Workload]]]] = {}
        """(cohort, needed) -> each child above its nominal quota with the workloads below it that use ``needed``."""
        self._targets: dict[tuple[object, ...], list[tuple[Node, Target]]] = {}
        """The same as targets, for preemptors alike in what makes a workload a target and of which variant."""

    def collected(self, tree: QuotaTree, ancestor: Node, needed: set[FlavorResource],
                  holders: Holders) -> list[tuple[Node, list[Workload]]]:
        key = (ancestor, frozenset(needed))
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = []
            for child in ancestor.children:
                workloads: list[Workload] = []
                _collect(tree, ancestor, None, "", needed, holders, workloads, [child])
                if workloads:
                    found.append((child, workloads))
        return found

    def targets(self, key: tuple[object, ...], build: Callable[[], list[tuple[Node, Target]]]) -> list[
            tuple[Node, Target]]:
        """The targets ``build`` makes for ``key``, in Kueue's candidate order (:func:`_order`: what is left of them
        once some are left out is still in that order)."""
        found = self._targets.get(key)
        if found is None:
            found = self._targets[key] = sorted(build(), key=lambda pair: _order(pair[1]))
        return found

    def segment(self, key: tuple[object, ...], borrowing: bool, tree: QuotaTree,
                needed: set[FlavorResource]) -> _Segment | None:
        """The targets of ``key`` (of a cohort of ClusterQueues) that a search takes out in turn, with or without
        ``borrowing``, while nothing it takes can make the request fit (see :func:`_remove_until_fit`); None where
        some are being evicted already (a search takes those first, its own queue's among them)."""
        found = self._segments.get((key, borrowing), self)
        if found is self:
            found = self._segments[(key, borrowing)] = _segment(self._targets[key], borrowing, tree, needed)
        return found if not isinstance(found, CohortScan) else None


@dataclass(frozen=True, slots=True)
class _Segment:
    """The victims a search takes out of a cohort's other queues before its own queue's, when its own quota is short
    all along (:meth:`CohortScan.segment`). Whether a victim may be taken depends only on its queue's usage and the
    victims of that queue taken before it: what one preemptor's queue leaves out (its own workloads) changes nothing
    for the others."""

    valid: list[tuple[Node, Target]]
    """Each victim, with the queue it is taken from, in order."""
    sums: dict[str, dict[FlavorResource, int]]
    """What the victims of each queue use."""
    total: dict[FlavorResource, int]
    """What they all use."""
    root: dict[FlavorResource, int]
    """What taking them all out takes off the root's usage (see :class:`_Flat`)."""
    suffixes: dict[FlavorResource, list[int] | None] = field(default_factory=dict)
    """By (flavor, resource): what the victims from each on to the last use of it (None where one uses less than
    nothing), worked out once asked for."""

    def put_back_at_once(self, short: Mapping[FlavorResource, int], top: int) -> int:
        """How far :func:`minimal`'s walk, at victim ``top`` (each before it out of the tree, the request fitting),
        surely puts the victims back: the lowest ``i`` such that the request fits with each of the victims from
        ``top`` down to ``i`` back, were the root's usage to grow by all they use (``top + 1``: not even ``top``).
        ``short``: what the request would miss of each (flavor, resource) if its queue had no borrowing limit (at
        most 0: see :meth:`_Flat.uncapped`).

        None of them is of the request's queue: its usage, its own quota and what its borrowing limit leaves it are
        as they were, and the request still fits while the root has room for it (the borrowing limit did let it in).
        A queue passes its root at most what a victim put back uses (all of it, where it holds its guaranteed quota
        already), so each of these victims does go back; the walk decides the next as ever. Usages are never less
        than nothing: once one does not fit on this reckoning, none further does."""
        bounds = []
        for fr, missing in short.items():
            suffix = self._suffix(fr)
            if suffix is None:
                return top + 1
            bounds.append((missing - suffix[top + 1], suffix))
        low, high = 0, top + 1  # the answer is in [low, high]; high fits (nothing put back)
        while low < high:
            mid = (low + high) // 2
            if all(missing + suffix[mid] <= 0 for missing, suffix in bounds):
                high = mid
            else:
                low = mid + 1
        return low

    def _suffix(self, fr: FlavorResource) -> list[int] | None:
        """What the victims from each on to the last use of ``fr``; None where one uses less than nothing (see
        :meth:`put_back_at_once`)."""
        if fr in self.suffixes:
            return self.suffixes[fr]
        self.suffixes[fr] = None
        suffix = [0] * (len(self.valid) + 1)
        for i in range(len(self.valid) - 1, -1, -1):
            admission = self.valid[i][1].workload.admission
            assert admission is not None
            amount = admission.total.get(fr, 0)
            if amount < 0:
                return None
            suffix[i] = suffix[i + 1] + amount
        self.suffixes[fr] = suffix
        return suffix

    def without(self, queue: Node) -> _Taken:
        """The victims, their sums by queue and their total, less those of ``queue`` (the preemptor's); and what
        taking them out takes off the root's usage, where that is :attr:`root` (None: to be worked out)."""
        mine = self.sums.get(queue.name)
        if mine is None:
            return [t for _, t in self.valid], self.sums, self.total, self.root
        sums = {name: usage for name, usage in self.sums.items() if name != queue.name}
        return ([t for c, t in self.valid if c is not queue], sums,
                {fr: amount - mine.get(fr, 0) for fr, amount in self.total.items()}, None)


_Taken = tuple[list[Target], Mapping[str, Mapping[FlavorResource, int]], Mapping[FlavorResource, int],
               Mapping[FlavorResource, int] | None]
"""What :meth:`_Segment.without` gives a preemptor's search."""


def _segment(every: list[tuple[Node, Target]], borrowing: bool, tree: QuotaTree,
             needed: set[FlavorResource]) -> _Segment | None:
    """:meth:`CohortScan.segment`: :func:`_valid` asked of each target in turn, where each is a ClusterQueue's
    workload in a cohort of ClusterQueues (only the victims of its own queue taken before it count)."""
    valid: list[tuple[Node, Target]] = []
    sums: dict[str, dict[FlavorResource, int]] = {}
    total: dict[FlavorResource, int] = {}
    for child, t in every:
        wl = t.workload
        if wl.evicting:
            return None
        if borrowing and t.variant is Variant.RECLAIM_WITHOUT_BORROWING:
            continue
        node = tree.queues[wl.cluster_queue]
        if node is not child or node.parent is not t.lca:
            return None  # (a cohort below the cohort: the victims of its other queues count too)
        taken = sums.get(node.name)
        if taken is None:
            if tree.within_nominal(node, needed):
                continue
            taken = sums[node.name] = {}
        elif not any(node.subtree.get(fr, 0) < node.usage.get(fr, 0) - taken.get(fr, 0) for fr in needed):
            continue
        assert wl.admission is not None
        for fr, amount in wl.admission.total.items():
            taken[fr] = taken.get(fr, 0) + amount
            total[fr] = total.get(fr, 0) + amount
        valid.append((child, t))
    apart = _Flat(tree)
    apart.add_all(sums, -1)
    return _Segment(valid, sums, total, apart.root_change())


def _reclaimable(incoming: Workload, cq: ClusterQueueSpec, ancestor: Node, advantage: bool,
                 found: Iterable[tuple[Node, Workload]]) -> list[tuple[Node, Target]]:
    """The workloads ``found`` below ``ancestor`` that ``incoming`` may reclaim, as targets of their variant."""
    policy = PreemptionPolicy.ANY if cq.reclaim_within_cohort is PreemptionPolicy.ANY \
        else PreemptionPolicy.LOWER_PRIORITY
    out: list[tuple[Node, Target]] = []
    for child, w in found:
        if not policy_allows(policy, incoming, w):
            continue
        if advantage:
            out.append((child, Target(w, Variant.HIERARCHICAL_RECLAIM, ancestor)))
        elif cq.borrow_within_cohort is PreemptionPolicy.NEVER or w.priority >= incoming.priority or (
                cq.borrow_within_cohort_threshold is not None
                and w.priority > cq.borrow_within_cohort_threshold):
            out.append((child, Target(w, Variant.RECLAIM_WITHOUT_BORROWING, ancestor)))
        else:
            out.append((child, Target(w, Variant.RECLAIM_WHILE_BORROWING, ancestor)))
    return out


def _scan_key(incoming: Workload, cq: ClusterQueueSpec, ancestor: Node, needed: set[FlavorResource],
              advantage: bool) -> tuple[object, ...]:
    """What makes a workload below ``ancestor`` a target of ``incoming``, and of which variant
    (:meth:`CohortScan.targets` keeps the targets of preemptors alike in it once)."""
    return (ancestor, frozenset(needed), incoming.priority, cq.reclaim_within_cohort is PreemptionPolicy.ANY,
            advantage, cq.borrow_within_cohort is PreemptionPolicy.NEVER, cq.borrow_within_cohort_threshold)


def _below(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders, needed: set[FlavorResource],
           ancestor: Node, child: Node, advantage: bool, scan: CohortScan | None) -> list[Target]:
    """The targets ``incoming`` (coming through ``child``) may reclaim below ``ancestor``, not yet excluded."""
    if scan is None:
        found: list[Workload] = []
        _collect(tree, ancestor, child, cq.name, needed, holders, found)
        return [t for _, t in _reclaimable(incoming, cq, ancestor, advantage, ((child, w) for w in found))]
    collected = scan.collected(tree, ancestor, needed, holders)
    key = _scan_key(incoming, cq, ancestor, needed, advantage)
    every = scan.targets(key, lambda: _reclaimable(incoming, cq, ancestor, advantage,
                                                   ((c, w) for c, ws in collected for w in ws)))
    return [t for c, t in every if c is not child]


def _own(incoming: Workload, cq: ClusterQueueSpec, holders: Holders, needed: set[FlavorResource],
         exclude: set[str]) -> list[Target]:
    """The candidates of the queue's own, under its ``withinClusterQueue`` policy."""
    policy = cq.within_cluster_queue
    if policy is PreemptionPolicy.NEVER:
        return []
    # The policy first: under LowerPriority, a comparison that most of the queue's workloads fail.
    lower, priority = policy is PreemptionPolicy.LOWER_PRIORITY, incoming.priority
    return [Target(w, Variant.WITHIN_CLUSTER_QUEUE) for w in holders.get(cq.name, {}).values()
            if (w.priority < priority if lower else policy_allows(policy, incoming, w))
            and w is not incoming and w.key not in exclude and _uses(w, needed)]


def _only_own(tree: QuotaTree, cq: ClusterQueueSpec, after: Mapping[FlavorResource, int]) -> bool:
    """In a flat cohort, a queue that must borrow (with usage ``after``, see :func:`_after_own`) may only reclaim
    without borrowing: the cohort's workloads can never be its victims, so they are not even collected."""
    parent = tree.queues[cq.name].parent
    return parent is not None and parent.parent is None and cq.borrow_within_cohort is PreemptionPolicy.NEVER \
        and _must_borrow(tree, cq.name, after)


def nobody_locally(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
                   needed: set[FlavorResource], requests: Mapping[FlavorResource, int],
                   exclude: set[str] | None = None) -> bool:
    """Whether :func:`find_targets` finds nobody, as told from ``cq`` alone: none of its own workloads is a
    candidate and none of its cohort's may be one (the request passes its borrowing limit, or it must borrow in a
    flat cohort it may not borrow from while reclaiming); or the request passes its borrowing limit even with its
    own candidates evicted. The answer then rests on the queue's own workloads and its usage only, not on the rest
    of its cohort: a caller may keep it while those have not changed."""
    if not needed:
        return True
    own = _own(incoming, cq, holders, needed, exclude or set())
    after = _after_own(tree, cq.name, requests, own)
    return _over_limit(tree, cq.name, after) or (not own and _only_own(tree, cq, after))


def _candidates(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree,
                holders: Holders, needed: set[FlavorResource],
                requests: Mapping[FlavorResource, int], exclude: set[str],
                scan: CohortScan | None = None) -> tuple[list[Target], list[Target], list[Target], tuple[bool, bool]]:
    """The candidates of the queue's own, hierarchical reclaim and reclaim by priority; and whether the hierarchical
    and by priority ones are already in Kueue's candidate order (each from one of ``scan``'s ordered lists)."""
    own = _own(incoming, cq, holders, needed, exclude)
    after = _after_own(tree, cq.name, requests, own)
    if _over_limit(tree, cq.name, after):
        return [], [], [], (True, True)  # no eviction anywhere can let the queue hold this much
    if _only_own(tree, cq, after):
        return own, [], [], (True, True)
    node = tree.queues[cq.name]
    hierarchy: list[Target] = []
    by_priority: list[Target] = []
    lists = [0, 0]
    """How many non-empty lists went into each (one of the scan's is in Kueue's order already)."""
    if node.parent is not None and cq.reclaim_within_cohort is not PreemptionPolicy.NEVER:
        advantage = all(node.subtree.get(fr, 0) >= node.usage.get(fr, 0) + v for fr, v in requests.items())
        remaining = {fr: v - tree.local_available(node, fr) for fr, v in requests.items()}
        child: Node = node
        ancestor: Node | None = node.parent
        while ancestor is not None:
            found = _below(incoming, cq, tree, holders, needed, ancestor, child, advantage, scan)
            if exclude:
                found = [t for t in found if t.workload.key not in exclude]
            (hierarchy if advantage else by_priority).extend(found)
            if found:
                lists[0 if advantage else 1] += 1
            advantage = advantage or all(
                ancestor.subtree.get(fr, 0) >= ancestor.usage.get(fr, 0) + remaining[fr] for fr in remaining)
            remaining = {fr: r - tree.local_available(ancestor, fr) for fr, r in remaining.items()}
            child, ancestor = ancestor, ancestor.parent
    return own, hierarchy, by_priority, (scan is not None and lists[0] <= 1, scan is not None and lists[1] <= 1)


class _Reads(Protocol):
    """What a victim search reads of usage: the quota tree, or a flat cohort's usage apart from it (:class:`_Flat`)."""

    queues: dict[str, Node]

    def available(self, cq: str, fr: FlavorResource) -> int: ...

    def usage(self, cq: str, fr: FlavorResource) -> int: ...

    def nominal(self, cq: str, fr: FlavorResource) -> int: ...


class _Changes(Protocol):
    """Where a victim search takes victims out and puts them back: a :class:`Trial` of the quota tree, or a
    :class:`_Flat`."""

    def add_all(self, changes: Mapping[str, Mapping[FlavorResource, int]], sign: int = 1) -> None: ...

    def remove(self, cq: str, usage: Mapping[FlavorResource, int]) -> None: ...


class _Flat:
    """The usage of a flat cohort (ClusterQueues right under their root) with victims taken out and put back, kept
    apart from the quota tree: a search that takes out all of a cohort's victims at once and puts nearly all of them
    back (:func:`_from_segment`) reads it as it would read the tree, without walking the tree with each change and back
    again when the search ends. A queue passes its root the part of its usage above its guaranteed quota, as in
    :meth:`QuotaTree.add`, and what is available to a queue is :meth:`QuotaTree.available`'s for a queue whose parent
    is the root."""

    __slots__ = ("_apart", "_root", "_tree", "_used", "queues")

    def __init__(self, tree: QuotaTree, apart: Mapping[str, Mapping[FlavorResource, int]] | None = None,
                 root: Mapping[FlavorResource, int] | None = None) -> None:
        """``apart``: usage of each queue taken out from the start, ``root`` what that takes off the root's usage
        (:meth:`root_change` of a :class:`_Flat` that took it out: a :class:`_Segment` works it out once for all the
        searches of a phase)."""
        self._tree = tree
        self.queues: dict[str, Node] = tree.queues
        self._apart: Mapping[str, Mapping[FlavorResource, int]] = apart or {}
        self._used: dict[str, dict[FlavorResource, int]] = {}
        """Each queue's usage, where it changed (all of it, as the tree would hold it)."""
        self._root: dict[FlavorResource, int] = {fr: -amount for fr, amount in root.items()} if root else {}
        """What the changes add to the root's usage."""

    def root_change(self) -> dict[FlavorResource, int]:
        """What the changes so far take off the root's usage."""
        return {fr: -amount for fr, amount in self._root.items()}

    def add_all(self, changes: Mapping[str, Mapping[FlavorResource, int]], sign: int = 1) -> None:
        for cq, usage in changes.items():
            self._add(cq, usage, sign)

    def remove(self, cq: str, usage: Mapping[FlavorResource, int]) -> None:
        self._add(cq, usage, -1)

    def _add(self, cq: str, usage: Mapping[FlavorResource, int], sign: int) -> None:
        used = self._used.get(cq)
        node = self.queues[cq]
        if used is None:
            used = self._used[cq] = self._usage_of(node)
        guarantees, root = node.guarantees, self._root
        for fr, amount in usage.items():  # as QuotaTree.add, one level up
            before = used.get(fr, 0)
            after = used[fr] = before + sign * amount
            if guarantees:
                guaranteed = guarantees.get(fr, 0)
                before -= guaranteed
                after -= guaranteed
            passed = (after if after > 0 else 0) - (before if before > 0 else 0)
            if passed:
                root[fr] = root.get(fr, 0) + passed

    def _usage_of(self, node: Node) -> dict[FlavorResource, int]:
        used = dict(node.usage)
        for fr, amount in self._apart.get(node.name, {}).items():
            used[fr] = used.get(fr, 0) - amount
        return used

    def uncapped(self, cq: str, fr: FlavorResource) -> int:
        """:meth:`available` as if ``cq`` had no borrowing limit: its own unused guaranteed quota and what the root
        has free. What the queue may take is the least of this and what its borrowing limit leaves it."""
        node = self.queues[cq]
        root = node.parent
        assert root is not None and root.parent is None
        guaranteed = node.guarantees.get(fr, 0) if node.guarantees else 0
        used = self.usage(cq, fr)
        return (guaranteed - used if guaranteed > used else 0) + \
            root.subtree.get(fr, 0) - root.usage.get(fr, 0) - self._root.get(fr, 0)

    def usage(self, cq: str, fr: FlavorResource) -> int:
        used = self._used.get(cq)
        if used is None:
            used = self._used[cq] = self._usage_of(self.queues[cq])
        return used.get(fr, 0)

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        return self._tree.nominal(cq, fr)

    def available(self, cq: str, fr: FlavorResource) -> int:
        node = self.queues[cq]
        root = node.parent
        assert root is not None and root.parent is None
        from_parent = root.subtree.get(fr, 0) - root.usage.get(fr, 0) - self._root.get(fr, 0)
        guaranteed = node.guarantees.get(fr, 0) if node.guarantees else 0
        used = self.usage(cq, fr)
        local = guaranteed - used if guaranteed > used else 0
        quota = node.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            stored = node.subtree.get(fr, 0) - guaranteed
            from_parent = min(stored - max(0, used - guaranteed) + quota.borrowing_limit, from_parent)
        return local + from_parent


class _Missing:
    """What a request lacks to fit in its ClusterQueue: room (what it may take, borrowing included) and, where it may
    not borrow, the queue's own quota; it fits when nothing is missing.

    Taking a victim out (putting one back) adds to (takes from) the room at most the victim's usage, and changes the
    queue's own usage by exactly that when the victim is its own: so the victim searches below can tell from these
    bounds when the answer cannot have changed, and read the tree again only when it may have."""

    __slots__ = ("own", "room")

    def __init__(self, tree: _Reads, cq: str, requests: Mapping[FlavorResource, int], borrowing: bool) -> None:
        self.room = {fr: wanted - tree.available(cq, fr) for fr, wanted in requests.items()}
        self.own = {} if borrowing else {fr: tree.usage(cq, fr) + wanted - tree.nominal(cq, fr)
                                         for fr, wanted in requests.items()}

    def none(self) -> bool:
        for missing in self.room.values():  # loops: this is asked of every victim tried
            if missing > 0:
                return False
        for missing in self.own.values():  # noqa: SIM110
            if missing > 0:
                return False
        return True

    def over_nominal(self) -> bool:
        """Whether the queue's own quota, where it may not borrow, is short (exact, unlike the room)."""
        for missing in self.own.values():  # noqa: SIM110 - a loop, as in none()
            if missing > 0:
                return True
        return False

    def shift(self, usage: Mapping[FlavorResource, int], own_queue: bool, sign: int) -> bool:
        """A victim taken out (``sign`` -1) or put back (1): the room by its bound, the own quota exactly. Whether
        nothing is missing after it."""
        none = True
        room = self.room
        for fr, before in room.items():  # loops and local names: this is asked of every victim tried
            after = room[fr] = before + sign * usage.get(fr, 0)
            if after > 0:
                none = False
        own = self.own
        if own_queue:
            for fr, before in own.items():
                after = own[fr] = before + sign * usage.get(fr, 0)
                if after > 0:
                    none = False
        elif none:
            for missing in own.values():
                if missing > 0:
                    return False
        return none


def fits_with_borrowing(tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int]) -> bool:
    """Whether ``requests`` fit in ``cq`` now, borrowing where it may."""
    for fr, v in requests.items():  # noqa: SIM110 - a loop: asked of every workload a cycle processes
        if v > tree.available(cq, fr):
            return False
    return True


class _Aside:
    """Usage changes for the trial, summed by ClusterQueue and made only when the tree must be read (one change per
    queue instead of one per workload: the tree's usage is a function of its queues' usage alone). The searches add
    to :attr:`by_cq` inline: they run for every candidate of every search."""

    __slots__ = ("_sign", "_trial", "by_cq")

    def __init__(self, trial: _Changes, sign: int) -> None:
        self._trial, self._sign = trial, sign
        self.by_cq: dict[str, dict[FlavorResource, int]] = {}

    def flush(self) -> None:
        self._trial.add_all(self.by_cq, self._sign)
        self.by_cq.clear()  # (the trial keeps the sums it was given: each flush starts new ones)


def _valid(t: Target, victim: str, tree: QuotaTree, needed: set[FlavorResource], borrowing: bool,
           out: _Aside) -> bool:
    """Whether ``t`` (of another queue than the preemptor's: ``victim``) may still be a victim: its queue, and the
    cohorts between it and where it is reclaimed from, all still above their nominal quota once the victims taken out
    before it (``out``) are gone."""
    if borrowing and t.variant is Variant.RECLAIM_WITHOUT_BORROWING:
        return False
    node: Node | None = tree.queues[victim]
    assert node is not None
    if node.parent is t.lca:  # only the queue's own usage counts: the victims of that queue set aside are subtracted
        taken = out.by_cq.get(victim)
        if taken is None:
            return not tree.within_nominal(node, needed)
        subtree, usage = node.subtree, node.usage
        for fr in needed:  # noqa: SIM110 - a loop: this is asked of every candidate tried
            if subtree.get(fr, 0) < usage.get(fr, 0) - taken.get(fr, 0):
                return True
        return False
    out.flush()
    while node is not None and node is not t.lca:
        if tree.within_nominal(node, needed):
            return False
        node = node.parent
    return True


def find_targets(
    incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
    needed: set[FlavorResource], requests: Mapping[FlavorResource, int], exclude: set[str] | None = None,
    usage: LocalQueueUsage | None = None, *, topology: Callable[[list[Target]], bool] | None = None,
    scan: CohortScan | None = None,
) -> list[Target]:
    """The victims whose eviction lets ``incoming`` take ``requests`` in ``cq``; empty if none suffice. ``usage``:
    admission fair sharing's LocalQueue usage, which orders the candidates of a ClusterQueue that uses it.
    ``topology``: where ``incoming`` is placed on a topology, whether it is once the given victims are gone (Kueue's
    ``workloadFits`` asks it with the quota, so the victims free a placement too). ``scan``: the cohorts' candidates
    of the nomination phase it is asked in (:class:`CohortScan`)."""
    if not needed:
        return []
    own, hierarchy, by_priority, ordered_already = _candidates(incoming, cq, tree, holders, needed, requests,
                                                              exclude or set(), scan)
    if not own and not hierarchy and not by_priority:
        return []  # (most searches: a queue that must borrow, with no workload of its own to preempt)
    if (not hierarchy and not by_priority) or (cq.borrow_within_cohort is PreemptionPolicy.NEVER and not all(
            tree.usage(cq.name, fr) < tree.nominal(cq.name, fr) for fr in needed)):
        attempts = [True]
    elif cq.borrow_within_cohort is PreemptionPolicy.NEVER and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    candidates = [*hierarchy, *by_priority, *own]
    attempts = [borrowing for borrowing in attempts
                if _could_fit(tree, cq.name, requests, candidates, own, borrowing)]
    if not attempts:
        return []  # no eviction can make room: the candidates need no ordering
    if usage is not None:
        ordered_already = (False, False)  # admission fair sharing orders them otherwise
    groups = [g if done else _ordered(g, usage)  # other queues' first
              for g, done in ((hierarchy, ordered_already[0]), (by_priority, ordered_already[1]), (own, False))]
    ordered: list[Target] | None = None
    node = tree.queues[cq.name]
    shared = scan is not None and usage is None and topology is None and not exclude and (hierarchy or by_priority) \
        and node.parent is not None and node.parent.parent is None and not any(t.workload.evicting for t in own)
    for borrowing in attempts:
        segment = scan.segment(_scan_key(incoming, cq, node.parent, needed, bool(hierarchy)), borrowing, tree,
                               needed) if shared and scan is not None and node.parent is not None else None
        if segment is not None:
            found = _from_segment(tree, cq.name, needed, requests, segment, node, groups[2], borrowing)
            if found:
                return found
            continue
        if ordered is None:  # (the segment's searches take the groups as they are)
            ordered = [t for g in groups for t in g if t.workload.evicting] + [
                t for g in groups for t in g if not t.workload.evicting]
        with tree.trial() as trial:
            removed = _remove_until_fit(trial, tree, cq.name, needed, requests, ordered, borrowing, topology)
            if removed and topology is not None:
                return _minimal_placed(trial, tree, cq.name, requests, removed, borrowing, topology)
            if removed:
                return minimal(trial, tree, cq.name, requests, removed, borrowing, ending=True)
    return []


def _remove_until_fit(trial: Trial, tree: QuotaTree, cq: str, needed: set[FlavorResource],
                      requests: Mapping[FlavorResource, int], ordered: list[Target], borrowing: bool,
                      topology: Callable[[list[Target]], bool] | None = None) -> list[Target]:
    """Take the valid candidates out, in order, until the request fits (and is placed, where ``topology`` asks):
    those taken (empty if it never fits; the caller's trial is then undone, with the victims still set aside).

    The tree is read again only once the victims taken since it was last read could have covered what was then
    missing (a lower bound of what is missing, :class:`_Missing`)."""
    removed: list[Target] = []
    out = _Aside(trial, -1)
    taken = out.by_cq
    missing = _Missing(tree, cq, requests, borrowing)
    for t in ordered:  # _usage and the sums of _Aside inline: this runs for every candidate of every search
        wl = t.workload
        victim = wl.cluster_queue
        own = victim == cq
        if not own and not _valid(t, victim, tree, needed, borrowing, out):
            continue
        assert wl.admission is not None
        usage = wl.admission.total
        total = taken.get(victim)
        if total is None:
            total = taken[victim] = {}
        for fr, amount in usage.items():
            total[fr] = total.get(fr, 0) + amount
        removed.append(t)
        if not missing.shift(usage, own, -1):
            continue
        out.flush()
        missing = _Missing(tree, cq, requests, borrowing)
        if missing.none() and (topology is None or topology(removed)):
            return removed
    return []


def _from_segment(tree: QuotaTree, cq: str, needed: set[FlavorResource], requests: Mapping[FlavorResource, int],
                  segment: _Segment, node: Node, own: list[Target], borrowing: bool) -> list[Target]:
    """:func:`_remove_until_fit` of a cohort's other queues' victims (``segment``: :meth:`_Segment.without`, in
    order, none being evicted) and then the queue's ``own`` (in order, none being evicted), and :func:`minimal` of
    those taken: where the queue's own quota is short, no victim of another queue can make the request fit, and the
    search takes all of the segment's as a whole (the cohort scan found them once for every preemptor of the
    cohort), in a :class:`_Flat` rather than in the tree (the cohort is flat: the segment is of one)."""
    cohort, sums, total, root = segment.without(node)
    missing = _Missing(tree, cq, requests, borrowing)
    if not missing.over_nominal():
        with tree.trial() as trial:
            removed = _remove_until_fit(trial, tree, cq, needed, requests, [*cohort, *own], borrowing)
            return _put_back(trial, tree, cq, requests, removed, borrowing, True) if removed else []
    if root is None:
        flat = _Flat(tree)
        flat.add_all(sums, -1)
    else:
        flat = _Flat(tree, sums, root)  # the segment's victims out from the start
    out = _Aside(flat, -1)
    room = missing.room
    for fr in room:
        room[fr] -= total.get(fr, 0)
    removed = _take_own(flat, cq, requests, own, borrowing, out, missing, list(cohort))
    if not removed:
        return []
    if root is None:  # (some of the segment's victims are the request's queue's: walked one by one)
        return _put_back(flat, flat, cq, requests, removed, borrowing, True)
    return _put_back_segment(tree, flat, cq, requests, removed, borrowing, segment)


def _put_back_segment(tree: QuotaTree, flat: _Flat, cq: str, requests: Mapping[FlavorResource, int],
                      removed: list[Target], borrowing: bool, segment: _Segment) -> list[Target]:
    """:func:`minimal` of a segment's victims (all of them, none of the request's queue) and then the queue's own
    (at least one): the walk back over the queue's own, then over the run of the segment's that surely go back
    (:meth:`_Segment.put_back_at_once`) at once, the cohort's usage then worked out anew from the few victims still
    out, then one by one again. The walk puts back each victim with which the request still fits (the bound of
    :class:`_Missing` only spares reading the tree), so it would put back the run's too."""
    walk = _Walk(flat, flat, cq, requests, removed, borrowing)
    top = min(len(segment.valid), len(removed) - 1) - 1  # the last of the segment's walked back over
    walk.back_to(len(removed) - 2, top)
    walk.back.flush()  # (the queue's own put back so far: the usage apart is as the walk stands)
    first = segment.put_back_at_once({fr: wanted - flat.uncapped(cq, fr) for fr, wanted in requests.items()}, top)
    if first <= top:
        del removed[first:top + 1]
        still: dict[str, dict[FlavorResource, int]] = {}
        for t in removed:
            assert t.workload.admission is not None
            total = still.setdefault(t.workload.cluster_queue, {})
            for fr, amount in t.workload.admission.total.items():
                total[fr] = total.get(fr, 0) + amount
        walk.trial = walk.tree = anew = _Flat(tree)
        anew.add_all(still, -1)
        walk.back = _Aside(anew, 1)
        walk.missing = _Missing(anew, cq, requests, borrowing)
    walk.back_to(first - 1, -1)
    return removed


def _take_own(tree: _Reads, cq: str, requests: Mapping[FlavorResource, int], own: list[Target], borrowing: bool,
              out: _Aside, missing: _Missing, removed: list[Target]) -> list[Target]:
    """The rest of :func:`_remove_until_fit` once only the queue's own victims are left (each a victim: nothing
    taken out of the tree changes whether its own workloads may be)."""
    taken = out.by_cq
    for t in own:
        wl = t.workload
        assert wl.admission is not None
        usage = wl.admission.total
        total = taken.get(cq)
        if total is None:
            total = taken[cq] = {}
        for fr, amount in usage.items():
            total[fr] = total.get(fr, 0) + amount
        removed.append(t)
        if not missing.shift(usage, True, -1):
            continue
        out.flush()
        missing = _Missing(tree, cq, requests, borrowing)
        if missing.none():
            return removed
    return []


def _minimal_placed(trial: Trial, tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int],
                    removed: list[Target], borrowing: bool, topology: Callable[[list[Target]], bool]) -> list[Target]:
    """:func:`minimal` where the request is also placed on a topology: each victim but the last, latest first, is
    put back where the request still fits and is still placed without evicting it."""
    for i in range(len(removed) - 2, -1, -1):
        victim, usage = removed[i].workload.cluster_queue, _usage(removed[i])
        trial.add(victim, usage)
        if _Missing(tree, cq, requests, borrowing).none() and topology(removed[:i] + removed[i + 1:]):
            removed.pop(i)
        else:
            trial.remove(victim, usage)
    return removed


def minimal(trial: Trial, tree: QuotaTree, cq: str, requests: Mapping[FlavorResource, int],
            removed: list[Target], borrowing: bool, *,
            topology: Callable[[list[Target]], bool] | None = None, ending: bool = False) -> list[Target]:
    """Put back each victim but the last, latest first, where the request still fits without evicting it (and, with
    ``topology``, is still placed).

    While even an upper bound of what is missing (:class:`_Missing`) says it fits, victims are put back without
    reading the tree, and enter it together when it must be read. ``ending``: ``trial`` is undone right after, all of
    it: the victims put back since the tree was last read need not enter it first."""
    if topology is not None:
        return _minimal_placed(trial, tree, cq, requests, removed, borrowing, topology)
    return _put_back(trial, tree, cq, requests, removed, borrowing, ending)


def _put_back(trial: _Changes, tree: _Reads, cq: str, requests: Mapping[FlavorResource, int], removed: list[Target],
              borrowing: bool, ending: bool) -> list[Target]:
    """:func:`minimal` without a topology, in a :class:`Trial` of the tree or in a :class:`_Flat`."""
    walk = _Walk(trial, tree, cq, requests, removed, borrowing)
    walk.back_to(len(removed) - 2, -1)
    if not ending:
        walk.back.flush()
    return removed


class _Walk:
    """:func:`minimal`'s walk back over the victims taken: where it stands (what is missing, the usages refused, the
    victims put back since the tree was last read), so that it can go on from any victim."""

    __slots__ = ("back", "borrowing", "cq", "missing", "refused", "removed", "requests", "tree", "trial")

    def __init__(self, trial: _Changes, tree: _Reads, cq: str, requests: Mapping[FlavorResource, int],
                 removed: list[Target], borrowing: bool) -> None:
        self.trial, self.tree, self.cq, self.requests, self.removed = trial, tree, cq, requests, removed
        self.borrowing = borrowing
        self.back = _Aside(trial, 1)
        self.missing = _Missing(tree, cq, requests, borrowing)
        self.refused: dict[object, list[Mapping[FlavorResource, int]]] = {}
        """The usages found not to fit, by where they would have gone (:func:`_into`). Victims are only ever put back,
        so the room only shrinks: what did not fit never will in this search."""

    def back_to(self, start: int, stop: int) -> None:
        """Walk from victim ``start`` down to the one after ``stop``, each put back where the request still fits."""
        trial, tree, cq, requests, removed, borrowing = \
            self.trial, self.tree, self.cq, self.requests, self.removed, self.borrowing
        back, missing, refused = self.back, self.missing, self.refused
        returned = back.by_cq
        for i in range(start, stop, -1):  # _usage and the sums of _Aside inline, as in _remove_until_fit
            t = removed[i]
            wl = t.workload
            assert wl.admission is not None
            usage, victim = wl.admission.total, wl.cluster_queue
            if refused and _at_least_one_of(usage, refused.get(_into(tree, cq, victim))):
                continue  # no more room than when a smaller usage did not fit there: the victim stays out
            own = victim == cq
            fits = missing.shift(usage, own, 1)
            if not fits and own and missing.over_nominal():
                missing.shift(usage, own, -1)  # the queue's own quota is exact: it does not fit, the victim stays out
                continue
            total = returned.get(victim)
            if total is None:
                total = returned[victim] = {}
            for fr, amount in usage.items():
                total[fr] = total.get(fr, 0) + amount
            if fits:
                removed.pop(i)  # it fits even if putting the victim back took all its usage from the request's room
                continue
            back.flush()
            fresh = _Missing(tree, cq, requests, borrowing)
            if fresh.none():
                removed.pop(i)
                missing = fresh
            else:
                trial.remove(victim, usage)
                missing.shift(usage, own, -1)  # the tree is as it was: the bound it had still holds
                refused.setdefault(_into(tree, cq, victim), []).append(usage)
        self.missing = missing


def _into(tree: _Reads, cq: str, victim: str) -> object:
    """Where a victim of ``victim`` put back takes room from, as ``cq``'s request sees it: a queue other than ``cq``
    that keeps no guaranteed quota passes all of its usage up to its parent, and the request's room depends on the
    parent's usage alone, whichever child it came from (the parent, then); else the queue itself.

    The room is never more for more usage put back anywhere (every quantity of :meth:`QuotaTree.available` and of the
    own quota falls or stays as usage grows), so once a usage did not fit somewhere, one at least as large does not fit
    there either, as long as usage is only ever added (as :func:`minimal` adds it)."""
    node = tree.queues[victim]
    if victim != cq and not node.guarantees and node.parent is not None:
        return node.parent
    return victim


def _at_least_one_of(usage: Mapping[FlavorResource, int], smaller: list[Mapping[FlavorResource, int]] | None) -> bool:
    """Whether ``usage`` is at least as large as one of ``smaller``, resource by resource."""
    if not smaller:
        return False
    for other in smaller:
        for fr, amount in other.items():
            if usage.get(fr, 0) < amount:
                break
        else:
            return True
    return False


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
               own: list[Target], borrowing: bool) -> bool:
    """A necessary condition for an attempt to succeed, to spare the one-by-one search when it cannot (the
    order of ``candidates`` does not matter).

    Evicting a workload frees at most its usage; an attempt without borrowing must fit within the nominal
    quota once its own victims are gone; an attempt with borrowing cannot use victims that may only be
    reclaimed without borrowing. (The borrowing limit was checked when the candidates were collected.) ``own``: those
    of ``candidates`` in the queue itself (the others are all of other queues).
    """
    if not borrowing and _must_borrow(tree, cq, _after_own(tree, cq, requests, own)):
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
                 exclude: set[str] | None = None, usage: LocalQueueUsage | None = None,
                 search: Search | None = None) -> None:
        self.incoming, self.cq, self.tree, self.holders, self.exclude = incoming, cq, tree, holders, exclude
        self.usage = usage
        self.search: Search = search or find_targets
        self._last: tuple[FlavorResource, int, int, list[Target]] | None = None
        """(fr, val, the tree's version after the answer, the victims) of the last answer that found victims."""
        classical = self.search is find_targets or (
            isinstance(self.search, functools.partial) and self.search.func is find_targets)
        self.asked: list[tuple[FlavorResource, int]] | None = [] if classical else None
        """The questions asked so far, while each was answered from the incoming workload's queue alone
        (:func:`nobody_locally`); None once one was not, or where the search is not Kueue's classical one."""

    def __call__(self, fr: FlavorResource, val: int) -> tuple[Granular, int]:
        cq, tree = self.cq, self.tree
        if self.asked is not None:
            if nobody_locally(self.incoming, cq, tree, self.holders, {fr}, {fr: val}, self.exclude):
                self.asked.append((fr, val))
                return Granular.NO_CANDIDATES, 0
            self.asked = None
        targets = self.search(self.incoming, cq, tree, self.holders, {fr}, {fr: val}, self.exclude, self.usage)
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
    exclude: set[str] | None = None, usage: LocalQueueUsage | None = None, search: Search | None = None,
) -> PreemptionOracle:
    """The flavor assigner's question: can preemption free ``val`` of ``fr``, and how?"""
    return PreemptionOracle(incoming, cq, tree, holders, exclude, usage, search)
