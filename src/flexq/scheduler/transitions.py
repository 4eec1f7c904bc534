"""The scheduler's state changes: a workload reserves quota, is admitted, releases its quota, is evicted,
preempted, finished or deactivated, or waits (and says why).

:class:`Transitions` acts on the :class:`~flexq.scheduler.state.SchedulerState`, through
:class:`~flexq.scheduler.holdings.Holdings` for quota and :class:`~flexq.scheduler.racing.Racing` for a racing
workload's variants.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.holdings import Holdings, podsets_of, without
from flexq.scheduler.model import (
    Admission,
    CheckState,
    DelayedTopology,
    FlavorResource,
    PendingReason,
    PodSetAssignment,
    PodSetUpdate,
    Strategy,
    Workload,
    WorkloadState,
)
from flexq.scheduler.phrases import Text
from flexq.scheduler.preemption import Target
from flexq.scheduler.racing import Racing
from flexq.scheduler.second_pass import PENDING_MESSAGE, pending_delayed
from flexq.scheduler.second_pass import queue as queue_second_pass
from flexq.scheduler.slices import REPLACED
from flexq.scheduler.state import SchedulerState

__all__ = ["Transitions", "placements"]


def placements(admission: Admission) -> dict[str, dict[str, object]]:
    """The topology assignments of ``admission``'s pod sets, as the event log writes them."""
    return {ps.name: {"levels": list(ps.topology.levels),
                      "domains": [{"values": list(values), "count": count} for values, count in ps.topology.domains]}
            for ps in admission.podsets if ps.topology is not None}


