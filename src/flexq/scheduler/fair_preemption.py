"""Preemption under Kueue's fair sharing (its ``fairPreemptions``).

Candidates hold quota in a (flavor, resource) the incoming workload needs: in its own ClusterQueue under
``withinClusterQueue``, and, under ``reclaimWithinCohort``, in every other ClusterQueue of its cohort tree that
borrows one of those resources. With the incoming workload counted in its queue, target queues are taken in turn,
each time walking down from the root to the child with the highest share (:class:`_Ordering`): the incoming
queue's own candidates go at once; another queue's go while its share stays above the incoming queue's
(the configured strategies, compared at the two queues' ancestors just below their lowest common cohort):

- ``LessThanOrEqualToFinalShare``: the preemptor's share with its workload is at most the target's without the
  candidate;
- ``LessThanInitialShare``: the preemptor's share with its workload is below the target's as it is.

The second strategy only retries the candidates the first passed over. A preemptor queue that stays within its
nominal quota on the contested resources reclaims from the borrowing queues whatever the shares (Kueue's
``FairSharingPreemptWithinNominal``, on by default). Victims not needed in the end are put back, latest first.

Where the incoming workload's pod sets are placed on a topology, each "it fits now" also asks that they are placed
with the victims gone, and so does putting a victim back (Kueue's ``workloadFitsForFairSharing`` and
``fillBackWorkloads`` both go through its ``workloadFits``, which places them): fair sharing preempts for a
placement as the classical search does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final

from flexq.scheduler.fairshare import NEGATIVE, Share, compare, share_of
from flexq.scheduler.model import ClusterQueueSpec, FlavorResource, PreemptionPolicy, Workload
from flexq.scheduler.preemption import (
    Holders,
    LocalQueueUsage,
    Search,
    Target,
    Variant,
    find_targets,
    fits_with_borrowing,
    minimal,
    policy_allows,
    usage_first,
)
from flexq.scheduler.quota import Node, QuotaTree, Trial

__all__ = ["LESS_THAN_INITIAL_SHARE", "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE", "STRATEGIES", "fair_targets", "search_for"]

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: Final = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE: Final = "LessThanInitialShare"
STRATEGIES: Final = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
"""Kueue's default strategies, in its order."""


def _uses(wl: Workload, needed: set[FlavorResource]) -> bool:
    return wl.admission is not None and not needed.isdisjoint(wl.admission.usage())


def _usage(wl: Workload) -> Mapping[FlavorResource, int]:
    assert wl.admission is not None
    return wl.admission.usage()


def _order(wl: Workload, cq: str) -> tuple[bool, bool, int, float, str]:
    """Kueue's ``CandidatesOrdering``: those being evicted, then other queues' before the preemptor's own, lower
    priority, the most recently admitted."""
    return (not wl.evicting, wl.cluster_queue == cq, wl.priority,
            -(wl.reserved_at if wl.reserved_at is not None else 0.0), wl.uid or wl.key)


def _candidates(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
                needed: set[FlavorResource], exclude: set[str], usage: LocalQueueUsage | None) -> list[Workload]:
    found: list[Workload] = []
    if cq.within_cluster_queue is not PreemptionPolicy.NEVER:
        found += [w for w in holders.get(cq.name, {}).values()
                  if w is not incoming and policy_allows(cq.within_cluster_queue, incoming, w)]
    if tree.queues[cq.name].parent is not None and cq.reclaim_within_cohort is not PreemptionPolicy.NEVER:
        for name in tree.members(cq.name):
            if name == cq.name or not any(tree.borrowing(name, fr) for fr in needed):
                continue
            found += [w for w in holders.get(name, {}).values()
                      if policy_allows(cq.reclaim_within_cohort, incoming, w)]
    found = [w for w in found if w.key not in exclude and _uses(w, needed)]
    if usage is None:
        return sorted(found, key=lambda w: _order(w, cq.name))
    return sorted(found, key=functools.cmp_to_key(functools.partial(_compare, cq=cq.name, usage=usage)))


