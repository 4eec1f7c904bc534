"""Deferred actions in time order, one implementation for both clocks.

A :class:`TimerHeap` holds actions to run at given times; ties go by priority, then by the order they were
scheduled, so a run is deterministic. The live server's controller runs the due ones on the real clock
(:meth:`TimerHeap.run_due`, from its loop); the simulator's :class:`~flexq.sim.kernel.Kernel` runs them in
virtual time, moving its clock to each one. The capacity driver schedules through either, as the same
protocol (:class:`flexq.capacity.provisioning.Timers`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from flexq.clock import Clock

__all__ = ["TimerHeap"]

_Item = tuple[float, int, int, Callable[[], None]]
"""(at, priority, sequence, action): the sequence is unique, so the action is never compared."""


class TimerHeap:
    """Actions to run at given times on ``clock``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[_Item] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.clock.now()

    def schedule(self, at: float, action: Callable[[], None], priority: int = 0) -> None:
        heapq.heappush(self._heap, (at, priority, next(self._seq), action))

    def next_at(self) -> float | None:
        """When the soonest action is due (None: nothing is scheduled)."""
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[float, Callable[[], None]]:
        """The soonest action and its time, taken off the heap."""
        at, _priority, _seq, action = heapq.heappop(self._heap)
        return at, action

    def run_due(self) -> None:
        """Run every action due by the clock's now, soonest first (one scheduled meanwhile for now runs too)."""
        now = self.clock.now()
        while self._heap and self._heap[0][0] <= now:
            self.pop()[1]()
