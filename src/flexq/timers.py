"""Deferred actions in time order, one implementation for both clocks.

A :class:`TimerHeap` holds actions to run at given times; ties go by priority, then by the order they were
scheduled, so a run is deterministic. The live server's controller runs the due ones on the real clock
(:meth:`TimerHeap.run_due`, from its loop); a :class:`Kernel` (the simulator's, a forecast's) runs them in virtual
time, moving its clock to each one. The capacity driver schedules through either, as the same protocol
(:class:`flexq.capacity.provisioning.Timers`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from flexq.clock import Clock, VirtualClock

__all__ = ["Kernel", "TimerHeap"]

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

    def pending(self) -> list[tuple[float, int, Callable[[], None]]]:
        """Every action still to run, as (at, priority, action), in the order they would run."""
        return [(at, priority, action) for at, priority, _seq, action in sorted(self._heap)]

    def pop(self) -> tuple[float, Callable[[], None]]:
        """The soonest action and its time, taken off the heap."""
        at, _priority, _seq, action = heapq.heappop(self._heap)
        return at, action

    def run_due(self) -> None:
        """Run every action due by the clock's now, soonest first (one scheduled meanwhile for now runs too)."""
        now = self.clock.now()
        while self._heap and self._heap[0][0] <= now:
            self.pop()[1]()


class Kernel(TimerHeap):
    """Runs scheduled actions in time order; ties by priority, then by the order they were scheduled. An action
    scheduled for a time already past runs now."""

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.virtual = clock or VirtualClock()
        super().__init__(self.virtual)

    def schedule(self, at: float, action: Callable[[], None], priority: int = 0) -> None:
        now = self.clock.now()
        super().schedule(at if at > now else now, action, priority)

    def peek(self) -> float | None:
        return self.next_at()

    def step(self) -> None:
        at, action = self.pop()
        self.virtual.advance_to(at)
        action()

    def run_until(self, moment: float | None, after_each_time: Callable[[float], None]) -> None:
        """Run every action up to ``moment`` (all, if None); call ``after_each_time(t)`` once per instant."""
        while (t := self.next_at()) is not None:
            if moment is not None and t > moment:
                break
            while self.next_at() == t:
                self.step()
            after_each_time(t)

    def advance(self, moment: float) -> None:
        """Run every action up to ``moment``, then move the clock there."""
        self.run_until(moment, lambda _t: None)
        if moment > self.virtual.now():
            self.virtual.advance_to(moment)
