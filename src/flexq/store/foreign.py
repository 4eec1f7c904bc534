"""Transactions prepared elsewhere and committed here: how API workers write through the one store's owner.

An API worker (see :mod:`flexq.store.replica`) runs a request's transaction on its own read-only view of the
database: it reads objects and listings there, validates and defaults what it writes, and sends the owner one
:class:`ForeignTx`: what it read (each object's resourceVersion, or its absence; each listing's resourceVersion),
and the objects it would write, as stored text with a provisional resourceVersion. The owner commits it in one
transaction of its own store, if nothing read has changed since (else :class:`~flexq.store.refusals.Stale`: the
worker runs the request again on the newer state). The owner gives each write its real resourceVersion, in order,
as it does its own writes; so every change still comes from one writer, in order and without gaps, and the
transaction is serializable: it is as if the worker had run it at the moment of the commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from flexq.store.changes import Change, ChangeType
from flexq.store.codec import dumps, loads
from flexq.store.refusals import Key, Stale

if TYPE_CHECKING:
    from flexq.store.base import BaseStore

__all__ = ["PROVISIONAL", "ForeignTx", "Put", "commit_foreign"]

PROVISIONAL = 10**15
"""Provisional resourceVersions start here: far above any the store gives, so that none is taken for a real one."""


@dataclass(frozen=True, slots=True)
class Put:
    """One write: the object's row as it would be stored (``body``, with ``provisional`` as its resourceVersion)."""

    change: ChangeType
    key: Key
    provisional: int
    body: str


@dataclass(slots=True)
class ForeignTx:
    """What one optimistic transaction read and would write."""

    reads: dict[Key, int | None] = field(default_factory=dict)
    """Objects read before the transaction wrote them, at the resourceVersion read (None: read as absent)."""
    listings: list[tuple[str, str, str | None, int]] = field(default_factory=list)
    """Listings read: group, resource, namespace (None: all) and the resourceVersion they were as of."""
    puts: list[Put] = field(default_factory=list)

    def to_wire(self) -> bytes:
        return orjson.dumps({
            "reads": [[k.group, k.resource, k.namespace, k.name, rv] for k, rv in self.reads.items()],
            "listings": [list(item) for item in self.listings],
            "puts": [[p.change.value, p.key.group, p.key.resource, p.key.namespace, p.key.name, p.provisional,
                      p.body] for p in self.puts],
        })

    @classmethod
    def from_wire(cls, data: bytes) -> ForeignTx:
        """The transaction :meth:`to_wire` wrote; ValueError (or KeyError, TypeError) where ``data`` is not one."""
        doc: dict[str, Any] = orjson.loads(data)
        reads = {Key(str(g), str(r), str(ns), str(n)): (None if rv is None else int(rv))
                 for g, r, ns, n, rv in doc["reads"]}
        listings = [(str(g), str(r), None if ns is None else str(ns), int(rv)) for g, r, ns, rv in doc["listings"]]
        puts = [Put(ChangeType(t), Key(str(g), str(r), str(ns), str(n)), int(prov), str(body))
                for t, g, r, ns, n, prov, body in doc["puts"]]
        return cls(reads, listings, puts)


def commit_foreign(store: BaseStore, tx: ForeignTx) -> list[int]:
    """Commit ``tx`` in ``store`` as one transaction: the resourceVersions its writes were given, in order.
    :class:`Stale` (nothing written) where an object or a listing it read has changed since."""
    with store.transaction():
        for key, rv in tx.reads.items():
            if store._version(key) != rv:
                raise Stale(key, store.current_rv())
        for group, resource, namespace, since in tx.listings:
            _unchanged_since(store, group, resource, namespace, since)
        given: list[int] = []
        for put in tx.puts:
            rv = store._next_rv()
            obj = loads(put.body)
            obj["metadata"]["resourceVersion"] = str(rv)
            body = dumps(obj)
            store._put(put.change, put.key, rv, body)
            store._pending.append(Change(rv, put.change, put.key, body))
            given.append(rv)
        return given


def _unchanged_since(store: BaseStore, group: str, resource: str, namespace: str | None, since: int) -> None:
    """:class:`Stale` where an object of the listing changed after ``since`` (or the log no longer says). Read from
    the log in this transaction: what it holds of the transactions committed with this one before it (a group
    commit), and of another server's on the same file (``--shared``) that this one has not heard of yet."""
    if since < store._compaction_mark() or store._changed_after(group, resource, namespace, since):
        raise Stale(None, store.current_rv())
