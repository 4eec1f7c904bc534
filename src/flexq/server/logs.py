"""Reading a job's log, and following it as it grows until the job's end marker.

A log is a file of the server's (``FLEXQ_HOME/runs/...`` or ``FLEXQ_HOME/logs/...``, in folders only the server's
user can enter), whose path the server builds from names: it is opened without following a link all the same
(``O_NOFOLLOW``, and only a regular file is read), and a follower reads what was added since its last read, never
the whole file again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

from flexq.runtime import END_MARKER

__all__ = ["READ_LIMIT", "follow_log", "read_log"]

READ_LIMIT: Final = 64 << 20
"""The most of a log one read returns (its end): a log that grew past it is cut at its start."""

_CHUNK: Final = 1 << 20


def _open(path: Path) -> int | None:
    """The log opened for reading (a regular file, reached without a link at its end), or None where there is none
    (yet)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def read_log(path: Path, limit: int = READ_LIMIT) -> str:
    """The log's text (its last ``limit`` bytes at most); empty where there is none."""
    fd = _open(path)
    if fd is None:
        return ""
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        chunks: list[bytes] = []
        while chunk := os.read(fd, _CHUNK):
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


async def follow_log(path: Path, closed: Callable[[], bool] = lambda: False,
                     limit: float = 6 * 3600.0) -> AsyncIterator[bytes]:
    """Stream a log file as it grows, until the job's end marker, ``limit`` seconds, or ``closed()`` (the server is
    stopping: the client follows again). A log written afresh (a new run) is followed from its start."""
    marker = END_MARKER.encode()
    sent = 0
    waited = 0.0
    held = b""  # the end of the last read that may be the start of the marker
    fd: int | None = None
    try:
        while waited < limit and not closed():
            if fd is None:
                fd = _open(path)
            if fd is not None:
                size = os.fstat(fd).st_size
                if size < sent:  # rewritten (a new run)
                    sent, held = 0, b""
                os.lseek(fd, sent, os.SEEK_SET)
                chunk = os.read(fd, _CHUNK)
                sent += len(chunk)
                data = held + chunk
                if marker in data:
                    before = data[:data.index(marker)]
                    if before:
                        yield before
                    return
                keep = next((n for n in range(min(len(marker) - 1, len(data)), 0, -1)
                             if marker.startswith(data[-n:])), 0)
                data, held = (data[:-keep], data[-keep:]) if keep else (data, b"")
                if data:
                    yield data
                if len(chunk) == _CHUNK:
                    continue  # more is there already
            await asyncio.sleep(0.5)
            waited += 0.5
    finally:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
