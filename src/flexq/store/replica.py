"""An API worker's store: the owner's SQLite file read directly, writes committed by the owner.

An API worker serves reads and watches from the database file the owner writes (SQLite in WAL mode lets other
processes read while one writes): objects and listings are read from the file, and the changes the owner commits
reach this store's window for watches as the owner sends them (:meth:`ReplicaStore.receive`), or (with ``follow``)
are followed from the file, as a second server on a shared file follows them. A write is
an optimistic transaction (see :mod:`flexq.store.foreign`): :class:`~flexq.store.base.BaseStore`'s own create,
update and delete run here unchanged, on the file as read, with what this transaction wrote in front of it; the
rows they would write get provisional resourceVersions; at the end the transaction goes to the owner in one
message, which commits it or refuses it as :class:`~flexq.store.refusals.Stale`. The objects a committed
transaction handed its caller have their real resourceVersion then (the API's answer names it).

Each thread has a transaction of its own, and none holds the store while the owner commits: a worker's requests
wait for the owner side by side, and the owner commits those that came meanwhile together.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from flexq.store.bodies import unpack
from flexq.store.changes import ChangeType, LogRow, from_rows
from flexq.store.codec import dumps, loads
from flexq.store.foreign import PROVISIONAL, ForeignTx, Put
from flexq.store.refusals import Key
from flexq.store.sqlite import Store

__all__ = ["Committer", "ReplicaStore"]

Committer = Callable[[ForeignTx], list[int]]
"""Sends a transaction to the owner: the resourceVersions given to its writes, or :class:`Stale` (or
:class:`StoreUnavailable`, as the owner's store refused it)."""

_PATH = re.compile(r"^\$((?:\.[A-Za-z0-9_-]+)+)$")


@dataclass
class _Open:
    """One thread's open transaction."""

    depth: int = 0
    tx: ForeignTx = field(default_factory=ForeignTx)
    overlay: dict[Key, str | None] = field(default_factory=dict)
    """What the transaction wrote, by key (None: deleted), in front of the file."""
    issued: list[dict[str, Any]] = field(default_factory=list)
    """Objects handed out in the transaction that carry a provisional resourceVersion."""


class ReplicaStore(Store):
    """The store at ``path`` (the owner's file), read here and written through ``commit``. Reads outside a
    transaction see what the owner has committed; watches see it as it is received, or after ``follow`` seconds at
    most (0: only as received)."""

    shares_batches: ClassVar[bool] = False
    """A batch here is one transaction sent to the owner (which commits its workers' in groups itself)."""

    def __init__(self, path: Path, commit: Committer, *, follow: float = 0.005, history: int = 50_000) -> None:
        self._send = commit
        self._local = threading.local()
        self._numbers = itertools.count(PROVISIONAL)
        super().__init__(path, history=history, follow=follow)

    def _open(self) -> _Open | None:
        found: _Open | None = getattr(self._local, "open", None)
        return found

    def receive(self, rows: list[LogRow]) -> None:
        """Changes the owner committed, sent to this replica in resourceVersion order: into the window and to the
        listeners (those seen already are passed over; a gap before them is read from the file first)."""
        with self._lock:
            self._publish(from_rows(rows))

    # --- transactions: the thread's own, sent to the owner at the end -------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        open_ = self._open()
        if open_ is None:
            open_ = self._local.open = _Open()
        open_.depth += 1
        try:
            yield
        except BaseException:
            open_.depth -= 1
            if open_.depth == 0:
                self._local.open = None
            raise
        open_.depth -= 1
        if open_.depth == 0:
            self._local.open = None
            self._send_open(open_)

    @contextmanager
    def batch(self, held: Callable[[], None] | None = None) -> Iterator[None]:
        with self.transaction():
            yield
            if held is not None:
                held()

    def breathe(self, every: float | None = None, waited: float = 0.002) -> None:
        return

    def _send_open(self, open_: _Open) -> None:
        if not open_.tx.puts:
            return
        given = dict(zip((p.provisional for p in open_.tx.puts), self._send(open_.tx), strict=True))
        for obj in open_.issued:
            meta = obj["metadata"]
            meta["resourceVersion"] = str(given[int(meta["resourceVersion"])])

    # --- reads: the overlay first, then the file, noted ---------------------------------------------

    def _row(self, key: Key) -> tuple[int, str] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT rv, body FROM objects WHERE grp=? AND resource=? AND namespace=? AND name=?",
                (key.group, key.resource, key.namespace, key.name)).fetchone()
        return None if row is None else (int(row[0]), unpack(row[1]))

    def _body(self, key: Key) -> str | None:
        open_ = self._open()
        if open_ is not None and key in open_.overlay:
            return open_.overlay[key]
        row = self._row(key)
        if open_ is not None and key not in open_.tx.reads:
            open_.tx.reads[key] = None if row is None else row[0]
        return None if row is None else row[1]

    def _exists(self, key: Key) -> bool:
        return self._body(key) is not None

    def _existing(self, keys: list[Key]) -> set[Key]:
        return {key for key in keys if self._exists(key)}

    def _listing(self, group: str, resource: str, namespace: str | None) -> tuple[list[str], int]:
        with self._lock:
            self._db.execute("BEGIN")  # one snapshot: the rows and the counter as of the same commit
            try:
                texts, rv = super()._listing(group, resource, namespace)
            finally:
                self._db.execute("COMMIT")
        open_ = self._open()
        if open_ is None:
            return texts, rv
        open_.tx.listings.append((group, resource, namespace, rv))
        mine = {k: v for k, v in open_.overlay.items()
                if k.group == group and k.resource == resource and (namespace is None or k.namespace == namespace)}
        if not mine:
            return texts, rv
        rows = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): t for t in texts for o in (loads(t),)}
        for key, text in mine.items():
            if text is None:
                rows.pop((key.namespace, key.name), None)
            else:
                rows[(key.namespace, key.name)] = text
        order = sorted(rows, key=lambda place: (place[0].encode(), place[1].encode()))
        return [rows[place] for place in order], rv

    def _found(self, group: str, resource: str, path: str, value: str) -> list[str]:
        if self._open() is None:
            return super()._found(group, resource, path, value)
        texts, _ = self._listing(group, resource, None)
        names = _path(path)
        return [t for t in texts if _at(loads(t), names) == value]

    # --- writes: into the thread's transaction, with provisional versions ----------------------------

    def _write(self, change: ChangeType, key: Key, obj: dict[str, Any], echo: bool = True) -> dict[str, Any]:
        open_ = self._open()
        assert open_ is not None, "a write outside a transaction"
        rv = next(self._numbers)
        obj["metadata"]["resourceVersion"] = str(rv)
        body = dumps(obj)
        open_.tx.puts.append(Put(change, key, rv, body))
        open_.overlay[key] = None if change is ChangeType.DELETED else body
        return self._note(obj if not echo else loads(body))

    def create_many(self, items: list[tuple[Key, dict[str, Any]]]) -> set[Key]:
        with self.transaction():
            existed: set[Key] = set()
            for key, obj in items:
                if key in existed or self._exists(key):
                    existed.add(key)
                    continue
                self._write(ChangeType.ADDED, key, self._new_object(key, obj), echo=False)
            return existed

    def compact(self, keep: int) -> int:
        return 0

    def get(self, key: Key) -> dict[str, Any]:
        return self._note(super().get(key))

    def get_to_change(self, key: Key) -> tuple[dict[str, Any], dict[str, Any]]:
        first, second = super().get_to_change(key)
        return self._note(first), self._note(second)

    def list_objects(self, group: str, resource: str, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        objects, rv = super().list_objects(group, resource, namespace)
        for obj in objects:
            self._note(obj)
        return objects, rv

    def _note(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj``, remembered where it carries a provisional resourceVersion (given its real one at the commit)."""
        open_ = self._open()
        if open_ is not None and int(obj.get("metadata", {}).get("resourceVersion") or 0) >= PROVISIONAL:
            open_.issued.append(obj)
        return obj


def _path(path: str) -> list[str]:
    match = _PATH.match(path)
    if match is None:
        raise ValueError(f"not a path of names: {path}")
    return match.group(1)[1:].split(".")


def _at(obj: Any, names: list[str]) -> Any:
    for name in names:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(name)
    return obj
