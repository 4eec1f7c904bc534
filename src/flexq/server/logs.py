"""Following a job's log file as it grows, until the job's end marker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from flexq.runtime import END_MARKER

__all__ = ["follow_log"]


async def follow_log(path: Path, closed: Callable[[], bool] = lambda: False,
                     limit: float = 6 * 3600.0) -> AsyncIterator[bytes]:
    """Stream a log file as it grows, until the job's end marker, ``limit`` seconds, or ``closed()`` (the server is
    stopping: the client follows again)."""
    sent = 0
    waited = 0.0
    while waited < limit and not closed():
        if path.exists():
            text = path.read_text(encoding="utf-8", errors="replace")
            if len(text) < sent:
                sent = 0  # rewritten (a new run)
            chunk = text[sent:]
            sent = len(text)
            done = END_MARKER in chunk
            chunk = chunk.replace(END_MARKER, "")
            if chunk:
                yield chunk.encode()
            if done:
                return
        await asyncio.sleep(0.5)
        waited += 0.5
