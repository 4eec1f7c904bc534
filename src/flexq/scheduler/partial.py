"""Partial admission: a workload whose pod sets may run with fewer pods (Kueue's ``minCount``, from a Job's
``kueue.x-k8s.io/job-min-parallelism``) and that fits neither as it is nor by preemption is admitted with the most
pods that fit, down to its minimum.

As Kueue's ``PodSetReducer``: every pod set gives up the same share of what it may give up (its count less its
minimum), and a binary search over the whole reduction (0: as submitted, the sum of the pod sets' margins: all at
their minimum) finds the smallest reduction that fits, by assignment or by preemption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from flexq.scheduler.model import PodSet

__all__ = ["counts_at", "largest_fit", "reducible"]

R = TypeVar("R")


def reducible(podsets: Sequence[PodSet]) -> bool:
    """Whether some pod set may be admitted with fewer pods than it asks for."""
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in podsets)


def _margins(podsets: Sequence[PodSet]) -> list[int]:
    return [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in podsets]


def counts_at(podsets: Sequence[PodSet], step: int) -> list[int]:
    """The pod sets' counts ``step`` steps of reduction down (each gives up its margin x step / all margins)."""
    margins = _margins(podsets)
    total = sum(margins)
    return [ps.count - margin * step // total for ps, margin in zip(podsets, margins, strict=True)]


def largest_fit(podsets: Sequence[PodSet], fits: Callable[[list[int]], R | None]) -> R | None:
    """What ``fits`` answers for the largest counts it accepts (None: it accepts none down to the minimums).
    ``fits`` is taken to accept every count below one it accepts (fewer pods never fit worse)."""
    total = sum(_margins(podsets))
    if total == 0:
        return None
    found: R | None = None
    low, high = 0, total + 1  # the smallest step in [low, high) that fits; high: none does
    while low < high:
        step = (low + high) // 2
        answer = fits(counts_at(podsets, step))
        if answer is None:
            low = step + 1
        else:
            found, high = answer, step
    return found
