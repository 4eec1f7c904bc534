"""A tiny event kernel: the timer heap of :mod:`flexq.timers` on a virtual clock that moves to each action."""

from __future__ import annotations

from collections.abc import Callable

from flexq.clock import VirtualClock
from flexq.timers import TimerHeap

__all__ = ["Kernel"]


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
