"""Workload slices: elastic jobs that grow and shrink while they run (Kueue's ElasticJobsViaWorkloadSlices).

A job that scales up gets a new Workload, a *slice* with the job's new pod counts, that replaces the one
admitted (:attr:`~flexq.scheduler.model.Workload.replaces`). The slice queues like any workload, but it is
nominated with the old slice's usage taken out of the quota tree, so it needs quota only for what it adds,
and on the old slice's flavors (flavors are sticky: a slice that does not fit there waits, even if another
flavor has room). When it is admitted, the old slice is finished (``WorkloadSliceReplaced``) in the same
step, its usage released and the new slice's reserved; until then the old slice runs undisturbed. An old
slice evicted while its replacement waits (preempted, its nodes lost, a check's Retry) is finished too rather
than queued again, and the replacement, standing alone, then needs quota for all its pods. A slice may
preempt other workloads to grow, as its ClusterQueue's preemption policy allows (never the slice it replaces):
it waits for them to be evicted, then replaces the old slice. A job that scales down keeps its workload: the
counts shrink in place and the quota they held is freed at once (:func:`shrunk`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from flexq.scheduler.flavorassigner import Assignment, PodSetResult, assign_flavors
from flexq.scheduler.model import Admission, ClusterQueueSpec, FlavorSpec, Granular, Mode, Workload
from flexq.scheduler.preemption import Holders, LocalQueueUsage, Search, Target, find_targets, oracle_for
from flexq.scheduler.quota import QuotaTree

__all__ = ["REPLACED", "assign_slice", "replaced_slice", "shrunk", "slice_targets"]

REPLACED = "WorkloadSliceReplaced"
"""The reason a replaced slice is finished with."""


def replaced_slice(workloads: Mapping[str, Workload], wl: Workload) -> Workload | None:
    """The slice ``wl`` replaces, while that one still holds quota in ``wl``'s ClusterQueue (else ``None``: a
    slice whose predecessor is gone is admitted as a workload of its own)."""
    if not wl.replaces:
        return None
    old = workloads.get(wl.replaces)
    if old is None or old.admission is None or old.admission.cluster_queue != wl.cluster_queue:
        return None
    return old


def _sticky(cq: ClusterQueueSpec, admission: Admission) -> ClusterQueueSpec:
    """``cq`` with each resource group offering only the flavors the old slice was given in it."""
    used = {f for ps in admission.podsets for f in ps.flavors.values()}
    groups = []
    for group in cq.groups:
        kept = tuple(f for f in group.flavors if f in used)
        groups.append(dataclasses.replace(group, flavors=kept) if kept else group)
    return dataclasses.replace(cq, groups=tuple(groups))


def assign_slice(wl: Workload, old: Workload, cq: ClusterQueueSpec, tree: QuotaTree,
                 flavors: Mapping[str, FlavorSpec], holders: Holders, search: Search = find_targets,
                 usage: LocalQueueUsage | None = None, *, fair: bool = False) -> Assignment:
    """Flavors for slice ``wl`` on ``old``'s flavors, with ``old``'s usage out of the tree (restored after).

    The slice may preempt others of ``holders`` (the workloads holding quota, per ClusterQueue) as the
    ClusterQueue's policy allows, never ``old``: found by ``search`` (Kueue's classical one, or fair sharing's with
    ``fair``, as for any workload). A flavor change is never a fit: the slice waits for room on its flavors.
    """
    assert old.admission is not None
    with tree.without([(old.admission.cluster_queue, old.admission.usage())]):
        oracle = oracle_for(wl, cq, tree, holders, exclude={old.key}, usage=usage, search=search)
        assignment = assign_flavors(wl, _sticky(cq, old.admission), tree, flavors, oracle, fair=fair)
    before = {ps.name: ps.flavors for ps in old.admission.podsets}
    results = []
    for ps in assignment.podsets:
        changed = sorted((r, before[ps.name][r], f) for r, f in ps.flavors.items()
                         if ps.name in before and r in before[ps.name] and before[ps.name][r] != f)
        if changed:
            reasons = tuple(f"couldn't change flavor from: {a} to: {b}" for _, a, b in changed)
            ps = PodSetResult(ps.name, ps.count, {}, Granular.NO_FIT, 0, {}, ps.tried, reasons)
        results.append(ps)
    out = Assignment(tuple(results), assignment.complete)
    if out.granular is Granular.FIT or out.mode is Mode.PREEMPT:
        return out
    return Assignment(out.podsets, complete=False)


def slice_targets(wl: Workload, old: Workload, cq: ClusterQueueSpec, tree: QuotaTree, holders: Holders,
                  assignment: Assignment, search: Search = find_targets,
                  usage: LocalQueueUsage | None = None) -> list[Target]:
    """The workloads slice ``wl`` would preempt for ``assignment``: found by ``search`` with ``old``'s usage out of
    the tree, and never ``old`` itself (its usage is the slice's own)."""
    assert old.admission is not None
    with tree.without([(old.admission.cluster_queue, old.admission.usage())]):
        return search(wl, cq, tree, holders, assignment.preempt_resources(), assignment.usage(), {old.key}, usage)


def shrunk(admission: Admission, counts: Mapping[str, int]) -> Admission:
    """``admission`` with pod sets scaled down to ``counts`` (pod set -> pods); usage is per pod, so it scales.

    Raises ValueError for a count above the admitted one: growing needs a new slice."""
    podsets = []
    for ps in admission.podsets:
        count = counts.get(ps.name, ps.count)
        if count > ps.count:
            raise ValueError(f"pod set {ps.name}: {count} pods is more than the {ps.count} admitted; growing needs "
                             "a new workload slice")
        usage = {fr: amount * count // ps.count for fr, amount in ps.usage.items()} if ps.count else dict(ps.usage)
        podsets.append(dataclasses.replace(ps, flavors=dict(ps.flavors), usage=usage, count=count))
    return Admission.of(admission.cluster_queue, tuple(podsets))
