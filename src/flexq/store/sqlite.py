"""The durable object store on SQLite in WAL mode: one file, one server (the default); with ``follow``, several
processes on one file, each seeing the others' commits in order.

What the store does is :mod:`flexq.store.base`'s; this module holds SQLite's statements. A write transaction
is ``BEGIN IMMEDIATE``: it takes SQLite's write lock at once, so writers never interleave. A write the database
refuses (disk full, locked by another process) is undone whole and raises :class:`StoreUnavailable`
(:mod:`flexq.store.faults`); reads go on. With a ``reserve``, a full disk still takes deletes
(:mod:`flexq.store.reserve`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from flexq.store.base import BaseStore, Change, ChangeType, LogRow, rfc3339
from flexq.store.bodies import pack, unpack
from flexq.store.faults import BUSY_TIMEOUT_MS, begin, refused, unavailable
from flexq.store.refusals import Key, StoreUnavailable
from flexq.store.reserve import LOW_SPACE, Reserve, free_bytes
from flexq.store.stamps import new_uid, utcnow

__all__ = ["Change", "ChangeType", "Store", "rfc3339"]

log = logging.getLogger("flexq.store")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, body BLOB NOT NULL,
    PRIMARY KEY (grp, resource, namespace, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes (
    rv INTEGER PRIMARY KEY, type TEXT NOT NULL,
    grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES ('rv', 0);
"""

SHARED_BREATHE = 0.01
"""Seconds a long batch holds the write lock at the most, on a file shared with other servers (which cannot be seen
waiting for it)."""

WAL_KEEP = 8 * 2**20
"""Bytes of the write-ahead log kept once it starts over after a checkpoint (SQLite's ``journal_size_limit``): a
transaction larger than that (a step that made thousands of workloads) grows the log for as long as it lasts, and
the log shrinks back at the next checkpoint instead of holding that much of the disk for good."""

_WHERE_KEY = "grp=? AND resource=? AND namespace=? AND name=?"
_CHUNK = 500
"""Names asked for in one statement, at the most (SQLite takes up to 32,766 parameters)."""


