"""The scheduler's side of concurrent admission: a workload racing one variant per flavor.

:class:`Racing` is mixed into :class:`~flexq.scheduler.scheduler.Scheduler` and works on its state (quota tree,
queues, workloads): it makes a workload race (:meth:`Racing.race_reason` says why it waits), settles the race for
the variant that wins (withdrawing, or under ``TryPreferredFlavors`` keeping, the others; migrating a running
workload), and keeps the quota of the pod sets the variants share (the guide's Ray head) held once, by one
*carrier*. Which flavors race and what a variant may take is :mod:`flexq.scheduler.race`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    ConcurrentPolicy,
    FlavorResource,
    PodSetAssignment,
    Workload,
    WorkloadState,
)
from flexq.scheduler.queues import QueueManager
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.race import IMPLICIT, VariantPlan, plan_variants, rank, variant_name

if TYPE_CHECKING:
    from flexq.scheduler.flavorassigner import Assignment
    from flexq.scheduler.preemption import Target
    from flexq.scheduler.queue_config import Config

__all__ = ["Racing", "discount", "podsets_of", "without"]


class Racing:
    """Concurrent admission's state and transitions (a mixin of the scheduler: it provides what is declared here)."""

    config: Config
    _tree: QuotaTree
    _queues: QueueManager
    _workloads: dict[str, Workload]
    holding: dict[str, dict[str, Workload]]
    last_assignment: dict[str, Assignment]
    _requeues: dict[str, float]
    last_targets: dict[str, list[Target]]
    variants: dict[str, list[str]]
    """Racing workloads: the parent's key -> its variants' keys, most preferred first."""
    start_decides: bool
    """Set by a capacity driver: a variant wins when its pods start (:meth:`settle`), not when admitted."""
    migration_check: Callable[[Workload, Workload, float], str | None] | None
    """Beyond Kueue: asked before a running workload migrates to a variant's flavor (parent, variant, now); a
    reason refuses it (the variant is withdrawn)."""
    _carrier: dict[str, str]
    """Racing workloads: the one (a variant, or the parent once it runs) whose quota holds the pod sets the
    variants share (the guide's Ray head on ``default-cpu``): the others reserve only what they race for."""
    _full: dict[str, Admission]
    """Variants holding quota without the shared part: their admission as it would be with it."""

    def _release(self, wl: Workload) -> None:
        raise NotImplementedError  # the scheduler's: frees the workload's quota

    def may_preempt(self, wl: Workload) -> bool:
        """Kueue's preemption gate for variants, simplified: one variant of a workload preempts at a time, none
        while a sibling holds quota, and none to move a workload that already runs."""
        if not wl.parent:
            return True
        parent = self._workloads.get(wl.parent)
        if parent is not None and parent.admission is not None:
            return False
        for key in self.variants.get(wl.parent, ()):
            other = self._workloads.get(key)
            if other is None or other is wl:
                continue
            if other.admission is not None or any(t.workload.evicting for t in self.last_targets.get(key, ())):
                return False
        return True

    def _policy(self, cq: ClusterQueueSpec) -> ConcurrentPolicy | None:
        if cq.concurrent is not None:
            return cq.concurrent
        return IMPLICIT if self.config.race else None

    def flavor_plans(self, wl: Workload) -> list[VariantPlan]:
        """The flavors ``wl`` could race on in its ClusterQueue, most preferred first, each with the flavors its pod
        sets would take there (what a what-if shows under each flavor); empty where only one flavor could hold it."""
        cq = self.config.cluster_queues.get(wl.cluster_queue)
        if cq is None:
            return []
        return plan_variants(wl, cq, IMPLICIT, self._tree, self.config.flavors, strict=False)

    def _race(self, wl: Workload, now: float) -> list[Event] | None:
        """Make ``wl`` race, one variant per flavor (queued in its place); None when it does not race."""
        cq = self.config.cluster_queues.get(wl.cluster_queue)
        policy = None if cq is None else self._policy(cq)
        if cq is None or policy is None:
            return None
        plans = plan_variants(wl, cq, policy, self._tree, self.config.flavors, strict=not self.config.race)
        if not plans:
            return None
        self._queues.discard(wl)
        events: list[Event] = []
        keys: list[str] = []
        for plan in plans:
            variant = Workload(wl.namespace, variant_name(wl, plan.flavor), wl.queue, wl.cluster_queue, wl.podsets,
                               wl.priority, wl.created, owner=wl.owner, ordering_time=wl.ordering_time,
                               parent=wl.key, flavor=plan.flavor, allowed=plan.allowed)
            self._workloads[variant.key] = variant
            self._queues.push(variant)
            keys.append(variant.key)
            events.append(Event(now, EventKind.CREATED, variant.key, cq.name,
                                f"Variant of {wl.key} for flavor {plan.flavor}",
                                extra={"parent": wl.key, "flavor": plan.flavor}))
        self.variants[wl.key] = keys
        wl.pending_reason = self.race_reason(wl.key)
        return events

    def race_reason(self, key: str) -> str:
        """Why a racing workload waits: each variant's reason, those nearest to starting first (admitted, then
        holding quota, then pending; by preference within each). Empty if it is not racing."""
        order = {WorkloadState.ADMITTED: 0, WorkloadState.QUOTA_RESERVED: 1}
        variants = [v for k in self.variants.get(key, ()) if (v := self._workloads.get(k)) is not None]
        parts = []
        for _i, variant in sorted(enumerate(variants), key=lambda e: (order.get(e[1].state, 2), e[0])):
            parts.append(f"{variant.flavor}: {variant.pending_reason or variant.state.value}")
        return "racing: " + "; ".join(parts) if parts else ""

    def settle(self, key: str, now: float) -> list[Event]:
        """Variant ``key`` wins: its parent takes its admission (migrating from where it runs, if it runs); the
        other variants are withdrawn, except, under ``TryPreferredFlavors``, the more preferred ones."""
        variant = self._workloads.get(key)
        parent = self._workloads.get(variant.parent) if variant is not None else None
        cq = self.config.cluster_queues.get(variant.cluster_queue) if variant is not None else None
        if variant is None or parent is None or cq is None or variant.admission is None:
            return []
        refused = self.refuse_migration(variant, now)
        if refused:
            return refused
        self._take_shared(variant, parent)
        events = self._migrate(parent, variant, now)
        admission = variant.admission
        self.holding.get(variant.cluster_queue, {}).pop(variant.key, None)
        variant.admission = None
        parent.admission = admission
        self.holding.setdefault(parent.cluster_queue, {})[parent.key] = parent  # the same usage: the tree is as it was
        parent.state = WorkloadState.ADMITTED
        parent.reserved_at = parent.admitted_at = now
        parent.checks = dict(variant.checks)
        parent.pod_set_updates = dict(variant.pod_set_updates)
        parent.pending_reason = ""
        parent.won = variant.name
        events += self._withdraw_losers(parent, variant, cq, now)
        variant.state = WorkloadState.FINISHED
        self._workloads.pop(key, None)
        self.last_assignment.pop(key, None)
        events.append(Event(now, EventKind.FINISHED, key, variant.cluster_queue,
                            f"The variant won: {parent.key} runs on flavor {variant.flavor}",
                            extra={"finishedReason": "VariantAdmitted", "parent": parent.key}))
        podsets = podsets_of(admission)
        events.append(Event(now, EventKind.QUOTA_RESERVED, parent.key, cq.name,
                            f"Quota reserved in ClusterQueue {cq.name}", podsets))
        events.append(Event(now, EventKind.ADMITTED, parent.key, cq.name, f"The variant {variant.name} is admitted",
                            podsets, extra={"variant": key, "flavor": variant.flavor}))
        return events

    def _take_shared(self, variant: Workload, parent: Workload) -> None:
        """The winner takes the shared pod sets' quota over from the sibling that held it."""
        carrier = self._workloads.get(self._carrier.get(parent.key, ""))
        if variant.key in self._full and carrier is not None and carrier is not parent and \
                carrier.admission is not None:
            held = carrier.admission
            shared = discount(held.total, self._shared(variant))
            self._full[carrier.key] = held
            carrier.admission = without(held, shared)
            self._tree.remove(carrier.cluster_queue, {fr: v for fr, v in shared.items() if v})
            self._make_full(variant)
            self._carrier[parent.key] = variant.key

    def _migrate(self, parent: Workload, variant: Workload, now: float) -> list[Event]:
        """A running parent moves to the winner's flavor: it releases what it holds."""
        if parent.admission is None:
            return []
        event = Event(now, EventKind.EVICTED, parent.key, parent.cluster_queue,
                      f"Evicted to accommodate a workload (UID: {parent.uid or parent.key}) due to migration "
                      f"to more favorable resource flavor {variant.flavor}", extra={"cause": "FlavorMigration"})
        if variant.key in self._full:
            self._carrier[parent.key] = variant.key  # it takes the shared pod sets' quota over from the parent
        self._release(parent)
        parent.evictions += 1
        self._make_full(variant)
        return [event]

    def _withdraw_losers(self, parent: Workload, variant: Workload, cq: ClusterQueueSpec, now: float) -> list[Event]:
        """Withdraw the other variants, except, under ``TryPreferredFlavors``, those more preferred (and acceptable)."""
        events: list[Event] = []
        policy = self._policy(cq)
        keep = []
        for other_key in self.variants.pop(parent.key, []):
            other = self._workloads.get(other_key)
            if other is None or other_key == variant.key:
                continue
            if policy is not None and policy.migrate and not policy.implicit and \
                    rank(cq, other.flavor) < rank(cq, variant.flavor) and (
                    policy.last_acceptable is None or rank(cq, other.flavor) <= rank(cq, policy.last_acceptable)):
                keep.append(other_key)
                continue
            events += self._withdraw(other, now, f"Variant withdrawn: {variant.name} won on flavor {variant.flavor}")
        if keep:
            self.variants[parent.key] = keep
            self._carrier[parent.key] = parent.key  # the running workload holds what the variants share
        else:
            self._carrier.pop(parent.key, None)
        return events

    def refuse_migration(self, variant: Workload, now: float) -> list[Event]:
        """If ``variant`` would move its running workload and :attr:`migration_check` refuses, withdraw it."""
        parent = self._workloads.get(variant.parent)
        if parent is None or parent.admission is None or self.migration_check is None:
            return []
        why = self.migration_check(parent, variant, now)
        if not why:
            return []
        remaining = self.variants.get(parent.key, [])
        if variant.key in remaining:
            remaining.remove(variant.key)
        if not remaining:
            self.variants.pop(parent.key, None)
        return self._withdraw(variant, now, f"Variant withdrawn: no migration to flavor {variant.flavor}: {why}")

    def _settle_admitted(self, events: list[Event], now: float) -> list[Event]:
        """Without a capacity driver deciding, a variant wins when it is admitted (Kueue's rule)."""
        if not self.variants or self.start_decides:
            return events
        out = list(events)
        for event in events:
            if event.kind is EventKind.ADMITTED:
                variant = self._workloads.get(event.workload)
                if variant is not None and variant.parent and variant.state is WorkloadState.ADMITTED:
                    out += self.settle(variant.key, now)
        return out

    def _withdraw(self, variant: Workload, now: float, reason: str) -> list[Event]:
        if variant.admission is not None:
            self._release(variant)
        self._queues.discard(variant)
        self._requeues.pop(variant.key, None)
        variant.state = WorkloadState.FINISHED
        self._workloads.pop(variant.key, None)
        self.last_assignment.pop(variant.key, None)
        return [Event(now, EventKind.FINISHED, variant.key, variant.cluster_queue, reason,
                      extra={"finishedReason": "VariantWithdrawn", "parent": variant.parent})]

    def _withdraw_all(self, wl: Workload, now: float, reason: str) -> list[Event]:
        events: list[Event] = []
        for key in self.variants.pop(wl.key, []):
            variant = self._workloads.get(key)
            if variant is not None:
                events += self._withdraw(variant, now, reason)
        return events

    def _variant_lost(self, variant: Workload, now: float, reason: str) -> list[Event]:
        """A variant was deactivated (its check Rejected): when none is left racing, the parent is deactivated."""
        parent = self._workloads.get(variant.parent)
        if parent is None or parent.admission is not None:
            return []
        live = [k for k in self.variants.get(parent.key, [])
                if (v := self._workloads.get(k)) is not None and v.state is not WorkloadState.INACTIVE]
        if live:
            return []
        events = self._withdraw_all(parent, now, "Variant withdrawn: its workload is deactivated")
        parent.state = WorkloadState.INACTIVE
        parent.pending_reason = reason
        return [*events, Event(now, EventKind.DEACTIVATED, parent.key, parent.cluster_queue, reason)]

    def _make_full(self, wl: Workload) -> None:
        """A variant that reserved without the shared pod sets' quota takes it on."""
        full = self._full.pop(wl.key, None)
        if full is None or wl.admission is None:
            return
        extra = {fr: v - wl.admission.total.get(fr, 0) for fr, v in full.total.items()}
        if wl.cluster_queue in self._tree.queues:
            self._tree.add(wl.cluster_queue, {fr: v for fr, v in extra.items() if v})
        wl.admission = full

    def _shared(self, wl: Workload) -> dict[FlavorResource, int] | None:
        """What the carrier of ``wl``'s race holds for the pod sets they share, if ``wl`` is a variant that
        does not carry it."""
        if not wl.parent or wl.allowed is None:
            return None
        allowed = wl.allowed_flavors()
        carrier = self._workloads.get(self._carrier.get(wl.parent, ""))
        if carrier is None or carrier is wl or carrier.admission is None:
            return None
        shared = {fr: v for fr, v in carrier.admission.total.items() if fr[0] in allowed and fr[0] != wl.flavor}
        return shared or None


def discount(usage: Mapping[FlavorResource, int], shared: Mapping[FlavorResource, int] | None
              ) -> dict[FlavorResource, int]:
    """The part of ``usage`` that a sibling variant already holds."""
    if not shared:
        return {}
    return {fr: min(v, shared[fr]) for fr, v in usage.items() if shared.get(fr)}


def without(admission: Admission, discount: Mapping[FlavorResource, int]) -> Admission:
    """``admission`` with ``discount`` taken off its pod sets' usage (first pod sets first)."""
    left = dict(discount)
    podsets = []
    for ps in admission.podsets:
        usage = dict(ps.usage)
        for fr, v in usage.items():
            take = min(v, left.get(fr, 0))
            if take:
                usage[fr] = v - take
                left[fr] -= take
        podsets.append(PodSetAssignment(ps.name, ps.flavors, usage, ps.count))
    return Admission.of(admission.cluster_queue, tuple(podsets))


def podsets_of(admission: Admission) -> dict[str, dict[str, str]]:
    return {ps.name: dict(sorted(ps.flavors.items())) for ps in admission.podsets}
