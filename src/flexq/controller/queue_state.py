"""What the queue controller's parts share: its state, and the steps each part calls in another.

:class:`~flexq.controller.queue.QueueController` is made of :class:`~flexq.controller.job_events.JobEvents` (the
jobs' side: their workloads made, finished, resized, deleted) and
:class:`~flexq.controller.workload_writes.WorkloadWrites` (the scheduler's decisions written back: statuses,
Events, jobs started and stopped), over this state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from flexq.scheduler.events import Event
from flexq.scheduler.model import Workload
from flexq.store import Key, NotFound
from flexq.store.recorder import event_note, record_events

if TYPE_CHECKING:
    from flexq.clock import Clock
    from flexq.control.plane import ControlPlane
    from flexq.controller.capacity_sync import LiveCapacity
    from flexq.controller.pod_sync import PodIntegration
    from flexq.controller.ray_runs import RayRuntime
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
    _after_write: list[Callable[[], None]]
    _touched: set[str]
    _stored_variants: dict[str, set[str]]
    _event_notes: list[tuple[Key, dict[str, Any]]]
    """The Events of the write under way (a workload's), recorded together at its end."""

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
        try:
            return self.store.get(self._wl_key(wl))
        except NotFound:
            return None

    @staticmethod
    def _wl_key(wl: Workload) -> Key:
        return Key("kueue.x-k8s.io", "workloads", wl.namespace, wl.name)
