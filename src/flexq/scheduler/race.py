"""Concurrent admission: one workload, one *variant* per flavor, all racing; the first that can start wins.

Kueue's Concurrent Admission (``ClusterQueue.spec.concurrentAdmissionPolicy``, alpha) makes a *parent*
workload and one variant per flavor of the ClusterQueue's only resource group, each limited to its flavor.
The variants queue, reserve quota and run their admission checks (a ProvisioningRequest each) independently;
when one is admitted the parent takes its admission and the others are withdrawn, except, under
``TryPreferredFlavors``, those of more preferred flavors (down to ``lastAcceptableFlavorName``): they go on,
and when one of them is admitted the workload *migrates* to it (stopped where it runs, started there).

flexq's own policy races too, with no ``concurrentAdmissionPolicy`` written (``implicit``): only the flavors
that every pod set could use race (the guide's ``default-cpu``, with no TPU quota, is not one: it stays
open to the Ray head in every variant), a workload races only when two or more such flavors exist, the
winner is the variant whose pods *start* first when capacity is modelled, and a started workload does not
migrate. In both, a pod set a variant's flavor could never hold (no quota for a resource it asks) may use
the ClusterQueue's other such flavors, so the guide's head stays on ``default-cpu``; Kueue-compatible
racing limits a variant to its one flavor, as Kueue does.

This module holds the pure parts: which flavors race, what a variant may take, variant names.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Final

from flexq.scheduler.domains import tas_implied
from flexq.scheduler.flavorassigner import compatible
from flexq.scheduler.model import ClusterQueueSpec, ConcurrentPolicy, FlavorSpec, Workload
from flexq.scheduler.quota import QuotaTree

__all__ = ["ALLOWED_FLAVORS", "IMPLICIT", "PARENT_LABEL", "VariantPlan", "plan_variants", "rank", "variant_name"]

PARENT_LABEL: Final = "kueue.x-k8s.io/concurrent-admission-parent"
ALLOWED_FLAVORS: Final = "kueue.x-k8s.io/workload-allowed-resource-flavors"
"""The annotation naming a variant's flavor, as Kueue sets it."""
IMPLICIT: Final = ConcurrentPolicy(migrate=False, implicit=True)
"""flexq's racing policy for ClusterQueues that name none."""


@dataclasses.dataclass(frozen=True, slots=True)
class VariantPlan:
    flavor: str
    allowed: tuple[tuple[str, frozenset[str]], ...]
    """By pod set: the flavors it may take."""


def _podset_flavors(wl: Workload, cq: ClusterQueueSpec, tree: QuotaTree, flavors: Mapping[str, FlavorSpec],
                    index: int) -> frozenset[str]:
    """The flavors of ``cq``'s group that could ever hold pod set ``index``: its taints tolerated, its selectors
    matched, and as much quota as it asks at the most the flavor could have."""
    podset = wl.podsets[index]
    group = cq.groups[0]
    out = []
    for name in group.flavors:
        spec = flavors.get(name)
        if spec is None or not compatible(podset, spec, tas_implied(cq, flavors)):
            continue
        if all(podset.count * amount <= tree.potential(cq.name, (name, resource))
               for resource, amount in podset.requests.items() if amount > 0 and resource in group.covered):
            out.append(name)
    return frozenset(out)


def plan_variants(wl: Workload, cq: ClusterQueueSpec, policy: ConcurrentPolicy, tree: QuotaTree,
                  flavors: Mapping[str, FlavorSpec], strict: bool) -> list[VariantPlan]:
    """The variants ``wl`` races with in ``cq`` (empty: it does not race), most preferred first.

    The racing flavors are those of the pod sets that more than one flavor could hold (the guide's TPU
    workers: ``on-demand`` and ``dws``). ``strict``: Kueue's rule, a variant takes its one flavor only.
    Otherwise its pod sets may also take the flavors that do not race (the guide's Ray head, on
    ``default-cpu``)."""
    if len(cq.groups) != 1 or wl.parent or wl.replaces or wl.allowed is not None:
        return []
    group = cq.groups[0]
    options = [_podset_flavors(wl, cq, tree, flavors, i) for i in range(len(wl.podsets))]
    racing = frozenset().union(*(o for o in options if len(o) > 1))
    shared = frozenset(group.flavors) - racing
    plans = []
    for name in group.flavors:
        # A pod set takes the variant's flavor; one that flavor could never hold takes the flavors that do not race
        # (and could hold it), except under Kueue's rule.
        allowed = tuple((p.name, frozenset({name}) if strict or name in o else o & shared)
                        for p, o in zip(wl.podsets, options, strict=True))
        viable = all(flavors for _p, flavors in allowed)
        if policy.implicit and not (name in racing and viable):
            continue
        plans.append(VariantPlan(name, allowed))
    if policy.implicit and len(plans) < 2:
        return []
    return plans


def rank(cq: ClusterQueueSpec, flavor: str) -> int:
    """A flavor's preference in ``cq``: its position in the first resource group (lower is preferred)."""
    flavors = cq.groups[0].flavors if cq.groups else ()
    return flavors.index(flavor) if flavor in flavors else len(flavors)


def variant_name(parent: Workload, flavor: str) -> str:
    """Kueue's ``<parent>-variant-<flavor>-<hash>``: the parent's name without its own hash suffix."""
    base, _, suffix = parent.name.rpartition("-")
    if not (base and len(suffix) == 5 and suffix.isalnum()):
        base = parent.name
    digest = hashlib.sha256(f"{parent.uid or parent.key}/{flavor}".encode()).hexdigest()[:5]
    prefix = f"{base}-variant-{flavor}"[: 253 - 6]
    return f"{prefix}-{digest}"
