"""Between API workers and the owner: the owner's sockets, its group commit, and a worker's way to it.

With ``flexq server --workers N`` the process that owns the store and runs the controllers (the owner) listens on two
Unix sockets in ``FLEXQ_HOME``, both 0600 (as the administrator's token: the server's user alone reaches them), and
API workers serve the ports. A worker hands the owner:

- its writes, as transactions prepared on its replica of the store (:mod:`flexq.store.foreign`), on
  ``commit.sock``: one message each way per transaction, a 4-byte length and the transaction (or the answer) after
  it, over a connection the worker keeps; the owner serves each connection in a thread of its own and commits what
  has come meanwhile in one group (:class:`GroupCommit`);
- every request it does not serve itself (see :mod:`flexq.server.worker`), as it came, to the owner's whole
  application on ``owner.sock``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson

from flexq.store import BaseStore, ForeignTx, Stale, StoreUnavailable, commit_foreign

__all__ = ["Answer", "CommitServer", "GroupCommit", "OwnerLink", "accept_each", "commit_socket", "decode_answer",
           "encode_answer", "frame", "owner_socket", "read_frame", "unix_listener"]

_GROUP: Final = 64
"""Transactions committed together at the most."""
_LENGTH: Final = struct.Struct(">I")
_LARGEST: Final = 1 << 30


def owner_socket(home: Path) -> Path:
    """Where the owner serves its whole application to its workers."""
    return home / "owner.sock"


def commit_socket(home: Path) -> Path:
    """Where the owner takes its workers' transactions."""
    return home / "commit.sock"


Answer = list[int] | Stale | StoreUnavailable


