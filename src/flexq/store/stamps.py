"""What the store stamps on what it writes: a uid, and the moment to the second (``creationTimestamp``)."""

from __future__ import annotations

import functools
import math
import uuid
from datetime import UTC, datetime

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


def new_uid() -> str:
    return str(uuid.uuid4())
