"""How long the cloud takes to answer ProvisioningRequests, by node pool, from the answers seen so far.

A forecast must not know what the cloud will answer: it expects what answers so far say. A request in flight
``age`` seconds is expected to be answered after the median of the past answers of its pool that took longer than
``age`` (those it can still be like); a new request after the median of them all. With fewer than
:data:`MIN_ANSWERS` answers in a pool, the pool's model is taken instead (its declared delay, or the median of its
declared distribution: :meth:`flexq.capacity.EmulatedCloud.foreseeable`).
"""

from __future__ import annotations

import statistics
from collections import deque
from typing import Final

__all__ = ["ANSWERS_KEPT", "MIN_ANSWERS", "AnswerTimes"]

MIN_ANSWERS: Final = 3
"""Answers a pool must have had before they, not its model, say how long the next will take."""
ANSWERS_KEPT: Final = 50
"""The last answers remembered per pool."""


class AnswerTimes:
    """ProvisioningRequests in flight (when each was accepted) and, by pool, how long the last ones took."""

    def __init__(self) -> None:
        self._asked: dict[str, float] = {}
        self._answers: dict[str, deque[float]] = {}

    def accepted(self, request: str, at: float) -> None:
        self._asked.setdefault(request, at)

    def answered(self, request: str, pool: str, at: float) -> None:
        """The cloud answered ``request`` for ``pool`` at ``at`` (its nodes provisioned, or room for them awaited in
        the pool): its wait is learned; a later answer of the same request is not."""
        asked = self._asked.pop(request, None)
        if asked is not None and at >= asked:
            self._answers.setdefault(pool, deque(maxlen=ANSWERS_KEPT)).append(at - asked)

    def ended(self, request: str) -> None:
        """``request`` failed or was withdrawn: no answer to learn."""
        self._asked.pop(request, None)

    def asked_at(self, request: str) -> float | None:
        return self._asked.get(request)

    def answers(self, pool: str) -> int:
        return len(self._answers.get(pool, ()))

    def typical(self, pool: str) -> float | None:
        """How long a new request of ``pool`` is expected to wait (None: too few answers to say)."""
        seen = self._answers.get(pool)
        return statistics.median(seen) if seen is not None and len(seen) >= MIN_ANSWERS else None

    def remaining(self, pool: str, age: float) -> float | None:
        """How much longer a request of ``pool`` in flight for ``age`` seconds is expected to wait (None: too few
        answers to say). Past every answer seen, it is expected as a new one would be."""
        seen = self._answers.get(pool)
        if seen is None or len(seen) < MIN_ANSWERS:
            return None
        longer = [s for s in seen if s > age]
        return statistics.median(longer) - age if longer else statistics.median(seen)

    def copy(self) -> AnswerTimes:
        made = AnswerTimes()
        made._asked = dict(self._asked)
        made._answers = {pool: deque(seen, maxlen=ANSWERS_KEPT) for pool, seen in self._answers.items()}
        return made
