"""The scheduler: Kueue's admission cycle over an in-memory cache, for any clock.

Inputs arrive as method calls (configuration, workloads created or deleted, finished, admission
check states) with the time passed in; every decision is returned as :class:`Event` values, and
nothing here reads a clock, a random source or the outside world. One pass of :meth:`Scheduler.schedule`
runs Kueue's cycle repeatedly (heads, nominate, order, admit or preempt, requeue) until nothing more
can be admitted, so unlike Kueue (one head per ClusterQueue per cycle) it admits everything that fits
at that moment, in the order Kueue's successive cycles would.

Lifecycle of a workload: Pending -> QuotaReserved -> Admitted (when every admission check that
applies is Ready) -> Finished. Eviction (preemption, a check's Retry) returns it to Pending with its
quota released; a check's Rejected deactivates it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.flavorassigner import Assignment, assign_flavors
from flexq.scheduler.model import (
    Admission,
    CheckState,
    ClusterQueueSpec,
    CohortSpec,
    FlavorSpec,
    Mode,
    PodSetAssignment,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import find_victims
from flexq.scheduler.queues import QueueManager
from flexq.scheduler.quota import QuotaTree

__all__ = ["Config", "Scheduler"]

DEFAULT_CHECK_RETRY_DELAY = 15 * 60.0
"""Kueue's v1beta1 default ``retryDelayMinutes`` (15) for a check that says Retry."""


@dataclass(frozen=True, slots=True)
class Config:
    """The queue configuration the scheduler works with."""

    flavors: Mapping[str, FlavorSpec]
    cluster_queues: Mapping[str, ClusterQueueSpec]
    cohorts: Mapping[str, CohortSpec]
    check_retry_delay: Mapping[str, float]
    """Seconds a workload waits after a check's Retry before it queues again."""


