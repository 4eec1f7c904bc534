"""What the queue controller's parts share: its state, and the steps each part calls in another.

:class:`~flexq.controller.queue.QueueController` is made of :class:`~flexq.controller.job_events.JobEvents` (the
jobs' side: their workloads made, finished, resized, deleted) and
:class:`~flexq.controller.workload_writes.WorkloadWrites` (the scheduler's decisions written back: statuses,
Events, jobs started and stopped), over this state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from flexq.control import JobDeleted
from flexq.scheduler.events import Event
from flexq.scheduler.model import Workload
from flexq.store import AlreadyExists, Key, NotFound, record_event
from flexq.store.recorder import event_note, record_events

if TYPE_CHECKING:
    from flexq.clock import Clock
    from flexq.control.plane import ControlPlane
    from flexq.controller.capacity_sync import LiveCapacity
    from flexq.controller.pod_sync import PodIntegration
    from flexq.controller.ray_runs import RayRuntime
    from flexq.forecast import Forecast
    from flexq.objects.service import ObjectService
    from flexq.scheduler.scheduler import Scheduler
    from flexq.store import BaseStore

__all__ = ["COMPONENT", "QueueState"]

COMPONENT: Final = "flexq-queue-controller"
"""The source the queue controller's Events name."""


class QueueState:
    """The queue controller's state (set by its ``__init__``) and the steps its parts share."""

    service: ObjectService
    store: BaseStore
    clock: Clock
    plane: ControlPlane
    runtime: RayRuntime | None
    capacity: LiveCapacity
    pods: PodIntegration
    by_job_uid: dict[str, str]
    metrics: dict[str, dict[str, Any]]
    forecast: dict[str, Forecast]
    _forecast_lock: threading.Lock
    _after_write: list[Callable[[], None]]
    _touched: set[str]
    _stored_variants: dict[str, set[str]]
    _event_notes: list[tuple[Key, dict[str, Any]]]
    """The Events of the write under way (a workload's), recorded together at its end."""
    _unborn: dict[str, tuple[dict[str, Any], dict[str, Any]]]
    """Workloads made for jobs in this step, not stored yet: their objects (checked) and their jobs. Each is stored
    with its first status when the step writes it (one write, not a create and then a status), or as it is when
    anything reads it before then."""

    @property
    def scheduler(self) -> Scheduler:
        return self.plane.scheduler

    @property
    def local_queues(self) -> dict[tuple[str, str], str]:
        """(namespace, LocalQueue) -> its ClusterQueue, as last configured."""
        return self.plane.local_queues

    def _log(self, events: list[Event]) -> None:
        """Take the scheduler's events into the step (written back at its end)."""
        raise NotImplementedError

    def _run_workload(self, key: str, _now: float) -> None:
        """Start an admitted workload's job (once its pods are placed, where capacity is modelled)."""
        raise NotImplementedError

    def _note_event(self, involved: dict[str, Any], reason: str, message: str, *, type: str = "Normal") -> None:
        """An Event to record with the others of the same write, together (:meth:`_write_events`, in its
        transaction: a workload's status and its Events are stored whole or not at all)."""
        self._event_notes.append(event_note(involved, reason, message, self.store.timestamp(), type=type,
                                            component=COMPONENT))

    def _write_events(self) -> None:
        notes, self._event_notes = self._event_notes, []
        record_events(self.store, notes)

    def _queued_since(self, key: str) -> float | None:
        wl = self.scheduler.workload(key)
        return None if wl is None else wl.queue_time

    def _stored_workload(self, wl: Workload) -> dict[str, Any] | None:
        if wl.key in self._unborn:
            return self._born(wl, None)
        try:
            return self.store.get(self._wl_key(wl))
        except NotFound:
            return None

    def _born(self, wl: Workload, status: dict[str, Any] | None) -> dict[str, Any] | None:
        """Store a workload made in this step (with ``status``, its first), with the uid it was given, and note the
        Event that says so on its job; None if the name is taken (the scheduler forgets it, as if never made)."""
        obj, job = self._unborn.pop(wl.key)
        if status is not None:
            obj = {**obj, "status": status}
        try:
            stored = self.store.create(self._wl_key(wl), obj, echo=False, uid=wl.uid)
        except AlreadyExists as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=COMPONENT)
            self.by_job_uid.pop(str(job["metadata"].get("uid", "")), None)
            self._log(self.plane.feed(JobDeleted(wl.key, self.clock.now())))
            return None
        note = event_note(job, "CreatedWorkload", f"Created Workload: {wl.key}", self.store.timestamp(),
                          component=COMPONENT)
        if status is None:
            record_events(self.store, [note])
        else:
            self._event_notes.append(note)  # with the workload's own, in its write's transaction
        return stored

    @staticmethod
    def _wl_key(wl: Workload) -> Key:
        return Key("kueue.x-k8s.io", "workloads", wl.namespace, wl.name)
