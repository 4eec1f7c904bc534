"""Flavor assignment, as Kueue's flavor assigner decides it.

For each pod set, and within it each resource group the pod set asks of, the flavors are tried in the
ClusterQueue's order. All resources of a group in one pod set share a flavor; different pod sets may
get different flavors; quota taken by earlier pod sets of the same workload counts. A flavor is
refused for an untolerated taint or a node selector that contradicts its labels (only the label keys
the group's flavors define are compared). Otherwise each resource gets a mode, NoFit < Preempt < Fit,
and the flavor's mode is the lowest. ``flavorFungibility`` says whether to stop at a flavor that fits
only by borrowing or by preempting, or to try the next one and take the best.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from flexq.api.quantity import Quantity
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorResource,
    FlavorSpec,
    Mode,
    PodSet,
    PreemptionPolicy,
    ResourceGroup,
    Taint,
    Workload,
)
from flexq.scheduler.quota import QuotaTree

__all__ = ["Assignment", "FlavorTry", "PodSetResult", "assign_flavors", "format_amount"]

_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage"})


def format_amount(resource: str, milli: int) -> str:
    """An amount in thousandths, written as Kubernetes writes the resource (``1Gi``, ``500m``, ``16``)."""
    from fractions import Fraction

    return Quantity(Fraction(milli, 1000), binary=resource in _BINARY_RESOURCES).canonical()


@dataclass(frozen=True, slots=True)
class FlavorTry:
    """One flavor considered for one resource group of one pod set, and what came of it."""

    flavor: str
    mode: Mode
    borrow: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PodSetResult:
    name: str
    count: int
    flavors: Mapping[str, str]
    """resource -> flavor, for the resources assigned"""
    mode: Mode
    borrow: bool
    usage: Mapping[FlavorResource, int]
    tried: tuple[FlavorTry, ...]
    reasons: tuple[str, ...]

    def message(self) -> str:
        return f"couldn't assign flavors to pod set {self.name}: {', '.join(self.reasons)}"


@dataclass(frozen=True, slots=True)
class Assignment:
    podsets: tuple[PodSetResult, ...]

    @property
    def mode(self) -> Mode:
        return min((p.mode for p in self.podsets), default=Mode.FIT)

    @property
    def borrow(self) -> bool:
        return any(p.borrow for p in self.podsets)

    def usage(self) -> dict[FlavorResource, int]:
        total: dict[FlavorResource, int] = {}
        for ps in self.podsets:
            for fr, amount in ps.usage.items():
                total[fr] = total.get(fr, 0) + amount
        return total

    def message(self) -> str:
        """Why the workload does not simply fit (empty when it does), in Kueue's words."""
        return "; ".join(p.message() for p in self.podsets if p.mode is not Mode.FIT)

    def preempt_usage(self) -> dict[FlavorResource, int]:
        """The usage of the pod sets that need preemption (what has to be freed)."""
        total: dict[FlavorResource, int] = {}
        for ps in self.podsets:
            if ps.mode is Mode.PREEMPT:
                for fr, amount in ps.usage.items():
                    total[fr] = total.get(fr, 0) + amount
        return total


def _untolerated(taints: tuple[Taint, ...], podset: PodSet, flavor: FlavorSpec) -> Taint | None:
    tolerations = (*podset.tolerations, *flavor.tolerations)
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def _label_keys(group: ResourceGroup, flavors: Mapping[str, FlavorSpec]) -> set[str]:
    return {key for name in group.flavors if name in flavors for key in flavors[name].node_labels}


def _selector_matches(podset: PodSet, flavor: FlavorSpec, keys: set[str]) -> bool:
    return all(flavor.node_labels.get(k) == v for k, v in podset.node_selector.items() if k in keys)


def _fits(cq: ClusterQueueSpec, tree: QuotaTree, fr: FlavorResource, val: int, previous: int
          ) -> tuple[Mode, bool, str]:
    """Kueue's ``fitsResourceQuota`` for one (flavor, resource): mode, borrowing, reason."""
    flavor, resource = fr
    capacity = tree.potential(cq.name, fr)
    if val > capacity:
        if previous:
            return Mode.NO_FIT, False, (
                f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets requests "
                f"({format_amount(resource, previous)}) + current podset request "
                f"({format_amount(resource, val - previous)}) > maximum capacity ({format_amount(resource, capacity)})")
        return Mode.NO_FIT, False, (f"insufficient quota for {resource} in flavor {flavor}, request > maximum "
                                    f"capacity ({format_amount(resource, capacity)})")
    borrow = tree.borrowing(cq.name, fr, val)
    available = tree.available(cq.name, fr)
    if val <= available:
        return Mode.FIT, borrow, ""
    nominal = tree.nominal(cq.name, fr)
    reclaim = cq.cohort is not None and cq.reclaim_within_cohort is not PreemptionPolicy.NEVER and val <= nominal
    within = cq.within_cluster_queue is not PreemptionPolicy.NEVER and val <= nominal
    while_borrowing = cq.cohort is not None and cq.borrow_within_cohort is not PreemptionPolicy.NEVER
    reason = (f"insufficient unused quota for {resource} in flavor {flavor}, "
              f"{format_amount(resource, val - max(available, 0))} more needed")
    if reclaim or within or while_borrowing:
        return Mode.PREEMPT, borrow, reason
    return Mode.NO_FIT, borrow, reason


