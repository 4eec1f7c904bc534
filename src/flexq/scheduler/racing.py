"""The scheduler's side of concurrent admission: a workload racing one variant per flavor.

:class:`Racing` acts on the :class:`~flexq.scheduler.state.SchedulerState` (its workloads, queues, ``variants``,
``carrier``): it makes a workload race (:meth:`Racing.race_reason` says why it waits), settles the race for the
variant that wins (withdrawing, or under ``TryPreferredFlavors`` keeping, the others; migrating a running
workload). The quota of the pod sets the variants share (the guide's Ray head), held once by one *carrier*, is
:class:`~flexq.scheduler.holdings.Holdings`'. Which flavors race and what a variant may take is
:mod:`flexq.scheduler.race`.
"""

from __future__ import annotations

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.holdings import Holdings, podsets_of
from flexq.scheduler.model import ClusterQueueSpec, ConcurrentPolicy, Workload, WorkloadState
from flexq.scheduler.phrases import Text
from flexq.scheduler.race import IMPLICIT, VariantPlan, plan_variants, rank, variant_name
from flexq.scheduler.state import SchedulerState

__all__ = ["Racing"]


class Racing:
    """Concurrent admission's transitions: races started, settled, withdrawn."""

    def __init__(self, state: SchedulerState, holdings: Holdings) -> None:
        self.state = state
        self.holdings = holdings

    def may_preempt(self, wl: Workload) -> bool:
        """Kueue's preemption gate for variants, simplified: one variant of a workload preempts at a time, none
        while a sibling holds quota, and none to move a workload that already runs."""
        state = self.state
        if not wl.parent:
            return True
        parent = state.workloads.get(wl.parent)
        if parent is not None and parent.admission is not None:
            return False
        for key in state.variants.get(wl.parent, ()):
            other = state.workloads.get(key)
            if other is None or other is wl:
                continue
            if other.admission is not None or any(t.workload.evicting for t in state.last_targets.get(key, ())):
                return False
        return True

    def _policy(self, cq: ClusterQueueSpec) -> ConcurrentPolicy | None:
        if cq.concurrent is not None:
            return cq.concurrent
        return IMPLICIT if self.state.config.race else None

    def flavor_plans(self, wl: Workload) -> list[VariantPlan]:
        """The flavors ``wl`` could race on in its ClusterQueue, most preferred first, each with the flavors its pod
        sets would take there (what a what-if shows under each flavor); empty where only one flavor could hold it."""
        state = self.state
        cq = state.config.cluster_queues.get(wl.cluster_queue)
        if cq is None:
            return []
        return plan_variants(wl, cq, IMPLICIT, state.tree, state.config.flavors, strict=False)

    def race(self, wl: Workload, now: float) -> list[Event] | None:
        """Make ``wl`` race, one variant per flavor (queued in its place); None when it does not race."""
        state = self.state
        cq = state.config.cluster_queues.get(wl.cluster_queue)
        policy = None if cq is None else self._policy(cq)
        if cq is None or policy is None:
            return None
        plans = plan_variants(wl, cq, policy, state.tree, state.config.flavors, strict=not state.config.race)
        if not plans:
            return None
        state.queues.discard(wl)
        events: list[Event] = []
        keys: list[str] = []
        for plan in plans:
            variant = Workload(wl.namespace, variant_name(wl, plan.flavor), wl.queue, wl.cluster_queue, wl.podsets,
                               wl.priority, wl.created, owner=wl.owner, ordering_time=wl.ordering_time,
                               parent=wl.key, flavor=plan.flavor, allowed=plan.allowed)
            state.workloads[variant.key] = variant
            state.queues.push(variant)
            keys.append(variant.key)
            events.append(Event(now, EventKind.CREATED, variant.key, cq.name,
                                f"Variant of {wl.key} for flavor {plan.flavor}",
                                extra={"parent": wl.key, "flavor": plan.flavor}))
        state.variants[wl.key] = keys
        wl.pending_reason = self.race_reason(wl.key)
        return events

    def race_reason(self, key: str) -> Text:
        """Why a racing workload waits: each variant's reason, those nearest to starting first (admitted, then
        holding quota, then pending; by preference within each). Empty if it is not racing."""
        state = self.state
        order = {WorkloadState.ADMITTED: 0, WorkloadState.QUOTA_RESERVED: 1}
        variants = [v for k in state.variants.get(key, ()) if (v := state.workloads.get(k)) is not None]
        told: Text = ""
        for i, variant in enumerate(sorted(enumerate(variants), key=lambda e: (order.get(e[1].state, 2), e[0]))):
            told = told + ("racing: " if i == 0 else "; ") + f"{variant[1].flavor}: " + (
                variant[1].pending_reason or variant[1].state.value)
        return told

    def settle(self, key: str, now: float) -> list[Event]:
        """Variant ``key`` wins: its parent takes its admission (migrating from where it runs, if it runs); the
        other variants are withdrawn, except, under ``TryPreferredFlavors``, the more preferred ones."""
        state = self.state
        variant = state.workloads.get(key)
        parent = state.workloads.get(variant.parent) if variant is not None else None
        cq = state.config.cluster_queues.get(variant.cluster_queue) if variant is not None else None
        if variant is None or parent is None or cq is None or variant.admission is None:
            return []
        refused = self.refuse_migration(variant, now)
        if refused:
            return refused
        self.holdings.take_shared(variant, parent)
        events = self._migrate(parent, variant, now)
        admission = variant.admission
        state.holding.get(variant.cluster_queue, {}).pop(variant.key, None)
        variant.admission = None
        parent.admission = admission
        state.holding.setdefault(parent.cluster_queue, {})[parent.key] = parent  # the same usage: the tree is as it was
        parent.state = WorkloadState.ADMITTED
        parent.reserved_at = parent.admitted_at = now
        parent.checks = dict(variant.checks)
        parent.pod_set_updates = dict(variant.pod_set_updates)
        parent.pending_reason = ""
        parent.won = variant.name
        events += self._withdraw_losers(parent, variant, cq, now)
        variant.state = WorkloadState.FINISHED
        state.workloads.pop(key, None)
        state.last_assignment.pop(key, None)
        events.append(Event(now, EventKind.FINISHED, key, variant.cluster_queue,
                            f"The variant won: {parent.key} runs on flavor {variant.flavor}",
                            extra={"finishedReason": "VariantAdmitted", "parent": parent.key}))
        podsets = podsets_of(admission)
        events.append(Event(now, EventKind.QUOTA_RESERVED, parent.key, cq.name,
                            f"Quota reserved in ClusterQueue {cq.name}", podsets))
        events.append(Event(now, EventKind.ADMITTED, parent.key, cq.name, f"The variant {variant.name} is admitted",
                            podsets, extra={"variant": key, "flavor": variant.flavor}))
        return events

    def _migrate(self, parent: Workload, variant: Workload, now: float) -> list[Event]:
        """A running parent moves to the winner's flavor: it releases what it holds."""
        state = self.state
        if parent.admission is None:
            return []
        event = Event(now, EventKind.EVICTED, parent.key, parent.cluster_queue,
                      f"Evicted to accommodate a workload (UID: {parent.uid or parent.key}) due to migration "
                      f"to more favorable resource flavor {variant.flavor}", extra={"cause": "FlavorMigration"})
        if variant.key in state.full:
            state.carrier[parent.key] = variant.key  # it takes the shared pod sets' quota over from the parent
        self.holdings.release(parent)
        parent.count_eviction("FlavorMigration")
        self.holdings.make_full(variant)
        return [event]

    def _withdraw_losers(self, parent: Workload, variant: Workload, cq: ClusterQueueSpec, now: float) -> list[Event]:
        """Withdraw the other variants, except, under ``TryPreferredFlavors``, those more preferred (and acceptable)."""
        state = self.state
        events: list[Event] = []
        policy = self._policy(cq)
        keep = []
        for other_key in state.variants.pop(parent.key, []):
            other = state.workloads.get(other_key)
            if other is None or other_key == variant.key:
                continue
            if policy is not None and policy.migrate and not policy.implicit and \
                    rank(cq, other.flavor) < rank(cq, variant.flavor) and (
                    policy.last_acceptable is None or rank(cq, other.flavor) <= rank(cq, policy.last_acceptable)):
                keep.append(other_key)
                continue
            events += self.withdraw(other, now, f"Variant withdrawn: {variant.name} won on flavor {variant.flavor}")
        if keep:
            state.variants[parent.key] = keep
            state.carrier[parent.key] = parent.key  # the running workload holds what the variants share
        else:
            state.carrier.pop(parent.key, None)
        return events

    def refuse_migration(self, variant: Workload, now: float) -> list[Event]:
        """If ``variant`` would move its running workload and :attr:`migration_check` refuses, withdraw it."""
        state = self.state
        parent = state.workloads.get(variant.parent)
        if parent is None or parent.admission is None or state.migration_check is None:
            return []
        why = state.migration_check(parent, variant, now)
        if not why:
            return []
        remaining = state.variants.get(parent.key, [])
        if variant.key in remaining:
            remaining.remove(variant.key)
        if not remaining:
            state.variants.pop(parent.key, None)
        return self.withdraw(variant, now, f"Variant withdrawn: no migration to flavor {variant.flavor}: " + why)

    def settle_admitted(self, events: list[Event], now: float) -> list[Event]:
        """Without a capacity driver deciding, a variant wins when it is admitted (Kueue's rule)."""
        state = self.state
        if not state.variants or state.start_decides:
            return events
        out = list(events)
        for event in events:
            if event.kind is EventKind.ADMITTED:
                variant = state.workloads.get(event.workload)
                if variant is not None and variant.parent and variant.state is WorkloadState.ADMITTED:
                    out += self.settle(variant.key, now)
        return out

    def withdraw(self, variant: Workload, now: float, reason: Text) -> list[Event]:
        """``variant`` leaves the race: its quota is released and it is gone."""
        state = self.state
        if variant.admission is not None:
            self.holdings.release(variant)
        state.queues.discard(variant)
        state.requeues.pop(variant.key, None)
        variant.state = WorkloadState.FINISHED
        state.workloads.pop(variant.key, None)
        state.last_assignment.pop(variant.key, None)
        return [Event.told(now, EventKind.FINISHED, variant.key, variant.cluster_queue, reason,
                           extra={"finishedReason": "VariantWithdrawn", "parent": variant.parent})]

    def withdraw_all(self, wl: Workload, now: float, reason: str) -> list[Event]:
        """``wl`` stops racing: every variant of it is withdrawn."""
        state = self.state
        events: list[Event] = []
        for key in state.variants.pop(wl.key, []):
            variant = state.workloads.get(key)
            if variant is not None:
                events += self.withdraw(variant, now, reason)
        return events

    def variant_lost(self, variant: Workload, now: float, reason: str) -> list[Event]:
        """A variant was deactivated (its check Rejected): when none is left racing, the parent is deactivated."""
        state = self.state
        parent = state.workloads.get(variant.parent)
        if parent is None or parent.admission is not None:
            return []
        live = [k for k in state.variants.get(parent.key, [])
                if (v := state.workloads.get(k)) is not None and v.state is not WorkloadState.INACTIVE]
        if live:
            return []
        events = self.withdraw_all(parent, now, "Variant withdrawn: its workload is deactivated")
        parent.state = WorkloadState.INACTIVE
        parent.pending_reason = reason
        return [*events, Event(now, EventKind.DEACTIVATED, parent.key, parent.cluster_queue, reason)]
