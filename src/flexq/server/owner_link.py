"""Between API workers and the owner: the owner's socket, the commit desk on it, and a worker's way to it.

With ``flexq server --workers N`` the process that owns the store and runs the controllers (the owner) serves its
whole application on a Unix socket in ``FLEXQ_HOME`` (0600, as the administrator's token: the server's user alone
reaches it), and API workers serve the ports. A worker hands the owner:

- its writes, as transactions prepared on its replica of the store (:mod:`flexq.store.foreign`), to
  ``POST /flexq/internal/commit`` on that socket, which the owner commits or refuses as stale;
- every request it does not serve itself (see :mod:`flexq.server.worker`), as it came.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import queue
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from flexq.store import BaseStore, ForeignTx, Stale, StoreUnavailable, commit_foreign

__all__ = ["COMMIT_PATH", "CommitDesk", "GroupCommit", "OwnerLink", "owner_socket"]

COMMIT_PATH: Final = "/flexq/internal/commit"
_GROUP: Final = 64
"""Transactions committed together at the most."""


def owner_socket(home: Path) -> Path:
    """Where the owner serves its workers."""
    return home / "owner.sock"


class GroupCommit:
    """Commits the workers' transactions in one thread, as many at a time as have come (a group commit): each in a
    savepoint of its own (one that is stale is undone alone), all of them in one commit of the store, and every
    worker answered once that commit is made."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self._queue: queue.SimpleQueue[_Waiting | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="flexq-group-commit", daemon=True)
        self._thread.start()

    async def commit(self, tx: ForeignTx) -> list[int]:
        """The resourceVersions given to ``tx``'s writes once they are committed; :class:`Stale` or
        :class:`StoreUnavailable` as the store refused it."""
        loop = asyncio.get_running_loop()
        waiting = _Waiting(tx, loop, loop.create_future())
        self._queue.put(waiting)
        return await waiting.future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            group = [first]
            with contextlib.suppress(queue.Empty):
                while len(group) < _GROUP and (more := self._queue.get_nowait()) is not None:
                    group.append(more)
            self._commit(group)

    def _commit(self, group: list[_Waiting]) -> None:
        answers: list[list[int] | BaseException] = []
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
            waiting.loop.call_soon_threadsafe(_settle, waiting.future, answer)


@dataclass(frozen=True, slots=True)
class _Waiting:
    tx: ForeignTx
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[list[int]]


def _settle(future: asyncio.Future[list[int]], answer: list[int] | BaseException) -> None:
    if future.done():
        return
    if isinstance(answer, BaseException):
        future.set_exception(answer)
    else:
        future.set_result(answer)


class CommitDesk:
    """The owner's application on its socket, with the commit desk in front."""

    def __init__(self, app: ASGIApp, store: BaseStore) -> None:
        self.app = app
        self.store = store
        self.group = GroupCommit(store)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != COMMIT_PATH:
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        code, answer = await self._commit(bytes(body))
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": code, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    async def _commit(self, body: bytes) -> tuple[int, bytes]:
        try:
            tx = ForeignTx.from_wire(body)
        except (ValueError, KeyError, TypeError) as exc:
            return 400, orjson.dumps({"message": f"not a transaction: {exc}"})
        try:
            return 200, orjson.dumps({"rvs": await self.group.commit(tx)})
        except Stale as exc:
            return 409, orjson.dumps({"stale": exc.rv})
        except StoreUnavailable as exc:
            return 503, orjson.dumps({"message": str(exc), "reason": exc.reason})


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path) -> None:
        super().__init__("owner", timeout=60)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(str(self.path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


class OwnerLink:
    """A worker's commits to the owner, over one kept-alive connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    def commit(self, tx: ForeignTx) -> list[int]:
        """The resourceVersions the owner gave ``tx``'s writes; :class:`Stale` or :class:`StoreUnavailable` as the
        owner answered, :class:`StoreUnavailable` where it cannot be reached."""
        body = tx.to_wire()
        for attempt in range(2):  # a kept-alive connection the owner closed meanwhile: once more on a new one
            conn = self._connection()
            try:
                conn.request("POST", COMMIT_PATH, body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                code, answer = response.status, response.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                if attempt == 1 or not isinstance(exc, (ConnectionError, http.client.RemoteDisconnected)):
                    raise StoreUnavailable(f"the server's owner process cannot be reached ({self.path}): {exc}",
                                           "OwnerUnavailable") from None
        doc = orjson.loads(answer)
        if code == 200:
            return [int(rv) for rv in doc["rvs"]]
        if code == 409:
            raise Stale(None, int(doc["stale"]))
        raise StoreUnavailable(str(doc.get("message", f"the owner answered {code}")),
                               str(doc.get("reason", "WriteFailed")))

    def _connection(self) -> _UnixConnection:
        conn: _UnixConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _UnixConnection(self.path)
        return conn