class Scheduler:
    def __init__(self, config: Config | None = None) -> None:
        self.config = config or Config({}, {}, {}, {})
        self.tree = QuotaTree(self.config.cluster_queues.values(), self.config.cohorts.values())
        self.workloads: dict[str, Workload] = {}
        self.queues = QueueManager()
        self.last_assignment: dict[str, Assignment] = {}

    # --- configuration -----------------------------------------------------------------------------

    def configure(self, config: Config) -> None:
        """Replace the queue configuration; usage of workloads holding quota is carried over."""
        self.config = config
        self.tree = QuotaTree(config.cluster_queues.values(), config.cohorts.values())
        for wl in self.workloads.values():
            if wl.admission is not None and wl.cluster_queue in self.tree.queues:
                self.tree.add(wl.cluster_queue, wl.admission.usage())
        self.queues.wake(list(config.cluster_queues), self.workloads)

    # --- inputs ------------------------------------------------------------------------------------

    def add(self, wl: Workload, now: float) -> list[Event]:
        """A new workload enters its queue."""
        self.workloads[wl.key] = wl
        wl.state = WorkloadState.PENDING
        events = [Event(now, EventKind.CREATED, wl.key, wl.cluster_queue, extra=_owner(wl))]
        if wl.cluster_queue not in self.config.cluster_queues:
            reason = (f"LocalQueue {wl.queue} doesn't exist" if not wl.cluster_queue
                      else f"ClusterQueue {wl.cluster_queue} doesn't exist")
            self._note_pending(wl, reason)
            return [*events, Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        self.queues.push(wl)
        return events

    def delete(self, key: str, now: float) -> list[Event]:
        """The workload (or its job) was deleted: its quota is freed."""
        wl = self.workloads.pop(key, None)
        if wl is None:
            return []
        self.queues.discard(wl)
        self.last_assignment.pop(key, None)
        if wl.admission is not None:
            self._release(wl)
        return []

    def finish(self, key: str, now: float, reason: str = "JobFinished") -> list[Event]:
        wl = self.workloads[key]
        self.queues.discard(wl)
        if wl.admission is not None:
            self._release(wl)
        wl.state = WorkloadState.FINISHED
        wl.finished_at = now
        return [Event(now, EventKind.FINISHED, wl.key, wl.cluster_queue, reason)]

    def set_check(self, key: str, check: str, state: CheckState, now: float, message: str = "") -> list[Event]:
        """An admission check controller (or a person) reports a check's state for a workload."""
        wl = self.workloads[key]
        if not wl.holds_quota or check not in wl.checks:
            return []
        wl.checks[check] = state
        events = [Event(now, EventKind.CHECK, wl.key, wl.cluster_queue, message or state.value,
                        extra={"check": check, "state": state.value})]
        if state is CheckState.READY and wl.state is WorkloadState.QUOTA_RESERVED and all(
                s is CheckState.READY for s in wl.checks.values()):
            wl.state = WorkloadState.ADMITTED
            wl.admitted_at = now
            events.append(self._admitted_event(wl, now, "The workload is admitted"))
        elif state is CheckState.RETRY:
            events += self._evict(wl, now, f"At least one admission check is false: {check} asked to retry",
                                  "AdmissionCheck")
            wl.requeue_at = now + self.config.check_retry_delay.get(check, DEFAULT_CHECK_RETRY_DELAY)
            self.queues.discard(wl)
        elif state is CheckState.REJECTED:
            events += self._evict(wl, now, f"Admission check {check} rejected the workload", "AdmissionCheck")
            self.queues.discard(wl)
            wl.state = WorkloadState.INACTIVE
            events.append(Event(now, EventKind.DEACTIVATED, wl.key, wl.cluster_queue,
                                f"Admission check {check} rejected the workload"))
        return events

    def evict(self, key: str, now: float, reason: str, kind: str = "Evicted") -> list[Event]:
        """Evict from outside (a controller): release quota and queue again."""
        wl = self.workloads[key]
        return self._evict(wl, now, reason, kind)

    def next_requeue(self) -> float | None:
        """The earliest moment a workload waiting out a retry delay returns to its queue."""
        times = [wl.requeue_at for wl in self.workloads.values() if wl.requeue_at is not None]
        return min(times) if times else None

    # --- the cycle ---------------------------------------------------------------------------------

    def schedule(self, now: float) -> list[Event]:
        """Admit everything that can be admitted at ``now``; return what happened."""
        events = self._requeue_due(now)
        while True:
            heads = self._heads()
            if not heads:
                break
            nominated = [(wl, self._assign(wl)) for wl in heads]
            nominated.sort(key=lambda e: (e[1].borrow, -e[0].priority, e[0].queue_time, e[0].key))
            progress = False
            changed = False
            for wl, assignment in nominated:
                if changed:
                    assignment = self._assign(wl)  # an earlier admission this pass changed usage
                cq = self.config.cluster_queues[wl.cluster_queue]
                if assignment.mode is Mode.FIT:
                    events += self._reserve(wl, assignment, now)
                    progress = changed = True
                elif assignment.mode is Mode.PREEMPT:
                    victims = find_victims(wl, assignment, cq, self.tree, self._holders(wl.cluster_queue))
                    if victims:
                        for victim in victims:
                            events += self._preempt(victim, wl, now)
                        progress = changed = True
                    else:
                        events += self._inadmissible(wl, assignment.message() + "; no preemption targets found"
                                                     if assignment.message() else "no preemption targets found",
                                                     cq, now)
                else:
                    events += self._inadmissible(wl, assignment.message(), cq, now)
            if not progress:
                break
        return events

    def _heads(self) -> list[Workload]:
        heads: list[Workload] = []
        for name in self.queues.queues():
            cq = self.config.cluster_queues.get(name)
            if cq is None or self.queues.blocked(name):
                continue
            wl = self.queues.head(name, self.workloads)
            if wl is None:
                continue
            if not cq.active:
                self._note_pending(wl, f"ClusterQueue {name} is inactive")
                continue
            heads.append(wl)
        return heads

    def _assign(self, wl: Workload) -> Assignment:
        cq = self.config.cluster_queues[wl.cluster_queue]
        assignment = assign_flavors(wl, cq, self.tree, self.config.flavors)
        self.last_assignment[wl.key] = assignment
        return assignment

    def _holders(self, cq: str) -> Iterable[Workload]:
        return (w for w in self.workloads.values() if w.admission is not None)

    # --- state changes -----------------------------------------------------------------------------

    def _reserve(self, wl: Workload, assignment: Assignment, now: float) -> list[Event]:
        cq = self.config.cluster_queues[wl.cluster_queue]
        admission = Admission(cq.name, tuple(
            PodSetAssignment(p.name, dict(p.flavors), dict(p.usage), p.count) for p in assignment.podsets))
        self.tree.add(cq.name, admission.usage())
        self.queues.discard(wl)
        wl.admission = admission
        wl.state = WorkloadState.QUOTA_RESERVED
        wl.reserved_at = now
        wl.pending_reason = ""
        wl.checks = {name: CheckState.PENDING for name in cq.checks_for(admission.flavors())}
        events = [Event(now, EventKind.QUOTA_RESERVED, wl.key, cq.name,
                        f"Quota reserved in ClusterQueue {cq.name}", _podsets(admission))]
        if not wl.checks:
            wl.state = WorkloadState.ADMITTED
            wl.admitted_at = now
            events.append(self._admitted_event(wl, now, "The workload is admitted"))
        else:
            waiting = ", ".join(sorted(wl.checks))
            wl.pending_reason = f"waiting for admission checks: {waiting}"
        return events

    def _admitted_event(self, wl: Workload, now: float, reason: str) -> Event:
        assert wl.admission is not None
        return Event(now, EventKind.ADMITTED, wl.key, wl.cluster_queue, reason, _podsets(wl.admission))

    def _release(self, wl: Workload) -> None:
        assert wl.admission is not None
        if wl.cluster_queue in self.tree.queues:
            self.tree.remove(wl.cluster_queue, wl.admission.usage())
        wl.admission = None
        wl.checks = {}
        self._wake_tree(wl.cluster_queue)

    def _wake_tree(self, cq: str) -> None:
        if cq not in self.tree.queues:
            return
        root = self.tree.root(cq)
        queues = [name for name in self.tree.queues if self.tree.root(name) is root]
        self.queues.wake(queues, self.workloads)

    def _evict(self, wl: Workload, now: float, reason: str, kind: str) -> list[Event]:
        if wl.admission is None:
            return []
        self._release(wl)
        wl.state = WorkloadState.PENDING
        wl.ordering_time = now
        wl.reserved_at = wl.admitted_at = None
        wl.evictions += 1
        self.queues.push(wl)
        return [Event(now, EventKind.EVICTED, wl.key, wl.cluster_queue, reason, extra={"cause": kind})]

    def _preempt(self, victim: Workload, by: Workload, now: float) -> list[Event]:
        reason = f"Preempted to accommodate a workload (UID: {by.uid or by.key}) in ClusterQueue {by.cluster_queue}"
        events = [Event(now, EventKind.PREEMPTED, victim.key, victim.cluster_queue, reason,
                        extra={"preemptor": by.key})]
        return events + self._evict(victim, now, reason, "Preempted")

    def _inadmissible(self, wl: Workload, reason: str, cq: ClusterQueueSpec, now: float) -> list[Event]:
        if cq.strategy.value == "StrictFIFO":
            self.queues.block(cq.name)
        else:
            self.queues.set_aside(wl)
        if self._note_pending(wl, reason):
            return [Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        return []

    def _note_pending(self, wl: Workload, reason: str) -> bool:
        changed = wl.pending_reason != reason
        wl.pending_reason = reason
        return changed

    def _requeue_due(self, now: float) -> list[Event]:
        events: list[Event] = []
        for wl in sorted(self.workloads.values(), key=lambda w: (w.requeue_at or 0.0, w.key)):
            if wl.requeue_at is not None and wl.requeue_at <= now and wl.state is WorkloadState.PENDING:
                wl.requeue_at = None
                wl.ordering_time = now
                self.queues.push(wl)
                events.append(Event(now, EventKind.REQUEUED, wl.key, wl.cluster_queue, "Backoff finished"))
        return events


def _podsets(admission: Admission) -> dict[str, dict[str, str]]:
    return {ps.name: dict(sorted(ps.flavors.items())) for ps in admission.podsets}


def _owner(wl: Workload) -> dict[str, str]:
    return {"job": wl.owner} if wl.owner else {}
