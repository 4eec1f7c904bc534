"""The queue controller: Kueue's scheduler and job integration, run against the store in real time.

It keeps a :class:`~flexq.scheduler.scheduler.Scheduler` in step with the store by reading the change
log in order (after a full read at start-up, as an informer does), and writes every decision back:

- a queued RayJob, RayCluster or Job gets its Workload (``kind-name-hash``, owned by the job);
- Workload statuses say where each workload stands (conditions, admission, admission checks, and the
  flavors considered with the reason each was refused);
- an admitted job is un-suspended with its flavors' node labels and tolerations; an evicted one is
  suspended and restored;
- ClusterQueue and LocalQueue statuses count pending, reserving and admitted workloads and the quota
  each flavor has in use;
- Kubernetes Events record each step on the Workload.

Admission-check states written into a Workload's status by anyone else (``kubectl patch --subresource
status``, ``flexq admissioncheck``) are fed to the scheduler; so are finished jobs and deleted jobs.
The controller reads time only from its :class:`~flexq.clock.Clock`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from flexq.api import DEFAULT_KUEUE_CONFIG, KindInfo, KueueConfig, by_resource, resolve
from flexq.capacity import CapacityConfig, EmulatedCloud
from flexq.clock import Clock
from flexq.control import (
    CapacityChanged,
    CheckSet,
    ControlPlane,
    JobDeleted,
    JobHooks,
    JobQueued,
    QueuesReconfigured,
    RunTimes,
)
from flexq.controller.capacity_sync import LiveCapacity
from flexq.controller.forecasts import LiveForecasts, material
from flexq.controller.job_events import JobEvents, declared_run_time
from flexq.controller.job_sync import finished
from flexq.controller.metrics import Sample, Tally, sample
from flexq.controller.object_sync import (
    workload_from_object,
)
from flexq.controller.pacing import COALESCE, FORGET_RETRY, RECONFIGURE_EVERY, STEP_CYCLES
from flexq.controller.pod_sync import PodIntegration
from flexq.controller.queue_counts import QueueCounts, object_key
from flexq.controller.queue_state import ControllerState
from flexq.controller.ray_runs import RayRuntime
from flexq.controller.settled import ConfigView
from flexq.controller.steps import StepTimer
from flexq.controller.workload_writes import WorkloadWrites, parent_of, shows_forecast
from flexq.forecast import CapacityChangeError, Forecast, Lookahead, ensemble, flavor_lookaheads, waits
from flexq.jobs import JOB_KINDS
from flexq.objects import ObjectService
from flexq.scheduler import CheckState, Event, EventKind, Scheduler, Workload, WorkloadState, pod_set_updates
from flexq.store import Change, ChangeType, Gone, StoreUnavailable, rfc3339
from flexq.timers import TimerHeap

__all__ = ["InLine", "QueueController"]

log = logging.getLogger("flexq.controller")

_READER: Final = "queue-controller"
"""The name the controller holds the change log by."""
_CONFIG_KINDS: Final = frozenset({"ResourceFlavor", "Topology", "ClusterQueue", "Cohort", "AdmissionCheck",
                                  "ProvisioningRequestConfig", "LocalQueue", "WorkloadPriorityClass",
                                  "PriorityClass", "NodePool", "Namespace"})
_OWN_RESOURCES: Final = frozenset((resolve(kind).group, resolve(kind).plural)
                                  for kind in (*JOB_KINDS, "Workload", "ClusterQueue", "LocalQueue"))
"""Where the controller's own writes are passed over when read back (a queue's status it wrote itself: what it
wrote is remembered, and is not read again before its next write)."""


FORECAST_WRITES: Final = 0.05
"""Seconds a step spends writing workloads whose forecast alone moved, at the most: a new forecast can move thousands
at once, and a step that wrote them all (2.5 s for 6,700 in Kueue's baseline) took back and gave out no quota
meanwhile."""

_PROMPT: Final = frozenset({EventKind.QUOTA_RESERVED, EventKind.ADMITTED, EventKind.FINISHED, EventKind.EVICTED,
                            EventKind.PREEMPTED, EventKind.DEACTIVATED})
"""What a step writes and commits before the rest: a workload's quota taken or freed, its job started or stopped."""


@dataclass(frozen=True, slots=True)
class InLine:
    """A workload waiting in its ClusterQueue's line, as the controller held it when asked."""

    namespace: str
    name: str
    local_queue: str
    priority: int
    created: float
    """When the workload was made (Unix time)."""


class QueueController:
    """Kueue's scheduler and job integration against the store: reads its changes, steps, writes back. It owns its
    parts and the state they share (:class:`~flexq.controller.queue_state.ControllerState`): the jobs' side
    (:attr:`jobs`), the writes (:attr:`writes`), queued Pods (:attr:`pods`), the capacity (:attr:`capacity`)."""

    def __init__(self, service: ObjectService, clock: Clock, capacity: CapacityConfig | None = None,
                 runtime: RayRuntime | None = None, kueue: KueueConfig = DEFAULT_KUEUE_CONFIG) -> None:
        self.service = service
        self.runtime = runtime
        self.store = service.store
        self.clock = clock
        self.cursor = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending_events: list[Event] = []
        self._more = False  # the last step left scheduling to do
        self._unwritten = 0.0
        """When the store refused a step's writes: not before then (a second on) the state is read back."""
        run_times = RunTimes()
        """Run times that jobs declare (``flexq.dev/expected-run-time``) or are bounded by, and those of finished
        jobs."""
        self.plane = ControlPlane(TimerHeap(clock), self._told, JobHooks(self._run_workload, run_times.declared.get,
                                                                    watches_pods=self._watches_pods),
                                  start_on_admission=False, run_times=run_times, kueue=kueue)
        """The scheduler, the capacity driver and the job integration, stepped as the simulator steps them. Without
        a driver, an admitted job starts when its admission is written (:meth:`_write_workload`), not on the event."""
        self.capacity = LiveCapacity(self.store, self.plane, capacity or CapacityConfig((), EmulatedCloud()), clock)
        self.state = ControllerState(service, clock, self.plane, self.capacity, runtime)
        """What the parts share."""
        self.pods = PodIntegration(self.state)
        """Kueue's Pod integration: queued Pods and pod groups."""
        self.jobs = JobEvents(self.state, self._run_workload)
        """What jobs' changes do to their workloads."""
        self.writes = WorkloadWrites(self.state, self.pods)
        """The scheduler's decisions written back."""
        self.tally = Tally()
        """What happened since the server started, for /metrics."""
        self.tally.kueue.attach(self.plane)
        self._timer = StepTimer(self.tally.steps)
        self._config = ConfigView()
        self._queues: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        self._cohorts: list[dict[str, Any]] = []
        """The ClusterQueues and LocalQueues as last read (their specs: the statuses are the controller's)."""
        self._counts = QueueCounts(self.store, clock.now)
        self._counts.fair = self.plane.fair_usage
        self._reconfigured = -RECONFIGURE_EVERY
        self._reconfigure_due = False
        self._capacity_due: CapacityConfig | None = None
        """A capacity file read again (:meth:`change_capacity`), modelled from the next step on."""
        self._stepping = 0  # the thread in a step's batch (0: none)
        self._own: set[int] = set()
        """Versions of workloads and jobs its steps wrote, not read back yet: passed over unparsed (its own)."""
        self.forecasts = LiveForecasts(self._prepare_forecast, self._forecasts_made)
        self.store.subscribe(lambda _changes: self._wake.set())
        self.store.subscribe_own(self._wrote)

    @property
    def scheduler(self) -> Scheduler:
        return self.state.scheduler

    @property
    def local_queues(self) -> dict[tuple[str, str], str]:
        return self.state.local_queues

    # --- running -----------------------------------------------------------------------------------

    def start(self) -> None:
        self.resync()
        if self.runtime is not None:
            self.runtime.batch.resume()  # Jobs that ran under the last leader run on here
        self._thread = threading.Thread(target=self._run, name="flexq-queue-controller", daemon=True)
        self._thread.start()
        self.forecasts.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop after the step under way (waiting up to ``timeout`` seconds for it; None: until it ends)."""
        self.forecasts.stop(timeout)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        self.store.hold(_READER, None)
        self.pods.stop_all()
        self.capacity.ray_pools.stop()
        if self.runtime is not None:
            self.runtime.stop_all()

    @property
    def more(self) -> bool:
        """The last step stopped with work left: scheduling at its cycles, or forecasts to write past
        :data:`FORECAST_WRITES` (the next one goes on at once)."""
        return self._more

    def _run(self) -> None:
        while not self._stop.is_set():
            wake = self.plane.next_wake()
            timeout = 5.0 if wake is None else max(0.02, min(5.0, wake - self.clock.now()))
            timeout = min(timeout, max(0.02, self._counts.due_in()))
            if self._reconfigure_due:
                timeout = min(timeout, max(0.02, self._reconfigured + RECONFIGURE_EVERY - self.clock.now()))
            if self._unwritten:
                timeout = min(timeout, max(0.02, self._unwritten - self.clock.now()))
            if self._more or self._pending_events:  # scheduling left to do, or what its writes decided (a job that
                self._wake.set()                       # could not start, its workload finished): at once
            # Changes that came in during the last step are handled at once; the first change after a quiet
            # spell waits a moment for those that follow it.
            if not self._wake.is_set() and self._wake.wait(timeout):
                self._stop.wait(COALESCE)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.sync()

    # --- reading the store ---------------------------------------------------------------------------

    def _objects(self, kind: str) -> list[dict[str, Any]]:
        info = resolve(kind)
        return self.store.list_objects(info.group, info.plural)[0]

    def _reconfigure(self, *, read: bool = False) -> CapacityConfig | None:
        """Configure the scheduler from the configuration objects followed since the last read of them (``read``:
        read them from the store first); the capacity now modelled (None: none)."""
        if read:
            by_kind = {kind: self._objects(kind) for kind in _CONFIG_KINDS}
            self._config.reset((kind, object_key(resolve(kind), o), o) for kind, objects in by_kind.items()
                               for o in objects)
        by_kind = self._config.objects(_CONFIG_KINDS)
        self._queues, self._cohorts = (by_kind["ClusterQueue"], by_kind["LocalQueue"]), by_kind["Cohort"]
        self._counts.recount()
        self._reconfigured, self._reconfigure_due = self.clock.now(), False
        capacity = self.capacity.modelled(by_kind)
        self.plane.feed(QueuesReconfigured(by_kind, capacity, self.clock.now()))
        self.capacity.configure(capacity)
        now = self.clock.now()
        for wl in self.scheduler.workloads():
            if wl.admission is None:
                wl.cluster_queue = self.local_queues.get((wl.namespace, wl.queue), "")
                # One waiting out a retry delay queues again when the delay ends (Scheduler._requeue_due), not
                # whenever a configuration object (or its status, which this controller writes) changes.
                self.scheduler.enqueue(wl, now)
        return capacity

    def _wrote(self, changes: list[Change]) -> None:
        if threading.get_ident() == self._stepping:
            self._own.update(c.rv for c in changes if (c.key.group, c.key.resource) in _OWN_RESOURCES)

    def _stored_workload(self, obj: dict[str, Any]) -> Workload:
        """A stored Workload as the scheduler models it, its pod sets counted as Kueue's Configuration says."""
        wl = workload_from_object(obj, self.local_queues)
        wl.podsets = self.plane.counted(wl.podsets)
        return wl

    def resync(self) -> None:
        """Read everything afresh (start-up): configuration, workloads, jobs that still need one."""
        with self._lock:
            self.cursor = self.store.current_rv()
            self._own.clear()
            self.state.unborn.clear()
            self.plane.reset()
            self._reconfigure(read=True)
            self.state.by_job_uid = {}
            self.state.stored_variants = {}
            for obj in self._objects("Workload"):
                parent = parent_of(obj)
                if parent is not None:  # the scheduler makes its variants anew: these are reconciled below
                    self.state.stored_variants.setdefault(parent, set()).add(obj["metadata"]["name"])
                    continue
                wl = self._stored_workload(obj)
                if wl.state is not WorkloadState.FINISHED:
                    self.jobs.remember(obj)  # a job's slices: the one that replaces another wins (below)
                if wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
                    continue
                self.plane.name_priority_class(wl.key, (obj.get("spec") or {}).get("priorityClassRef"))
                self.plane.feed(JobQueued(wl, wl.created))
            for wl in self.scheduler.workloads():
                if wl.replaces:
                    for uid, key in list(self.state.by_job_uid.items()):
                        if key == wl.replaces:
                            self.state.by_job_uid[uid] = wl.key
            for kind in ("RayJob", "RayCluster", "Job"):
                for job in self._objects(kind):
                    self.jobs.added(resolve(kind), job)
                    if finished(kind, job):  # it may have ended while the server was down, or before it read it
                        self.jobs.modified(resolve(kind), job)
            self._log(self.pods.resync())
            driver = self.capacity.driver
            if driver is not None and self._unwritten:  # after a refused step, the driver's starts as stored
                for key in sorted(driver.running):
                    stored = self.scheduler.workload(key)
                    if stored is None or stored.state is not WorkloadState.ADMITTED:
                        driver.release(key)  # its admission was never written: it starts when admitted again
                    else:
                        self._run_workload(key, self.clock.now())  # its job's start may have been dropped
            elif self._unwritten:  # no capacity modelled: admitted jobs start on admission, and a start may be lost
                for wl in self.scheduler.workloads():
                    if wl.state is WorkloadState.ADMITTED:
                        self._run_workload(wl.key, self.clock.now())  # a running job is left as it is
            if driver is not None:
                for wl in self.scheduler.workloads():
                    if wl.state is WorkloadState.ADMITTED:
                        driver.try_start(wl.key)  # nodes do not survive a restart: ask for them again
            self.state.touched |= set(self.scheduler.variants) | set(self.state.stored_variants)
            self._schedule_and_write()

    def sync(self) -> None:
        """Apply every change since the cursor, run the scheduler, write back what it decided (committed
        as one batch). A cursor that fell behind the change log's window starts over from a full read."""
        try:
            try:
                if self._unwritten and self.clock.now() < self._unwritten:
                    return
                self._timer.begin()
                if self._unwritten:
                    with self._step():
                        self.resync()
                else:
                    with self._step(batch=False):
                        self._sync()
                self._timer.end()
                self._unwritten = 0.0
            except Gone:
                log.warning("the queue controller fell behind the change log: reading everything afresh")
                with self._step():
                    self.resync()
        except Exception as exc:
            # Kueue's assume / forget: nothing decided in a step whose writes failed acts outside (no job started or
            # stopped), and what the scheduler holds is read back from the store (resync) and decided again.
            if isinstance(exc, StoreUnavailable):
                log.warning("the queue controller's writes were refused, it reads its state back and tries again: "
                            "%s", exc)
            else:
                log.exception("queue controller sync failed: it reads its state back from the store")
            self.state.after_write.clear()
            self.state.event_notes.clear()  # of writes the database undid (those of the rest went with them)
            self.capacity.unwritten()
            self._unwritten = self.clock.now() + FORGET_RETRY
        finally:
            self.store.hold(_READER, self.cursor)  # the change log keeps what this controller has yet to read
            actions, self.state.after_write = self.state.after_write, []
            for action in actions:
                action()

    @contextlib.contextmanager
    def _step(self, *, batch: bool = True) -> Iterator[None]:
        """A step: what it commits (on this thread) is the controller's own; in one batch unless ``batch`` is
        False (then the step opens its batch itself, for its writes)."""
        self._stepping = threading.get_ident()
        try:
            if batch:
                with self._batch():
                    yield
            else:
                yield
        finally:
            self._stepping = 0

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        """The store's batch, the Events its workload writes note held back and written before each of its commits
        (outside one, each write records its own)."""
        with self.store.batch(held=self.state.write_events):
            holding, self.state.holding_events = self.state.holding_events, True
            try:
                yield
            finally:
                self.state.holding_events = holding

    def _sync(self) -> None:
        with self._lock:
            while True:
                changes = self.store.changes(self.cursor)
                if not changes:
                    break
                self._timer.changes += len(changes)
                for change in changes:
                    self.cursor = change.rv
                    if change.rv in self._own:
                        self._own.discard(change.rv)
                        continue
                    info = by_resource(change.key.group, change.key.resource)
                    if info is None:
                        continue
                    if info.kind in _CONFIG_KINDS:
                        if info.kind in ("ClusterQueue", "LocalQueue", "Cohort"):
                            self._counts.forget(change.key)
                        self._reconfigure_due = self._config.changed(info.kind, change) or self._reconfigure_due
                    else:
                        if self._reconfigure_due and (info.kind in JOB_KINDS or info.kind == "Workload"):
                            self._reconfigure()  # a job is read with the queues and priorities made before it
                        self._dispatch(info, change)
            if self._reconfigure_due and self.clock.now() >= self._reconfigured + RECONFIGURE_EVERY:
                self._reconfigure()
            if self._capacity_due is not None:
                self._new_capacity(self._capacity_due)
            self._timer.lap("read")
            # The changes are read without holding the store (the change window has a lock of its own): the API's
            # writes go on meanwhile instead of waiting for, and then holding up, the step's hand-overs.
            with self._batch():
                self._schedule_and_write()

    def change_capacity(self, capacity: CapacityConfig) -> None:
        """Model ``capacity`` (the capacity file read again: ``kill -HUP`` the server) from the next step on. Its
        times still count from the server's start; the nodes, requests and timers of the pools it keeps are kept,
        and what waits for capacity asks again."""
        self._capacity_due = capacity
        self._wake.set()

    def _new_capacity(self, capacity: CapacityConfig) -> None:
        self._capacity_due = None
        origin = self.capacity.config.cloud.origin
        self.capacity.config = dataclasses.replace(capacity, cloud=dataclasses.replace(capacity.cloud, origin=origin))
        modelled = self._reconfigure()  # the file's pools, its fallback policy: a driver made where there was none
        if modelled is not None:
            self._log(self.plane.feed(CapacityChanged(modelled, self.clock.now())))

    def _dispatch(self, info: KindInfo, change: Change) -> None:
        if info.kind not in JOB_KINDS and info.kind not in ("Node", "Workload", "Pod"):
            return  # Events above all: the most frequent change, and none of the controller's business
        obj = change.obj
        if info.kind in JOB_KINDS:
            if change.type is ChangeType.ADDED:
                self.jobs.added(info, obj)
            elif change.type is ChangeType.DELETED:
                self.jobs.deleted(obj)
            else:
                self.jobs.modified(info, obj)
        elif info.kind == "Pod" and not info.group:
            self._log(self.pods.changed(change))
        elif info.kind == "Node" and change.type is ChangeType.DELETED:
            self.capacity.node_deleted(obj["metadata"]["name"])
        elif info.kind == "Node":
            self.capacity.node_modified(obj)
        elif info.kind == "Workload":
            key = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"
            if parent_of(obj) is not None:
                # A variant's object is the controller's own: only admission-check states set on it count.
                if change.type is not ChangeType.DELETED and self.scheduler.knows(key):
                    self._workload_checks(key, obj)
                return
            if change.type is ChangeType.DELETED:
                self.state.inactive_generation.pop(key, None)
                self._log(self.plane.feed(JobDeleted(key, self.clock.now())))
                self.capacity.release(key)
            elif not self.scheduler.knows(key):
                self.jobs.remember(obj)
                wl = self._stored_workload(obj)
                if wl.state not in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
                    self._log(self.plane.feed(JobQueued(wl, self.clock.now())))
            else:
                self._workload_modified(key, obj)

    # --- jobs --------------------------------------------------------------------------------------

    def _workload_modified(self, key: str, obj: dict[str, Any]) -> None:
        wl = self.scheduler.held(key)
        now = self.clock.now()
        generation = int(obj["metadata"].get("generation") or 0)
        if (obj.get("spec") or {}).get("active") is False:
            self.state.inactive_generation[key] = generation
            if wl.state is not WorkloadState.INACTIVE:
                self._log(self.scheduler.deactivate(key, now))
            return
        if wl.state is WorkloadState.INACTIVE and generation > self.state.inactive_generation.get(key, generation):
            # Active again after it was deactivated (not a change older than its deactivation): it queues again.
            del self.state.inactive_generation[key]
            self._log(self.scheduler.activate(key, now))
            return
        self._workload_checks(key, obj)

    def _workload_checks(self, key: str, obj: dict[str, Any]) -> None:
        """Admission-check states written into a Workload's status (for a racing workload: its variants')."""
        wl = self.scheduler.held(key)
        now = self.clock.now()
        if not wl.holds_quota and key not in self.scheduler.variants:
            return
        known = dict(wl.checks)
        for variant in self.scheduler.variants.get(key, ()):  # a racing workload's checks are its variants'
            known.update(getattr(self.scheduler.workload(variant), "checks", {}))
        for check in (obj.get("status") or {}).get("admissionChecks") or []:
            name, state = check.get("name"), check.get("state")
            if name in known and state and state != known[name].value:
                try:
                    new = CheckState(state)
                except ValueError:
                    continue
                updates = pod_set_updates(check.get("podSetUpdates")) or None
                self._log(self.plane.feed(CheckSet(key, name, new, now, str(check.get("message") or ""), updates)))
                if not wl.holds_quota and key not in self.scheduler.variants:
                    break

    # --- writing back --------------------------------------------------------------------------------

    def _log(self, events: list[Event]) -> None:
        self.plane.emit(events)

    def _watches_pods(self, key: str) -> bool:
        """Whether the workload's job reports its pods' readiness itself (run by a runtime that says so)."""
        wl = self.scheduler.workload(key)
        return wl is not None and self.writes.tells_ready(wl)

    def _run_workload(self, key: str, now: float) -> None:
        """The plane's job starter: an admitted workload's job runs (once its pods are placed)."""
        self.writes.run_workload(key, now)

    def _told(self, event: Event) -> None:
        """An event to write with this step: on its workload, or (the driver's) as a capacity note."""
        if event.kind.capacity:
            self.capacity.notes.append(event)
        else:
            self._pending_events.append(event)

    def _schedule_and_write(self) -> None:
        self.capacity.timers.run_due()
        now = self.clock.now()
        self._more = self.plane.settle(now, STEP_CYCLES)
        self._timer.lap("schedule")
        events, self._pending_events = self._pending_events, []
        # Variants racing now, and those whose race ended in this step (their last events name their workload).
        parents = {v: p for p, vs in self.scheduler.variants.items() for v in vs}
        parents.update((e.workload, str(e.extra["parent"])) for e in events if e.extra.get("parent"))
        changed = self.capacity.touched() | self.state.touched | {*self.state.unborn}
        touched: dict[str, list[Event]] = {key: [] for key in changed | self._forecasts_due(bool(events))}
        self.state.touched = set()
        for event in events:
            # A variant is the scheduler's own: its story is told on the workload it races for.
            key = parents.get(event.workload, event.workload)
            touched.setdefault(key, []).append(event)
        stamp = rfc3339(datetime.fromtimestamp(now, UTC))
        # What takes or frees quota is written first and committed at once (the watchers see an admission or an end
        # then, a job starts on it): not after the step's other writes, the messages and forecasts of those waiting.
        first: list[tuple[str, list[Event]]] = []
        rest: list[tuple[str, list[Event]]] = []
        for item in touched.items():
            (first if any(e.kind in _PROMPT for e in item[1]) else rest).append(item)
        # Forecasts alone (a workload nothing else touched) last: a step writes them for FORECAST_WRITES seconds at
        # the most, and leaves the rest to the steps that follow at once, which take back and give out quota first.
        rest.sort(key=lambda item: not item[1] and item[0] not in changed)
        forecasts_until = 0.0
        for n, (key, evs) in enumerate([*first, *rest]):
            if not evs and key not in changed:  # a forecast alone (never one of ``first``: each has Events)
                if not forecasts_until:  # the first is written whatever the time: every step writes one at least
                    forecasts_until = time.monotonic() + FORECAST_WRITES
                elif time.monotonic() > forecasts_until:
                    with self.state.forecast_lock:
                        self.state.forecast_due.update(k for k, _ in rest[n - len(first):])
                    self._more = True
                    break
            self.store.breathe(every=0 if n == len(first) and first and rest else None)
            wl = self.scheduler.workload(key)
            if wl is not None:
                self.writes.write_workload(wl, evs, stamp)
                self._timer.writes += 1
            else:
                self.state.unborn.pop(key, None)  # gone before it was stored
            # A racing workload written for its forecast alone: its variants are as they were.
            if (key in self.scheduler.variants or key in self.state.stored_variants) and (evs or key in changed):
                self.writes.write_variants(key, stamp)
        self.state.write_events()
        self.capacity.write()
        self._timer.lap("write")
        self._counts.write(self.scheduler, *self._queues, {e.workload for e in events} | set(touched), self._cohorts)
        self._timer.lap("queues")

    # --- the queues' lines (Kueue's visibility API) ------------------------------------------------------

    def in_line(self, cluster_queue: str) -> list[InLine] | None:
        """The workloads waiting for quota in ``cluster_queue``, in the order it would try them (those holding quota
        are not in line); None where no such ClusterQueue is configured."""
        with self._lock:
            line = self.scheduler.in_line(cluster_queue)
            if line is None:
                return None
            return [InLine(wl.namespace, wl.name, wl.queue, wl.priority, wl.created) for wl in line]

    def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        """The ClusterQueue the LocalQueue ``namespace/local_queue`` names (None: no such LocalQueue)."""
        with self._lock:
            return self.local_queues.get((namespace, local_queue))

    # --- forecasts -----------------------------------------------------------------------------------

    def _prepare_forecast(self) -> Lookahead | None:
        """The plane forked as it stands between two steps (None when nothing waits)."""
        with self._lock:
            if not any(waits(self.plane, wl) for wl in self.scheduler.workloads()):
                return None
            return Lookahead(self.plane, self.clock.now())

    def what_if(self, jobs: list[tuple[KindInfo, dict[str, Any]]]) -> list[tuple[Forecast, dict[str, Forecast]]]:
        """Where and when ``jobs`` (checked and defaulted) would start if submitted now, each with its run time where
        it declares one, and where and when each would start held to each flavor it could race on (a job alone in
        that copy): the plane is forked under the lock and the copies alone are given them. Raises
        :class:`~flexq.jobs.workload.JobError` for a job that would get no workload."""
        with self._lock:
            now = self.clock.now()
            extra = []
            for n, (info, job) in enumerate(jobs):
                job = copy.deepcopy(job)
                job["metadata"]["uid"] = f"what-if-{n}-{self.store.new_uid()}"
                wl = self.plane.workload_for(info.kind, info.group, job, now)
                wl.uid = job["metadata"]["uid"]
                extra.append((JobQueued(wl, now), declared_run_time(job)))
            ahead = Lookahead(self.plane, now, extra=extra)
            held = [flavor_lookaheads(self.plane, now, queued, run) for queued, run in extra]
        made = ensemble(ahead)
        return [(made[queued.workload.key], {flavor: ensemble(fork)[queued.workload.key] for flavor, fork in forks})
                for (queued, _run), forks in zip(extra, held, strict=True)]

    def simulate(self, change: Callable[[CapacityConfig], CapacityConfig]) -> tuple[list[Forecast], list[Forecast]]:
        """Every waiting workload's forecast as things stand, and under the capacity ``change`` makes of the live one
        (raises ValueError where no capacity is modelled, or the change is refused)."""
        with self._lock:
            driver = self.plane.driver
            if driver is None:
                raise CapacityChangeError("no capacity is modelled: the server has no node pools to change")
            changed = change(driver.config)
            now = self.clock.now()
            ahead, other = Lookahead(self.plane, now), Lookahead(self.plane, now, capacity=changed)
        return list(ensemble(ahead).values()), list(ensemble(other).values())

    def _forecasts_due(self, changed: bool) -> set[str]:
        """The workloads whose forecast moved enough to be written again; after a step that changed something (not
        one that only writes forecasts), the next forecast is asked for."""
        with self.state.forecast_lock:
            due, self.state.forecast_due = self.state.forecast_due, set()
        if changed or self.state.touched or self.state.unborn:
            self.forecasts.request()
        return {key for key in due if (wl := self.scheduler.workload(key)) is not None and shows_forecast(wl)}

    def foreseen(self) -> list[Forecast]:
        """The last forecast of every waiting workload."""
        with self.state.forecast_lock:
            return list(self.state.forecast.values())

    def _forecasts_made(self, made: dict[str, Forecast]) -> None:
        with self.state.forecast_lock:
            old, self.state.forecast = self.state.forecast, made
            due = {key for key, f in made.items() if material(old.get(key), f)} | (set(old) - set(made))
            self.state.forecast_due |= due
        if due:
            self._wake.set()

    def costs(self) -> dict[str, float]:
        """What each workload that used nodes has cost so far, runs still going included (empty where no capacity
        is modelled): the dashboard's cost column, as current as ``/metrics``."""
        with self._lock:
            driver = self.plane.driver
            return driver.spent() if driver is not None else {}

    def observe(self) -> tuple[Tally, Sample]:
        """What /metrics shows: the counters, and where things stand now (read under the controller's lock)."""
        with self._lock:
            now = self._standing()
            # A deleted queue's series go with it, as Kueue clears them.
            kueue = now.kueue
            self.tally.kueue.keep(kueue.queue_status, kueue.local_queues, kueue.cohorts)
            return self.tally.snapshot(), now

    def standing(self) -> Sample:
        """Where things stand now (read under the controller's lock), without the counters: the dashboard's
        figures."""
        with self._lock:
            return self._standing()

    def _standing(self) -> Sample:
        made = self.forecasts
        return sample(self.plane, self.foreseen(), (made.made, made.cpu, made.cpu_total), self.clock.now())
