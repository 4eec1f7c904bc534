"""The control plane: the scheduler, the capacity driver and the job integration, one step the same on both clocks.

The live server's queue controller and the simulator each feed it what happened (a job queued, a check set,
a job finished, a timer due) and let it settle. It holds the :class:`~flexq.scheduler.scheduler.Scheduler`, the
:class:`~flexq.capacity.driver.CapacityDriver` where capacity is modelled, the timers both run on, and what turns
a job into its workload (the LocalQueues and priority classes of the configuration it was given). Every event is
told (to the simulator's log, or to the controller's writes) the moment it happens, then acted on: the capacity
driver places, provisions and releases; without one, an admitted workload starts at once (where the clock's
owner asks for that). What the driver does in turn (a node came, a request was refused) comes back through
:meth:`ControlPlane.emit`, so the two clocks see the same events in the same order.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from flexq.api import DEFAULT_KUEUE_CONFIG, KueueConfig, QuantityError, parse_quantity
from flexq.capacity import (
    CapacityConfig,
    CapacityDriver,
    ProvisioningState,
    RequestNote,
    finishes_sooner_here,
    provisioning_settings,
)
from flexq.control.answer_times import AnswerTimes
from flexq.control.pods_ready import PodsReadyTimer
from flexq.control.run_times import RunTimes
from flexq.control.vocabulary import (
    CapacityChanged,
    CheckSet,
    Input,
    JobDeleted,
    JobFinished,
    JobHooks,
    JobQueued,
    JobResized,
    JobStarted,
    Objects,
    PodsReady,
    QueuesReconfigured,
)
from flexq.jobs import JobError, Priorities, local_queues_of, make_workload, priority_class_ref
from flexq.objects import parse_time
from flexq.scheduler import (
    COUNTDOWNS,
    FAILED_TO_START,
    NAMED_MOMENTS,
    Event,
    EventKind,
    PodSet,
    Scheduler,
    Text,
    UsageLedger,
    Workload,
    WorkloadState,
    build_config,
    start_conflict,
)
from flexq.timers import TimerHeap

__all__ = ["MAX_EXEC_CAUSE", "MAX_EXEC_MESSAGE", "SETTLE_PASSES", "ControlPlane"]

MAX_EXEC_CAUSE: Final = "DeactivatedDueToMaximumExecutionTimeExceeded"
"""The Evicted reason of a workload deactivated for running past its maximum execution time (Kueue's
``Deactivated`` with the underlying cause ``MaximumExecutionTimeExceeded``)."""
MAX_EXEC_MESSAGE: Final = "The workload is deactivated due to exceeding the maximum execution time"

SETTLE_PASSES: Final = 100
"""Scheduling passes in one step at the most: each pass acts on what the last admitted or evicted (a started job
may free or take capacity that the next pass sees); a step that has not settled by then goes on at the next."""

_CAPACITY: Final = frozenset(kind for kind in EventKind if kind.capacity)
"""The capacity driver's event kinds (:attr:`EventKind.capacity`), looked up once per event told."""

