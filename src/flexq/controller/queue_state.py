"""What the queue controller's parts share: its collaborators and the state they act on, with the few steps they all
take (logging the scheduler's events, noting Events, storing a workload made in this step).

:class:`~flexq.controller.queue.QueueController` owns one :class:`ControllerState` and hands it to its parts:
:class:`~flexq.controller.job_events.JobEvents` (the jobs' side: their workloads made, finished, resized, deleted),
:class:`~flexq.controller.workload_writes.WorkloadWrites` (the scheduler's decisions written back: statuses,
Events, jobs started and stopped) and :class:`~flexq.controller.pod_sync.PodIntegration` (queued Pods). None of
them knows the controller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from flexq.control import JobDeleted
from flexq.scheduler import Event, Workload
from flexq.store import AlreadyExists, Key, NotFound, event_note, record_event, record_events

if TYPE_CHECKING:
    from flexq.clock import Clock
    from flexq.control import ControlPlane
    from flexq.controller.capacity_sync import LiveCapacity
    from flexq.controller.ray_runs import RayRuntime
    from flexq.forecast import Forecast
    from flexq.objects import ObjectService
    from flexq.scheduler import Scheduler
    from flexq.store import BaseStore

__all__ = ["COMPONENT", "ControllerState"]

COMPONENT: Final = "flexq-queue-controller"
"""The source the queue controller's Events name."""


class ControllerState:
    """The queue controller's collaborators and the state its parts share (each part is given this record)."""

    def __init__(self, service: ObjectService, clock: Clock, plane: ControlPlane, capacity: LiveCapacity,
                 runtime: RayRuntime | None) -> None:
        self.service = service
        self.store: BaseStore = service.store
        self.clock = clock
        self.plane = plane
        self.capacity = capacity
        self.runtime = runtime
        self.by_job_uid: dict[str, str] = {}
        """Job uid -> the key of its workload."""
        self.metrics: dict[str, dict[str, Any]] = {}
        """What each workload's job last reported with train.report (shown in the Workload's status)."""
        self.touched: set[str] = set()
        """Workloads whose status needs writing though no scheduler event names them."""
        self.inactive_generation: dict[str, int] = {}
        """Deactivated workloads: the generation of their Workload as deactivated (``spec.active: false``); a later
        one that is active again reactivates them."""
        self.stored_variants: dict[str, set[str]] = {}
        """Racing workloads: the names of their variants' Workload objects in the store."""
        self.after_write: list[Callable[[], None]] = []
        """Slow work (starting or stopping Ray) done after the store writes of a sync, outside its lock."""
        self.unborn: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        """Workloads made for jobs in this step, not stored yet: their objects (checked) and their jobs. Each is
        stored with its first status when the step writes it (one write, not a create and then a status), or as it
        is when anything reads it before then."""
        self.event_notes: list[tuple[Key, dict[str, Any]]] = []
        """The Events the step's workload writes noted, recorded together before the step commits (its batch
        calls :meth:`write_events`): each workload's are noted in its write's transaction, and dropped with it."""
        self.holding_events = False
        """Whether the step's batch holds the noted Events back (else each workload write records its own)."""
        self.forecast: dict[str, Forecast] = {}
        """The last forecast of every waiting workload (made on the forecaster's thread)."""
        self.forecast_due: set[str] = set()
        """Workloads whose forecast moved enough to be written again."""
        self.forecast_lock = threading.Lock()
        """Guards :attr:`forecast` and :attr:`forecast_due` (the forecaster's thread hands them over)."""

    @property
    def scheduler(self) -> Scheduler:
        return self.plane.scheduler

    @property
    def local_queues(self) -> dict[tuple[str, str], str]:
        """(namespace, LocalQueue) -> its ClusterQueue, as last configured."""
        return self.plane.local_queues

    def log(self, events: list[Event]) -> None:
        """Take the scheduler's events into the step (written back at its end)."""
        self.plane.emit(events)

    def note_event(self, involved: dict[str, Any], reason: str, message: str, *, type: str = "Normal") -> None:
        """An Event to record with the others of the step, together (:meth:`write_events`, before the step's batch
        commits: a workload's status and its Events are committed together or not at all)."""
        self.event_notes.append(event_note(involved, reason, message, self.store.timestamp(), type=type,
                                            component=COMPONENT))

    def write_events(self) -> None:
        notes, self.event_notes = self.event_notes, []
        record_events(self.store, notes)

    def queued_since(self, key: str) -> float | None:
        wl = self.scheduler.workload(key)
        return None if wl is None else wl.queue_time

    def stored_workload(self, wl: Workload) -> dict[str, Any] | None:
        if wl.key in self.unborn:
            return self.born(wl, None)
        try:
            return self.store.get(self.wl_key(wl))
        except NotFound:
            return None

    def born(self, wl: Workload, status: dict[str, Any] | None) -> dict[str, Any] | None:
        """Store a workload made in this step (with ``status``, its first), with the uid it was given, and note the
        Event that says so on its job; None if the name is taken (the scheduler forgets it, as if never made)."""
        obj, job = self.unborn.pop(wl.key)
        if status is not None:
            obj = {**obj, "status": status}
        try:
            stored = self.store.create(self.wl_key(wl), obj, echo=False, uid=wl.uid)
        except AlreadyExists as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=COMPONENT)
            self.by_job_uid.pop(str(job["metadata"].get("uid", "")), None)
            self.log(self.plane.feed(JobDeleted(wl.key, self.clock.now())))
            return None
        note = event_note(job, "CreatedWorkload", f"Created Workload: {wl.key}", self.store.timestamp(),
                          component=COMPONENT)
        if status is None:
            record_events(self.store, [note])
        else:
            self.event_notes.append(note)  # with the workload's own, in its write's transaction
        return stored

    @staticmethod
    def wl_key(wl: Workload) -> Key:
        return Key("kueue.x-k8s.io", "workloads", wl.namespace, wl.name)
