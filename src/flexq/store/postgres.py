"""The store on PostgreSQL: several servers on one database, each seeing the others' writes.

What the store does is :mod:`flexq.store.base`'s; this module holds PostgreSQL's statements, and the
following of other servers' writes:

- A write transaction begins by locking the ``rv`` counter's row (``SELECT ... FOR UPDATE``): writers of all
  servers take turns, so resourceVersions are committed in the order they are given out, without gaps, and
  a read inside a transaction sees everything committed before it (the optimistic concurrency checks hold
  across servers).
- A commit sends ``NOTIFY flexq_changes`` with its newest resourceVersion. Each store LISTENs on a
  connection of its own (and looks at the counter every second, should a notification be lost), reads the
  log past what it has seen, and feeds it to its window and listeners in order: a watch or a controller on
  any server sees every server's changes.
- Lists read the objects and the counter in one statement, so a list's resourceVersion is exactly what it
  holds, whatever the other servers commit meanwhile.

Text columns compare as bytes (``COLLATE "C"``), so lists come in SQLite's order.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from flexq.store.base import BaseStore, ChangeType, LogRow
from flexq.store.refusals import Key, StoreError
from flexq.store.stamps import new_uid, utcnow

__all__ = ["PostgresStore", "Unavailable", "connect"]

log = logging.getLogger("flexq.store")

CHANNEL = "flexq_changes"
_SCHEMA_LOCK = 0x666C6578  # an advisory lock: servers starting together create the schema one at a time
_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    grp TEXT COLLATE "C" NOT NULL, resource TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL, name TEXT COLLATE "C" NOT NULL,
    rv BIGINT NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (grp, resource, namespace, name)
);
CREATE TABLE IF NOT EXISTS changes (
    rv BIGINT PRIMARY KEY, type TEXT NOT NULL,
    grp TEXT COLLATE "C" NOT NULL, resource TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL, name TEXT COLLATE "C" NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO counters VALUES ('rv', 0) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY, holder TEXT NOT NULL, acquired TIMESTAMPTZ NOT NULL, renewed TIMESTAMPTZ NOT NULL,
    duration DOUBLE PRECISION NOT NULL, transitions INTEGER NOT NULL
);
"""

_SESSION = ("SET idle_in_transaction_session_timeout = '30s'; SET tcp_keepalives_idle = 5; "
            "SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3")
_SAVEPOINTS = 48
"""Transactions in one batch before it is committed and goes on in a new one: past 64 subtransactions (savepoints
that wrote) in one transaction, PostgreSQL's snapshots grow slow for every session."""
_WHERE_KEY = "grp=%s AND resource=%s AND namespace=%s AND name=%s"
_LOG_COLUMNS = "rv, type, grp, resource, namespace, name, body"

Connection = psycopg.Connection[tuple[Any, ...]]


class Unavailable(StoreError):
    """The database cannot be reached, or refused us."""


