"""Time, behind one protocol: the real clock for the server, a virtual clock for scenarios.

The scheduler and every controller read time only through a :class:`Clock`, as seconds since an epoch
of the clock's choosing, so the same code runs in real time and in virtual time.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the clock's epoch."""
        ...


class RealClock:
    """Wall-clock time (Unix seconds)."""

    def now(self) -> float:
        return time.time()


class VirtualClock:
    """Time that moves only when told to; starts at ``start``."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, moment: float) -> None:
        if moment < self._now:
            raise ValueError(f"virtual time cannot go back ({moment} < {self._now})")
        self._now = moment
