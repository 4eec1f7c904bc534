"""The queue controller's pace: how long a step waits for more changes, how much a step schedules, how often it
rebuilds its configuration, and when it reads the store again after refused writes."""

from __future__ import annotations

from typing import Final

__all__ = ["COALESCE", "FORGET_RETRY", "RECONFIGURE_EVERY", "STEP_CYCLES"]

COALESCE: Final = 0.01
"""Seconds a step waits after the store changes, so that the changes of a busy moment make one step."""
FORGET_RETRY: Final = 1.0
"""Seconds before the stored state is read afresh after a failed write (and between tries while it fails)."""
STEP_CYCLES: Final = 2
"""Scheduling cycles a step runs at the most (each admits up to one head per ClusterQueue); the next step goes on at
once. A step's writes stay short, so that a finished job's quota is taken back after a step of a few cycles, not after
the hundreds of admissions of a busy moment."""
RECONFIGURE_EVERY: Final = 0.25
"""Seconds between two rebuilds of the scheduler's configuration, at the most: creating a thousand queues
rebuilds it a few times, not a thousand (workloads of a queue not known yet wait for the rebuild)."""
