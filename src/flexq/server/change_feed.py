"""The owner's commits, pushed to its API workers: the stream their watches are served from.

With ``flexq server --workers N`` on SQLite, the owner sends every change its store commits (its controllers' and
its workers' alike) to each worker over ``changes.sock`` in ``FLEXQ_HOME`` (0600, as the other sockets), as the
Kubernetes API server's watch cache is fed from etcd's watch: in resourceVersion order, each commit's changes in one
message (a 4-byte length, then a JSON list of change-log rows: rv, type, group, resource, namespace, name, the
object's text). A worker's watches read them from its window (:class:`~flexq.store.ReplicaStore`) the moment they
come, without reading them back from the database file.

Nothing is lost on the way: the owner's first message on a connection, an empty list, says the worker now gets every
commit, and the worker then reads what was committed before it from the file (its change log); a gap the worker
sees between two messages is read from the file too (the store does that for any writer it follows). A worker that
does not keep up (more than ``_BACKLOG`` bytes waiting for it) is let go, and catches up from the file when it
connects again; while it cannot connect it reads the file every ``follow`` seconds, as without the feed.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Final

import orjson

from flexq.server.owner_link import accept_each, frame, read_frame, unix_listener
from flexq.store import BaseStore, Change, ReplicaStore

__all__ = ["ChangeFeed", "FeedReader", "changes_socket"]

log = logging.getLogger("flexq.server")

_BACKLOG: Final = 256 * 2**20
"""Bytes of messages waiting for one worker at the most; past that it is let go (it reads the rest from the file)."""
_HELLO: Final = frame(b"[]")
_RETRY: Final = 0.05


def changes_socket(home: Path) -> Path:
    """Where the owner sends its commits to its workers."""
    return home / "changes.sock"


def encode(changes: list[Change]) -> bytes:
    """One message: the rows of ``changes``, oldest first."""
    return frame(orjson.dumps([[c.rv, c.type.value, c.key.group, c.key.resource, c.key.namespace, c.key.name, c.text]
                               for c in changes]))


class _Subscriber:
    """One worker's connection: what is sent to it waits in a queue of its own, sent by a thread of its own, so that
    a commit never waits for a worker."""

    def __init__(self, conn: socket.socket, gone: Callable[[_Subscriber], None]) -> None:
        self.conn = conn
        self._gone = gone
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._waiting = 0
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._send, name="flexq-feed", daemon=True).start()

    def put(self, message: bytes) -> None:
        with self._lock:
            if self._closed:
                return
            self._waiting += len(message)
            behind = self._waiting > _BACKLOG
        if behind:
            log.warning("an API worker fell %d MiB behind the owner's commits: it reads them from the database file",
                        _BACKLOG // 2**20)
            self.close()
            return
        self._queue.put(message)

    def _send(self) -> None:
        while (message := self._queue.get()) is not None:
            try:
                self.conn.sendall(message)
            except OSError:
                break
            with self._lock:
                self._waiting -= len(message)
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        self.conn.close()
        self._queue.put(None)
        self._gone(self)


class ChangeFeed:
    """The owner's side of ``changes.sock``: every commit of ``store`` to every worker connected."""

    def __init__(self, path: Path, store: BaseStore) -> None:
        self.path = path
        self._socket = unix_listener(path)
        self._lock = threading.Lock()
        self._subscribers: list[_Subscriber] = []
        self._closing = threading.Event()
        store.subscribe(self._committed)
        threading.Thread(target=self._accept, name="flexq-feed-accept", daemon=True).start()

    def _committed(self, changes: list[Change]) -> None:
        subscribers = self._subscribers  # replaced, never changed in place: read without the lock
        if not subscribers:
            return
        message = encode(changes)
        for subscriber in subscribers:
            subscriber.put(message)

    def _accept(self) -> None:
        accept_each(self._socket, self._closing, self._take)

    def _take(self, conn: socket.socket) -> None:
        subscriber = _Subscriber(conn, self._gone)
        with self._lock:
            self._subscribers = [*self._subscribers, subscriber]
        subscriber.put(_HELLO)  # every commit from here on reaches it: it reads those before from the file

    def _gone(self, subscriber: _Subscriber) -> None:
        with self._lock:
            self._subscribers = [s for s in self._subscribers if s is not subscriber]

    def close(self) -> None:
        self._closing.set()
        self._socket.close()
        for subscriber in list(self._subscribers):
            subscriber.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class FeedReader:
    """A worker's side of ``changes.sock``: the owner's commits into ``store``'s window as they come; while the
    owner cannot be reached, the file read every ``follow`` seconds instead."""

    def __init__(self, path: Path, store: ReplicaStore, follow: float) -> None:
        self.path = path
        self.store = store
        self.follow = follow
        self._closing = threading.Event()
        self._conn: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="flexq-feed-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            conn = self._connect()
            if conn is None:
                self._catch_up()  # without the feed, as a server that follows the file
                self._closing.wait(max(self.follow, _RETRY))
                continue
            try:
                self._read(conn)
            finally:
                self._conn = None
                conn.close()

    def _connect(self) -> socket.socket | None:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.path))
        except OSError:
            conn.close()
            return None
        self._conn = conn
        return conn

    def _read(self, conn: socket.socket) -> None:
        while (message := read_frame(conn)) is not None:
            rows = orjson.loads(message)
            if rows:
                self.store.receive([(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6]) for r in rows])
            else:  # the owner now sends every commit: what came before is read from the file
                self._catch_up()

    def _catch_up(self) -> None:
        try:
            self.store.catch_up()
        except Exception as exc:  # the file locked or closed: the next message or try reads it
            if not self._closing.is_set():
                log.warning("reading the owner's commits from the database file: %s", exc)

    def close(self) -> None:
        self._closing.set()
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
