"""How a reason names a moment: the clock that tells it decides, not the code that finds it.

The capacity driver keeps times as numbers (a node ready at, a slice freeing at) and turns them into words only where
it hands a reason out (an event, a pending reason), through the :class:`TimeWords` its owner gave it: the simulator's
log names the moment (``t=1h20m``), so that a replay reads the same whenever it is read; the live server says how long
until it (``in 5m``), as ``kubectl`` shows ages. A live pending reason leaves a moment aside out: it is rewritten only
when the workload's state changes, so a countdown in it would go stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol

from flexq.durations import format_seconds

__all__ = ["COUNTDOWNS", "NAMED_MOMENTS", "TimeWords"]


class TimeWords(Protocol):
    """The words for a moment ``at`` in a reason told at ``now``."""

    def moment(self, at: float, now: float) -> str:
        """The moment alone: ``t=1h`` or ``in 5m``."""
        ...

    def at(self, at: float, now: float) -> str:
        """The moment after a verb: ``at t=1h`` or ``in 5m``."""
        ...

    def aside(self, what: str, at: float, now: float) -> str:
        """A moment added in brackets to a pending reason (``what`` is ``ready``): `` (ready at t=1h)``, or nothing."""
        ...


@dataclass(frozen=True, slots=True)
class _NamedMoments:
    """Moments named by their time on the clock (the simulator's log)."""

    def moment(self, at: float, now: float) -> str:
        return f"t={format_seconds(at)}"

    def at(self, at: float, now: float) -> str:
        return f"at t={format_seconds(at)}"

    def aside(self, what: str, at: float, now: float) -> str:
        return f" ({what} at t={format_seconds(at)})"


@dataclass(frozen=True, slots=True)
class _Countdowns:
    """Moments told as how long until them (the live server's real time)."""

    def moment(self, at: float, now: float) -> str:
        return f"in {format_seconds(at - now)}"

    def at(self, at: float, now: float) -> str:
        return f"in {format_seconds(at - now)}"

    def aside(self, what: str, at: float, now: float) -> str:
        return ""


NAMED_MOMENTS: Final[TimeWords] = _NamedMoments()
COUNTDOWNS: Final[TimeWords] = _Countdowns()
