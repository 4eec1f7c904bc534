"""An API worker's store: the owner's SQLite file read directly, writes committed by the owner.

An API worker serves reads and watches from the database file the owner writes (SQLite in WAL mode lets other
processes read while one writes): objects and listings are read from the file, and the changes the owner commits
are followed into this store's window for watches, as a second server on a shared file follows them. A write is
an optimistic transaction (see :mod:`flexq.store.foreign`): :class:`~flexq.store.base.BaseStore`'s own create,
update and delete run here unchanged, on the file as read, with what this transaction wrote in front of it; the
rows they would write get provisional resourceVersions; at the end the transaction goes to the owner in one
message, which commits it or refuses it as :class:`~flexq.store.refusals.Stale`. The objects a committed
transaction handed its caller have their real resourceVersion then (the API's answer names it).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flexq.store.bodies import unpack
from flexq.store.changes import ChangeType
from flexq.store.codec import loads
from flexq.store.foreign import PROVISIONAL, ForeignTx, Put
from flexq.store.refusals import Key
from flexq.store.sqlite import Store

__all__ = ["Committer", "ReplicaStore"]

Committer = Callable[[ForeignTx], list[int]]
"""Sends a transaction to the owner: the resourceVersions given to its writes, or :class:`Stale` (or
:class:`StoreUnavailable`, as the owner's store refused it)."""

_PATH = re.compile(r"^\$((?:\.[A-Za-z0-9_-]+)+)$")


class ReplicaStore(Store):
    """The store at ``path`` (the owner's file), read here and written through ``commit``. Reads outside a
    transaction see what the owner has committed; watches see it after ``follow`` seconds at most."""

    def __init__(self, path: Path, commit: Committer, *, follow: float = 0.005, history: int = 50_000) -> None:
        self._send = commit
        self._tx: ForeignTx | None = None
        self._overlay: dict[Key, str | None] = {}
        """What the open transaction wrote, by key (None: deleted), in front of the file."""
        self._issued: list[dict[str, Any]] = []
        """Objects handed out in the open transaction that carry a provisional resourceVersion."""
        self._marks: list[tuple[int, dict[Key, str | None]]] = []
        self._numbers = itertools.count(PROVISIONAL)
        super().__init__(path, history=history, follow=follow)

    # --- transactions ------------------------------------------------------------------------------

    def _begin(self) -> None:
        self._tx, self._overlay, self._issued, self._marks = ForeignTx(), {}, [], []

    def _in_transaction(self) -> bool:
        return self._tx is not None

    def _end(self) -> None:
        tx, issued = self._tx, self._issued
        try:
            if tx is None or not tx.puts:
                return
            given = dict(zip((p.provisional for p in tx.puts), self._send(tx), strict=True))
            for obj in issued:
                meta = obj["metadata"]
                meta["resourceVersion"] = str(given[int(meta["resourceVersion"])])
        finally:
            self._tx, self._overlay, self._issued, self._marks = None, {}, [], []
            self._pending = []  # the owner's commit reaches the window through the log, with its real versions

    def _undo(self) -> None:
        self._tx, self._overlay, self._issued, self._marks = None, {}, [], []

    def _savepoint(self, step: str) -> None:
        tx = self._tx
        assert tx is not None
        if step == "begin":
            self._marks.append((len(tx.puts), dict(self._overlay)))
        elif step == "undo":
            count, self._overlay = self._marks.pop()
            del tx.puts[count:]
        else:
            self._marks.pop()

    def _refusal(self, exc: BaseException) -> None:
        return None

    # --- reads: the overlay first, then the file, noted ---------------------------------------------

    def _row(self, key: Key) -> tuple[int, str] | None:
        row = self._db.execute("SELECT rv, body FROM objects WHERE grp=? AND resource=? AND namespace=? AND name=?",
                               (key.group, key.resource, key.namespace, key.name)).fetchone()
        return None if row is None else (int(row[0]), unpack(row[1]))

    def _body(self, key: Key) -> str | None:
        tx = self._tx
        if tx is not None and key in self._overlay:
            return self._overlay[key]
        row = self._row(key)
        if tx is not None and key not in tx.reads:
            tx.reads[key] = None if row is None else row[0]
        return None if row is None else row[1]

    def _exists(self, key: Key) -> bool:
        return self._body(key) is not None

    def _existing(self, keys: list[Key]) -> set[Key]:
        return {key for key in keys if self._exists(key)}

    def _listing(self, group: str, resource: str, namespace: str | None) -> tuple[list[str], int]:
        self._db.execute("BEGIN")  # one snapshot: the rows and the counter as of the same commit
        try:
            texts, rv = super()._listing(group, resource, namespace)
        finally:
            self._db.execute("COMMIT")
        tx = self._tx
        if tx is None:
            return texts, rv
        tx.listings.append((group, resource, namespace, rv))
        mine = {k: v for k, v in self._overlay.items()
                if k.group == group and k.resource == resource and (namespace is None or k.namespace == namespace)}
        if not mine:
            return texts, rv
        rows = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): t
                for t in texts for o in (loads(t),)}
        for key, text in mine.items():
            if text is None:
                rows.pop((key.namespace, key.name), None)
            else:
                rows[(key.namespace, key.name)] = text
        order = sorted(rows, key=lambda place: (place[0].encode(), place[1].encode()))
        return [rows[place] for place in order], rv

    def _found(self, group: str, resource: str, path: str, value: str) -> list[str]:
        if self._tx is None:
            return super()._found(group, resource, path, value)
        texts, _ = self._listing(group, resource, None)
        names = _path(path)
        return [t for t in texts if _at(loads(t), names) == value]

    # --- writes: into the transaction, with provisional versions ------------------------------------

    def _next_rv(self) -> int:
        return next(self._numbers)

    def _put(self, change: ChangeType, key: Key, rv: int, body: str) -> None:
        tx = self._tx
        assert tx is not None, "a write outside a transaction"
        tx.puts.append(Put(change, key, rv, body))
        self._overlay[key] = None if change is ChangeType.DELETED else body

    def _put_new(self, rows: list[tuple[Key, int, str]]) -> None:
        for key, rv, body in rows:
            self._put(ChangeType.ADDED, key, rv, body)

    def _set_counter(self, name: str, value: int) -> None:
        raise NotImplementedError("an API worker's store does not compact: the owner does")

    def compact(self, keep: int) -> int:
        return 0

    def _write(self, change: ChangeType, key: Key, obj: dict[str, Any], echo: bool = True) -> dict[str, Any]:
        return self._note(super()._write(change, key, obj, echo))

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
        if self._tx is not None and int(obj.get("metadata", {}).get("resourceVersion") or 0) >= PROVISIONAL:
            self._issued.append(obj)
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
