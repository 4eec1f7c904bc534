"""Leader election among the servers that share one SQLite file (``flexq server --shared``), as on PostgreSQL.

A row of the ``leases`` table names a holder and when it last renewed. A server acquires it when nobody holds
it, or when the holder let it expire (no renewal for ``duration`` seconds), in a write transaction of its own
(``BEGIN IMMEDIATE``: one server at a time); the holder renews it well within that time. The servers share the
file, so they share this machine's clock.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from flexq.store.holder import Holder
from flexq.store.refusals import StoreUnavailable

__all__ = ["SqliteLease"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY, holder TEXT NOT NULL, acquired REAL NOT NULL, renewed REAL NOT NULL,
    duration REAL NOT NULL, transitions INTEGER NOT NULL
)
"""


class SqliteLease:
    """The lease ``name`` in the SQLite file at ``path``, sought by ``identity`` (on a connection of its own)."""

    kind = "sqlite"

    def __init__(self, path: Path, identity: str, *, name: str = "flexq-controller", duration: float = 15.0) -> None:
        self.path = path
        self.identity = identity
        self.name = name
        self.duration = duration
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=5.0)
            self._db.execute(_SCHEMA)
        return self._db

    def acquire(self) -> bool:
        """Acquire or renew the lease; whether it is ours now. :class:`StoreUnavailable` if the file is not."""
        try:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                row = db.execute("SELECT holder, renewed, duration FROM leases WHERE name = ?", (self.name,)).fetchone()
                if row is None:
                    db.execute("INSERT INTO leases VALUES (?, ?, ?, ?, ?, 0)",
                               (self.name, self.identity, now, now, self.duration))
                elif row[0] == self.identity:
                    db.execute("UPDATE leases SET renewed = ?, duration = ? WHERE name = ?",
                               (now, self.duration, self.name))
                elif row[1] + row[2] < now:
                    db.execute("UPDATE leases SET holder = ?, acquired = ?, renewed = ?, duration = ?, "
                               "transitions = transitions + 1 WHERE name = ?",
                               (self.identity, now, now, self.duration, self.name))
                else:
                    db.execute("COMMIT")
                    return False
                db.execute("COMMIT")
                return True
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self.close()
            raise StoreUnavailable(f"the lease in {self.path}: {exc}", "LeaseUnavailable") from None

    def release(self) -> None:
        """Let the lease go at once (if it is ours), so that another server takes over without waiting."""
        with contextlib.suppress(sqlite3.Error):
            self._connection().execute("UPDATE leases SET renewed = 0 WHERE name = ? AND holder = ?",
                                       (self.name, self.identity))

    def read(self) -> Holder | None:
        try:
            row = self._connection().execute(
                "SELECT holder, acquired, renewed, duration, transitions FROM leases WHERE name = ?",
                (self.name,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"the lease in {self.path}: {exc}", "LeaseUnavailable") from None
        if row is None:
            return None
        holder, acquired, renewed, duration, transitions = row
        return Holder(str(holder), datetime.fromtimestamp(acquired, UTC), datetime.fromtimestamp(renewed, UTC),
                      float(duration), int(transitions), renewed + duration < time.time())

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
