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

The scheduler is built in layers, each a module: :mod:`flexq.scheduler.racing` (concurrent admission),
:mod:`flexq.scheduler.transitions` (state changes), :mod:`flexq.scheduler.cycle` (the cycle), and this one (the
inputs).
"""

from __future__ import annotations

from collections.abc import Callable

from flexq.scheduler.cycle import Cycling
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.flavorassigner import Assignment
from flexq.scheduler.model import (
    Admission,
    CheckState,
    FlavorResource,
    PendingReason,
    PodSet,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import Target
from flexq.scheduler.queue_config import Config
from flexq.scheduler.queues import QueueManager
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.slices import shrunk

__all__ = ["Config", "Scheduler"]


class Scheduler(Cycling):
    def __init__(self, config: Config | None = None, *, instant_eviction: bool = False) -> None:
        self.config = config or Config({}, {}, {})
        self.instant_eviction = instant_eviction
        self._tree = QuotaTree(self.config.cluster_queues.values(), self.config.cohorts.values())
        self._workloads: dict[str, Workload] = {}
        self.holding: dict[str, dict[str, Workload]] = {}
        self._queues = QueueManager()
        self.last_assignment: dict[str, Assignment] = {}
        self._failed: dict[tuple[object, ...], tuple[int, Assignment]] = {}
        """Assignments that found no way in, by (queue, workload shape), valid while their tree is unchanged."""
        self._requeues: dict[str, float] = {}
        """Workloads waiting out a retry delay: key -> when they queue again."""
        self._requeue_order: dict[str, float] = {}
        """Where a workload waiting out a delay takes its place in the queue when it comes back (default: then)."""
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
        self._stops_due = _any_stopped(self.config)
        """Queues were stopped since the last pass: their workloads that hold quota are looked at."""

    # --- what the scheduler holds, for its drivers (the live controller, the simulator, the capacity driver) ---

    def workload(self, key: str) -> Workload | None:
        """The workload ``key`` (None when the scheduler does not hold it)."""
        return self._workloads.get(key)

    def held(self, key: str) -> Workload:
        """The workload ``key``, which the scheduler holds (KeyError otherwise)."""
        return self._workloads[key]

    def knows(self, key: str) -> bool:
        return key in self._workloads

    def workloads(self) -> list[Workload]:
        """Every workload held, in the order they were added."""
        return list(self._workloads.values())

    def workload_keys(self) -> list[str]:
        return list(self._workloads)

    def waiting(self, wl: Workload) -> bool:
        """A pending workload in its queue's line (not set aside as inadmissible)."""
        return self._queues.queued(wl) and not self._queues.aside(wl)

    def in_line(self, cq: str) -> list[Workload] | None:
        """The workloads waiting in ClusterQueue ``cq`` for quota, in the order it would try them (those set aside as
        inadmissible included, in their place); None where no such ClusterQueue is configured. Kueue's visibility
        API shows this line (``pendingworkloads``)."""
        if cq not in self.config.cluster_queues:
            return None
        return self._queues.in_line(cq, self._workloads)

    def has_cluster_queue(self, name: str) -> bool:
        """The ClusterQueue is in the quota tree (configured and known)."""
        return name in self._tree.queues

    def usage(self, cq: str, fr: FlavorResource) -> int:
        """What the ClusterQueue's admitted workloads hold of ``fr`` (0 for a queue not in the tree)."""
        return self._tree.usage(cq, fr) if cq in self._tree.queues else 0

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        return self._tree.nominal(cq, fr) if cq in self._tree.queues else 0

    def queue_usage(self, cq: str) -> dict[FlavorResource, int]:
        """What the ClusterQueue's admitted workloads hold, by flavor and resource."""
        return dict(self._tree.queues[cq].usage) if cq in self._tree.queues else {}

    def cohort_root(self, cq: str) -> str | None:
        """The name of the top of the ClusterQueue's cohort tree (the queue itself when it has no cohort)."""
        return self._tree.root(cq).name if cq in self._tree.queues else None

    def explain(self, key: str, reason: str) -> None:
        """Why the workload waits, as its driver knows it (nodes booting, a ProvisioningRequest, an unplaceable
        pod): its pending reason, shown in its status."""
        wl = self._workloads.get(key)
        if wl is not None:
            wl.pending_reason = reason

    def note_race_reasons(self) -> None:
        """Each workload still racing says why, as its variants stand now (its pending reason)."""
        for key in self.variants:
            self._workloads[key].pending_reason = self.race_reason(key)

    def configure(self, config: Config) -> None:
        """Replace the queue configuration; usage of workloads holding quota is carried over."""
        self.config = config
        self._failed.clear()
        self._tree = QuotaTree(config.cluster_queues.values(), config.cohorts.values())
        for wl in self._workloads.values():
            if wl.admission is not None and wl.cluster_queue in self._tree.queues:
                self._tree.add(wl.cluster_queue, wl.admission.usage())
        for wl in list(self._workloads.values()):
            self.enqueue(wl, 0.0 if wl.ordering_time is None else wl.ordering_time)
        self._queues.wake(list(config.cluster_queues), self._workloads)
        self._stops_due = _any_stopped(config)

    def hold_stopped(self, now: float) -> list[Event]:
        """Kueue's workload controller on a stopped LocalQueue or ClusterQueue (the LocalQueue looked at first): a
        workload reserving quota gives it back (it waits, held); an admitted one runs on under ``Hold`` and is evicted
        under ``HoldAndDrain`` (``LocalQueueStopped``, ``ClusterQueueStopped``)."""
        if not self._stops_due:
            return []
        self._stops_due = False
        stopped = self.config.stopped_queues
        queues = self.config.cluster_queues
        events: list[Event] = []
        for wl in list(self._workloads.values()):
            if wl.admission is None or wl.evicting or wl.key not in self._workloads:
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
            events += self._evict(wl, now, message, cause)
        return events

    def enqueue(self, wl: Workload, now: float) -> None:
        """Queue a pending workload that is not queued, racing or waiting out a retry delay (its ClusterQueue
        appeared, or the configuration changed)."""
        if wl.state is not WorkloadState.PENDING or wl.requeue_at is not None or wl.key in self.variants or \
                wl.cluster_queue not in self.config.cluster_queues or self._queues.queued(wl):
            return
        raced = None if wl.parent else self._race(wl, now)
        if raced is None:
            self._queues.push(wl)
        else:
            self._deferred += raced

    def add(self, wl: Workload, now: float) -> list[Event]:
        """A new workload enters its queue (or, already holding quota, is restored as it was)."""
        self._workloads[wl.key] = wl
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
        self._queues.push(wl)
        return events

    def delete(self, key: str, now: float) -> list[Event]:
        """The workload (or its job) was deleted: its quota is freed."""
        wl = self._workloads.pop(key, None)
        if wl is None:
            return []
        if self._replaced_by.get(wl.replaces) == key:
            del self._replaced_by[wl.replaces]
        self._queues.discard(wl)
        self.last_assignment.pop(key, None)
        self._requeues.pop(key, None)
        self._requeue_order.pop(key, None)
        if wl.admission is not None:
            self._release(wl)
        return self._withdraw_all(wl, now, "Variant withdrawn: its workload was deleted")

    def set_check(self, key: str, check: str, state: CheckState, now: float, message: str = "",
                  retry_after: float | None = None,
                  pod_set_updates: dict[str, dict[str, str]] | None = None) -> list[Event]:
        """An admission check controller (or a person) reports a check's state for a workload (for a racing
        workload: for its variants that have the check)."""
        wl = self._workloads[key]
        if key in self.variants and check not in wl.checks:
            out: list[Event] = []
            for variant in list(self.variants[key]):
                if variant in self._workloads:  # one that won may have withdrawn the others
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
                self._queues.discard(wl)
                wl.requeue_at = now + delay
                self._requeues[wl.key] = wl.requeue_at
        elif state is CheckState.REJECTED:
            reason = f'AdmissionCheck in Rejected state: "{check}"' + (f" ({message})" if message else "")
            events += self._evict(wl, now, reason, "AdmissionCheck")
            if wl.state is WorkloadState.FINISHED:
                return events
            self._queues.discard(wl)
            wl.state = WorkloadState.INACTIVE
            events.append(Event(now, EventKind.DEACTIVATED, wl.key, wl.cluster_queue, reason))
            if wl.parent:
                events += self._variant_lost(wl, now, reason)
        return self._settle_admitted(events, now)

    def evict(self, key: str, now: float, reason: str, cause: str = "Evicted") -> list[Event]:
        """Evict from outside (a controller): release the quota and queue again."""
        return self._evict(self._workloads[key], now, reason, cause)

    def evict_until(self, key: str, now: float, reason: str, cause: str, until: float,
                    ordering_time: float | None = None) -> list[Event]:
        """Evict from outside and keep out of the queue until ``until`` (Kueue's requeue backoff, as after a
        PodsReady timeout); it then queues again (a racing workload races again) ordered by ``ordering_time``
        (None: the moment it comes back)."""
        wl = self._workloads[key]
        events = self._evict(wl, now, reason, cause, requeue=False)
        if wl.state is not WorkloadState.PENDING:
            return events  # a slice whose replacement waits: that one carries the job on
        self._queues.discard(wl)
        wl.requeue_at = until
        self._requeues[key] = until
        if ordering_time is not None:
            self._requeue_order[key] = ordering_time
        return events

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

    def resize(self, key: str, podsets: tuple[PodSet, ...], now: float) -> list[Event]:
        """The job's pod counts changed in place: an elastic job that scaled down (its quota shrinks at once), or
        a workload not yet admitted (it is nominated again with its new shape). Growth of an admitted workload
        takes a new slice instead (:mod:`flexq.scheduler.slices`)."""
        wl = self._workloads[key]
        if wl.admission is not None:
            admission = shrunk(wl.admission, {p.name: p.count for p in podsets})
            if wl.cluster_queue in self._tree.queues:
                self._tree.remove(wl.cluster_queue, wl.admission.usage())
                self._tree.add(wl.cluster_queue, admission.usage())
            wl.admission = admission
            self._wake_tree(wl.cluster_queue)
        wl.podsets = podsets
        if wl.key in self.variants:  # racing: the variants race anew with the new shape
            events = self._withdraw_all(wl, now, "Variant withdrawn: its workload was resized")
            return events + (self._race(wl, now) or [])
        if wl.state is WorkloadState.PENDING and self._queues.queued(wl):
            self._queues.discard(wl)
            self._queues.push(wl)
        return []


def _any_stopped(config: Config) -> bool:
    return bool(config.stopped_queues) or any(cq.stop_policy != "None" for cq in config.cluster_queues.values())


def _owner(wl: Workload) -> dict[str, str]:
    return {"job": wl.owner} if wl.owner else {}