class Store(BaseStore):
    """The store on SQLite: a file (``path``), or memory (the default, for tests and embedded use)."""

    def __init__(
        self,
        path: Path | str = ":memory:",
        *,
        now: Callable[[], datetime] = utcnow,
        new_uid: Callable[[], str] = new_uid,
        history: int = 50_000,
        busy: float = 5.0,
        follow: float = 0.0,
        reserve: int = 0,
    ) -> None:
        """``history``: how many of the newest changes the log keeps (older ones are compacted away once
        a tenth as many more were written); ``busy``: how long a write waits for another process's lock;
        ``follow``: every how many seconds to look for other processes' commits to the same file (0: never, the
        file is this store's alone); ``reserve``: bytes kept aside beside the file for deletes on a full disk (0:
        none; see :mod:`flexq.store.reserve`)."""
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        self._rv: int | None = None
        """The resourceVersion counter while a write transaction is open, once a write read it (None: not read): the
        transaction's later writes count on it here, and its commit writes it back once."""
        self._rv_stored = 0
        """The counter's value in the open transaction's own view of the table."""
        self._rv_marks: list[tuple[int | None, int]] = []
        """The counter at each open savepoint, put back when the savepoint is undone."""
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.create_function("unpacked", 1, unpack, deterministic=True)
        try:
            self._db.execute(f"PRAGMA busy_timeout={int(busy * 1000)}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA journal_size_limit={WAL_KEEP}")
            self._db.executescript(_SCHEMA)
        except sqlite3.OperationalError as exc:  # locked by another process, or no room for the schema
            self._db.close()
            raise unavailable(exc, str(path), busy) from exc
        self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        super().__init__(now=now, new_uid=new_uid, history=history)
        self._where, self._busy = str(path), busy
        self._reserve = Reserve(Path(path), reserve) if reserve > 0 and _on_disk(path) else None
        self._closing = threading.Event()
        self._writer, self._holding = -1, False
        """Shared: a file lock that the servers on this file take around each write transaction, so that a writer
        waits for another process's commit in the kernel and goes on the moment it is released (SQLite's own wait
        polls, sleeping up to 50 ms between tries)."""
        if follow > 0:
            self._writer = os.open(f"{path}-writer", os.O_RDWR | os.O_CREAT, 0o600)
            self.breathe_every = SHARED_BREATHE
            threading.Thread(target=self._follow, args=(follow,), name="flexq-store-follower", daemon=True).start()

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            self._db.close()
            if self._writer >= 0:
                os.close(self._writer)
                self._writer = -1

    def _follow(self, every: float) -> None:
        """Publish the commits other processes make to the same file (their writes reach this store's watches and
        controllers in resourceVersion order)."""
        while not self._closing.wait(every):
            try:
                with self._lock:
                    if self._closing.is_set():
                        return
                    if (self._counter("rv") or 0) > self._known:
                        self.catch_up()
            except sqlite3.Error as exc:  # locked for longer than the busy timeout, or closed: look again later
                log.warning("following the database's changes: %s", exc)

    # --- transactions ------------------------------------------------------------------------------

    def refusing(self) -> str | None:
        return self._reserve.refusing() if self._reserve is not None else None

    def low_space(self) -> str | None:
        if not _on_disk(self._where):
            return None
        free = free_bytes(Path(self._where).parent)
        if free is None or free >= LOW_SPACE:
            return None
        return (f"the store's disk is nearly full: {free / 2**20:.1f} MiB free for {self._where} (writes are refused "
                "once it is full; deletes go on)")

    def _room(self, change: ChangeType) -> None:
        """Raise :class:`StoreUnavailable` for a write other than a delete while the disk is full (the room left is
        the deletes')."""
        if change is not ChangeType.DELETED and self._reserve is not None:
            why = self._reserve.refusing()
            if why is not None:
                raise StoreUnavailable(f"the store could not write: database or disk is full ({self._where}): {why}; "
                                       "nothing of this write was kept: delete what is not needed, or free space "
                                       "there, and try again", "DiskFull")

    def _begin(self) -> None:
        if self._reserve is not None:
            self._reserve.check()
        if self._writer >= 0:
            self._take_writer()
        try:
            begin(self._db, self._lock, self._busy, self._where)
        except BaseException:
            self._let_go()
            raise

    def _take_writer(self) -> None:
        """The servers' file lock, waited for in the kernel (the gate let go meanwhile, as :func:`begin` does). It
        only orders the servers' writers: SQLite's own lock, taken next, is what keeps writes apart."""
        try:
            fcntl.flock(self._writer, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with self._lock.aside():
                fcntl.flock(self._writer, fcntl.LOCK_EX)
        self._holding = True

    def _let_go(self) -> None:
        if self._holding:
            self._holding = False
            fcntl.flock(self._writer, fcntl.LOCK_UN)

    def _in_transaction(self) -> bool:
        if self._db.in_transaction:
            return True
        self._forget_rv()
        self._let_go()  # committed, or rolled back by SQLite itself (a full disk)
        return False

    def _forget_rv(self) -> None:
        self._rv, self._rv_marks = None, []

    def _refusal(self, exc: BaseException) -> StoreUnavailable | None:
        if isinstance(exc, sqlite3.Error) and refused(exc):
            refusal = unavailable(exc, self._where, self._busy)
            if refusal.reason == "DiskFull" and self._reserve is not None:
                self._reserve.release()
            return refusal
        return None

    def _end(self) -> None:
        try:
            if self._rv is not None and self._rv != self._rv_stored and self._db.in_transaction:
                self._db.execute("UPDATE counters SET value=? WHERE name='rv'", (self._rv,))
            self._db.execute("COMMIT")
        finally:
            if not self._db.in_transaction:
                self._forget_rv()
                self._let_go()

    def _undo(self) -> None:
        try:
            self._db.execute("ROLLBACK")
        finally:
            self._forget_rv()
            self._let_go()

    def _savepoint(self, step: str) -> None:
        if step == "begin":
            self._db.execute("SAVEPOINT tx")
            self._rv_marks.append((self._rv, self._rv_stored))
        elif step == "undo":
            self._db.execute("ROLLBACK TO tx")
            self._db.execute("RELEASE tx")
            if self._rv_marks:
                self._rv, self._rv_stored = self._rv_marks.pop()
        else:
            self._db.execute("RELEASE tx")
            if self._rv_marks:
                self._rv_marks.pop()

    # --- rows --------------------------------------------------------------------------------------

    def _counter(self, name: str) -> int | None:
        if name == "rv" and self._rv is not None:
            return self._rv
        row = self._db.execute("SELECT value FROM counters WHERE name=?", (name,)).fetchone()
        return int(row[0]) if row else None

    def _set_counter(self, name: str, value: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?)", (name, value))

    def _next_rv(self) -> int:
        """The first write of a transaction counts in the table (and reads the counter back); the others count in
        memory, and the commit writes the counter once (a batch of a thousand writes: one statement, not a thousand)."""
        if self._rv is None:
            row = self._db.execute("UPDATE counters SET value = value + 1 WHERE name='rv' RETURNING value").fetchone()
            self._rv = self._rv_stored = int(row[0])
        else:
            self._rv += 1
        return self._rv

    def _body(self, key: Key) -> str | None:
        row = self._db.execute(f"SELECT body FROM objects WHERE {_WHERE_KEY}",
                               (key.group, key.resource, key.namespace, key.name)).fetchone()
        return None if row is None else unpack(row[0])

    def _exists(self, key: Key) -> bool:
        row = self._db.execute(f"SELECT 1 FROM objects WHERE {_WHERE_KEY}",
                               (key.group, key.resource, key.namespace, key.name)).fetchone()
        return row is not None

    def _version(self, key: Key) -> int | None:
        row = self._db.execute(f"SELECT rv FROM objects WHERE {_WHERE_KEY}",
                               (key.group, key.resource, key.namespace, key.name)).fetchone()
        return None if row is None else int(row[0])

    def _existing(self, keys: list[Key]) -> set[Key]:
        found: set[Key] = set()
        by_place: dict[tuple[str, str, str], list[str]] = {}
        for key in keys:
            by_place.setdefault((key.group, key.resource, key.namespace), []).append(key.name)
        for (group, resource, namespace), names in by_place.items():
            for at in range(0, len(names), _CHUNK):
                chunk = names[at:at + _CHUNK]
                rows = self._db.execute(
                    "SELECT name FROM objects WHERE grp=? AND resource=? AND namespace=? AND name IN "
                    f"({','.join('?' * len(chunk))})", (group, resource, namespace, *chunk)).fetchall()
                found.update(Key(group, resource, namespace, row[0]) for row in rows)
        return found

    def _listing(self, group: str, resource: str, namespace: str | None) -> tuple[list[str], int]:
        if namespace is None:
            rows = self._db.execute(
                "SELECT body FROM objects WHERE grp=? AND resource=? ORDER BY namespace, name",
                (group, resource),
            ).fetchall()
        else:
            rows = self._db.execute(
                "SELECT body FROM objects WHERE grp=? AND resource=? AND namespace=? ORDER BY name",
                (group, resource, namespace),
            ).fetchall()
        return [unpack(r[0]) for r in rows], self._counter("rv") or 0

    def _found(self, group: str, resource: str, path: str, value: str) -> list[str]:
        rows = self._db.execute(
            "SELECT body FROM objects WHERE grp=? AND resource=? AND json_extract(unpacked(body), ?) = ? "
            "ORDER BY namespace, name", (group, resource, path, value)).fetchall()
        return [unpack(r[0]) for r in rows]

    def _log_after(self, since: int, limit: int) -> list[LogRow]:
        rows = self._db.execute(
            "SELECT rv, type, grp, resource, namespace, name, body FROM changes WHERE rv > ? "
            "ORDER BY rv LIMIT ?", (since, limit)).fetchall()
        return [(*row[:6], unpack(row[6])) for row in rows]

    def _put(self, change: ChangeType, key: Key, rv: int, body: str) -> None:
        self._room(change)
        args = (key.group, key.resource, key.namespace, key.name)
        packed = pack(body)
        if change is ChangeType.DELETED:
            self._db.execute(f"DELETE FROM objects WHERE {_WHERE_KEY}", args)
        else:
            self._db.execute("INSERT OR REPLACE INTO objects VALUES (?,?,?,?,?,?)", (*args, rv, packed))
        self._db.execute("INSERT INTO changes VALUES (?,?,?,?,?,?,?)", (rv, change.value, *args, packed))

    def _put_new(self, rows: list[tuple[Key, int, str]]) -> None:
        self._room(ChangeType.ADDED)
        packed = [(key.group, key.resource, key.namespace, key.name, rv, pack(body)) for key, rv, body in rows]
        self._db.executemany("INSERT INTO objects VALUES (?,?,?,?,?,?)", packed)
        self._db.executemany("INSERT INTO changes VALUES (?,'ADDED',?,?,?,?,?)",
                             [(rv, g, r, ns, n, body) for g, r, ns, n, rv, body in packed])

    def _drop_log(self, cutoff: int) -> int:
        return self._db.execute("DELETE FROM changes WHERE rv <= ?", (cutoff,)).rowcount

    def _changed_after(self, group: str, resource: str, namespace: str | None, since: int) -> bool:
        where, args = ("", (since, group, resource)) if namespace is None else \
            (" AND namespace=?", (since, group, resource, namespace))
        return self._db.execute(f"SELECT 1 FROM changes WHERE rv > ? AND grp=? AND resource=?{where} LIMIT 1",
                                args).fetchone() is not None


def _on_disk(path: Path | str) -> bool:
    """Whether ``path`` names a file (not SQLite's memory)."""
    return isinstance(path, Path) or not (path == ":memory:" or path.startswith("file:"))
