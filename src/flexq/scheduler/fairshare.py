"""Kueue's fair sharing: the dominant resource share (DRS) of ClusterQueues and cohorts, and the order in which a
cycle considers its heads under it.

A node's share is, over the resources it borrows (uses above its subtree's quota, summed over flavors), the
largest ratio of what it borrows to what its parent cohort could lend of that resource (the parent's potential
available, summed over the tree's flavors), in thousandths, divided by the node's ``fairSharing.weight``
(Kueue's ``dominantResourceShare``). A root, or a node that borrows nothing, has share 0; a node of weight 0 that
borrows has an infinite share. Lower shares are served first and preempted from last.

:func:`fair_order` is Kueue's fair-sharing iterator: each pick runs a tournament over the cohort tree of a
remaining head, where every node nominates the head of its subtree whose admission leaves that node with the
lowest share (not borrowing on the head's resources first, then the share, then priority, then queue time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from flexq.scheduler.model import FlavorResource, Workload
from flexq.scheduler.quota import Node, QuotaTree

__all__ = ["NEGATIVE", "Share", "compare", "fair_order", "lendable", "share_of"]

_MAX_INT64: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Share:
    """A node's dominant resource share."""

    weight: float = 1.0
    ratio: float = 0.0
    """What it borrows of its dominant resource per thousand of what its parent could lend (unweighted)."""
    dominant: str = ""
    borrowing: bool = False
    borrowed: frozenset[FlavorResource] = frozenset()

    @property
    def infinite(self) -> bool:
        """Weight 0 and borrowing (Kueue's ``ZeroWeightBorrows``)."""
        return self.weight == 0 and self.borrowing

    @property
    def weighted(self) -> float:
        """Kueue's ``PreciseWeightedShare``."""
        if self.infinite:
            return math.inf
        if self.ratio == 0:
            return 0.0
        return self.ratio / self.weight

    @property
    def rounded(self) -> int:
        """What Kueue writes to ``status.fairSharing.weightedShare``: the weighted share rounded up."""
        return _MAX_INT64 if self.infinite else math.ceil(self.weighted)

    def borrowing_on(self, requests: Mapping[FlavorResource, int]) -> bool:
        """Whether it borrows any (flavor, resource) ``requests`` asks for."""
        return any(requests.get(fr, 0) > 0 for fr in self.borrowed)


NEGATIVE: Final = Share(ratio=-1.0)
"""Below every share: where comparisons start."""


def compare(a: Share, b: Share) -> int:
    """Kueue's ``CompareDRS``: -1 when ``a`` is the fairer to serve (lower), 1 when ``b`` is, 0 when equal."""
    if a.infinite and b.infinite:
        return (a.ratio > b.ratio) - (a.ratio < b.ratio)
    if a.infinite:
        return 1
    if b.infinite:
        return -1
    x, y = a.weighted, b.weighted
    return (x > y) - (x < y)


def lendable(tree: QuotaTree, cohort: Node) -> dict[str, int]:
    """What ``cohort`` could lend of each resource: its potential available of each of the tree's (flavor,
    resource), summed by resource (Kueue's ``calculateLendable``)."""
    known = tree.lendable_cache.get(cohort)
    if known is None:
        root = cohort
        while root.parent is not None:
            root = root.parent
        known = {}
        for fr in root.subtree:
            known[fr[1]] = known.get(fr[1], 0) + tree.potential_of(cohort, fr)
        tree.lendable_cache[cohort] = known
    return known


def share_of(tree: QuotaTree, node: Node) -> Share:
    """The dominant resource share of ``node`` (a ClusterQueue or a cohort) at its current usage."""
    if node.parent is None:
        return Share(node.weight)
    borrowed: dict[str, int] = {}
    frs: list[FlavorResource] = []
    for fr, quota in node.subtree.items():
        over = node.usage.get(fr, 0) - quota
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
            frs.append(fr)
    if not borrowed:
        return Share(node.weight)
    can_lend = lendable(tree, node.parent)
    ratio, dominant = 0.0, ""
    for resource, amount in borrowed.items():
        lend = can_lend.get(resource, 0)
        if lend > 0:
            r = amount * 1000.0 / lend
            if r > ratio or (r == ratio and resource < dominant):
                ratio, dominant = r, resource
    return Share(node.weight, ratio, dominant, True, frozenset(frs))


E = TypeVar("E")


def fair_order(tree: QuotaTree, entries: Sequence[E], workload: Callable[[E], Workload],
               usage: Callable[[E], Mapping[FlavorResource, int]]) -> Iterator[E]:
    """The entries (one head per ClusterQueue, given in the cycle's usual order), in the order Kueue's fair-sharing
    iterator pops them. Each pick reads the tree as it is then: what the entries before it took is counted."""
    left = {workload(e).cluster_queue: e for e in entries}
    order = [workload(e).cluster_queue for e in entries]
    while left:
        first = next(name for name in order if name in left)
        node = tree.queues[first]
        if node.parent is None:
            yield left.pop(first)
            continue
        root = tree.root(first)
        shares = _shares(tree, root, left, usage)
        best = _tournament(root, left, shares, workload, usage)
        assert best is not None
        yield left.pop(workload(best).cluster_queue)


def _shares(tree: QuotaTree, root: Node, left: Mapping[str, E],
            usage: Callable[[E], Mapping[FlavorResource, int]]) -> dict[tuple[str, str], Share]:
    """(parent cohort, ClusterQueue) -> the share of the ClusterQueue's ancestor below that cohort, once the
    ClusterQueue's head is admitted (Kueue's ``computeDRS``)."""
    shares: dict[tuple[str, str], Share] = {}
    for name, entry in left.items():
        if tree.root(name) is not root:
            continue
        node = tree.queues[name]
        with tree.trial() as trial:
            trial.add(name, usage(entry))
            share = share_of(tree, node)
            while node.parent is not None:
                shares[(node.parent.name, name)] = share
                node = node.parent
                share = share_of(tree, node)
    return shares


def _tournament(cohort: Node, left: Mapping[str, E], shares: Mapping[tuple[str, str], Share],
                workload: Callable[[E], Workload], usage: Callable[[E], Mapping[FlavorResource, int]]) -> E | None:
    """The head ``cohort`` nominates: the winner among its child cohorts' nominees and its ClusterQueues' heads."""
    candidates: list[E] = []
    for child in cohort.children:
        if child.is_cohort:
            won = _tournament(child, left, shares, workload, usage)
            if won is not None:
                candidates.append(won)
    candidates += [left[child.name] for child in cohort.children if not child.is_cohort and child.name in left]
    if not candidates:
        return None

    def key(e: E) -> tuple[bool, Share, int, float, str]:
        wl = workload(e)
        share = shares[(cohort.name, wl.cluster_queue)]
        return share.borrowing_on(usage(e)), share, -wl.priority, wl.queue_time, wl.uid or wl.key

    best, best_key = candidates[0], key(candidates[0])
    for current in candidates[1:]:
        current_key = key(current)
        if _less(current_key, best_key):
            best, best_key = current, current_key
    return best


def _less(a: tuple[bool, Share, int, float, str], b: tuple[bool, Share, int, float, str]) -> bool:
    """Kueue's tournament comparison: not borrowing (on the head's resources) first, the lower share, the higher
    priority, the earlier queue time (then, for a fixed order, the uid)."""
    if a[0] != b[0]:
        return not a[0]
    by_share = compare(a[1], b[1])
    if by_share:
        return by_share < 0
    return a[2:] < b[2:]
