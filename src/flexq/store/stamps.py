"""What the store stamps on what it writes: a uid, and the moment to the second (``creationTimestamp``)."""

from __future__ import annotations

import functools
import math
import random
from datetime import UTC, datetime
from typing import Final

__all__ = ["new_uid", "rfc3339", "utcnow"]


def rfc3339(moment: datetime) -> str:
    """``moment`` to the second, in UTC: ``2026-12-02T06:30:00Z``."""
    return _second(math.floor(moment.timestamp()))


@functools.lru_cache(maxsize=64)
def _second(epoch: int) -> str:
    """A second's stamp, worked out once: every write stamps one, and a busy second has thousands."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> datetime:
    return datetime.now(UTC)


_VERSION_4: Final = (0xF << 76 | 0x3 << 62, 0x4 << 76 | 0x2 << 62)
"""The bits a version-4 UUID fixes (its version nibble and its variant), cleared and then set."""


def new_uid() -> str:
    """A random (version 4) UUID, as the API server gives each object: from the interpreter's generator, seeded from
    the system's and reseeded in a forked child; four times as fast as :func:`uuid.uuid4`, which reads the system's
    for each (a busy step stamps thousands)."""
    clear, fixed = _VERSION_4
    h = f"{random.getrandbits(128) & ~clear | fixed:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