class Transitions:
    """Changes of a workload's state."""

    def __init__(self, state: SchedulerState, holdings: Holdings, racing: Racing) -> None:
        self.state = state
        self.holdings = holdings
        self.racing = racing
        self._made: tuple[Assignment, str, Admission] | None = None
        """The last assignment an admission was made of, in which ClusterQueue, and what was made of it."""

    def finish(self, key: str, now: float, reason: str, outcome: str | None = None) -> list[Event]:
        """``key``'s job has ended; ``reason`` says how, and ``outcome`` (Succeeded or Failed) where it is known."""
        state = self.state
        wl = state.workloads[key]
        state.queues.discard(wl)
        state.second_pass.pop(key, None)
        if wl.admission is not None:
            self.holdings.release(wl)
        withdrawn = self.racing.withdraw_all(wl, now, "Variant withdrawn: its workload finished")
        wl.state = WorkloadState.FINISHED
        wl.finished_at = now
        extra = {"finishedReason": outcome} if outcome else {}
        return [*withdrawn, Event(now, EventKind.FINISHED, wl.key, wl.cluster_queue, reason, extra=extra)]

    def complete_eviction(self, key: str, now: float) -> list[Event]:
        """A preempted workload has stopped: its quota is released and it queues again."""
        wl = self.state.workloads.get(key)
        if wl is None or not wl.evicting:
            return []
        return self.evict(wl, now, wl.pending_reason or "Preempted", "Preempted")

    def deactivate(self, key: str, now: float, reason: str, cause: str) -> list[Event]:
        """Deactivate a workload (``spec.active: false``): it is evicted if it holds quota and leaves its queue; a
        racing workload's variants are withdrawn. ``cause``: the eviction's reason (Kueue's ``Deactivated``, or
        ``DeactivatedDueTo<cause>`` where Kueue deactivated it itself)."""
        state = self.state
        wl = state.workloads[key]
        if wl.state is WorkloadState.INACTIVE:
            return []
        events = self.evict(wl, now, reason, cause, requeue=False)
        if wl.state is WorkloadState.FINISHED:  # a slice whose replacement waits: that one carries the job on
            return events
        events += self.racing.withdraw_all(wl, now, "Variant withdrawn: its workload is deactivated")
        state.queues.discard(wl)
        wl.state = WorkloadState.INACTIVE
        return [*events, Event(now, EventKind.DEACTIVATED, key, wl.cluster_queue, reason)]

    def activate(self, key: str, now: float) -> list[Event]:
        """Reactivate a deactivated workload (``spec.active`` true again): it queues again, as Kueue requeues it
        (``Requeued``, ``Reactivated``)."""
        state = self.state
        wl = state.workloads[key]
        if wl.state is not WorkloadState.INACTIVE:
            return []
        wl.state = WorkloadState.PENDING
        wl.pending_reason = ""
        wl.pending = None
        events = [Event(now, EventKind.REQUEUED, key, wl.cluster_queue, "The workload was reactivated")]
        if wl.cluster_queue not in state.config.cluster_queues:
            return events
        raced = None if wl.parent else self.racing.race(wl, now)
        if raced is not None:
            return events + raced
        state.queues.push(wl)
        return events

    def set_check(self, key: str, check: str, reported: CheckState, now: float, message: str,
                  retry_after: float | None, pod_set_updates: Mapping[str, PodSetUpdate] | None) -> list[Event]:
        """An admission check controller (or a person) reports a check's state for a workload (for a racing
        workload: for its variants that have the check)."""
        state = self.state
        wl = state.workloads[key]
        if key in state.variants and check not in wl.checks:
            out: list[Event] = []
            for variant in list(state.variants[key]):
                if variant in state.workloads:  # one that won may have withdrawn the others
                    out += self.set_check(variant, check, reported, now, message, retry_after, pod_set_updates)
            return out
        if not wl.holds_quota or check not in wl.checks:
            return []
        wl.checks[check] = reported
        if reported is CheckState.READY and pod_set_updates:
            wl.pod_set_updates[check] = dict(pod_set_updates)
        events = [Event(now, EventKind.CHECK, wl.key, wl.cluster_queue, message or reported.value,
                        extra={"check": check, "state": reported.value})]
        if reported is CheckState.READY and wl.state is WorkloadState.QUOTA_RESERVED and all(
                s is CheckState.READY for s in wl.checks.values()):
            events += self._checks_ready(wl, now)
        elif reported is CheckState.RETRY:
            # Queued again (or, racing, racing again) at once, or once its delay ends (requeue_due does it then).
            delay = retry_after if retry_after is not None else state.config.check_retry_delay.get(check, 0.0)
            events += self.evict(wl, now, f'Evicted due to AdmissionCheck in Retry state: "{check}"',
                                 "AdmissionCheck", requeue=delay <= 0)
            if wl.state is WorkloadState.FINISHED:
                return events
            if delay > 0:
                wl.requeue_at = now + delay
                state.requeues[wl.key] = wl.requeue_at
        elif reported is CheckState.REJECTED:
            reason = f'AdmissionCheck in Rejected state: "{check}"' + (f" ({message})" if message else "")
            events += self.evict(wl, now, reason, "AdmissionCheck", requeue=False)
            if wl.state is WorkloadState.FINISHED:
                return events
            wl.state = WorkloadState.INACTIVE
            events.append(Event(now, EventKind.DEACTIVATED, wl.key, wl.cluster_queue, reason))
            if wl.parent:
                events += self.racing.variant_lost(wl, now, reason)
        return self.racing.settle_admitted(events, now)

    def hold_stopped(self, now: float) -> list[Event]:
        """Kueue's workload controller on a stopped LocalQueue or ClusterQueue (the LocalQueue looked at first): a
        workload reserving quota gives it back (it waits, held); an admitted one runs on under ``Hold`` and is evicted
        under ``HoldAndDrain`` (``LocalQueueStopped``, ``ClusterQueueStopped``)."""
        state = self.state
        if not state.stops_due:
            return []
        state.stops_due = False
        stopped = state.config.stopped_queues
        queues = state.config.cluster_queues
        events: list[Event] = []
        for wl in list(state.workloads.values()):
            if wl.admission is None or wl.evicting or wl.key not in state.workloads:
                continue
            policy = stopped.get((wl.namespace, wl.queue))
            message, cause = "The LocalQueue is stopped", "LocalQueueStopped"
            if policy is None:
                cq = queues.get(wl.cluster_queue)
                if cq is None or cq.stop_policy == "None":
                    continue
                policy, message, cause = cq.stop_policy, "The ClusterQueue is stopped", "ClusterQueueStopped"
            if wl.state is WorkloadState.ADMITTED and policy != "HoldAndDrain":
                continue
            events += self.evict(wl, now, message, cause)
        return events

    def reserve(self, wl: Workload, assignment: Assignment, now: float,
                discount: Mapping[FlavorResource, int] | None = None) -> list[Event]:
        """``wl`` reserves quota as ``assignment`` says (less ``discount``, what a sibling variant holds for it), and
        is admitted at once when no admission check applies."""
        state = self.state
        cq = state.config.cluster_queues[wl.cluster_queue]
        admission = self._admission(cq.name, assignment)
        state.queues.discard(wl)
        if discount:
            state.full[wl.key] = admission
            wl.admission = without(admission, discount)
        else:
            wl.admission = admission
            if wl.parent and len(wl.allowed_flavors()) > 1:
                state.carrier.setdefault(wl.parent, wl.key)
        self.holdings.hold(wl)
        wl.state = WorkloadState.QUOTA_RESERVED
        wl.reserved_at = now
        wl.pending = None
        wl.checks = {name: wl.checks.get(name, CheckState.PENDING)
                     for name in cq.checks_for(admission.flavors())} if cq.checks else {}
        asked = {ps.name: ps.count for ps in wl.podsets}
        fewer = {ps.name: ps.count for ps in admission.podsets if ps.count < asked.get(ps.name, ps.count)}
        placed = placements(admission)
        delayed = {ps.name: ps.delayed.value for ps in admission.podsets if ps.delayed is not None}
        podsets = podsets_of(admission)
        events = [Event(now, EventKind.QUOTA_RESERVED, wl.key, cq.name, f"Quota reserved in ClusterQueue {cq.name}",
                        podsets,
                        {**({"podSetCounts": fewer} if fewer else {}),
                         **({"topologyAssignments": placed} if placed else {}),
                         **({"delayedTopologyRequests": delayed} if delayed else {})})]
        if all(s is CheckState.READY for s in wl.checks.values()):
            # Admitted as it reserved: both events name the same flavors (one mapping, which readers only read).
            events += self._checks_ready(wl, now, podsets if wl.admission is admission else None)
        else:
            wl.pending_reason = "The workload has not all checks ready"
        return events

    def _admission(self, cluster_queue: str, assignment: Assignment) -> Admission:
        """The admission ``assignment`` makes in ``cluster_queue``. An admission is a value (frozen, its mappings
        read-only): workloads admitted by one assignment (the nomination gives again the last one that fitted for a
        queue and a shape) share it, made once."""
        made = self._made
        if made is not None and made[0] is assignment and made[1] == cluster_queue:
            return made[2]
        admission = Admission.of(cluster_queue, tuple(
            PodSetAssignment(p.name, dict(p.flavors), dict(p.usage), p.count, p.topology,
                             DelayedTopology.PENDING if p.delayed else None) for p in assignment.podsets))
        self._made = (assignment, cluster_queue, admission)
        return admission

    def _checks_ready(self, wl: Workload, now: float, podsets: dict[str, dict[str, str]] | None = None
                      ) -> list[Event]:
        """Every admission check of ``wl`` is Ready: it is admitted, unless a delayed topology request waits for
        its second pass (Kueue's ``PendingDelayedTopologyRequests``)."""
        if pending_delayed(wl):
            wl.pending_reason = PENDING_MESSAGE
            queue_second_pass(self.state, wl.key, now)
            return []
        wl.state = WorkloadState.ADMITTED
        wl.admitted_at = now
        wl.pending_reason = ""
        return [self.admitted_event(wl, now, podsets)]

    def admit_placed(self, wl: Workload, admission: Admission, now: float) -> list[Event]:
        """``wl``'s second pass placed its delayed pod sets (``admission``, its usage unchanged): it is admitted."""
        self.state.second_pass.pop(wl.key, None)
        wl.admission = admission
        wl.state = WorkloadState.ADMITTED
        wl.admitted_at = now
        wl.pending_reason = ""
        event = self.admitted_event(wl, now)
        return [dataclasses.replace(event, extra={"topologyAssignments": placements(admission)})]

    def admitted_event(self, wl: Workload, now: float, podsets: dict[str, dict[str, str]] | None = None) -> Event:
        """The event of ``wl``'s admission (its admission's pod sets and flavors: ``podsets`` where already made)."""
        assert wl.admission is not None
        return Event(now, EventKind.ADMITTED, wl.key, wl.cluster_queue, "The workload is admitted",
                     podsets if podsets is not None else podsets_of(wl.admission))

    def evict(self, wl: Workload, now: float, reason: Text, cause: str, requeue: bool = True,
              underlying: str = "") -> list[Event]:
        """``wl`` gives back its quota and (``requeue``) queues again, or races again; a slice whose replacement
        waits is finished instead. Nothing happens to a workload that holds no quota. ``underlying``: the
        eviction's underlying cause in its scheduling stats, where its Evicted reason does not name one."""
        state = self.state
        if wl.admission is None:
            return []
        if wl.max_exec_seconds is not None and wl.admitted_at is not None:
            # Kueue's Admitted condition turning False: the whole seconds admitted count towards its maximum.
            wl.past_exec_seconds += int(now - wl.admitted_at)
        self.holdings.release(wl)
        state.second_pass.pop(wl.key, None)
        wl.state = WorkloadState.PENDING
        wl.ordering_time = now
        wl.reserved_at = wl.admitted_at = None
        wl.checks = {}
        wl.pod_set_updates = {}
        wl.pods_ready_at = None
        wl.count_eviction(cause, underlying)
        wl.pending_reason = ""
        evicted = [Event.told(now, EventKind.EVICTED, wl.key, wl.cluster_queue, reason, extra={"cause": cause})]
        replacement = state.workloads.get(state.replaced_by.get(wl.key, ""))
        if replacement is not None and replacement.state is WorkloadState.PENDING:
            # A slice evicted while its replacement waits is not queued again: the job's next admission is the
            # replacement's, with quota for all its pods (as Kueue finishes evicted slices).
            return evicted + self.finish_replaced(wl, replacement, now,
                                                  "Replaced to accommodate a new workload slice")
        evicted += self.racing.withdraw_all(wl, now, "Variant withdrawn: its workload was evicted and races anew")
        if not requeue:
            return evicted
        raced = None if wl.parent else self.racing.race(wl, now)
        if raced is not None:
            return evicted + raced  # as Kueue: an evicted parent pursues every flavor again
        state.queues.push(wl)
        return evicted

    def finish_replaced(self, old: Workload, new: Workload, now: float, message: str) -> list[Event]:
        """Finish slice ``old``, replaced by ``new`` (which from now on stands alone)."""
        self.state.replaced_by.pop(old.key, None)
        new.replaces = ""
        return [dataclasses.replace(e, extra={**e.extra, "finishedReason": REPLACED, "replacedBy": new.key})
                for e in self.finish(old.key, now, message)]

    def preempt(self, target: Target, by: Workload, now: float) -> list[Event]:
        """``by`` preempts ``target``'s workload: it is marked evicting (it holds its quota until it stops)."""
        victim = target.workload
        victim.evicting = True
        reason = (f"Preempted to accommodate a workload (UID: {by.uid or by.key}) due to {target.why}; "
                  f"preemptor path: {self._path(by.cluster_queue)}; preemptee path: {self._path(victim.cluster_queue)}")
        victim.pending_reason = reason
        return [Event(now, EventKind.PREEMPTED, victim.key, victim.cluster_queue, reason,
                      extra={"preemptor": by.key, "preemptionReason": target.reason})]

    def _path(self, cq: str) -> str:
        parts = []
        node = self.state.tree.queues.get(cq)
        while node is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(parts))

    def inadmissible(self, wl: Workload, reason: str, now: float, kind: PendingReason | None, *,
                     blocks: bool = True) -> list[Event]:
        """The head cannot be admitted now: it steps aside until something changes (a StrictFIFO queue's head blocks
        the queue instead, unless ``blocks`` is False: Kueue requeues it as inadmissible, as for a namespace that the
        ClusterQueue does not select)."""
        state = self.state
        cq = state.config.cluster_queues.get(wl.cluster_queue)
        if blocks and cq is not None and cq.strategy is Strategy.STRICT_FIFO:
            state.queues.block(cq.name)
        else:
            state.queues.set_aside(wl)
            if wl.parent or not blocks:
                state.set_aside += 1  # a sibling variant (or the next workload) may be next in this queue: worth
                # another cycle now
        if self.note_pending(wl, reason, kind):
            return [Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        return []

    def skip(self, wl: Workload, reason: str, now: float, kind: PendingReason) -> list[Event]:
        """Not admitted this cycle, but it stays at the head of its queue (Kueue: retried next cycle)."""
        if self.note_pending(wl, reason, kind):
            return [Event(now, EventKind.PENDING, wl.key, wl.cluster_queue, reason)]
        return []

    def note_pending(self, wl: Workload, reason: str, kind: PendingReason | None) -> bool:
        changed = wl.pending_reason != reason
        wl.pending_reason = reason
        wl.pending = kind
        return changed

    def requeue_due(self, now: float) -> list[Event]:
        """The workloads whose retry delay has ended by ``now`` queue again."""
        state = self.state
        events: list[Event] = []
        due = sorted((at, key) for key, at in state.requeues.items() if at <= now)
        for _, key in due:
            del state.requeues[key]
            wl = state.workloads.get(key)
            if wl is not None and wl.requeue_at is not None and wl.state is WorkloadState.PENDING:
                wl.requeue_at = None
                wl.ordering_time = state.requeue_order.pop(key, now)
                events.append(Event(now, EventKind.REQUEUED, wl.key, wl.cluster_queue, "Backoff finished"))
                raced = None if wl.parent or wl.cluster_queue not in state.config.cluster_queues \
                    else self.racing.race(wl, now)
                if raced is None:
                    state.queues.push(wl)
                else:
                    events += raced  # as after any eviction: a racing workload pursues every flavor again
        return events
