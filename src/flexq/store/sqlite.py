"""The durable object store: SQLite in WAL mode, one global resourceVersion, an ordered change log.

Every write bumps one counter; the new value is the object's ``metadata.resourceVersion`` and the key of
a row in ``changes`` (ADDED, MODIFIED, DELETED with the object as written). Controllers and watches read
that log in order from any resourceVersion, so a consumer that remembers the last one it saw resumes
after a restart. :meth:`Store.transaction` groups writes so that a multi-document apply lands whole or
not at all.

The store knows nothing of kinds: validation and defaulting happen above it. It owns the fields the
API server owns: ``uid``, ``resourceVersion``, ``generation`` (bumped when anything but metadata and
status changes), ``creationTimestamp``.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from flexq.store.errors import AlreadyExists, Conflict, Gone, Key, NotFound

__all__ = ["Change", "ChangeType", "Store", "rfc3339"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (grp, resource, namespace, name)
);
CREATE TABLE IF NOT EXISTS changes (
    rv INTEGER PRIMARY KEY, type TEXT NOT NULL,
    grp TEXT NOT NULL, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO counters VALUES ('rv', 0);
"""


class ChangeType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    type: ChangeType
    key: Key
    obj: dict[str, Any]


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _new_uid() -> str:
    return str(uuid.uuid4())


