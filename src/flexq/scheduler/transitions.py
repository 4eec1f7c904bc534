"""The scheduler's state changes: a workload reserves quota, is admitted, releases its quota, is evicted,
preempted, finished or deactivated, or waits (and says why).

:class:`Transitions` is mixed into :class:`~flexq.scheduler.scheduler.Scheduler`, above :class:`Racing`, and works
on the state declared there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.model import (
    Admission,
    CheckState,
    FlavorResource,
    PendingReason,
    PodSetAssignment,
    Strategy,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import Target
from flexq.scheduler.racing import Racing, podsets_of, without
from flexq.scheduler.slices import REPLACED

__all__ = ["Transitions"]


class Transitions(Racing):
    """Changes of a workload's state (a mixin of the scheduler: it provides what is declared here)."""

    instant_eviction: bool
    _replaced_by: dict[str, str]
    _set_aside: int
    _requeue_order: dict[str, float]

    def finish(self, key: str, now: float, reason: str = "JobFinished", outcome: str | None = None) -> list[Event]:
        """``key``'s job has ended; ``reason`` says how, and ``outcome`` (Succeeded or Failed) where it is known."""
        wl = self._workloads[key]
        self._queues.discard(wl)
        if wl.admission is not None:
            self._release(wl)
        withdrawn = self._withdraw_all(wl, now, "Variant withdrawn: its workload finished")
        wl.state = WorkloadState.FINISHED
        wl.finished_at = now
        extra = {"finishedReason": outcome} if outcome else {}
        return [*withdrawn, Event(now, EventKind.FINISHED, wl.key, wl.cluster_queue, reason, extra=extra)]

    def complete_eviction(self, key: str, now: float) -> list[Event]:
        """A preempted workload has stopped: its quota is released and it queues again."""
        wl = self._workloads.get(key)
        if wl is None or not wl.evicting:
            return []
        return self._evict(wl, now, wl.pending_reason or "Preempted", "Preempted")

    def deactivate(self, key: str, now: float, reason: str = "The workload is deactivated",
                   cause: str = "Deactivated") -> list[Event]:
        """Deactivate a workload (``spec.active: false``): it is evicted if it holds quota and leaves its queue; a
        racing workload's variants are withdrawn. ``cause``: the eviction's reason (Kueue's ``Deactivated``, or
        ``DeactivatedDueTo<cause>`` where Kueue deactivated it itself)."""
        wl = self._workloads[key]
        if wl.state is WorkloadState.INACTIVE:
            return []
        events = self._evict(wl, now, reason, cause, requeue=False)
        if wl.state is WorkloadState.FINISHED:  # a slice whose replacement waits: that one carries the job on
            return events
        events += self._withdraw_all(wl, now, "Variant withdrawn: its workload is deactivated")
        self._queues.discard(wl)
        wl.state = WorkloadState.INACTIVE
        return [*events, Event(now, EventKind.DEACTIVATED, key, wl.cluster_queue, reason)]

    def activate(self, key: str, now: float) -> list[Event]:
        """Reactivate a deactivated workload (``spec.active`` true again): it queues again, as Kueue requeues it
        (``Requeued``, ``Reactivated``)."""
        wl = self._workloads[key]
        if wl.state is not WorkloadState.INACTIVE:
            return []
        wl.state = WorkloadState.PENDING
        wl.pending_reason = ""
        wl.pending = None
        events = [Event(now, EventKind.REQUEUED, key, wl.cluster_queue, "The workload was reactivated")]
        if wl.cluster_queue not in self.config.cluster_queues:
            return events
        raced = None if wl.parent else self._race(wl, now)
        if raced is not None:
            return events + raced
        self._queues.push(wl)
        return events

    def _hold(self, wl: Workload) -> None:
        assert wl.admission is not None
        self.holding.setdefault(wl.cluster_queue, {})[wl.key] = wl
        if wl.cluster_queue in self._tree.queues:
            self._tree.add(wl.cluster_queue, wl.admission.usage())

    def _reserve(self, wl: Workload, assignment: Assignment, now: float,
                 discount: Mapping[FlavorResource, int] | None = None) -> list[Event]:
        cq = self.config.cluster_queues[wl.cluster_queue]
        admission = Admission.of(cq.name, tuple(
            PodSetAssignment(p.name, dict(p.flavors), dict(p.usage), p.count) for p in assignment.podsets))
        self._queues.discard(wl)
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
        asked = {ps.name: ps.count for ps in wl.podsets}
        fewer = {ps.name: ps.count for ps in admission.podsets if ps.count < asked.get(ps.name, ps.count)}
        events = [Event(now, EventKind.QUOTA_RESERVED, wl.key, cq.name,
                        f"Quota reserved in ClusterQueue {cq.name}", podsets_of(admission),
                        {"podSetCounts": fewer} if fewer else {})]
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
        if wl.cluster_queue in self._tree.queues:
            self._tree.remove(wl.cluster_queue, wl.admission.usage())
        wl.admission = None
        wl.evicting = False
        self._full.pop(wl.key, None)
        parent = wl.parent or wl.key
        if self._carrier.get(parent) == wl.key:
            # Another holder takes over the shared pod sets' quota (a sibling that reserved without them).
            del self._carrier[parent]
            for key in self.variants.get(parent, ()):
                if key in self._full:
                    self._make_full(self._workloads[key])
                    self._carrier[parent] = key
                    break
        self._wake_tree(wl.cluster_queue)

    def _wake_tree(self, cq: str) -> None:
        if cq not in self._tree.queues:
            return
        self._queues.wake(self._tree.members(cq), self._workloads)

    def _evict(self, wl: Workload, now: float, reason: str, cause: str, requeue: bool = True) -> list[Event]:
        if wl.admission is None:
            return []
        if wl.max_exec_seconds is not None and wl.admitted_at is not None:
            # Kueue's Admitted condition turning False: the whole seconds admitted count towards its maximum.
            wl.past_exec_seconds += int(now - wl.admitted_at)
        self._release(wl)
        wl.state = WorkloadState.PENDING
        wl.ordering_time = now
        wl.reserved_at = wl.admitted_at = None
        wl.checks = {}
        wl.pod_set_updates = {}
        wl.pods_ready_at = None
        wl.evictions += 1
        wl.pending_reason = ""
        evicted = [Event(now, EventKind.EVICTED, wl.key, wl.cluster_queue, reason, extra={"cause": cause})]
        replacement = self._workloads.get(self._replaced_by.get(wl.key, ""))
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
        self._queues.push(wl)
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
        node = self._tree.queues.get(cq)
        while node is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(parts))

    def _inadmissible(self, wl: Workload, reason: str, now: float, kind: PendingReason | None, *,
                      blocks: bool = True) -> list[Event]:
        """The head cannot be admitted now: it steps aside until something changes (a StrictFIFO queue's head blocks
        the queue instead, unless ``blocks`` is False: Kueue requeues it as inadmissible, as for a namespace that the
        ClusterQueue does not select)."""
        cq = self.config.cluster_queues.get(wl.cluster_queue)
        if blocks and cq is not None and cq.strategy is Strategy.STRICT_FIFO:
            self._queues.block(cq.name)
        else:
            self._queues.set_aside(wl)
            if wl.parent or not blocks:
                self._set_aside += 1  # a sibling variant (or the next workload) may be next in this queue: worth
                # another cycle now
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
            wl = self._workloads.get(key)
            if wl is not None and wl.requeue_at is not None and wl.state is WorkloadState.PENDING:
                wl.requeue_at = None
                wl.ordering_time = self._requeue_order.pop(key, now)
                events.append(Event(now, EventKind.REQUEUED, wl.key, wl.cluster_queue, "Backoff finished"))
                raced = None if wl.parent or wl.cluster_queue not in self.config.cluster_queues \
                    else self._race(wl, now)
                if raced is None:
                    self._queues.push(wl)
                else:
                    events += raced  # as after any eviction: a racing workload pursues every flavor again
        return events
