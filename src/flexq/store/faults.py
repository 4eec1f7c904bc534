"""When the database refuses a write: the disk is full, or another process holds its write lock.

SQLite answers ``SQLITE_FULL`` ("database or disk is full") on a statement or at ``COMMIT`` (the write-ahead log
could not grow), and ``SQLITE_BUSY`` ("database is locked") when another connection holds the write lock. The
store then undoes the transaction whole (SQLite may have rolled it back already) and raises
:class:`~flexq.store.refusals.StoreUnavailable` naming the cause; what was committed before stays intact and
readable. A write waits for a lock held elsewhere up to the store's ``busy`` seconds, with its gate released
between tries so that readers in other threads are served meanwhile.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Final

from flexq.store.refusals import StoreUnavailable
from flexq.store.window import Gate

__all__ = ["BUSY_TIMEOUT_MS", "begin", "refused", "unavailable"]

BUSY_TIMEOUT_MS: Final = 50
"""SQLite's own wait for a lock, per statement: short, so that the gate is not held long; :func:`begin` waits on."""

_BUSY: Final = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_FULL: Final = frozenset({sqlite3.SQLITE_FULL})


def _code(exc: sqlite3.Error) -> int:
    return int(getattr(exc, "sqlite_errorcode", -1)) & 0xFF


def refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the database refusing a write (full, locked, I/O), not a mistake in the statement."""
    return isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError


def unavailable(exc: sqlite3.Error, path: str, busy: float) -> StoreUnavailable:
    """The error to raise for ``exc``, with what to do about it."""
    code, text = _code(exc), str(exc)
    if code in _FULL or "full" in text:
        return StoreUnavailable(f"the store could not write: {text} ({path}): nothing of this write was kept; "
                                "free space there and try again", "DiskFull")
    if code in _BUSY or "locked" in text:
        return StoreUnavailable(f"the store could not write: {text} ({path}): another process held its write "
                                f"lock for more than {busy:g}s; nothing of this write was kept, try again", "Locked")
    return StoreUnavailable(f"the store could not write: {text} ({path}): nothing of this write was kept",
                            "WriteFailed")


def begin(db: sqlite3.Connection, gate: Gate, busy: float, path: str) -> None:
    """``BEGIN IMMEDIATE`` on ``db``, whose ``gate`` the caller holds. While another process holds the write lock,
    try again until ``busy`` seconds have passed (the gate let go between tries when the caller holds it once:
    the connection is idle, readers may use it), then raise :class:`StoreUnavailable`."""
    deadline = time.monotonic() + busy
    pause = 0.002
    while True:
        try:
            db.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if (_code(exc) not in _BUSY and "locked" not in str(exc)) or time.monotonic() >= deadline:
                raise unavailable(exc, path, busy) from exc
        with gate.aside():
            time.sleep(pause)
        pause = min(pause * 2, 0.05)