class Store:
    """Objects by :class:`Key`, with optimistic concurrency and a change log. Thread-safe."""

    def __init__(
        self,
        path: Path | str = ":memory:",
        *,
        now: Callable[[], datetime] = _utcnow,
        new_uid: Callable[[], str] = _new_uid,
    ) -> None:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._lock = threading.RLock()
        self._depth = 0
        self._pending: list[Change] = []
        self._listeners: list[Callable[[list[Change]], None]] = []
        self._now = now
        self._new_uid = new_uid

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- notification ------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[list[Change]], None]) -> None:
        """Call ``listener`` with the changes of every committed transaction, after the commit."""
        self._listeners.append(listener)

    # --- transactions ------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all of them are committed, or (on an exception) none. Nestable."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                    self._pending.clear()
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")
                committed, self._pending = self._pending, []
                if committed:
                    for listener in self._listeners:
                        listener(committed)

    # --- reads -------------------------------------------------------------------------------------

    def current_rv(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT value FROM counters WHERE name='rv'").fetchone()
            return int(row[0])

    def get(self, key: Key) -> dict[str, Any]:
        with self._lock:
            row = self._db.execute(
                "SELECT body FROM objects WHERE grp=? AND resource=? AND namespace=? AND name=?",
                (key.group, key.resource, key.namespace, key.name),
            ).fetchone()
        if row is None:
            raise NotFound(key)
        body: dict[str, Any] = json.loads(row[0])
        return body

    def list_objects(self, group: str, resource: str, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Objects of one resource (in one namespace, or all), ordered by namespace and name; and the rv."""
        with self._lock:
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
            rv = self.current_rv()
        return [json.loads(r[0]) for r in rows], rv

    def changes(self, since: int, limit: int = 1000) -> list[Change]:
        """Changes with a resourceVersion above ``since``, oldest first; :class:`Gone` if compacted."""
        with self._lock:
            oldest = self._db.execute("SELECT MIN(rv) FROM changes").fetchone()[0]
            if oldest is not None and since < oldest - 1 and self._compacted_before(oldest):
                raise Gone(since, oldest)
            rows = self._db.execute(
                "SELECT rv, type, grp, resource, namespace, name, body FROM changes WHERE rv > ? "
                "ORDER BY rv LIMIT ?",
                (since, limit),
            ).fetchall()
        return [
            Change(int(rv), ChangeType(t), Key(g, r, ns, n), json.loads(body))
            for rv, t, g, r, ns, n, body in rows
        ]

    def _compacted_before(self, oldest: int) -> bool:
        row = self._db.execute("SELECT value FROM counters WHERE name='compacted'").fetchone()
        return row is not None and int(row[0]) >= oldest - 1

    def cursor(self, consumer: str) -> int:
        """The last resourceVersion ``consumer`` recorded with :meth:`save_cursor` (0 if none).

        A controller reads :meth:`changes` from its cursor and saves the cursor after acting on them,
        so after a restart it resumes where it stopped.
        """
        with self._lock:
            row = self._db.execute("SELECT value FROM counters WHERE name=?", (f"cursor:{consumer}",)).fetchone()
        return int(row[0]) if row else 0

    def save_cursor(self, consumer: str, rv: int) -> None:
        with self.transaction():
            self._db.execute("INSERT OR REPLACE INTO counters VALUES (?, ?)", (f"cursor:{consumer}", rv))

    def compact(self, keep: int) -> int:
        """Drop all but the newest ``keep`` changes; return the number dropped."""
        with self.transaction():
            cutoff = self.current_rv() - keep
            cur = self._db.execute("DELETE FROM changes WHERE rv <= ?", (cutoff,))
            self._db.execute("INSERT OR REPLACE INTO counters VALUES ('compacted', ?)", (cutoff,))
            return cur.rowcount

    # --- writes ------------------------------------------------------------------------------------

    def _next_rv(self) -> int:
        self._db.execute("UPDATE counters SET value = value + 1 WHERE name='rv'")
        return self.current_rv()

    def _write(self, change: ChangeType, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        body = json.dumps(obj, separators=(",", ":"))
        args = (key.group, key.resource, key.namespace, key.name)
        if change is ChangeType.DELETED:
            self._db.execute(
                "DELETE FROM objects WHERE grp=? AND resource=? AND namespace=? AND name=?", args
            )
        else:
            self._db.execute("INSERT OR REPLACE INTO objects VALUES (?,?,?,?,?,?)", (*args, rv, body))
        self._db.execute("INSERT INTO changes VALUES (?,?,?,?,?,?,?)", (rv, change.value, *args, body))
        self._pending.append(Change(rv, change, key, copy.deepcopy(obj)))
        return obj

    def create(self, key: Key, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object; set uid, resourceVersion, generation 1 and creationTimestamp."""
        with self.transaction():
            if self._exists(key):
                raise AlreadyExists(key)
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta["name"] = key.name
            if key.namespace:
                meta["namespace"] = key.namespace
            meta["uid"] = self._new_uid()
            meta["generation"] = 1
            meta["creationTimestamp"] = rfc3339(self._now())
            meta.pop("deletionTimestamp", None)
            return self._write(ChangeType.ADDED, key, obj)

    def update(self, key: Key, obj: dict[str, Any], *, subresource: str | None = None,
               keep_status: bool = True) -> dict[str, Any]:
        """Replace an object (or only its status, with ``subresource="status"``).

        A ``metadata.resourceVersion`` in ``obj`` must match the stored one (else :class:`Conflict`);
        an empty one means "whatever is there". The server-owned metadata is carried over. A main-resource
        update keeps the stored status when ``keep_status``; a status update keeps everything but status.
        """
        with self.transaction():
            old = self.get(key)
            given = str(obj.get("metadata", {}).get("resourceVersion") or "")
            if given and given != old["metadata"]["resourceVersion"]:
                raise Conflict(key, given, old["metadata"]["resourceVersion"])
            if subresource == "status":
                new = copy.deepcopy(old)
                if "status" in obj:
                    new["status"] = copy.deepcopy(obj["status"])
                else:
                    new.pop("status", None)
            else:
                new = copy.deepcopy(obj)
                if keep_status:
                    if "status" in old:
                        new["status"] = old["status"]
                    else:
                        new.pop("status", None)
            meta = new.setdefault("metadata", {})
            for owned in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
                if owned in old["metadata"]:
                    meta[owned] = old["metadata"][owned]
                else:
                    meta.pop(owned, None)
            meta["name"] = key.name
            if key.namespace:
                meta["namespace"] = key.namespace
            if _content(new) != _content(old):
                meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
            if new == {**old, "metadata": {**old["metadata"]}} and new["metadata"] == old["metadata"]:
                return old
            return self._write(ChangeType.MODIFIED, key, new)

    def delete(self, key: Key, *, resource_version: str | None = None) -> dict[str, Any]:
        """Remove an object; return it as it was. A given ``resource_version`` must match."""
        with self.transaction():
            old = self.get(key)
            if resource_version and resource_version != old["metadata"]["resourceVersion"]:
                raise Conflict(key, resource_version, old["metadata"]["resourceVersion"])
            old["metadata"]["deletionTimestamp"] = rfc3339(self._now())
            return self._write(ChangeType.DELETED, key, old)

    def _exists(self, key: Key) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM objects WHERE grp=? AND resource=? AND namespace=? AND name=?",
            (key.group, key.resource, key.namespace, key.name),
        ).fetchone()
        return row is not None


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What counts for ``generation``: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
