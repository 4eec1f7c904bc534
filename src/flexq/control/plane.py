"""The control plane: the scheduler and what acts on its decisions, one step the same on both clocks.

The live server's queue controller and the simulator each feed it what happened (a job queued, a check set,
a job finished, a timer due) and let it settle; it holds the :class:`~flexq.scheduler.scheduler.Scheduler`, the
:class:`~flexq.capacity.driver.CapacityDriver` where capacity is modelled, and the timers both run on. Every
event is told (to the simulator's log, or to the controller's writes) the moment it happens, then acted on: the
capacity driver places, provisions and releases; without one, an admitted workload starts at once. What the
driver does in turn (a node came, a request was refused) comes back through :meth:`ControlPlane.emit`, so the
two clocks see the same events in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from flexq.capacity.driver import CapacityDriver
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.scheduler import Scheduler
from flexq.timers import TimerHeap

__all__ = ["SETTLE_PASSES", "ControlPlane"]

SETTLE_PASSES: Final = 100
"""Scheduling passes in one step at the most: each pass acts on what the last admitted or evicted (a started job
may free or take capacity that the next pass sees); a step that has not settled by then goes on at the next."""


class ControlPlane:
    """The scheduler, the capacity driver (if any) and the timers, driven by one clock's loop.

    ``tell`` hears every event as it happens, capacity events included; ``start`` is called for an admitted
    workload when no capacity is modelled (with a driver, the driver starts workloads once their pods are placed).
    """

    def __init__(self, scheduler: Scheduler, timers: TimerHeap, tell: Callable[[Event], None],
                 start: Callable[[str, float], None] | None = None) -> None:
        self.scheduler = scheduler
        self.timers = timers
        self.driver: CapacityDriver | None = None
        self._tell = tell
        self._start = start

    def emit(self, events: Iterable[Event]) -> None:
        """What the scheduler or the driver decided: each told, then acted on, in order."""
        for event in events:
            self._tell(event)
            if event.kind.capacity:
                continue  # the driver's own account of what it did: nothing more to act on
            if self.driver is not None:
                self.driver.handle(event)
            elif event.kind is EventKind.ADMITTED and self._start is not None:
                self._start(event.workload, event.t)

    def settle(self, now: float) -> None:
        """Schedule at ``now`` until a pass decides nothing. Without a driver one pass is enough: starting jobs
        changes nothing the scheduler sees."""
        for _ in range(SETTLE_PASSES):
            events = self.scheduler.schedule(now)
            if not events:
                return
            self.emit(events)
            if self.driver is None:
                return

    def next_wake(self) -> float | None:
        """When something is due next: a workload's requeue, or a timer (a node booting, a request's verdict)."""
        times = [t for t in (self.scheduler.next_requeue(), self.timers.next_at()) if t is not None]
        return min(times) if times else None
