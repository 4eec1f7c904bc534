"""How long jobs run: what they declare, what bounds them, and what the jobs that finished so far took.

A forecast needs every running and waiting job's run time. The best is declared (the job's
``flexq.dev/expected-run-time``, the simulator's ``runFor``); a bound comes next (the job's
``activeDeadlineSeconds``, Kueue's ``kueue.x-k8s.io/max-exec-time-seconds``: it runs at most that); else the
mean of the last jobs that finished in the same ClusterQueue (the mean, not the median: a queue's wait is a sum of
run times, and the median of skewed run times undercounts every one of them); else nothing is known. Each answer
says which it is (:class:`Basis`), so that a forecast built on it can say how sure it is.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

__all__ = ["HISTORY", "Basis", "RunTime", "RunTimes"]

HISTORY: Final = 50
"""Finished jobs remembered per ClusterQueue for its estimate."""


class Basis(IntEnum):
    """What a run time (or a forecast built on run times) rests on, surest first: a forecast is as sure as the
    least sure run time it used."""

    DECLARED = 0
    LIMIT = 1
    ESTIMATED = 2
    UNKNOWN = 3

    @property
    def word(self) -> str:
        return self.name.capitalize()


@dataclass(frozen=True, slots=True)
class RunTime:
    seconds: float | None
    basis: Basis


class RunTimes:
    """Run times by workload key, and finished jobs' run times by ClusterQueue."""

    def __init__(self) -> None:
        self.declared: dict[str, float] = {}
        """What jobs say they take (``flexq.dev/expected-run-time``; the simulator's ``runFor``)."""
        self.limits: dict[str, float] = {}
        """The most jobs may take (``activeDeadlineSeconds``, ``max-exec-time-seconds``)."""
        self._finished: dict[str, deque[float]] = {}

    def finished(self, cluster_queue: str, seconds: float) -> None:
        """A job of ``cluster_queue`` ran for ``seconds`` and ended."""
        if seconds >= 0 and cluster_queue:
            self._finished.setdefault(cluster_queue, deque(maxlen=HISTORY)).append(seconds)

    @property
    def learned(self) -> bool:
        """Whether a job has finished in some queue: until one has, no run time is an estimate."""
        return any(self._finished.values())

    def forget(self, key: str) -> None:
        self.declared.pop(key, None)
        self.limits.pop(key, None)

    def of(self, key: str, cluster_queue: str, rng: random.Random | None = None) -> RunTime:
        """The run time of workload ``key`` (in ``cluster_queue``), and what it rests on. With ``rng``, an estimate is
        one of the finished jobs' run times drawn at random instead of their mean (a sample, for an ensemble)."""
        declared = self.declared.get(key)
        if declared is not None:
            return RunTime(declared, Basis.DECLARED)
        limit = self.limits.get(key)
        history = self._finished.get(cluster_queue)
        if history:
            mean = rng.choice(history) if rng is not None else statistics.fmean(history)
            if limit is None or mean <= limit:
                return RunTime(mean, Basis.ESTIMATED)
        if limit is not None:
            return RunTime(limit, Basis.LIMIT)
        return RunTime(None, Basis.UNKNOWN)

    def remaining(self, key: str, cluster_queue: str, elapsed: float, rng: random.Random | None = None) -> RunTime:
        """How much longer workload ``key``, running for ``elapsed`` seconds already, is expected to run. A declared
        or bounded run time counts down (to 0 once spent); an estimate looks only at the finished jobs that ran longer
        than ``elapsed`` (the mean of what they ran beyond it), and where none did, expects it to run on about half
        as long again as it has run (a job that outlived every other is not about to end)."""
        run = self.of(key, cluster_queue)
        if run.seconds is None or run.basis is not Basis.ESTIMATED:
            return RunTime(None if run.seconds is None else max(0.0, run.seconds - elapsed), run.basis)
        longer = [d - elapsed for d in self._finished.get(cluster_queue, ()) if d > elapsed]
        if not longer:
            return RunTime(elapsed / 2, Basis.ESTIMATED)
        return RunTime(rng.choice(longer) if rng is not None else statistics.fmean(longer), Basis.ESTIMATED)

    def copy(self) -> RunTimes:
        """A copy to read on another thread while this one goes on learning."""
        other = RunTimes()
        other.declared = dict(self.declared)
        other.limits = dict(self.limits)
        other._finished = {cq: deque(values, maxlen=HISTORY) for cq, values in self._finished.items()}
        return other
