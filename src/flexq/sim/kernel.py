"""A tiny event kernel: a heap of (time, priority, sequence, action), deterministic on ties."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from flexq.clock import VirtualClock

__all__ = ["Kernel"]


_Item = tuple[float, int, int, Callable[[], None]]
"""(at, priority, sequence, action): the sequence is unique, so the action is never compared."""


class Kernel:
    """Runs scheduled actions in time order; ties by priority, then by the order they were scheduled."""

    def __init__(self, clock: VirtualClock | None = None) -> None:
        self.clock = clock or VirtualClock()
        self._heap: list[_Item] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self.clock.now()

    def schedule(self, at: float, action: Callable[[], None], priority: int = 0) -> None:
        now = self.clock.now()
        heapq.heappush(self._heap, (at if at > now else now, priority, next(self._seq), action))

    def peek(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def step(self) -> None:
        at, _priority, _seq, action = heapq.heappop(self._heap)
        self.clock.advance_to(at)
        action()

    def run_until(self, moment: float | None, after_each_time: Callable[[float], None]) -> None:
        """Run every action up to ``moment`` (all, if None); call ``after_each_time(t)`` once per instant."""
        while self._heap:
            t = self._heap[0][0]
            if moment is not None and t > moment:
                break
            while self._heap and self._heap[0][0] == t:
                self.step()
            after_each_time(t)
