"""What every back end of the store shares: one global resourceVersion, an ordered change log, transactions.

Every write bumps one counter; the new value is the object's ``metadata.resourceVersion`` and the key of a row in
``changes`` (ADDED, MODIFIED, DELETED with the object as written). Controllers and watches read that log in order
from any resourceVersion, so a consumer that remembers the last one it saw resumes after a restart.
:meth:`BaseStore.transaction` groups writes so that a multi-document apply lands whole or not at all;
:meth:`BaseStore.batch` groups the transactions of one caller into one commit (each still whole or not at all). The
newest changes are also kept in memory (:mod:`flexq.store.window`), and the log keeps a window of ``history``
changes, as etcd compacts its own, and those after a reader that holds it (:mod:`flexq.store.holds`): a reader
resuming from a compacted resourceVersion gets :class:`Gone` (a watch answers 410, and kubectl or an informer lists
again). A write the database refuses (disk full, locked by another
process: :mod:`flexq.store.faults`) is undone whole and raises :class:`StoreUnavailable`; reads go on.

The store knows nothing of kinds (validation and defaulting happen above it). It owns the API server's fields:
``uid``, ``resourceVersion``, ``creationTimestamp``, ``generation`` (bumped by changes outside metadata and status).

A back end (:mod:`flexq.store.sqlite`, :mod:`flexq.store.postgres`) supplies the statements: beginning,
committing and undoing a transaction, and reading and writing rows. Its write transactions must exclude one
another (SQLite's ``BEGIN IMMEDIATE``, a row lock on PostgreSQL), so that resourceVersions are committed in
the order they are given out, without gaps.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ClassVar

from flexq.store.backend import Backend
from flexq.store.changes import CHANGE_TYPES, Change, ChangeType, LogRow, from_rows
from flexq.store.codec import dumps, loads
from flexq.store.holds import Holds
from flexq.store.refusals import AlreadyExists, Conflict, Gone, Key, NotFound, StoreUnavailable
from flexq.store.stamps import new_uid, rfc3339, utcnow
from flexq.store.window import ChangeWindow, Entry, Gate

__all__ = ["BaseStore", "Change", "ChangeType", "LogRow", "rfc3339"]


class BaseStore(Backend):
    """Objects by :class:`Key`, with optimistic concurrency and a change log. Thread-safe."""

    shares_batches: ClassVar[bool] = True
    """Whether the writes of several requests may share one :meth:`batch` (each a transaction of its own in it, undone
    alone when it fails, all committed together): a database of its own, not a replica whose writes go elsewhere."""

    def __init__(self, *, now: Callable[[], datetime] = utcnow, new_uid: Callable[[], str] = new_uid,
                 history: int = 50_000) -> None:
        """``history``: how many of the newest changes the log keeps (older ones are compacted away once
        a tenth as many more were written)."""
        self._lock = Gate()
        self._depth = 0
        self._pending: list[Change] = []
        self._listeners: list[Callable[[list[Change]], None]] = []
        self._own_listeners: list[Callable[[list[Change]], None]] = []
        self._now = now
        self._new_uid = new_uid
        self._batching = False
        self._batch_began = 0.0
        self._batch_thread = 0
        self._held: Callable[[], None] | None = None
        """What the open batch writes before each of its commits (:meth:`batch`'s ``held``), None where nothing."""
        self._writing_held = False
        """:attr:`_held` is being written: no commit of the batch until it is done."""
        self._window = ChangeWindow(10_000)
        self._known = self._counter("rv") or 0
        """The newest resourceVersion in the window and given to the listeners: they have seen every change before
        it, whoever wrote it."""
        self._history = history
        self._holds = Holds()
        self._unpruned = 0
        self._compacted = self._counter("compacted") or 0
        self._lost = False
        """The database rolled an open batch back whole (its earlier transactions too): the batch must say so."""
        self._where = "the store"
        """Where the store is, as its errors name it."""

    # --- notification ------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[list[Change]], None]) -> None:
        """Call ``listener`` with the changes of every committed transaction, after the commit."""
        self._listeners.append(listener)

    def subscribe_own(self, listener: Callable[[list[Change]], None]) -> None:
        """Call ``listener`` with the changes of every transaction this store object commits itself (not those of
        other writers of the same database), on the thread that committed them, before anyone can read them."""
        self._own_listeners.append(listener)

    def _publish(self, changes: list[Change]) -> None:
        """Committed changes into the window, then to the listeners: in resourceVersion order and without holes.
        Changes other writers of the same database committed between the last ones published and these go first
        (read from the log; where they were compacted away, the window starts afresh, and readers of older
        changes read the log and get :class:`Gone`)."""
        changes = [c for c in changes if c.rv > self._known]
        if not changes:
            return
        missing = changes[0].rv - self._known - 1
        if missing > 0:
            rows = self._log_after(self._known, missing) if missing <= self._window.size else []
            if len(rows) == missing and int(rows[-1][0]) == changes[0].rv - 1:
                changes = [*from_rows(rows), *changes]
            else:
                self._window = ChangeWindow(self._window.size)
        self._known = changes[-1].rv
        self._window.extend(Entry(c.rv, c.type.value, c.key, c._body) for c in changes)
        for listener in self._listeners:
            listener(changes)

    def catch_up(self) -> None:
        """Publish the changes other writers of the same database committed since the last ones published."""
        with self._lock:
            while True:
                rows = self._log_after(self._known, 1000)
                if not rows:
                    return
                self._publish(from_rows(rows))

    # --- transactions ------------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes: all of them are committed, or (on an exception) none. Nestable."""
        with self._lock:
            outer = self._depth == 0
            # Directly inside a batch, a transaction is a savepoint: it is undone alone when it fails.
            savepoint = self._batching and self._depth == 1
            if outer:
                self._begin()
            elif savepoint:
                if not self._in_transaction():  # the database rolled the batch back: it goes on in a new one
                    self._begin()
                self._savepoint("begin")
            mark = len(self._pending)
            self._depth += 1
            try:
                yield
            except BaseException as exc:
                self._depth -= 1
                if outer or savepoint:
                    self._rollback(savepoint, mark)
                refusal = self._refusal(exc)
                if refusal is not None:
                    raise refusal from exc
                raise
            self._depth -= 1
            if outer:
                self._commit()
            elif savepoint:
                self._savepoint("release")

    def _rollback(self, savepoint: bool, mark: int) -> None:
        """Undo a failed transaction: all of it, or (directly inside a batch) its savepoint. The database may
        have rolled the whole transaction back itself (a full disk, an I/O error): then a batch's earlier
        transactions went too, and the batch says so at its end."""
        if not savepoint or not self._in_transaction():
            if self._in_transaction():
                self._undo()
            self._pending.clear()
            self._lost = self._lost or savepoint
            return
        self._savepoint("undo")
        del self._pending[mark:]

    @contextmanager
    def batch(self, held: Callable[[], None] | None = None) -> Iterator[None]:
        """Group commit: the transactions made inside are committed together at the end, once, each still
        whole or not at all (one that fails is undone alone; those that finished are committed even when an
        exception leaves the batch). Readers in other threads wait until it ends. Inside a transaction, a
        batch is part of it.

        ``held``: the caller holds writes back to make them together (the Events of a controller's step); it is
        called, in the batch, before each commit of it (at its end, at :meth:`breathe`, where a back end commits
        finished transactions), so that what it writes is committed with the transactions it belongs to. An
        exception that leaves the batch still has it called, unless the database undid the batch. Inside a
        transaction, it is called at the batch's end."""
        with self._lock:
            if self._depth > 0:
                yield
                if held is not None:
                    held()
                return
            self._begin()
            self._depth, self._batching = 1, True
            self._batch_began = time.monotonic()
            self._batch_thread = threading.get_ident()
            self._held = held
            try:
                yield
            except BaseException:
                if not self._lost and self._in_transaction():
                    with contextlib.suppress(Exception):  # the exception that left the batch is the one to tell
                        self._write_held()
                raise
            else:
                self._write_held()
            finally:
                self._held = None
                self._depth, self._batching = 0, False
                lost, self._lost = self._lost, False
                self._commit()
                if lost:
                    raise StoreUnavailable(f"the store could not write ({self._where}): the database undid this "
                                           "batch's earlier writes with a failed one", "WriteFailed")

    breathe_every = 0.05
    """Seconds a long batch goes on before :meth:`breathe` commits it, though no other thread waits."""

    def breathe(self, every: float | None = None, waited: float = 0.002) -> None:
        """In a long batch, between its transactions: commit what the batch holds and let other threads in
        (the API's requests wait on the store while a batch is open), once the batch is ``waited`` seconds
        old and someone waits, or ``every`` seconds old. The batch goes on once those waiting then got the store
        (or after 5 ms: :meth:`Gate.hand_over`)."""
        if not self._batching or self._depth != 1 or self._batch_thread != threading.get_ident():
            return
        age = time.monotonic() - self._batch_began
        every = self.breathe_every if every is None else every
        if age < every and (age < waited or not self._lock.waiting):
            return
        self._write_held()
        self._depth, self._batching = 0, False
        self._commit()
        held, thread = self._held, self._batch_thread  # another thread's batch may come in meanwhile, with its own
        self._lock.hand_over()  # held once, by batch(), in this thread
        self._held, self._batch_thread = held, thread
        self._begin()
        self._depth, self._batching = 1, True
        self._batch_began = time.monotonic()

    def _write_held(self) -> None:
        """Before a commit of the open batch: what its caller held back, written (in the batch, once: a back end
        does not commit again for the transactions this makes)."""
        if self._held is None or self._writing_held:
            return
        self._writing_held = True
        try:
            self._held()
        finally:
            self._writing_held = False

    def _commit(self) -> None:
        """Commit the open transaction (if the database has not rolled it back) and publish its changes; a
        refused commit is undone whole and raises :class:`StoreUnavailable`."""
        try:
            if not self._in_transaction() and self._pending:
                raise StoreUnavailable(f"the store could not write ({self._where}): the database rolled the "
                                       "transaction back", "WriteFailed")
            if self._in_transaction():
                self._end()
        except Exception as exc:
            refusal = exc if isinstance(exc, StoreUnavailable) else self._refusal(exc)
            if refusal is None:
                raise
            if self._in_transaction():
                self._undo()
            self._pending.clear()
            raise refusal from exc
        committed, self._pending = self._pending, []
        if not committed:
            return
        for listener in self._own_listeners:
            listener(committed)
        self._unpruned += len(committed)
        if self._unpruned >= max(1000, self._history // 10):
            with contextlib.suppress(StoreUnavailable):  # compacted at a later commit
                self.compact(self._history)
                self._unpruned = 0
        self._publish(committed)

    def refusing(self) -> str | None:
        """Why the store refuses writes now, all but deletes (its disk is full: :mod:`flexq.store.reserve`); None
        while it takes them."""
        return None

    def low_space(self) -> str | None:
        """A warning where the store's disk is nearly full (None: it has room, or that cannot be known)."""
        return None

    def timestamp(self) -> str:
        """Now, as the store stamps it on what it writes (``creationTimestamp``)."""
        return rfc3339(self._now())

    # --- reads -------------------------------------------------------------------------------------

    def current_rv(self) -> int:
        with self._lock:
            return self._counter("rv") or 0

    def get(self, key: Key) -> dict[str, Any]:
        body: dict[str, Any] = loads(self._text(key))
        return body

    def get_to_change(self, key: Key) -> tuple[dict[str, Any], dict[str, Any]]:
        """Two of the object at ``key`` from one read: a copy to change, and one for :meth:`update`'s ``current``."""
        text = self._text(key)
        return loads(text), loads(text)

    def _text(self, key: Key) -> str:
        with self._lock:
            text = self._body(key)
        if text is None:
            raise NotFound(key)
        return text

    def list_objects(self, group: str, resource: str, namespace: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """Objects of one resource (in one namespace, or all), ordered by namespace and name; and the rv."""
        with self._lock:
            texts, rv = self._listing(group, resource, namespace)
        return [loads(t) for t in texts], rv

    def find(self, group: str, resource: str, path: str, value: str) -> list[dict[str, Any]]:
        """Objects of one resource whose field at ``path`` (a JSON path of names: ``$.spec.clusterQueue``) is
        ``value``, ordered by namespace and name."""
        with self._lock:
            texts = self._found(group, resource, path, value)
        return [loads(t) for t in texts]

    def changes(self, since: int, limit: int = 1000) -> list[Change]:
        """Changes with a resourceVersion above ``since``, oldest first; :class:`Gone` if compacted."""
        return self.changes_of(since, None, limit)[0]

    def changes_of(self, since: int, resources: frozenset[tuple[str, str]] | None,
                   limit: int = 1000) -> tuple[list[Change], int]:
        """Changes above ``since`` to objects of ``resources`` ((group, resource) pairs; None: all), oldest
        first, and the resourceVersion read up to (to resume from, past changes to other resources).
        :class:`Gone` if changes after ``since`` were compacted away."""
        # From the window without the store's lock (see ChangeWindow); from the log under it.
        served = self._window.serve(since, limit, resources) if since >= self._compacted else None
        if served is None:
            with self._lock:
                if since < self._compacted:
                    raise Gone(since, self._compacted + 1)
                served = self._window.serve(since, limit, resources)
                if served is None:
                    rows = self._log_after(since, limit)
                    # Another writer may have compacted the log: the mark, read after the rows, says if they are whole.
                    if since < self._compaction_mark():
                        raise Gone(since, self._compacted + 1)
                    served = ([Entry(int(rv), t, Key(g, r, ns, n), body) for rv, t, g, r, ns, n, body in rows
                               if resources is None or (g, r) in resources], int(rows[-1][0]) if rows else since)
        return [Change(e.rv, CHANGE_TYPES[e.type], e.key, e.body) for e in served[0]], served[1]

    def _compaction_mark(self) -> int:
        """The newest resourceVersion compacted out of the log, by this store or another writer of the database, as
        the database says it now (under the lock)."""
        self._compacted = max(self._compacted, self._counter("compacted") or 0)
        return self._compacted

    def hold(self, reader: str, rv: int | None) -> None:
        """``reader`` has read every change up to ``rv``: compaction waits for it (see :mod:`flexq.store.holds`)."""
        self._holds.hold(reader, rv)

    def compact(self, keep: int) -> int:
        """Drop all but the newest ``keep`` changes (and those a reader holds); return the number dropped."""
        with self.transaction():
            cutoff = self._holds.cutoff(self._compaction_mark(), self.current_rv(), keep)
            dropped = self._drop_log(cutoff)
            self._set_counter("compacted", cutoff)
            self._compacted = cutoff
            return dropped

    # --- writes ------------------------------------------------------------------------------------

    def _write(self, change: ChangeType, key: Key, obj: dict[str, Any], echo: bool = True) -> dict[str, Any]:
        """Write ``obj`` (whose ``metadata`` is the store's own, the rest perhaps shared with the caller's
        input); return a fresh copy of what was stored, which shares nothing with either, or (not ``echo``)
        ``obj`` itself, for a writer that does not keep what it wrote."""
        rv, body = self._versioned(obj)
        self._put(change, key, rv, body)
        self._pending.append(Change(rv, change, key, body))
        if not echo:
            return obj
        stored: dict[str, Any] = loads(body)
        return stored

    def _versioned(self, obj: dict[str, Any]) -> tuple[int, str]:
        """The next resourceVersion, set in ``obj``'s metadata, and ``obj``'s text as stored."""
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        return rv, dumps(obj)

    def exists(self, key: Key) -> bool:
        with self._lock:
            return self._exists(key)

    def create(self, key: Key, obj: dict[str, Any], *, echo: bool = True, uid: str | None = None) -> dict[str, Any]:
        """Store a new object; set uid, resourceVersion, generation 1 and creationTimestamp. Returns what was
        stored: a copy of its own, or with ``echo=False`` the written object (sharing parts with ``obj``). ``uid``:
        one :meth:`new_uid` gave the caller before (an object that others referred to before it was stored)."""
        with self.transaction():
            if self._exists(key):
                raise AlreadyExists(key)
            return self._write(ChangeType.ADDED, key, self._new_object(key, obj, uid), echo)

    def new_uid(self) -> str:
        """A uid as the store gives its objects."""
        return self._new_uid()

    def create_many(self, items: list[tuple[Key, dict[str, Any]]]) -> set[Key]:
        """Store new objects as :meth:`create` stores each (not echoed), in one transaction and as few statements
        as the database allows; return the keys that existed already (their objects are left as they are, and
        only the first of a key given twice is stored)."""
        with self.transaction():
            existed = self._existing([key for key, _ in items])
            taken = set(existed)
            rows: list[tuple[Key, int, str]] = []
            for key, obj in items:
                if key in taken:
                    continue
                taken.add(key)
                rv, body = self._versioned(self._new_object(key, obj))
                rows.append((key, rv, body))
            self._put_new(rows)
            self._pending.extend(Change(rv, ChangeType.ADDED, key, body) for key, rv, body in rows)
            return existed

    def _new_object(self, key: Key, obj: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
        """``obj`` as created: a metadata of its own with the store's fields (the rest shared with ``obj``)."""
        obj = {**obj, "metadata": dict(obj.get("metadata") or {})}
        meta = obj["metadata"]
        meta["name"] = key.name
        if key.namespace:
            meta["namespace"] = key.namespace
        meta["uid"] = uid or self._new_uid()
        meta["generation"] = 1
        meta["creationTimestamp"] = rfc3339(self._now())
        meta.pop("deletionTimestamp", None)
        return obj

    def update(self, key: Key, obj: dict[str, Any], *, subresource: str | None = None,
               keep_status: bool = True, echo: bool = True, current: dict[str, Any] | None = None) -> dict[str, Any]:
        """Replace an object (or only its status, with ``subresource="status"``).

        A ``metadata.resourceVersion`` in ``obj`` must match the stored one (else :class:`Conflict`);
        an empty one means "whatever is there". The server-owned metadata is carried over. A main-resource
        update keeps the stored status when ``keep_status``; a status update keeps everything but status.
        ``echo`` as for :meth:`create`. ``current``: the object as stored, read by a writer that has held the
        store since (its batch open, no breathing), so that it is not read again; it is not changed.
        """
        with self.transaction():
            old = self.get(key) if current is None else current
            given = str(obj.get("metadata", {}).get("resourceVersion") or "")
            if given and given != old["metadata"]["resourceVersion"]:
                raise Conflict(key, given, old["metadata"]["resourceVersion"])
            # ``old`` was just read, so it is the store's own; ``new`` may share parts of ``obj`` (never changed
            # here) and gets a metadata of its own.
            if subresource == "status":
                new = {**old, "metadata": dict(old["metadata"])}
                if "status" in obj:
                    new["status"] = obj["status"]
                else:
                    new.pop("status", None)
            else:
                new = {**obj, "metadata": dict(obj.get("metadata") or {})}
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
            return self._write(ChangeType.MODIFIED, key, new, echo)

    def delete(self, key: Key, *, resource_version: str | None = None) -> dict[str, Any]:
        """Remove an object; return it as it was. A given ``resource_version`` must match."""
        with self.transaction():
            old = self.get(key)
            if resource_version and resource_version != old["metadata"]["resourceVersion"]:
                raise Conflict(key, resource_version, old["metadata"]["resourceVersion"])
            old["metadata"]["deletionTimestamp"] = rfc3339(self._now())
            return self._write(ChangeType.DELETED, key, old)


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """What counts for ``generation``: everything but metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}
