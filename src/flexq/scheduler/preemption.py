"""Preemption, as Kueue chooses victims.

Candidates are admitted workloads that hold quota in a (flavor, resource) the incoming workload needs
to free: in its own ClusterQueue under ``withinClusterQueue``; in other ClusterQueues of its cohort
tree, while they borrow, under ``reclaimWithinCohort`` (or ``borrowWithinCohort`` when the incoming
workload itself borrows). They are ordered as Kueue orders them: other queues' workloads first, then
lower priority first, then the most recently admitted first. Victims are removed in that order until
the incoming workload fits; then each one but the last is put back if the workload still fits without
removing it, which leaves a minimal set.
"""

from __future__ import annotations

from collections.abc import Iterable

from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.model import ClusterQueueSpec, FlavorResource, PreemptionPolicy, Workload
from flexq.scheduler.quota import QuotaTree

__all__ = ["find_victims"]


def _fits(tree: QuotaTree, cq: str, usage: dict[FlavorResource, int]) -> bool:
    return all(amount <= tree.available(cq, fr) for fr, amount in usage.items())


def _within_allowed(policy: PreemptionPolicy, incoming: Workload, other: Workload) -> bool:
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return other.priority < incoming.priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return other.priority < incoming.priority or (
            other.priority == incoming.priority and other.queue_time > incoming.queue_time)
    return False


def _cohort_allowed(cq: ClusterQueueSpec, incoming: Workload, other: Workload, borrowing: bool) -> bool:
    if cq.reclaim_within_cohort is PreemptionPolicy.ANY:
        return True
    if cq.reclaim_within_cohort is PreemptionPolicy.LOWER_PRIORITY and other.priority < incoming.priority:
        return True
    if borrowing and cq.borrow_within_cohort is PreemptionPolicy.LOWER_PRIORITY and other.priority < incoming.priority:
        threshold = cq.borrow_within_cohort_threshold
        return threshold is None or other.priority <= threshold
    return False


def _order_key(incoming_cq: str, wl: Workload) -> tuple[int, int, float, str]:
    reserved = wl.reserved_at if wl.reserved_at is not None else 0.0
    return (1 if wl.cluster_queue == incoming_cq else 0, wl.priority, -reserved, wl.uid or wl.key)


def find_victims(
    incoming: Workload, assignment: Assignment, cq: ClusterQueueSpec, tree: QuotaTree,
    holders: Iterable[Workload],
) -> list[Workload] | None:
    """The workloads to evict so that ``incoming`` fits as assigned, or None if no set does."""
    needed = set(assignment.preempt_usage())
    usage = assignment.usage()
    if not needed:
        return None
    borrowing = assignment.borrow
    candidates: list[Workload] = []
    for other in holders:
        if other is incoming or other.admission is None:
            continue
        if not needed.intersection(other.admission.usage()):
            continue
        if other.cluster_queue == cq.name:
            if _within_allowed(cq.within_cluster_queue, incoming, other):
                candidates.append(other)
        elif cq.cohort is not None and other.cluster_queue in tree.queues and tree.same_tree(
                cq.name, other.cluster_queue):
            if _cohort_allowed(cq, incoming, other, borrowing):
                candidates.append(other)
    candidates.sort(key=lambda wl: _order_key(cq.name, wl))
    removed: list[Workload] = []
    fitted = False
    try:
        for cand in candidates:
            assert cand.admission is not None
            if cand.cluster_queue != cq.name and not any(
                    tree.borrowing(cand.cluster_queue, fr) for fr in needed if fr in cand.admission.usage()):
                continue  # that queue no longer borrows what we need: reclaiming stops there
            tree.remove(cand.cluster_queue, cand.admission.usage())
            removed.append(cand)
            if _fits(tree, cq.name, usage):
                fitted = True
                break
        if not fitted:
            return None
        for cand in list(reversed(removed[:-1])):
            assert cand.admission is not None
            tree.add(cand.cluster_queue, cand.admission.usage())
            if _fits(tree, cq.name, usage):
                removed.remove(cand)
            else:
                tree.remove(cand.cluster_queue, cand.admission.usage())
        return list(removed)
    finally:
        for cand in removed:
            assert cand.admission is not None
            tree.add(cand.cluster_queue, cand.admission.usage())
