"""The scheduler: Kueue's admission cycle over an in-memory cache, for any clock.

Inputs arrive as method calls (configuration, workloads created or deleted, finished, admission
check states, evictions completed) with the time passed in; every decision is returned as
:class:`Event` values. Nothing here reads a clock, a random source or the outside world.

:meth:`Scheduler.cycle` is one Kueue cycle: at most one head per ClusterQueue, all nominated against
the same snapshot, ordered (not borrowing first, higher priority, earlier queue time), then admitted,
preempted for, or requeued. :meth:`Scheduler.schedule` runs cycles until one changes nothing, so that,
unlike Kueue (one head per ClusterQueue per cycle, then wait for the next event), everything that can
be admitted at that moment is admitted, in the order Kueue's successive cycles would admit it.

A workload whose ClusterQueue races its flavors (Kueue's Concurrent Admission, or flexq's own policy) is
queued as one variant per flavor instead (:mod:`flexq.scheduler.racing`): the variant that wins gives the
workload its admission.

Lifecycle of a workload: Pending -> QuotaReserved -> Admitted (when every admission check that
applies is Ready) -> Finished. Preemption marks victims *evicting*: they keep their quota until the
driver reports that they stopped (:meth:`Scheduler.complete_eviction`), or at once with
``instant_eviction``. A check's Retry evicts and requeues; Rejected deactivates.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.flavorassigner import Assignment, assign_flavors
from flexq.scheduler.model import (
    Admission,
    CheckState,
    ClusterQueueSpec,
    CohortSpec,
    FlavorResource,
    FlavorSpec,
    Granular,
    Mode,
    PendingReason,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Strategy,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import Target, find_targets, oracle_for
from flexq.scheduler.queues import QueueManager
from flexq.scheduler.quota import QuotaTree, Trial
from flexq.scheduler.racing import Racing, podsets_of, without
from flexq.scheduler.racing import discount as racing_discount
from flexq.scheduler.slices import REPLACED, assign_slice, replaced_slice, shrunk, slice_targets

__all__ = ["Config", "Scheduler"]


@dataclass(frozen=True, slots=True)
class Config:
    """The queue configuration the scheduler works with."""

    flavors: Mapping[str, FlavorSpec]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    cohorts: Mapping[str, CohortSpec]
    check_retry_delay: Mapping[str, float] = field(default_factory=dict)
    """Seconds a workload waits after a check's Retry before it queues again (default: none)."""
    race: bool = False
    """flexq's policy: workloads race a variant per flavor even where no ClusterQueue asks for Concurrent
    Admission (:mod:`flexq.scheduler.race`). Off, the scheduler is Kueue's."""


@dataclass(slots=True)
class _Cycle:
    """One cycle's state: its trial changes to the quota tree (victims out, capacity kept for preemptors),
    undone when the cycle ends."""

    trial: Trial
    removed: list[Workload] = field(default_factory=list)
    """The victims of preemptions issued this cycle, out of the tree until it ends."""
    victims: list[Workload] = field(default_factory=list)
    progress: bool = False


