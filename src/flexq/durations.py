"""Durations as scenarios write them: ``90s``, ``10m``, ``2h``, ``7d``, ``1h30m``, or plain seconds."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Final

from flexq.errors import FlexqError

__all__ = ["WAIT", "DurationError", "dated", "ends_at", "format_seconds", "parse_duration"]

_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
WAIT: Final = re.compile(r"(?:expected in|frees in|may return in) ((?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+)"
                         r"(?: \(at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\))?")
"""A wait a message names (``expected in 1h30m``), and the moment it ends where the message was :func:`dated`."""
_MOMENT: Final = re.compile(r" \(at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)")


class DurationError(FlexqError, ValueError):
    pass


def parse_duration(value: Any) -> float:
    if isinstance(value, bool):
        raise DurationError(f"invalid duration {value!r}: use forms like 90s, 10m, 2h, 7d")
    if isinstance(value, int | float):
        if value < 0:
            raise DurationError(f"invalid duration {value!r}: must not be negative")
        return float(value)
    text = str(value).strip()
    pos, total = 0, 0.0
    for match in _PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise DurationError(f"invalid duration {value!r}: use forms like 90s, 10m, 2h, 7d")
    return total


def format_seconds(seconds: float) -> str:
    """``5400`` -> ``1h30m``; ``0`` -> ``0s``."""
    rest = round(seconds)
    if rest == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def dated(message: str, now: datetime, before: str = "") -> str:
    """``message`` with the moment each wait it names ends: ``expected in 1h30m`` said at 10:00 UTC reads
    ``expected in 1h30m (at ...T11:30:00Z)``. A stored message outlives the moment it was said (a condition's
    lastTransitionTime moves only with its status), so its reader needs the moment, not the distance. ``before``: the
    message stored until now; where it says the same waits, it stands (its moments were those of the first saying)."""
    if before and _MOMENT.sub("", before) == message:
        return before

    def at(match: re.Match[str]) -> str:
        end = now + timedelta(seconds=parse_duration(match.group(1)))
        return f"{match.group(0)} (at {end.strftime('%Y-%m-%dT%H:%M:%SZ')})"

    return WAIT.sub(at, message)


def ends_at(message: str, end: datetime) -> str:
    """``message`` with the moment its (first) wait ends where that moment is known exactly: ``expected in 1h``
    reads ``expected in 1h (at ...T11:30:00Z)`` with ``end`` to the second, not counted from when it is written
    (a write a moment later would move it). A message already :func:`dated` stands."""
    return WAIT.sub(lambda m: m.group(0) if m.group(2) else f"{m.group(0)} (at {end.strftime('%Y-%m-%dT%H:%M:%SZ')})",
                    message, count=1)