class ControlPlane:
    """The scheduler, the capacity driver (if any), the job integration and the timers, driven by one clock's loop.

    ``tell`` hears every event as it happens, capacity events included. ``hooks`` start a workload's job (called
    by the driver once its pods are placed, and, without a driver, on its admission when ``start_on_admission``:
    the live server starts a job when its admission is written instead) and say what is known of its run time.
    ``virtual``: the reasons of the events told name moments (``t=...``) rather than count down to them (each event
    leaves the plane worded by its clock: :meth:`emit`). What happens to jobs comes in
    through :meth:`feed`, in the words of :mod:`flexq.control.vocabulary`.
    """

    def __init__(self, timers: TimerHeap, tell: Callable[[Event], None], hooks: JobHooks | None = None, *,
                 scheduler: Scheduler | None = None, start_on_admission: bool = True, virtual: bool = False,
                 run_times: RunTimes | None = None, answer_times: AnswerTimes | None = None,
                 kueue: KueueConfig = DEFAULT_KUEUE_CONFIG) -> None:
        self.scheduler = scheduler or Scheduler(instant_eviction=True)
        self.kueue = kueue
        """Kueue's Configuration: waitForPodsReady, resource transformations, the frameworks managed."""
        self.run_times = run_times or RunTimes()
        """What jobs declare of their run times, and what the jobs that finished took (learned as they finish)."""
        self.provisioning_checks: frozenset[str] = frozenset()
        """The admission checks that are ProvisioningRequest checks (Kueue's provisioning controller's)."""
        self.answer_times = answer_times or AnswerTimes()
        """ProvisioningRequests in flight, and how long the cloud took to answer the last ones, by pool."""
        self.timers = timers
        self.driver: CapacityDriver | None = None
        self.local_queues: dict[tuple[str, str], str] = {}
        """(namespace, LocalQueue) -> its ClusterQueue."""
        self.priorities = Priorities()
        self.hooks = hooks or JobHooks()
        self._tell = tell
        self._listeners: list[Callable[[Event], None]] = []
        self._start_on_admission = start_on_admission
        self._words = NAMED_MOMENTS if virtual else COUNTDOWNS
        """How events' reasons name a moment: the simulator's log names it (t=...), the live server's events count
        down to it."""
        self._began: dict[str, float] = {}
        """When running workloads' jobs reported they began (:class:`JobStarted`)."""
        self._priority_classes: dict[str, str] = {}
        """Workload -> the name of the priority class it takes its priority from (none: ""), where
        :attr:`names_priority_classes`."""
        self.names_priority_classes = False
        """Whether :meth:`workload_for` notes each workload's priority class (for Kueue's metrics' labels)."""
        self._attempt_listeners: list[Callable[[bool, float], None]] = []
        self.pods_ready = PodsReadyTimer(kueue.pods_ready, timers, lambda: self.scheduler, self.emit)
        fair = kueue.admission_fair_sharing
        self.fair_usage = UsageLedger(fair) if fair is not None else None
        """Kueue's admission fair sharing: the LocalQueues' decaying usage (None: off). Kept across schedulers (the
        live server's read back), as Kueue keeps it in its LocalQueues' status."""
        self.scheduler.use_fair_sharing(self.fair_usage)
        if self.fair_usage is not None and not virtual:
            # The live server writes each LocalQueue's usage as it is sampled; the simulator reads it when it needs it
            # (the samples due are taken then, in order), and so runs no timer that would outlive its jobs.
            self._sample_due()

    # --- configuration ---------------------------------------------------------------------------------

    def configure(self, objects: Objects, capacity: CapacityConfig | None, now: float) -> None:
        """The queues, flavors, checks and priority classes, and the capacity modelled (None: none), from ``now``.
        flexq's policy races workloads across their flavors where capacity is modelled; Kueue-compatible
        (``fallback: false``) does not."""
        self.local_queues = local_queues_of(objects)
        if self.fair_usage is not None:
            self._seed_fair_usage(objects.get("LocalQueue", []))
            self.fair_usage.know(self.local_queues, self.timers.now())
        self.priorities = Priorities.of(objects)
        self.use_capacity(capacity, objects)
        race = capacity is not None and capacity.fallback
        self.scheduler.configure(dataclasses.replace(build_config(objects), race=race,
                                                     fair_sharing=self.kueue.fair_sharing,
                                                     replace_failed_nodes=self.kueue.replace_failed_nodes,
                                                     replace_fail_fast=self.kueue.gate(
                                                         "TASFailedNodeReplacementFailFast"),
                                                     replace_on_pod_termination=self.kueue.gate(
                                                         "TASReplaceNodeOnPodTermination"),
                                                     replace_on_taints=self.kueue.gate("TASReplaceNodeOnNodeTaints"),
                                                     balanced_placement=self.kueue.gate("TASBalancedPlacement"),
                                                     recompute_tas=self.kueue.gate(
                                                         "TASRecomputeAssignmentWithinSchedulingCycle"),
                                                     not_ready_fixed_time=self.kueue.gate(
                                                         "TASReplaceNodeDueToNotReadyOverFixedTime")), now)
        if self.driver is None:
            # Without nodes modelled the plane keeps flexq's guard itself (the driver does where it drives).
            self.scheduler.migration_check = self._migration_check
        else:
            # Capacity modelled only now (the live server's first node pool), or a provisioning check new: the
            # workloads that wait on one with no request yet get theirs.
            self.driver.adopt()

    def _seed_fair_usage(self, local_queues: Iterable[Mapping[str, Any]]) -> None:
        """Admission fair sharing goes on from the usage the LocalQueues' statuses kept (a server started again), as
        Kueue's LocalQueue controller seeds its ledger from ``status.fairSharing.admissionFairSharingStatus``."""
        assert self.fair_usage is not None
        for lq in local_queues:
            kept = ((lq.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
            if not isinstance(kept, Mapping):
                continue
            try:
                consumed = {str(name): float(parse_quantity(amount).value)
                            for name, amount in (kept.get("consumedResources") or {}).items()}
            except QuantityError:
                continue  # not Kueue's: the LocalQueue starts afresh
            moment = parse_time(kept.get("lastUpdate"))
            meta = lq.get("metadata") or {}
            self.fair_usage.seed((str(meta.get("namespace") or "default"), str(meta.get("name"))), consumed,
                                 moment.timestamp() if moment is not None else self.timers.now())

    def use_capacity(self, capacity: CapacityConfig | None, objects: Objects | None = None) -> None:
        """Model ``capacity`` from now on: the driver is made the first time, and keeps its nodes, requests and
        timers when pools change; None drops it. ``objects`` give the ProvisioningRequestConfigs."""
        provisioning = provisioning_settings(objects or {})
        self.provisioning_checks = frozenset(provisioning)
        if capacity is None:
            self.driver = None
        elif self.driver is None:
            self.driver = CapacityDriver(capacity, self.scheduler, self.timers, self.emit, self._started,
                                         provisioning, run_time=self.hooks.run_time,
                                         finish_eta=self.hooks.finish_eta, pods_ready=self._pods_bound)
        else:
            self.driver.attach(self.scheduler)
            self.driver.provisioning = provisioning
            self.driver.set_pools(list(capacity.pools))

    def reset(self) -> None:
        """A fresh scheduler, to be configured and filled again (the live server's state read back from the
        store); the driver drives it from the next :meth:`configure`."""
        self.scheduler = Scheduler(instant_eviction=True)
        self.scheduler.use_fair_sharing(self.fair_usage)

    # --- job integration -------------------------------------------------------------------------------

    def workload_for(self, kind: str, group: str, job: Mapping[str, Any], created: float,
                     pod_sets: tuple[PodSet, ...] | None = None) -> Workload:
        """The workload of a queued job, in the ClusterQueue its LocalQueue points to and at its priority class's
        priority; raises :class:`~flexq.jobs.workload.JobError` for a job that cannot have one, or whose framework
        Kueue's Configuration does not manage. ``pod_sets``, if given, are counted as they are (see
        :meth:`counted`)."""
        if not self.kueue.manages(kind):
            raise JobError(f"{kind} {(job.get('metadata') or {}).get('namespace') or 'default'}/"
                           f"{(job.get('metadata') or {}).get('name')} is not managed: the Kueue configuration's "
                           f"integrations.frameworks does not list {self.kueue.framework_of(kind)}")
        wl = make_workload(kind, group, job, local_queues=self.local_queues, priorities=self.priorities,
                           created=created, pod_sets=pod_sets)
        if wl.max_exec_seconds is None and self.kueue.gate("ClusterQueueMaxExecutionTime"):
            # KEP-7029: the ClusterQueue's default, where the job's label gives none (read once, at creation)
            cq = self.scheduler.config.cluster_queues.get(wl.cluster_queue)
            wl.max_exec_seconds = cq.default_max_exec_seconds if cq is not None else None
        if pod_sets is None and self.kueue.resources:
            wl.podsets = self.counted(wl.podsets)
        if self.names_priority_classes:
            self.name_priority_class(wl.key, self.priority_class_of(kind, job))
        return wl

    def counted(self, pod_sets: tuple[PodSet, ...]) -> tuple[PodSet, ...]:
        """Pod sets with their requests as Kueue counts them against quota (its Configuration's
        ``resources.excludeResourcePrefixes`` and ``resources.transformations``)."""
        resources = self.kueue.resources
        if not resources:
            return pod_sets
        return tuple(dataclasses.replace(p, requests=resources.apply(p.requests)) for p in pod_sets)

    def name_priority_class(self, key: str, ref: Mapping[str, str] | None) -> None:
        """Remember the priority class (``spec.priorityClassRef``) of workload ``key``, for Kueue's metrics' labels
        (a workload read back from the store, or made by :meth:`workload_for`)."""
        if ref is not None and ref.get("name"):
            self._priority_classes[key] = str(ref["name"])

    def priority_class_name(self, key: str) -> str:
        """The name of the priority class workload ``key`` takes its priority from ("" for none: Kueue's
        ``priority_class`` label)."""
        return self._priority_classes.get(key, "")

    def priority_class_of(self, kind: str, job: Mapping[str, Any]) -> dict[str, str] | None:
        """The class the job's workload takes its priority from (Kueue's ``spec.priorityClassRef``), or None."""
        return priority_class_ref(kind, job, self.priorities)

    def _migration_check(self, parent: Workload, variant: Workload, now: float) -> Text | None:
        """Beyond Kueue: a running workload is not moved to a more preferred flavor when it would finish sooner
        where it runs (its declared run time, counted from when it started)."""
        return finishes_sooner_here(self.hooks.run_time(parent.key), self.started_at(parent.key), now)

    def _pods_bound(self, key: str, t: float, ready: bool) -> None:
        """The driver's word on a workload's pods: those of a lost node wait unbound for its replacement (not ready),
        or are bound again (ready). Where the plane's user watches the pods itself, its word counts instead."""
        if not self.hooks.watches_pods(key):
            self.pods_ready.ready(key, t, ready)

    def _started(self, key: str, t: float) -> None:
        if self.hooks.start is not None:
            self.hooks.start(key, t)

    # --- what happened to jobs -------------------------------------------------------------------------

    def feed(self, what: Input) -> list[Event]:
        """Tell the scheduler what happened; returns what it decided at once (a workload queued, its quota freed),
        for the caller to tell and act on (:meth:`emit`) with the rest of its step."""
        match what:
            case JobQueued(workload, at):
                if workload.replaces in self._priority_classes:  # a grown slice: its job's class
                    self._priority_classes.setdefault(workload.key, self._priority_classes[workload.replaces])
                events = self.scheduler.add(workload, at)
                if workload.state is WorkloadState.ADMITTED:  # restored as it was: its time runs on
                    self._time_limit(workload)
                    self.pods_ready.admitted(workload)
                return events
            case PodsReady(key, at, ready):
                self.pods_ready.ready(key, at, ready)
                return []
            case CheckSet(key, check, state, at, message, updates):
                return self.scheduler.set_check(key, check, state, at, message, pod_set_updates=updates)
            case JobStarted(key, at):
                if self._began_now(key) is None:  # the first word of this admission's run counts
                    self._began[key] = at
                return []
            case JobFinished(key, at, message, outcome):
                self._learn_run_time(key, at)
                self._began.pop(key, None)
                return self.scheduler.finish(key, at, message, outcome)
            case JobResized(key, pod_sets, at):
                return self.scheduler.resize(key, pod_sets, at)
            case JobDeleted(key, at):
                self._began.pop(key, None)
                self._priority_classes.pop(key, None)
                return self.scheduler.delete(key, at)
            case QueuesReconfigured(objects, capacity, at):
                self.configure(objects, capacity, at)
                return []
            case CapacityChanged(capacity, _at):
                self._reshape(capacity)
                return []

    def _reshape(self, capacity: CapacityConfig) -> None:
        driver = self.driver
        if driver is None:
            raise ValueError("no capacity is modelled to change")
        driver.config = capacity
        driver.cluster.cloud = capacity.cloud
        driver.set_pools(list(capacity.pools))
        driver.retry_waiting()

    def started_at(self, key: str) -> float | None:
        """When a running workload's job started: when it reported so (:class:`JobStarted`) in its current admission,
        else its pods bound (capacity modelled), else its admission."""
        began = self._began_now(key)
        if began is not None:
            return began
        if self.driver is not None:
            return self.driver.started_at.get(key)
        wl = self.scheduler.workload(key)
        return wl.admitted_at if wl is not None and wl.state is WorkloadState.ADMITTED else None

    def _began_now(self, key: str) -> float | None:
        """When the job of ``key`` reported it began in its current admission (None: it has not)."""
        began = self._began.get(key)
        wl = self.scheduler.workload(key)
        if began is None or wl is None or wl.admitted_at is None or began < wl.admitted_at:
            return None
        return began

    def _learn_run_time(self, key: str, at: float) -> None:
        wl = self.scheduler.workload(key)
        started = self.started_at(key)
        if wl is not None and started is not None and wl.state is WorkloadState.ADMITTED:
            self.run_times.finished(wl.cluster_queue, at - started)

    # --- stepping --------------------------------------------------------------------------------------

    def listen(self, listener: Callable[[Event], None]) -> None:
        """Hear every event as it is told, after the plane's own ``tell`` (a test, a recorder)."""
        self._listeners.append(listener)

    def listen_attempts(self, listener: Callable[[bool, float], None]) -> None:
        """Hear each scheduling pass that decided something (Kueue's admission attempt): whether it reserved quota
        for any workload, and the seconds it took."""
        self._attempt_listeners.append(listener)

    def emit(self, events: Iterable[Event]) -> None:
        """What the scheduler or the driver decided: each told (its reason worded by this clock), then acted on, in
        order."""
        for event in events:
            if event.phrase is not None:
                event = event.worded(self._words)
            self._tell(event)
            for listener in self._listeners:
                listener(event)
            if event.kind in _CAPACITY:
                self._learn_answer(event)
                continue  # the driver's own account of what it did: nothing more to act on
            if event.kind is EventKind.ADMITTED:
                wl = self.scheduler.workload(event.workload)
                conflict = start_conflict(wl, self.scheduler.config.flavors) if wl is not None and not wl.parent \
                    else None
                if conflict is not None:  # its job cannot start: it finishes, as Kueue's job reconciler does
                    self.emit(self.scheduler.finish(event.workload, event.t, conflict, FAILED_TO_START))
                    continue
                if wl is not None:
                    self._time_limit(wl)
                    self.pods_ready.admitted(wl)
            if self.driver is not None:
                self.driver.handle(event)
            elif event.kind is EventKind.ADMITTED and self._start_on_admission:
                self._started(event.workload, event.t)

    def _learn_answer(self, event: Event) -> None:
        """Keep the time of every ProvisioningRequest's acceptance, and learn how long its pool's cloud took to answer:
        until it provisioned the nodes, or until it answered where the request then waits for room in the pool (that
        wait is the queue's, which a forecast runs forward itself)."""
        note = event.payload
        if not isinstance(note, RequestNote):
            return
        if note.state is ProvisioningState.ACCEPTED and note.room:
            self.answer_times.answered(note.request, note.room, event.t)
        elif note.state is ProvisioningState.ACCEPTED:
            self.answer_times.accepted(note.request, event.t)
        elif note.state is ProvisioningState.PROVISIONED and note.pool is not None:
            self.answer_times.answered(note.request, note.pool, event.t)
        elif note.state in (ProvisioningState.PROVISIONED, ProvisioningState.FAILED, ProvisioningState.WITHDRAWN):
            self.answer_times.ended(note.request)

    def _sample_due(self) -> None:
        """Take the LocalQueues' usage samples due (admission fair sharing, live), and wake for the next."""
        ledger = self.fair_usage
        assert ledger is not None
        now = self.timers.now()
        self.scheduler.fair_tick(now)
        self.timers.schedule(ledger.next_due(now), self._sample_due)

    def _time_limit(self, wl: Workload) -> None:
        """Kueue's maximum execution time: an admitted workload with ``spec.maximumExecutionTimeSeconds`` is
        deactivated once admitted that long in all (its past admissions' whole seconds counted)."""
        limit, admitted = wl.max_exec_seconds, wl.admitted_at
        if limit is None or admitted is None or wl.parent:
            return
        self.timers.schedule(admitted + limit - wl.past_exec_seconds,
                             functools.partial(self._time_exceeded, wl.key, admitted, limit))

    def _time_exceeded(self, key: str, admitted: float, limit: int) -> None:
        wl = self.scheduler.workload(key)
        if wl is None or wl.state is not WorkloadState.ADMITTED or wl.admitted_at != admitted:
            return  # finished, evicted or admitted anew since
        now = self.timers.now()
        events = self.scheduler.deactivate(key, now, MAX_EXEC_MESSAGE, MAX_EXEC_CAUSE)
        wl.past_exec_seconds = 0  # as Kueue clears accumulatedPastExecutionTimeSeconds
        # Kueue's Warning on the workload: MaximumExecutionTimeExceeded, "The maximum execution time (Ns) exceeded".
        self.emit([dataclasses.replace(e, reason=f"The maximum execution time ({limit}s) exceeded")
                   if e.kind is EventKind.DEACTIVATED else e for e in events])

    def settle(self, now: float, cycles: int | None = None) -> bool:
        """Schedule at ``now`` until a pass decides nothing. A pass ends at the first cycle that admits nothing:
        the workload behind a head just set aside (one that does not fit) is tried by the next pass, at the same
        instant, as Kueue's next cycle tries it milliseconds later; a started job may also free or take capacity.

        ``cycles``: at most so many scheduling cycles a pass (the live controller's step, whose writes then stay
        short: what is left is scheduled by its next step, after the changes that came in meanwhile, as Kueue's next
        cycle comes after the events of the last one). Returns whether a pass stopped there with more to decide.

        With waitForPodsReady's ``blockAdmission``, nothing is scheduled while an admitted workload's pods are not all
        ready (it becomes ready, or its timer evicts it, and the next step schedules); a cycle at a time, so that one
        admission holds back the next (a cycle admits a head of each ClusterQueue, where Kueue's would hold back
        the second of them too)."""
        block = self.pods_ready.blocks()
        if block:
            cycles = 1  # a cycle at a time: one admitted holds back the next until its pods are ready
        for _ in range(SETTLE_PASSES):
            if block and self.pods_ready.blocking():
                return False
            began = time.perf_counter() if self._attempt_listeners else 0.0
            events = self.scheduler.schedule(now) if cycles is None else self.scheduler.schedule(now, cycles)
            if self._attempt_listeners:
                self._attempted(events, time.perf_counter() - began)
            self.emit(events)
            if self.scheduler.cut_short and not block:
                return True
            if not events and not self.scheduler.cut_short:
                return False
        return False

    def _attempted(self, events: list[Event], seconds: float) -> None:
        """Tell the attempt listeners of a pass that decided something (a pass that decides nothing ends the step:
        it is the check that all is settled, not an attempt)."""
        if not events:
            return
        admitted = any(e.kind is EventKind.QUOTA_RESERVED for e in events)
        for listener in self._attempt_listeners:
            listener(admitted, seconds)

    def next_wake(self) -> float | None:
        """When something is due next: a workload's requeue, or a timer (a node booting, a request's verdict)."""
        times = [t for t in (self.scheduler.next_requeue(), self.timers.next_at()) if t is not None]
        return min(times) if times else None