def _compare(a: Workload, b: Workload, cq: str, usage: LocalQueueUsage) -> int:
    """Kueue's ``CandidatesOrdering`` with admission fair sharing: after those being evicted and other queues'
    first, of two workloads of one ClusterQueue from different LocalQueues, that of the LocalQueue that used more
    first; then as :func:`_order`."""
    ka, kb = _order(a, cq), _order(b, cq)
    if ka[:2] != kb[:2]:
        return -1 if ka[:2] < kb[:2] else 1
    return usage_first(a, b, usage) or (ka > kb) - (ka < kb)


class _Ordering:
    """Kueue's ``TargetClusterQueueOrdering``: the ClusterQueues to take candidates from, in turn."""

    def __init__(self, tree: QuotaTree, preemptor: str, candidates: list[Workload]) -> None:
        self.tree = tree
        self.preemptor = tree.queues[preemptor]
        self.ancestors: set[Node] = set()
        node = self.preemptor.parent
        while node is not None:
            self.ancestors.add(node)
            node = node.parent
        self.left: dict[str, list[Workload]] = {}
        for wl in candidates:
            self.left.setdefault(wl.cluster_queue, []).append(wl)
        self.pruned: set[Node] = set()

    def __iter__(self) -> Iterator[Node]:
        if self.preemptor.parent is None:
            while self.preemptor not in self.pruned and self.left.get(self.preemptor.name):
                yield self.preemptor
            return
        root = self.tree.root(self.preemptor.name)
        while root not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def drop(self, node: Node) -> None:
        self.pruned.add(node)

    def pop(self, node: Node) -> Workload:
        return self.left[node.name].pop(0)

    def has(self, node: Node) -> bool:
        return bool(self.left.get(node.name))

    def _next(self, cohort: Node) -> Node | None:
        """Down from ``cohort`` to the child with the highest share (None: only pruned some nodes)."""
        best_cq: Node | None = None
        best_cq_share = NEGATIVE
        best_cohort: Node | None = None
        best_cohort_share = NEGATIVE
        for child in cohort.children:
            if child in self.pruned:
                continue
            share = share_of(self.tree, child)
            if child.is_cohort:
                if not share.borrowing and child not in self.ancestors:
                    self.pruned.add(child)
                elif compare(share, best_cohort_share) >= 0:
                    best_cohort, best_cohort_share = child, share
            elif (not share.borrowing and child is not self.preemptor) or not self.has(child):
                self.pruned.add(child)
            elif best_cq is not None and compare(share, best_cq_share) == 0:
                if _order(self.left[child.name][0], self.preemptor.name) < _order(
                        self.left[best_cq.name][0], self.preemptor.name):
                    best_cq = child
            elif compare(share, best_cq_share) > 0:
                best_cq, best_cq_share = child, share
        if best_cohort is None and best_cq is None:
            self.pruned.add(cohort)
            return None
        if best_cohort is not None and compare(best_cohort_share, best_cq_share) >= 0:
            return self._next(best_cohort)
        return best_cq

    def shares(self, target: Node) -> tuple[Share, Share]:
        """(the preemptor's share, the target's share), each of its ancestor just below their lowest common
        cohort (Kueue's almost-LCAs)."""
        lca = target.parent
        while lca is not None and lca not in self.ancestors:
            lca = lca.parent
        assert lca is not None
        return share_of(self.tree, _below(self.preemptor, lca)), share_of(self.tree, _below(target, lca))


def _below(node: Node, lca: Node) -> Node:
    while node.parent is not lca:
        assert node.parent is not None
        node = node.parent
    return node


Placed = Callable[[Sequence[Target]], bool]
"""Whether the incoming workload's pod sets are placed on their topology with the given victims gone
(:func:`flexq.scheduler.tas.topology_check`)."""