class GroupCommit:
    """Commits the workers' transactions in one thread, as many at a time as have come (a group commit): each in a
    savepoint of its own (one that is stale is undone alone), all of them in one commit of the store, and every
    worker answered once that commit is made."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._queue: queue.SimpleQueue[_Waiting | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="flexq-group-commit", daemon=True)
        self._thread.start()

    def submit(self, tx: ForeignTx) -> Future[Answer]:
        """The resourceVersions given to ``tx``'s writes once they are committed, or the refusal (:class:`Stale`,
        :class:`StoreUnavailable`), as a future."""
        waiting = _Waiting(tx, Future())
        self._queue.put(waiting)
        return waiting.future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            group = [first]
            with contextlib.suppress(queue.Empty):
                while len(group) < _GROUP and (more := self._queue.get_nowait()) is not None:
                    group.append(more)
            try:
                self._commit(group)
            except Exception as exc:  # a fault of the owner's: each waiting worker hears it, none waits for good
                for waiting in group:
                    if not waiting.future.done():
                        waiting.future.set_exception(exc)

    def _commit(self, group: list[_Waiting]) -> None:
        answers: list[Answer] = []
        try:
            with self.store.batch():
                for waiting in group:
                    try:
                        answers.append(commit_foreign(self.store, waiting.tx))
                    except (Stale, StoreUnavailable) as exc:
                        answers.append(exc)
        except StoreUnavailable as exc:  # the commit itself: nothing of the group was kept
            answers = [exc] * len(group)
        for waiting, answer in zip(group, answers, strict=True):
            waiting.future.set_result(answer)


@dataclass(frozen=True, slots=True)
class _Waiting:
    tx: ForeignTx
    future: Future[Answer]


def encode_answer(answer: Answer) -> bytes:
    if isinstance(answer, Stale):
        return orjson.dumps({"stale": answer.rv})
    if isinstance(answer, StoreUnavailable):
        return orjson.dumps({"message": str(answer), "reason": answer.reason})
    return orjson.dumps({"rvs": answer})


def decode_answer(data: bytes) -> list[int]:
    """The resourceVersions an answer gives; raises the refusal it carries."""
    doc = orjson.loads(data)
    if "rvs" in doc:
        return [int(rv) for rv in doc["rvs"]]
    if "stale" in doc:
        raise Stale(None, int(doc["stale"]))
    raise StoreUnavailable(str(doc.get("message", "the owner refused the write")),
                           str(doc.get("reason", "WriteFailed")))


class CommitServer:
    """The owner's side of ``commit.sock``: a thread per worker connection, each transaction into the group commit."""

    def __init__(self, path: Path, group: GroupCommit) -> None:
        self.path = path
        self.group = group
        self._socket = unix_listener(path)
        self._closing = threading.Event()
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name="flexq-commit-accept", daemon=True).start()

    def _accept(self) -> None:
        accept_each(self._socket, self._closing, self._take)

    def _take(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.append(conn)
        threading.Thread(target=self._serve, args=(conn,), name="flexq-commit", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._answer(conn)
        finally:
            with self._lock:
                self._connections.remove(conn)

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            while (data := read_frame(conn)) is not None:
                try:
                    tx = ForeignTx.from_wire(data)
                except (ValueError, KeyError, TypeError) as exc:
                    answer = orjson.dumps({"message": f"not a transaction: {exc}", "reason": "BadRequest"})
                else:
                    answer = encode_answer(self.group.submit(tx).result())
                try:
                    conn.sendall(frame(answer))
                except OSError:
                    return

    def close(self) -> None:
        self._closing.set()
        self._socket.close()
        with self._lock:
            for conn in self._connections:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        self.group.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _read_exactly(conn: socket.socket, size: int) -> bytes | None:
    parts, left = [], size
    while left:
        try:
            chunk = conn.recv(min(left, 1 << 20))
        except OSError:
            return None
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def frame(message: bytes) -> bytes:
    """``message`` as it goes over the owner's sockets: a 4-byte length, then the message (see :func:`read_frame`)."""
    return _LENGTH.pack(len(message)) + message


def read_frame(conn: socket.socket) -> bytes | None:
    """The next message on ``conn``; None when it closed (or sent something that is not one)."""
    head = _read_exactly(conn, _LENGTH.size)
    if head is None:
        return None
    (size,) = _LENGTH.unpack(head)
    return None if size > _LARGEST else _read_exactly(conn, size)


def accept_each(listener: socket.socket, closing: threading.Event, take: Callable[[socket.socket], None]) -> None:
    """Hand each connection ``listener`` accepts to ``take``, until ``closing`` is set or the listener is closed."""
    while not closing.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        take(conn)


def unix_listener(path: Path, backlog: int = 2048) -> socket.socket:
    """A Unix socket listening at ``path``, its user's alone (a stale one from a server that died is replaced)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(umask)
    sock.listen(backlog)
    return sock


class OwnerLink:
    """A worker's commits to the owner, over one kept connection per thread. ``lost`` is called when the owner
    cannot be reached, before the commit fails: a worker whose owner is gone ends there, without an answer (see
    :func:`flexq.server.worker.end_with_owner`)."""

    def __init__(self, path: Path, lost: Callable[[], None] = lambda: None) -> None:
        self.path = path
        self.lost = lost
        self._local = threading.local()

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.path))
        except OSError:
            sock.close()
            raise
        return sock

    def commit(self, tx: ForeignTx) -> list[int]:
        """The resourceVersions the owner gave ``tx``'s writes; :class:`Stale` or :class:`StoreUnavailable` as the
        owner answered; :class:`StoreUnavailable` where it cannot be reached and still lives (``lost`` returned:
        whether the write was committed is unknown)."""
        body = tx.to_wire()
        conn: socket.socket | None = getattr(self._local, "conn", None)
        try:
            if conn is None:
                conn = self._local.conn = self._connect()
            conn.sendall(frame(body))
            answer = read_frame(conn)
        except OSError as exc:
            answer, problem = None, str(exc)
        else:
            problem = "the connection closed"
        if answer is None:
            if conn is not None:
                conn.close()
            self._local.conn = None
            self.lost()
            raise StoreUnavailable(f"the server's owner process cannot be reached ({self.path}): {problem}",
                                   "OwnerUnavailable")
        return decode_answer(answer)