def connect(url: str) -> Connection:
    """A connection in autocommit mode (transactions are begun by hand); :class:`Unavailable` if none.

    A server that stops mid-transaction without closing its connection (its machine died, or it hangs) would
    hold the write lock for ever: the database ends such a transaction after 30 s without a statement, and
    probes a silent peer every few seconds."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        raise Unavailable(_reason(exc)) from None
    try:
        conn.execute(_SESSION)
    except psycopg.Error as exc:
        conn.close()
        raise Unavailable(_reason(exc)) from None
    return conn


def _reason(exc: psycopg.Error) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return text or type(exc).__name__


def _path(path: str) -> list[str]:
    """``$.spec.clusterQueue`` -> ``["spec", "clusterQueue"]``."""
    if not path.startswith("$."):
        raise ValueError(f"not a JSON path of names: {path!r}")
    return path[2:].split(".")


class PostgresStore(BaseStore):
    """The store in the database at ``url`` (``postgresql://USER@HOST:PORT/DB``). With ``follow``, a thread
    follows the writes of other servers on the same database."""

    def __init__(self, url: str, *, now: Callable[[], datetime] = utcnow, new_uid: Callable[[], str] = new_uid,
                 history: int = 50_000, follow: bool = True, poll: float = 1.0) -> None:
        self._url = url
        self._db = connect(url)
        try:
            with self._db.transaction():
                self._db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                self._db.execute(_SCHEMA)
        except psycopg.Error as exc:
            self._db.close()
            raise Unavailable(_reason(exc)) from None
        super().__init__(now=now, new_uid=new_uid, history=history)
        self._poll = poll
        self._savepoints = 0
        self._closing = threading.Event()
        self._follower: threading.Thread | None = None
        if follow:
            self._follower = threading.Thread(target=self._follow, name="flexq-store-follower", daemon=True)
            self._follower.start()

    def close(self) -> None:
        self._closing.set()
        if self._follower is not None:
            with contextlib.suppress(psycopg.Error), self._lock:
                self._db.execute("SELECT pg_notify(%s, '0')", (CHANNEL,))  # wakes the follower: it stops
            self._follower.join(timeout=5)
        with self._lock:
            self._db.close()

    def _x(self, sql: str, params: tuple[Any, ...] = ()) -> psycopg.Cursor[tuple[Any, ...]]:
        """Run a statement; outside a transaction, once more on a new connection if the old one broke."""
        try:
            return self._db.execute(sql, params)
        except psycopg.OperationalError:
            if not self._db.broken or self._depth > 0:
                raise
        log.warning("the connection to the database broke: connecting again")
        self._db = connect(self._url)
        return self._db.execute(sql, params)

    # --- transactions ------------------------------------------------------------------------------

    def _begin(self) -> None:
        self._x("BEGIN; SELECT value FROM counters WHERE name='rv' FOR UPDATE")
        self._savepoints = 0

    def _in_transaction(self) -> bool:
        return self._db.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR,
                                                    TransactionStatus.ACTIVE)

    def _end(self) -> None:
        # The newest resourceVersion (an integer) goes into the text: one round trip, no parameters. Never on a
        # new connection: a commit that failed with the connection committed nothing, and publishes nothing.
        try:
            self._db.execute(f"SELECT pg_notify('{CHANNEL}', '{self._pending[-1].rv}'); COMMIT" if self._pending
                             else "COMMIT")
        except psycopg.Error:
            self._pending.clear()
            if not self._db.broken:
                self._db.execute("ROLLBACK")
            raise

    def _undo(self) -> None:
        if self._db.broken:  # the transaction went with the connection; the next statement connects again
            return
        self._db.execute("ROLLBACK")

    def _savepoint(self, step: str) -> None:
        if step == "begin":
            self._savepoints += 1
            if self._savepoints > _SAVEPOINTS and not self._writing_held:
                # The batch goes on in a new transaction, as after breathe(), what it held back committed first.
                self._write_held()
                depth, self._depth, self._batching = self._depth, 0, False
                self._commit()
                self._begin()
                self._depth, self._batching = depth, True
            self._x("SAVEPOINT tx")
        elif step == "undo":
            self._x("ROLLBACK TO SAVEPOINT tx")
            self._x("RELEASE SAVEPOINT tx")
        else:
            self._x("RELEASE SAVEPOINT tx")

    # --- rows --------------------------------------------------------------------------------------

    def _counter(self, name: str) -> int | None:
        row = self._x("SELECT value FROM counters WHERE name=%s", (name,)).fetchone()
        return int(row[0]) if row else None

    def _set_counter(self, name: str, value: int) -> None:
        self._x("INSERT INTO counters VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                (name, value))

    def _next_rv(self) -> int:
        row = self._x("UPDATE counters SET value = value + 1 WHERE name='rv' RETURNING value").fetchone()
        assert row is not None
        return int(row[0])

    def _body(self, key: Key) -> str | None:
        row = self._x(f"SELECT body FROM objects WHERE {_WHERE_KEY}",
                      (key.group, key.resource, key.namespace, key.name)).fetchone()
        return None if row is None else str(row[0])

    def _exists(self, key: Key) -> bool:
        row = self._x(f"SELECT 1 FROM objects WHERE {_WHERE_KEY}",
                      (key.group, key.resource, key.namespace, key.name)).fetchone()
        return row is not None

    def _version(self, key: Key) -> int | None:
        row = self._x(f"SELECT rv FROM objects WHERE {_WHERE_KEY}",
                      (key.group, key.resource, key.namespace, key.name)).fetchone()
        return None if row is None else int(row[0])

    def _listing(self, group: str, resource: str, namespace: str | None) -> tuple[list[str], int]:
        # One statement, one snapshot: the counter and the objects as of the same moment.
        scope = "" if namespace is None else " AND o.namespace=%s"
        params = (group, resource) if namespace is None else (group, resource, namespace)
        rows = self._x(
            "SELECT c.value, o.body FROM counters c LEFT JOIN objects o ON o.grp=%s AND o.resource=%s"
            f"{scope} WHERE c.name='rv' ORDER BY o.namespace, o.name", params).fetchall()
        return [r[1] for r in rows if r[1] is not None], int(rows[0][0])

    def _found(self, group: str, resource: str, path: str, value: str) -> list[str]:
        rows = self._x("SELECT body FROM objects WHERE grp=%s AND resource=%s AND body::json #>> %s = %s "
                       "ORDER BY namespace, name", (group, resource, _path(path), value)).fetchall()
        return [r[0] for r in rows]

    def _log_after(self, since: int, limit: int) -> list[LogRow]:
        rows: list[LogRow] = self._x(f"SELECT {_LOG_COLUMNS} FROM changes WHERE rv > %s ORDER BY rv LIMIT %s",
                                     (since, limit)).fetchall()
        return rows

    def _put(self, change: ChangeType, key: Key, rv: int, body: str) -> None:
        args = (key.group, key.resource, key.namespace, key.name)
        log_it = "INSERT INTO changes VALUES (%s,%s,%s,%s,%s,%s,%s)"
        if change is ChangeType.DELETED:
            self._x(f"WITH gone AS (DELETE FROM objects WHERE {_WHERE_KEY}) {log_it}",
                    (*args, rv, change.value, *args, body))
        else:
            self._x("WITH put AS (INSERT INTO objects VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT "
                    "(grp, resource, namespace, name) DO UPDATE SET rv = EXCLUDED.rv, body = EXCLUDED.body) "
                    f"{log_it}", (*args, rv, body, rv, change.value, *args, body))

    def _drop_log(self, cutoff: int) -> int:
        return self._x("DELETE FROM changes WHERE rv <= %s", (cutoff,)).rowcount

    def _changed_after(self, group: str, resource: str, namespace: str | None, since: int) -> bool:
        where, args = ("", (since, group, resource)) if namespace is None else \
            (" AND namespace=%s", (since, group, resource, namespace))
        return self._x(f"SELECT 1 FROM changes WHERE rv > %s AND grp=%s AND resource=%s{where} LIMIT 1",
                       args).fetchone() is not None

    # --- following every server's changes ----------------------------------------------------------

    def _follow(self) -> None:
        conn: Connection | None = None
        while not self._closing.is_set():
            try:
                if conn is None:
                    conn = connect(self._url)
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.catch_up()
                if self._closing.is_set():
                    break  # (checked after LISTEN: a close from now on wakes the wait below)
                newest = 0
                for note in conn.notifies(timeout=self._poll, stop_after=1):
                    newest = max(newest, int(note.payload or 0))
                if not newest:  # quiet: look at the counter, in case a notification was lost
                    row = conn.execute("SELECT value FROM counters WHERE name='rv'").fetchone()
                    newest = int(row[0]) if row else 0
                if newest > self._known:
                    self.catch_up()
            except (psycopg.Error, StoreError) as exc:
                log.warning("following the database's changes: %s (trying again)", exc)
                if conn is not None:
                    conn.close()
                conn = None
                self._closing.wait(1.0)
        if conn is not None:
            conn.close()