def fair_targets(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
                 needed: set[FlavorResource], requests: Mapping[FlavorResource, int], strategies: tuple[str, ...],
                 exclude: set[str] | None = None, usage: LocalQueueUsage | None = None,
                 topology: Placed | None = None) -> list[Target]:
    """The victims whose eviction lets ``incoming`` take ``requests`` in ``cq`` under fair sharing (and, with
    ``topology``, be placed); empty if none suffice. ``usage``: admission fair sharing's LocalQueue usage, where it
    orders candidates."""
    if not needed:
        return []
    candidates = _candidates(incoming, cq, tree, holders, needed, exclude or set(), usage)
    if not candidates:
        return []
    with tree.trial() as trial:
        trial.add(cq.name, requests)  # the shares count the incoming workload
        run = _Run(tree, trial, cq.name, needed, requests, topology)
        fits, retry = run.first(candidates, strategies[0])
        if not fits and len(strategies) > 1:
            fits = run.second(retry)
        if not fits:
            return []
        trial.remove(cq.name, requests)
        return minimal(trial, tree, cq.name, requests, run.targets, True, topology=topology)


def search_for(strategies: tuple[str, ...] | None) -> Search:
    """How victims are chosen: fair sharing's search with ``strategies``, or, without fair sharing (None),
    Kueue's classical one."""
    if strategies is None:
        return find_targets

    def search(incoming: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
               needed: set[FlavorResource], requests: Mapping[FlavorResource, int],
               exclude: set[str] | None = None, usage: LocalQueueUsage | None = None, *,
               topology: Placed | None = None) -> list[Target]:
        return fair_targets(incoming, cq, tree, holders, needed, requests, strategies, exclude, usage, topology)

    return search


class _Run:
    """One search for victims: the targets taken so far, out of the tree (in ``trial``)."""

    def __init__(self, tree: QuotaTree, trial: Trial, cq: str, needed: set[FlavorResource],
                 requests: Mapping[FlavorResource, int], topology: Placed | None = None) -> None:
        self.tree, self.trial, self.cq, self.needed, self.requests = tree, trial, cq, needed, requests
        self.topology = topology
        self.targets: list[Target] = []

    def _take(self, wl: Workload, variant: Variant) -> bool:
        """Evict ``wl``; whether the incoming workload fits now (and is placed, where it asks a topology)."""
        self.trial.remove(wl.cluster_queue, _usage(wl))
        self.targets.append(Target(wl, variant))
        with self.tree.without([(self.cq, self.requests)]):
            fits = fits_with_borrowing(self.tree, self.cq, self.requests)
        return fits and (self.topology is None or self.topology(self.targets))

    def first(self, candidates: list[Workload], strategy: str) -> tuple[bool, list[Workload]]:
        ordering = _Ordering(self.tree, self.cq, candidates)
        retry: list[Workload] = []
        within_nominal = not any(self.tree.borrowing(self.cq, fr) for fr in self.needed)
        for target in ordering:
            if target is ordering.preemptor:
                if self._take(ordering.pop(target), Variant.WITHIN_CLUSTER_QUEUE):
                    return True, []
                continue
            if within_nominal:
                if self._take(ordering.pop(target), Variant.RECLAIM_WITHOUT_BORROWING):
                    return True, []
                continue
            preemptor_new, target_old = ordering.shares(target)
            if preemptor_new.infinite and not target_old.infinite:
                while ordering.has(target):
                    retry.append(ordering.pop(target))
                continue
            while ordering.has(target):
                wl = ordering.pop(target)
                if self._passes(strategy, ordering, target, wl, preemptor_new, target_old):
                    if self._take(wl, Variant.FAIR_SHARING):
                        return True, []
                    break  # the shares changed: the next target may be another queue
                retry.append(wl)
        return False, retry

    def _passes(self, strategy: str, ordering: _Ordering, target: Node, wl: Workload, preemptor_new: Share,
                target_old: Share) -> bool:
        if strategy == LESS_THAN_INITIAL_SHARE:
            return compare(preemptor_new, target_old) < 0
        with self.tree.without([(wl.cluster_queue, _usage(wl))]):
            _, target_new = ordering.shares(target)
        return compare(preemptor_new, target_new) <= 0

    def second(self, retry: list[Workload]) -> bool:
        """Rule S2-b over the candidates the first strategy passed over: at most one victim per queue."""
        ordering = _Ordering(self.tree, self.cq, retry)
        for target in ordering:
            preemptor_new, target_old = ordering.shares(target)
            wl = ordering.pop(target)
            if compare(preemptor_new, target_old) < 0 and self._take(wl, Variant.FAIR_SHARING):
                return True
            ordering.drop(target)
        return False
