"""How the queue controller's steps go, for ``/metrics``: how many, how long (whole, and by phase), how much each
read and wrote.

A step reads the store's changes since the last one (``read``), runs the scheduler until a pass decides nothing
(``schedule``), writes what it decided about each workload it touched (``write``), brings the queues' statuses up
to date (``queues``) and commits (``commit``: the batch's last writes, and the change to the watchers). Under load
the time from a job's end to the next admission is mostly the step under way when the end came, and the next one;
these figures say which phase those steps spend their time in.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

__all__ = ["PHASES", "STEP_BUCKETS", "StepStats", "StepTimer"]

STEP_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Upper bounds (seconds) of the step duration histogram's buckets."""
PHASES: Final = ("read", "schedule", "write", "queues", "commit")


@dataclass
class StepStats:
    """Counters since the server started."""

    steps: int = 0
    seconds: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(STEP_BUCKETS) + 1))
    """Steps by duration: one count per bucket of :data:`STEP_BUCKETS` (not cumulative), the last above them all."""
    phases: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    """Seconds spent in each phase."""
    changes: int = 0
    """Changes read from the store."""
    writes: int = 0
    """Workloads written (a status, or a workload stored with its first status)."""

    def record(self, seconds: float, phases: dict[str, float], changes: int, writes: int) -> None:
        self.steps += 1
        self.seconds += seconds
        self.buckets[bisect.bisect_left(STEP_BUCKETS, seconds)] += 1
        for phase, spent in phases.items():
            self.phases[phase] += spent
        self.changes += changes
        self.writes += writes

    def cumulative(self) -> list[tuple[str, int]]:
        """The buckets as Prometheus counts them: steps at or under each bound, then all of them (``+Inf``)."""
        rows, seen = [], 0
        for bound, n in zip(STEP_BUCKETS, self.buckets, strict=False):
            seen += n
            rows.append((str(bound), seen))
        return [*rows, ("+Inf", self.steps)]


class StepTimer:
    """Times one step at a time: :meth:`begin`, a :meth:`lap` at the end of each phase, :meth:`end`."""

    def __init__(self, stats: StepStats, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.stats = stats
        self._monotonic = monotonic
        self._began = self._last = 0.0
        self._phases: dict[str, float] = {}
        self.changes = 0
        self.writes = 0

    def begin(self) -> None:
        self._began = self._last = self._monotonic()
        self._phases = {}
        self.changes = self.writes = 0

    def lap(self, phase: str) -> None:
        """The time since the last lap (or the beginning) was spent in ``phase``."""
        now = self._monotonic()
        self._phases[phase] = self._phases.get(phase, 0.0) + now - self._last
        self._last = now

    def end(self) -> None:
        """The rest of the step was its commit; count it."""
        self.lap("commit")
        self.stats.record(self._last - self._began, self._phases, self.changes, self.writes)
