"""Durations as scenarios write them: ``90s``, ``10m``, ``2h``, ``7d``, ``1h30m``, or plain seconds."""

from __future__ import annotations

import re
from typing import Any, Final

from flexq.errors import FlexqError

__all__ = ["DurationError", "format_seconds", "parse_duration"]

_PART: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


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
