"""Reasons that name moments, kept as times until they leave the core, where the clock telling them words them.

The core keeps times as numbers (a node ready at, a slice freeing at). A reason that names one is a :class:`Phrase`
(text with :class:`Moment` parts), not a string; whoever shows it puts its moments into words with a
:class:`TimeWords`: the simulator's log names the moment (``t=1h20m``), so that a replay reads the same whenever it
is read; the live server counts down to it (``in 5m``), as ``kubectl`` shows ages: an event has its own time, and a
workload's status adds the moment a wait ends where it stores one; a forecast's line gives the time of day
(``14:20:05Z``), as its other moments.

Most reasons name no moment and stay plain strings: a reason is :data:`Text`, either, and :func:`worded` turns
either into the words of a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Final, Protocol

from flexq.durations import format_seconds

__all__ = ["COUNTDOWNS", "NAMED_MOMENTS", "TIMES_OF_DAY", "Moment", "MomentForm", "Phrase", "Text", "TimeWords",
           "worded"]


class TimeWords(Protocol):
    """The words for a moment ``at`` in a reason told at ``now``."""

    def moment(self, at: float, now: float) -> str:
        """The moment alone: ``t=1h``, ``in 5m``, ``14:20:05Z``."""
        ...

    def at(self, at: float, now: float) -> str:
        """The moment after a verb: ``at t=1h``, ``in 5m``, ``at 14:20:05Z``."""
        ...

    def aside(self, what: str, at: float, now: float) -> str:
        """A moment added in brackets (``what`` is ``ready``): `` (ready at t=1h)``, or nothing where the clock's
        words for it would not add to the reason."""
        ...


class MomentForm(Enum):
    """Where a moment stands in its reason, which decides its words (the methods of :class:`TimeWords`)."""

    ALONE = "alone"
    AFTER_VERB = "after verb"
    ASIDE = "aside"


@dataclass(frozen=True, slots=True)
class Moment:
    """A moment in a reason: a time on the clock of the run that tells it."""

    at: float
    form: MomentForm = MomentForm.ALONE
    what: str = ""
    """For an aside: what happens then (``ready``)."""

    def words(self, words: TimeWords, now: float) -> str:
        match self.form:
            case MomentForm.ALONE:
                return words.moment(self.at, now)
            case MomentForm.AFTER_VERB:
                return words.at(self.at, now)
            case MomentForm.ASIDE:
                return words.aside(self.what, self.at, now)


@dataclass(frozen=True, slots=True)
class Phrase:
    """A reason with moments in it, in order with its text. Joined to text or another phrase with ``+``."""

    parts: tuple[str | Moment, ...]

    def __add__(self, other: Text) -> Phrase:
        return Phrase(self.parts + (other.parts if isinstance(other, Phrase) else (other,)))

    def __radd__(self, other: str) -> Phrase:
        return Phrase((other, *self.parts))

    def __bool__(self) -> bool:
        """Said at all (an empty phrase is no reason, as an empty string)."""
        return bool(self.parts)

    def words(self, words: TimeWords, now: float) -> str:
        """The reason in the words of the clock that tells it at ``now``."""
        return "".join(p if isinstance(p, str) else p.words(words, now) for p in self.parts)

    @property
    def moments(self) -> tuple[float, ...]:
        """The times it names, in order."""
        return tuple(p.at for p in self.parts if isinstance(p, Moment))


Text = str | Phrase
"""A reason: a plain string, or a :class:`Phrase` where it names a moment."""


def worded(text: Text, words: TimeWords, now: float) -> str:
    """``text`` in the words of a clock, at ``now``."""
    return text if isinstance(text, str) else text.words(words, now)


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
    """Moments told as how long until them (the live server's events: each has its own time). An aside says
    nothing: the reason it would be added to already says what is awaited."""

    def moment(self, at: float, now: float) -> str:
        return f"in {format_seconds(at - now)}"

    def at(self, at: float, now: float) -> str:
        return f"in {format_seconds(at - now)}"

    def aside(self, what: str, at: float, now: float) -> str:
        return ""


def _time_of_day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class _TimesOfDay:
    """Moments told as the time of day, UTC (a forecast's line, as it tells its other moments)."""

    def moment(self, at: float, now: float) -> str:
        return _time_of_day(at)

    def at(self, at: float, now: float) -> str:
        return f"at {_time_of_day(at)}"

    def aside(self, what: str, at: float, now: float) -> str:
        return f" ({what} at {_time_of_day(at)})"


NAMED_MOMENTS: Final[TimeWords] = _NamedMoments()
COUNTDOWNS: Final[TimeWords] = _Countdowns()
TIMES_OF_DAY: Final[TimeWords] = _TimesOfDay()