class Scheduler(Racing):
    def __init__(self, config: Config | None = None, *, instant_eviction: bool = False) -> None:
        self.config = config or Config({}, {}, {})
        self.instant_eviction = instant_eviction
        self.tree = QuotaTree(self.config.cluster_queues.values(), self.config.cohorts.values())
        self.workloads: dict[str, Workload] = {}
        self.holding: dict[str, dict[str, Workload]] = {}
        self.queues = QueueManager()
        self.last_assignment: dict[str, Assignment] = {}
        self._failed: dict[tuple[object, ...], tuple[int, Assignment]] = {}
        """Assignments that found no way in, by (queue, workload shape), valid while their tree is unchanged."""
        self._requeues: dict[str, float] = {}
        """Workloads waiting out a retry delay: key -> when they queue again."""
        self.unavailable: dict[str, tuple[float, str]] = {}
        """Flavors that could not deliver nodes: flavor -> (until, why). Skipped by the flavor search."""
        self.last_targets: dict[str, list[Target]] = {}
        """The preemption targets last chosen for each workload (issued, or already being evicted)."""
        self._replaced_by: dict[str, str] = {}
        """Workload slices waiting to replace another: the replaced slice's key -> the replacement's."""
        # Concurrent admission's state, described where it is used (flexq.scheduler.racing.Racing).
        self.variants: dict[str, list[str]] = {}
        self.start_decides = False
        self.migration_check: Callable[[Workload, Workload, float], str | None] | None = None
        self._carrier: dict[str, str] = {}
        self._full: dict[str, Admission] = {}
        self._deferred: list[Event] = []
        """Events of races started outside a scheduling pass (a configuration change), returned by the next."""
        self._gated: set[str] = set()
        """Variants whose preemption targets were held back this cycle (:meth:`Racing.may_preempt`)."""
        self._set_aside = 0
        """Variants set aside so far: a cycle that set one aside has a new head to try in that queue."""

    # --- configuration -----------------------------------------------------------------------------

    def configure(self, config: Config) -> None:
        """Replace the queue configuration; usage of workloads holding quota is carried over."""
        self.config = config
        self._failed.clear()
        self.tree = QuotaTree(config.cluster_queues.values(), config.cohorts.values())
        for wl in self.workloads.values():
            if wl.admission is not None and wl.cluster_queue in self.tree.queues:
                self.tree.add(wl.cluster_queue, wl.admission.usage())
        for wl in list(self.workloads.values()):
            self.enqueue(wl, 0.0 if wl.ordering_time is None else wl.ordering_time)
        self.queues.wake(list(config.cluster_queues), self.workloads)

    def enqueue(self, wl: Workload, now: float) -> None:
        """Queue a pending workload that is not queued, racing or waiting out a retry delay (its ClusterQueue
        appeared, or the configuration changed)."""
        if wl.state is not WorkloadState.PENDING or wl.requeue_at is not None or wl.key in self.variants or \
                wl.cluster_queue not in self.config.cluster_queues or self.queues.queued(wl):
            return
        raced = None if wl.parent else self._race(wl, now)
        if raced is None:
            self.queues.push(wl)
        else:
            self._deferred += raced

    # --- inputs ------------------------------------------------------------------------------------

    def add(self, wl: Workload, now: float) -> list[Event]:
        """A new workload enters its queue (or, already holding quota, is restored as it was)."""
        self.workloads[wl.key] = wl
        if wl.replaces:
            self._replaced_by[wl.replaces] = wl.key
        events = [Event(now, EventKind.CREATED, wl.key, wl.cluster_queue, extra=_owner(wl))]
        if wl.admission is not None:
            self._hold(wl)
            return events
        wl.state = WorkloadState.PENDING
        if wl.cluster_queue not in self.config.cluster_queues:
            reason = (f"LocalQueue {wl.queue} doesn't exist" if not wl.cluster_queue
                      else f"ClusterQueue {wl.cluster_queue} doesn't exist")
            self._note_pending(wl, reason, PendingReason.MISCONFIGURED)
            return [*events, Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        raced = self._race(wl, now)
        if raced is not None:
            return events + raced
        self.queues.push(wl)
        return events

    def delete(self, key: str, now: float) -> list[Event]:
        """The workload (or its job) was deleted: its quota is freed."""
        wl = self.workloads.pop(key, None)
        if wl is None:
            return []
        if self._replaced_by.get(wl.replaces) == key:
            del self._replaced_by[wl.replaces]
        self.queues.discard(wl)
        self.last_assignment.pop(key, None)
        self._requeues.pop(key, None)
        if wl.admission is not None:
            self._release(wl)
        return self._withdraw_all(wl, now, "Variant withdrawn: its workload was deleted")

    def finish(self, key: str, now: float, reason: str = "JobFinished") -> list[Event]:
        wl = self.workloads[key]
        self.queues.discard(wl)
        if wl.admission is not None:
            self._release(wl)
        withdrawn = self._withdraw_all(wl, now, "Variant withdrawn: its workload finished")
        wl.state = WorkloadState.FINISHED
        wl.finished_at = now
        return [*withdrawn, Event(now, EventKind.FINISHED, wl.key, wl.cluster_queue, reason)]

    def set_check(self, key: str, check: str, state: CheckState, now: float, message: str = "",
                  retry_after: float | None = None,
                  pod_set_updates: dict[str, dict[str, str]] | None = None) -> list[Event]:
        """An admission check controller (or a person) reports a check's state for a workload (for a racing
        workload: for its variants that have the check)."""
        wl = self.workloads[key]
        if key in self.variants and check not in wl.checks:
            out: list[Event] = []
            for variant in list(self.variants[key]):
                if variant in self.workloads:  # one that won may have withdrawn the others
                    out += self.set_check(variant, check, state, now, message, retry_after, pod_set_updates)
            return out
        if not wl.holds_quota or check not in wl.checks:
            return []
        wl.checks[check] = state
        if state is CheckState.READY and pod_set_updates:
            wl.pod_set_updates[check] = pod_set_updates
        events = [Event(now, EventKind.CHECK, wl.key, wl.cluster_queue, message or state.value,
                        extra={"check": check, "state": state.value})]
        if state is CheckState.READY and wl.state is WorkloadState.QUOTA_RESERVED and all(
                s is CheckState.READY for s in wl.checks.values()):
            wl.state = WorkloadState.ADMITTED
            wl.admitted_at = now
            wl.pending_reason = ""
            events.append(self._admitted_event(wl, now))
        elif state is CheckState.RETRY:
            events += self._evict(wl, now, f'Evicted due to AdmissionCheck in Retry state: "{check}"',
                                  "AdmissionCheck")
            if wl.state is WorkloadState.FINISHED:
                return events
            delay = retry_after if retry_after is not None else self.config.check_retry_delay.get(check, 0.0)
            if delay > 0:
                self.queues.discard(wl)
                wl.requeue_at = now + delay
                self._requeues[wl.key] = wl.requeue_at
        elif state is CheckState.REJECTED:
            reason = f'AdmissionCheck in Rejected state: "{check}"' + (f" ({message})" if message else "")
            events += self._evict(wl, now, reason, "AdmissionCheck")
            if wl.state is WorkloadState.FINISHED:
                return events
            self.queues.discard(wl)
            wl.state = WorkloadState.INACTIVE
            events.append(Event(now, EventKind.DEACTIVATED, wl.key, wl.cluster_queue, reason))
            if wl.parent:
                events += self._variant_lost(wl, now, reason)
        return self._settle_admitted(events, now)

    def evict(self, key: str, now: float, reason: str, cause: str = "Evicted") -> list[Event]:
        """Evict from outside (a controller): release the quota and queue again."""
        return self._evict(self.workloads[key], now, reason, cause)

    def complete_eviction(self, key: str, now: float) -> list[Event]:
        """A preempted workload has stopped: its quota is released and it queues again."""
        wl = self.workloads.get(key)
        if wl is None or not wl.evicting:
            return []
        return self._evict(wl, now, wl.pending_reason or "Preempted", "Preempted")

    def next_requeue(self) -> float | None:
        """The earliest moment the scheduler has something to do by itself: a retry delay or a flavor's
        cool-down ending."""
        times = [*self._requeues.values(), *(until for until, _ in self.unavailable.values())]
        return min(times) if times else None

    def mark_unavailable(self, flavor: str, until: float, why: str) -> None:
        """Remember that ``flavor`` cannot deliver nodes until ``until`` (flexq's fallback): the flavor
        search skips it, so workloads move on to the next flavor."""
        self.unavailable[flavor] = (until, why)
        self._failed.clear()

    def _expire_unavailable(self, now: float) -> None:
        gone = [f for f, (until, _) in self.unavailable.items() if until <= now]
        for flavor in gone:
            del self.unavailable[flavor]
        if gone:
            self._failed.clear()
            self.queues.wake(list(self.config.cluster_queues), self.workloads)

    # --- the cycle ---------------------------------------------------------------------------------

    def schedule(self, now: float, max_cycles: int = 1_000_000) -> list[Event]:
        """Run cycles at ``now`` until one changes nothing; return what happened."""
        self._expire_unavailable(now)
        events, self._deferred = self._deferred, []
        events += self._requeue_due(now)
        for _ in range(max_cycles):
            cycle_events, progress = self.cycle(now)
            events += self._settle_admitted(cycle_events, now)
            if not progress:
                break
        return events

    def cycle(self, now: float) -> tuple[list[Event], bool]:
        """One Kueue scheduling cycle. Returns its events and whether it admitted or preempted anything."""
        aside = self._set_aside
        heads, events = self._heads(now)
        nominated: list[tuple[Workload, Assignment, list[Target]]] = []
        for wl in heads:
            if any(s in (CheckState.RETRY, CheckState.REJECTED) for s in wl.checks.values()):
                events += self._inadmissible(wl, "The workload has failed admission checks", now,
                                             PendingReason.PENDING_EVALUATION)
                continue
            assignment = self._assign(wl)
            targets: list[Target] = []
            if assignment.mode is Mode.PREEMPT and assignment.granular is not Granular.NO_CANDIDATES:
                # NO_CANDIDATES: the preemption oracle already found nobody to preempt, in this same state.
                targets = self._targets(wl, assignment)
            nominated.append((wl, assignment, targets))
        nominated.sort(key=lambda e: (e[1].borrow, -e[0].priority, e[0].queue_time, e[0].uid or e[0].key))
        with self.tree.trial() as trial:
            state = _Cycle(trial)
            for wl, assignment, targets in nominated:
                events += self._process(wl, assignment, targets, state, now)
        if self.instant_eviction:
            for victim in state.victims:
                events += self.complete_eviction(victim.key, now)
        return events, state.progress or self._set_aside != aside

    def _process(self, wl: Workload, assignment: Assignment, targets: list[Target], state: _Cycle,
                 now: float) -> list[Event]:
        cq = self.config.cluster_queues[wl.cluster_queue]
        usage = assignment.usage()
        if assignment.mode is Mode.NO_FIT:
            return self._inadmissible(wl, assignment.message(), now, assignment.no_fit)
        if assignment.mode is Mode.PREEMPT and not targets:
            if cq.reclaim_within_cohort is not PreemptionPolicy.ANY:
                self._reserve_capacity(cq, usage, assignment.borrow > 0, state)
            gated = ". It preempts nobody: another variant of its workload holds quota or is preempting" \
                if wl.key in self._gated else ""
            self._gated.discard(wl.key)
            return self._inadmissible(wl, assignment.message() + gated, now, PendingReason.WAITING_FOR_QUOTA)
        old = replaced_slice(self.workloads, wl)
        if old is not None and assignment.mode is Mode.FIT:
            return self._replace_slice(wl, old, assignment, state, now)
        discount = racing_discount(usage, self._shared(wl))
        if discount:
            usage = {fr: v - discount.get(fr, 0) for fr, v in usage.items()}
        issued = {v.key for v in state.removed}
        if targets and issued.intersection(t.workload.key for t in targets):
            return self._skip(wl, "Workload has overlapping preemption targets with another workload", now,
                              PendingReason.WAITING_FOR_QUOTA)
        own = [t.workload for t in targets]
        mark = state.trial.mark()
        for victim in own:
            self._remove_for_cycle(victim, state)
        # A growing slice preempts for what it adds: the slice it replaces is out of the tree for the check.
        replaced = old.admission.usage() if old is not None and old.admission is not None else {}
        with self.tree.without([(cq.name, replaced)] if replaced else []):
            fits = all(v <= self.tree.available(cq.name, fr) for fr, v in usage.items())
        if replaced:
            usage = {fr: v - replaced.get(fr, 0) for fr, v in usage.items()}
        if not fits:
            state.trial.undo(mark)
            del state.removed[len(state.removed) - len(own):]
            return self._skip(wl, "Workload no longer fits after processing another workload", now,
                              PendingReason.WAITING_FOR_QUOTA)
        if assignment.mode is Mode.FIT:
            state.progress = True
            return self._reserve(wl, assignment, now, discount)
        state.trial.add(cq.name, usage)
        events: list[Event] = []
        self.last_targets[wl.key] = list(targets)
        new = [t for t in targets if not t.workload.evicting]
        for target in new:
            events += self._preempt(target, wl, now)
            state.victims.append(target.workload)
        if new:
            state.progress = True
        message = f"{assignment.message()}. Pending the preemption of {len(targets)} workload(s)"
        if self._note_pending(wl, message, PendingReason.WAITING_FOR_PREEMPTED_WORKLOADS):
            events.append(Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, message))
        return events

    def _remove_for_cycle(self, victim: Workload, state: _Cycle) -> None:
        assert victim.admission is not None
        state.trial.remove(victim.cluster_queue, victim.admission.usage())
        state.removed.append(victim)

    def _replace_slice(self, wl: Workload, old: Workload, assignment: Assignment, state: _Cycle,
                       now: float) -> list[Event]:
        """Admit slice ``wl`` in place of ``old``: what it adds must fit; ``old`` is finished in the same step."""
        assert old.admission is not None
        with self.tree.without([(old.cluster_queue, old.admission.usage())]):
            fits = all(v <= self.tree.available(wl.cluster_queue, fr) for fr, v in assignment.usage().items())
        if not fits:
            return self._skip(wl, "Workload no longer fits after processing another workload", now,
                              PendingReason.WAITING_FOR_QUOTA)
        state.progress = True
        message = (f"Removed to accommodate a workload (UID: {wl.uid or wl.key}) due to workload slice aggregation")
        finished = self._finish_replaced(old, wl, now, message)
        return finished + self._reserve(wl, assignment, now)

    def resize(self, key: str, podsets: tuple[PodSet, ...], now: float) -> list[Event]:
        """The job's pod counts changed in place: an elastic job that scaled down (its quota shrinks at once), or
        a workload not yet admitted (it is nominated again with its new shape). Growth of an admitted workload
        takes a new slice instead (:mod:`flexq.scheduler.slices`)."""
        wl = self.workloads[key]
        if wl.admission is not None:
            admission = shrunk(wl.admission, {p.name: p.count for p in podsets})
            if wl.cluster_queue in self.tree.queues:
                self.tree.remove(wl.cluster_queue, wl.admission.usage())
                self.tree.add(wl.cluster_queue, admission.usage())
            wl.admission = admission
            self._wake_tree(wl.cluster_queue)
        wl.podsets = podsets
        if wl.key in self.variants:  # racing: the variants race anew with the new shape
            events = self._withdraw_all(wl, now, "Variant withdrawn: its workload was resized")
            return events + (self._race(wl, now) or [])
        if wl.state is WorkloadState.PENDING and self.queues.queued(wl):
            self.queues.discard(wl)
            self.queues.push(wl)
        return []

    def _reserve_capacity(self, cq: ClusterQueueSpec, usage: Mapping[FlavorResource, int], borrowing: bool,
                          state: _Cycle) -> None:
        """A workload waiting for preemption keeps other heads off the capacity it needs, this cycle."""
        reserved: dict[FlavorResource, int] = {}
        for fr, req in usage.items():
            nominal, used = self.tree.nominal(cq.name, fr), self.tree.usage(cq.name, fr)
            if borrowing:
                limit = self.tree.queues[cq.name].borrowing_limit(fr)
                amount = req if limit is None else min(req, nominal + limit - used)
            else:
                amount = max(0, min(req, nominal - used))
            if amount > 0:
                reserved[fr] = amount
        if reserved:
            state.trial.add(cq.name, reserved)

    def _heads(self, now: float) -> tuple[list[Workload], list[Event]]:
        heads: list[Workload] = []
        events: list[Event] = []
        for name in self.queues.queues():
            cq = self.config.cluster_queues.get(name)
            if cq is None or self.queues.blocked(name):
                continue
            wl = self.queues.head(name, self.workloads)
            if wl is None:
                continue
            if not cq.active:
                events += self._inadmissible(wl, f"ClusterQueue {name} is inactive", now, PendingReason.SUSPENDED)
                continue
            heads.append(wl)
        return heads, events

    def _assign(self, wl: Workload) -> Assignment:
        """Nominate ``wl``. A workload shaped like one that just found no way in, in a quota tree that has
        not changed since, gets the same answer without the search (Kueue's equivalence classes)."""
        cq = self.config.cluster_queues[wl.cluster_queue]
        old = replaced_slice(self.workloads, wl)
        if old is not None:
            assignment = assign_slice(wl, old, cq, self.tree, self.config.flavors, self.holding)
            self.last_assignment[wl.key] = assignment
            return assignment
        shared = self._shared(wl)
        if shared:
            # What a sibling variant already holds for the pod sets they share is this variant's too.
            with self.tree.without([(cq.name, shared)]):
                assignment = assign_flavors(wl, cq, self.tree, self.config.flavors,
                                            oracle_for(wl, cq, self.tree, self.holding), self._unavailable())
            self.last_assignment[wl.key] = assignment
            return assignment
        shape = self._shape(wl, cq)
        version = self.tree.root(cq.name).version
        cached = self._failed.get(shape)
        if cached is not None and cached[0] == version:
            self.last_assignment[wl.key] = cached[1]
            return cached[1]
        oracle = oracle_for(wl, cq, self.tree, self.holding)
        assignment = assign_flavors(wl, cq, self.tree, self.config.flavors, oracle, self._unavailable())
        self.last_assignment[wl.key] = assignment
        if assignment.granular in (Granular.NO_FIT, Granular.NO_CANDIDATES):
            self._failed[shape] = (version, assignment)
        return assignment

    def _unavailable(self) -> dict[str, str]:
        return {f: why for f, (_, why) in self.unavailable.items()}

    @staticmethod
    def _shape(wl: Workload, cq: ClusterQueueSpec) -> tuple[object, ...]:
        newer = wl.queue_time if cq.within_cluster_queue is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY else None
        return (cq.name, wl.priority, newer, wl.allowed, wl.shape())

    def _targets(self, wl: Workload, assignment: Assignment) -> list[Target]:
        cq = self.config.cluster_queues[wl.cluster_queue]
        old = replaced_slice(self.workloads, wl)
        if old is not None:
            return slice_targets(wl, old, cq, self.tree, self.holding, assignment)
        targets = find_targets(wl, cq, self.tree, self.holding, assignment.preempt_resources(), assignment.usage())
        if targets and not self.may_preempt(wl):
            self._gated.add(wl.key)  # another variant of its workload holds quota or preempts
            return []
        return targets

    # --- state changes -----------------------------------------------------------------------------

    def _hold(self, wl: Workload) -> None:
        assert wl.admission is not None
        self.holding.setdefault(wl.cluster_queue, {})[wl.key] = wl
        if wl.cluster_queue in self.tree.queues:
            self.tree.add(wl.cluster_queue, wl.admission.usage())

    def _reserve(self, wl: Workload, assignment: Assignment, now: float,
                 discount: Mapping[FlavorResource, int] | None = None) -> list[Event]:
        cq = self.config.cluster_queues[wl.cluster_queue]
        admission = Admission.of(cq.name, tuple(
            PodSetAssignment(p.name, dict(p.flavors), dict(p.usage), p.count) for p in assignment.podsets))
        self.queues.discard(wl)
        if discount:
            self._full[wl.key] = admission
            wl.admission = without(admission, discount)
        else:
            wl.admission = admission
            if wl.parent and len(wl.allowed_flavors()) > 1:
                self._carrier.setdefault(wl.parent, wl.key)
        self._hold(wl)
        wl.state = WorkloadState.QUOTA_RESERVED
        wl.reserved_at = now
        wl.pending_reason = ""
        wl.pending = None
        wl.checks = {name: wl.checks.get(name, CheckState.PENDING)
                     for name in cq.checks_for(admission.flavors())} if cq.checks else {}
        events = [Event(now, EventKind.QUOTA_RESERVED, wl.key, cq.name,
                        f"Quota reserved in ClusterQueue {cq.name}", podsets_of(admission))]
        if all(s is CheckState.READY for s in wl.checks.values()):
            wl.state = WorkloadState.ADMITTED
            wl.admitted_at = now
            events.append(self._admitted_event(wl, now))
        else:
            wl.pending_reason = "The workload has not all checks ready"
        return events

    def _admitted_event(self, wl: Workload, now: float) -> Event:
        assert wl.admission is not None
        return Event(now, EventKind.ADMITTED, wl.key, wl.cluster_queue, "The workload is admitted",
                     podsets_of(wl.admission))

    def _release(self, wl: Workload) -> None:
        assert wl.admission is not None
        self.holding.get(wl.cluster_queue, {}).pop(wl.key, None)
        if wl.cluster_queue in self.tree.queues:
            self.tree.remove(wl.cluster_queue, wl.admission.usage())
        wl.admission = None
        wl.evicting = False
        self._full.pop(wl.key, None)
        parent = wl.parent or wl.key
        if self._carrier.get(parent) == wl.key:
            # Another holder takes over the shared pod sets' quota (a sibling that reserved without them).
            del self._carrier[parent]
            for key in self.variants.get(parent, ()):
                if key in self._full:
                    self._make_full(self.workloads[key])
                    self._carrier[parent] = key
                    break
        self._wake_tree(wl.cluster_queue)

    def _wake_tree(self, cq: str) -> None:
        if cq not in self.tree.queues:
            return
        self.queues.wake(self.tree.members(cq), self.workloads)

    def _evict(self, wl: Workload, now: float, reason: str, cause: str, requeue: bool = True) -> list[Event]:
        if wl.admission is None:
            return []
        self._release(wl)
        wl.state = WorkloadState.PENDING
        wl.ordering_time = now
        wl.reserved_at = wl.admitted_at = None
        wl.checks = {}
        wl.pod_set_updates = {}
        wl.evictions += 1
        wl.pending_reason = ""
        evicted = [Event(now, EventKind.EVICTED, wl.key, wl.cluster_queue, reason, extra={"cause": cause})]
        replacement = self.workloads.get(self._replaced_by.get(wl.key, ""))
        if replacement is not None and replacement.state is WorkloadState.PENDING:
            # A slice evicted while its replacement waits is not queued again: the job's next admission is the
            # replacement's, with quota for all its pods (as Kueue finishes evicted slices).
            return evicted + self._finish_replaced(wl, replacement, now,
                                                   "Replaced to accommodate a new workload slice")
        evicted += self._withdraw_all(wl, now, "Variant withdrawn: its workload was evicted and races anew")
        if not requeue:
            return evicted
        raced = None if wl.parent else self._race(wl, now)
        if raced is not None:
            return evicted + raced  # as Kueue: an evicted parent pursues every flavor again
        self.queues.push(wl)
        return evicted

    def _finish_replaced(self, old: Workload, new: Workload, now: float, message: str) -> list[Event]:
        """Finish slice ``old``, replaced by ``new`` (which from now on stands alone)."""
        self._replaced_by.pop(old.key, None)
        new.replaces = ""
        return [dataclasses.replace(e, extra={**e.extra, "finishedReason": REPLACED, "replacedBy": new.key})
                for e in self.finish(old.key, now, message)]

    def _preempt(self, target: Target, by: Workload, now: float) -> list[Event]:
        victim = target.workload
        victim.evicting = True
        reason = (f"Preempted to accommodate a workload (UID: {by.uid or by.key}) due to {target.why}; "
                  f"preemptor path: {self._path(by.cluster_queue)}; preemptee path: {self._path(victim.cluster_queue)}")
        victim.pending_reason = reason
        return [Event(now, EventKind.PREEMPTED, victim.key, victim.cluster_queue, reason,
                      extra={"preemptor": by.key, "preemptionReason": target.reason})]

    def _path(self, cq: str) -> str:
        parts = []
        node = self.tree.queues.get(cq)
        while node is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(parts))

    def _inadmissible(self, wl: Workload, reason: str, now: float, kind: PendingReason | None) -> list[Event]:
        cq = self.config.cluster_queues.get(wl.cluster_queue)
        if cq is not None and cq.strategy is Strategy.STRICT_FIFO:
            self.queues.block(cq.name)
        else:
            self.queues.set_aside(wl)
            if wl.parent:
                self._set_aside += 1  # a sibling variant may be next in this queue: worth another cycle now
        if self._note_pending(wl, reason, kind):
            return [Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        return []

    def _skip(self, wl: Workload, reason: str, now: float, kind: PendingReason) -> list[Event]:
        """Not admitted this cycle, but it stays at the head of its queue (Kueue: retried next cycle)."""
        if self._note_pending(wl, reason, kind):
            return [Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        return []

    def _note_pending(self, wl: Workload, reason: str, kind: PendingReason | None) -> bool:
        changed = wl.pending_reason != reason
        wl.pending_reason = reason
        wl.pending = kind
        return changed

    def _requeue_due(self, now: float) -> list[Event]:
        events: list[Event] = []
        due = sorted((at, key) for key, at in self._requeues.items() if at <= now)
        for _, key in due:
            del self._requeues[key]
            wl = self.workloads.get(key)
            if wl is not None and wl.requeue_at is not None and wl.state is WorkloadState.PENDING:
                wl.requeue_at = None
                wl.ordering_time = now
                self.queues.push(wl)
                events.append(Event(now, EventKind.REQUEUED, wl.key, wl.cluster_queue, "Backoff finished"))
        return events

    def deactivate(self, key: str, now: float, reason: str = "The workload is deactivated") -> list[Event]:
        """Deactivate a workload (``spec.active: false``): it is evicted if it holds quota and leaves its queue; a
        racing workload's variants are withdrawn."""
        wl = self.workloads[key]
        if wl.state is WorkloadState.INACTIVE:
            return []
        events = self._evict(wl, now, reason, "Deactivated", requeue=False)
        if wl.state is WorkloadState.FINISHED:  # a slice whose replacement waits: that one carries the job on
            return events
        events += self._withdraw_all(wl, now, "Variant withdrawn: its workload is deactivated")
        self.queues.discard(wl)
        wl.state = WorkloadState.INACTIVE
        return [*events, Event(now, EventKind.DEACTIVATED, key, wl.cluster_queue, reason)]


def _owner(wl: Workload) -> dict[str, str]:
    return {"job": wl.owner} if wl.owner else {}