def _score(attempt: FlavorTry, prefer_preemption: bool) -> tuple[int, int]:
    if prefer_preemption:
        return (0 if attempt.borrow else 1, int(attempt.mode))
    return (int(attempt.mode), 0 if attempt.borrow else 1)


def _requests(podset: PodSet, cq: ClusterQueueSpec) -> dict[str, int]:
    requests = {r: v for r, v in podset.requests.items() if v > 0}
    if cq.group_of("pods") is not None:
        requests["pods"] = 1000
    return requests


def assign_flavors(
    workload: Workload, cq: ClusterQueueSpec, tree: QuotaTree, flavors: Mapping[str, FlavorSpec],
) -> Assignment:
    """Choose a flavor for every resource group of every pod set of ``workload`` in ``cq``."""
    assigned: dict[FlavorResource, int] = {}
    results: list[PodSetResult] = []
    for podset in workload.podsets:
        per_pod = _requests(podset, cq)
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        usage: dict[FlavorResource, int] = {}
        tried: list[FlavorTry] = []
        mode, borrow = Mode.FIT, False
        groups: list[ResourceGroup] = []
        for resource in per_pod:
            group = cq.group_of(resource)
            if group is None:
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                mode = Mode.NO_FIT
            elif group not in groups:
                groups.append(group)
        for group in groups:
            wanted = [r for r in group.covered if r in per_pod]
            keys = _label_keys(group, flavors)
            best: FlavorTry | None = None
            group_reasons: list[str] = []
            for name in group.flavors:
                spec = flavors.get(name)
                if spec is None:
                    attempt = FlavorTry(name, Mode.NO_FIT, False, (f"flavor {name} not found",))
                elif (taint := _untolerated(spec.node_taints, podset, spec)) is not None:
                    attempt = FlavorTry(name, Mode.NO_FIT, False, (
                        f"untolerated taint {{{taint.key}: {taint.value}}} in flavor {name}"
                        if taint.value else f"untolerated taint {{{taint.key}}} in flavor {name}",))
                elif not _selector_matches(podset, spec, keys):
                    attempt = FlavorTry(name, Mode.NO_FIT, False, (f"flavor {name} doesn't match node affinity",))
                else:
                    flavor_mode, flavor_borrow, why = Mode.FIT, False, []
                    for resource in wanted:
                        fr = (name, resource)
                        previous = assigned.get(fr, 0)
                        res_mode, res_borrow, reason = _fits(cq, tree, fr, podset.count * per_pod[resource] + previous,
                                                             previous)
                        flavor_mode = min(flavor_mode, res_mode)
                        flavor_borrow = flavor_borrow or res_borrow
                        if reason:
                            why.append(reason)
                    attempt = FlavorTry(name, flavor_mode, flavor_borrow, tuple(why))
                tried.append(attempt)
                group_reasons.extend(attempt.reasons)
                if attempt.mode is Mode.NO_FIT:
                    continue
                if best is None or _score(attempt, cq.fungibility.prefer_preemption_over_borrowing) > _score(
                        best, cq.fungibility.prefer_preemption_over_borrowing):
                    best = attempt
                if attempt.mode is Mode.FIT and not attempt.borrow:
                    break
                if attempt.mode is Mode.FIT and cq.fungibility.stop_when_borrowing:
                    break
                if attempt.mode is Mode.PREEMPT and cq.fungibility.stop_when_preempting:
                    break
            if best is None:
                mode = Mode.NO_FIT
                reasons.extend(group_reasons)
                continue
            if best.mode is not Mode.FIT:
                reasons.extend(best.reasons)
            mode = min(mode, best.mode)
            borrow = borrow or best.borrow
            for resource in wanted:
                fr = (best.flavor, resource)
                chosen[resource] = best.flavor
                amount = podset.count * per_pod[resource]
                usage[fr] = usage.get(fr, 0) + amount
                assigned[fr] = assigned.get(fr, 0) + amount
        results.append(PodSetResult(podset.name, podset.count, chosen, mode, borrow, usage, tuple(tried),
                                    tuple(reasons)))
    return Assignment(tuple(results))
