"""Watch streams: the changes to one resource, from a resourceVersion on, as the API server sends them.

Each watcher reads the store's change log for its own resource only (the store filters by resource before
any body is parsed), and sends all the frames one read found together: under load a watcher gets a few
large writes instead of one write per change. A resourceVersion older than the log's window gets the API
server's ERROR frame with a 410 Expired status, after which kubectl and informers list again.

What a watch holds stays bounded whoever its client is. A watch from ``resourceVersion=0`` (or none) begins with its
objects' ADDED frames from a listing shared with the other watches of the same selection (see
:mod:`flexq.server.watchers`), and every frame is encoded once for all the watches that send it; what is sent goes
in slices of at most :data:`PIECE` bytes, each written once the connection has taken the one before (uvicorn waits
while its transport's buffer is past its high-water mark), so that a client that does not read stops its watch
instead of piling its frames up in the server. Its unsent changes are the change log's, not the watch's own. A watch
whose client has not read for :data:`CHECK_EVERY` seconds while more than :data:`BACKLOG` bytes of its resource were
committed (or stays at it for the connection's write-stall limit, :mod:`flexq.server.connection`) is cut off, as the
API server closes a watcher that does not keep up: its client watches again from the last resourceVersion it read.
One caller has at most :data:`~flexq.server.watchers.WATCHES_PER_USER` watches open; past that, 429.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from flexq.api import KindInfo
from flexq.objects import ObjectService, table
from flexq.server.authn import caller
from flexq.server.connection import Connection, connection_of
from flexq.server.hub import ChangeHub
from flexq.server.status import status_body
from flexq.server.watchers import Listing, ListingKey, TallyKey, Watches
from flexq.store import Change, Gone

__all__ = ["ASK_EVERY", "BACKLOG", "CHECK_EVERY", "PIECE", "Position", "WatchResponse", "watch_response",
           "watch_stream"]

ASK_EVERY = 1.0
"""Seconds between two questions of an idle watch to its client: are you still there?"""
PIECE: Final = 16 * 1024
"""Bytes of a watch's stream written at once, at most."""
BACKLOG: Final = 8 * 2**20
"""Bytes a watch whose client does not read may fall behind its resource's changes before it is cut off."""
CHECK_EVERY: Final = 1.0
"""Seconds between two looks at how far behind a watch whose client does not read is."""

Piece = bytes | memoryview


@dataclass(slots=True)
class Position:
    """How far behind its resource's changes a watch is, in :class:`~flexq.server.watchers.Tally`'s count: ``mark``,
    what had been committed to ``key`` when it last read them; ``pending``, the bytes of the frames it read then that
    it has not handed on yet. (Its initial list is not counted: it is shared, and the API server too sends a watch's
    initial events at its client's pace.)"""

    key: TallyKey
    mark: int = 0
    pending: int = 0

    def behind(self, watches: Watches) -> int:
        return watches.tally.read(self.key) - self.mark + self.pending


def _pieces(data: bytes) -> Iterator[Piece]:
    """``data`` in slices of :data:`PIECE` bytes (views: not copied)."""
    if len(data) <= PIECE:
        yield data
        return
    view = memoryview(data)
    for at in range(0, len(data), PIECE):
        yield view[at:at + PIECE]


def _pieces_of(frames: list[bytes]) -> Iterator[Piece]:
    """``frames`` in pieces of about :data:`PIECE` bytes: small ones joined, large ones sliced."""
    held: list[bytes] = []
    size = 0
    for frame in frames:
        if size + len(frame) > PIECE and held:
            yield held[0] if len(held) == 1 else b"".join(held)
            held, size = [], 0
        if len(frame) > PIECE:
            yield from _pieces(frame)
        else:
            held.append(frame)
            size += len(frame)
    if held:
        yield held[0] if len(held) == 1 else b"".join(held)


def watch_stream(request: Request, service: ObjectService, hub: ChangeHub, info: KindInfo, version: str,
                 namespace: str | None, selected: Callable[[dict[str, Any]], bool] | None, as_table: bool, start: str,
                 timeout: float, *, selection: tuple[str, str] | None = None,
                 position: Position | None = None) -> AsyncGenerator[Piece, None]:
    """``selected``: the label and field selectors' test (None: every object of ``namespace``, or of all);
    ``selection``: the selectors as asked (label, field), which tell its listing apart from other watches' (None
    where ``selected`` is given: a listing of its own). ``position``: kept up to date with the stream's."""
    shared: ListingKey | None = None
    if selected is None or selection is not None:
        labels, fields = selection or ("", "")
        shared = (info.group, info.plural, namespace, version, labels, fields, as_table)
    return _Watch(request, service, hub, info, version, namespace, selected, as_table, shared,
                  position or Position((info.group, info.plural, namespace))).stream(start, timeout)


class _Watch:
    """One watch: how its frames are made, and its stream."""

    def __init__(self, request: Request, service: ObjectService, hub: ChangeHub, info: KindInfo, version: str,
                 namespace: str | None, selected: Callable[[dict[str, Any]], bool] | None, as_table: bool,
                 shared: ListingKey | None, here: Position) -> None:
        self.request, self.service, self.hub, self.watches = request, service, hub, hub.watches
        self.info, self.version, self.namespace = info, version, namespace
        self.selected, self.as_table = selected, as_table
        self.shared, self.here = shared, here
        self.resources = frozenset({(info.group, info.plural)})
        # Objects sent as stored (no selector to test, no conversion, no table) are framed from their text: a watch
        # of a busy resource (the Workloads that a runner follows) then parses nothing.
        self.as_stored = selected is None and not as_table and version == info.storage_version

    def frame(self, kind: str, obj: dict[str, Any]) -> bytes:
        shown = self.service._to(self.info, obj, self.version)
        if self.as_table:
            shown = table(self.info, [shown], shown["metadata"].get("resourceVersion", ""))
        return orjson.dumps({"type": kind, "object": shown}) + b"\n"

    def framed(self, change: Change) -> bytes:
        if self.as_stored:
            return b'{"type":"' + change.type.value.encode() + b'","object":' + change.text.encode() + b"}\n"
        return self.frame(change.type.value, change.obj)

    def frames_of(self, changes: list[Change]) -> list[bytes]:
        # The store keys each change by the object's namespace: the namespace is told apart before any parsing.
        ours = [change for change in changes if self.namespace is None or change.key.namespace == self.namespace]
        if self.selected is not None:
            ours = [change for change in ours if self.selected(change.obj)]
        return [self.watches.frames.get((change.rv, change.key, self.version, self.as_table),
                                        functools.partial(self.framed, change)) for change in ours]

    def listing(self) -> Listing:
        """The initial list's frames (in a thread: see :class:`~flexq.server.watchers.Listings`)."""
        mark = self.watches.tally.read(self.here.key)
        items, rv = self.service.list_objects(self.info, self.namespace, self.version)  # of the namespace alone
        selected = self.selected
        data = b"".join([self.frame("ADDED", item) for item in items if selected is None or selected(item)])
        return Listing(rv, mark, time.monotonic(), data)

    async def stream(self, start: str, timeout: float) -> AsyncGenerator[Piece, None]:
        here, hub = self.here, self.hub
        since: int
        if start in ("", "0"):
            initial: Listing | None = await self.watches.listings.get(self.shared, here.key, self.listing)
            assert initial is not None
            here.mark, since = initial.mark, initial.rv
            for piece in _pieces(initial.data):
                yield piece
            initial = None  # held while it is sent: the watches that start meanwhile share it
        else:
            since = int(start)
        deadline = time.monotonic() + timeout
        asked = -ASK_EVERY
        while time.monotonic() < deadline and not hub.closed:  # a stopping server ends its watches: clients watch again
            mark = self.watches.tally.read(here.key)  # before the read: a change committed meanwhile counts as unsent
            try:
                changes, reached = self.service.store.changes_of(since, self.resources)
            except Gone as exc:
                yield orjson.dumps({"type": "ERROR", "object": status_body(410, "Expired", str(exc))}) + b"\n"
                return
            frames = self.frames_of(changes)
            here.mark, here.pending = mark, sum(len(frame) for frame in frames)
            for piece in _pieces_of(frames):
                yield piece
                here.pending -= len(piece)
            del frames
            if reached == since:
                # Idle: ask whether the client is gone, at most every ASK_EVERY seconds. (The ASGI server's own
                # listener cancels the stream when it goes; a watch woken by every commit of other resources does
                # not ask each time: each ask costs a cancel scope and a task's repr.)
                now = time.monotonic()
                if now - asked >= ASK_EVERY:
                    asked = now
                    if await self.request.is_disconnected():
                        return
                await hub.wait(min(1.0, max(0.0, deadline - time.monotonic())))
            else:
                await asyncio.sleep(0)
            since = reached


class WatchResponse(StreamingResponse):
    """A watch's stream, written as its connection takes it. While it is open its caller holds one of their watches
    (429 where they hold :attr:`~flexq.server.watchers.WatchSlots.per_user` already). On flexq's own server (where
    the request's scope has its :class:`~flexq.server.connection.Connection`) a watch whose client has not read for
    :data:`CHECK_EVERY` seconds while more than :data:`BACKLOG` bytes of its resource were committed after what it
    read (counted with what waits in its transport) is cut off."""

    def __init__(self, stream: AsyncGenerator[Piece, None], position: Position, watches: Watches, user: str) -> None:
        super().__init__(stream, media_type="application/json")
        self.stream = stream
        self.position = position
        self.watches = watches
        self.user = user
        self.connection: Connection | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        slots = self.watches.slots
        if not slots.take(self.user):
            await self.stream.aclose()
            message = f'too many watches open for user "{self.user}": {slots.per_user} at most; close some and retry'
            await JSONResponse(status_body(429, "TooManyRequests", message, {"retryAfterSeconds": 1}), 429,
                               headers={"Retry-After": "1"})(scope, receive, send)
            return
        self.connection = connection_of(scope)
        try:
            await super().__call__(scope, receive, send)
        finally:
            slots.give(self.user)
            await self.stream.aclose()

    async def stream_response(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        connection = self.connection
        async for piece in self.stream:
            if connection is not None and (connection.lost or (connection.write_paused
                                                               and not await self._kept_up(connection))):
                await connection.abort()
                return
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _kept_up(self, connection: Connection) -> bool:
        """Wait for the client to read (True); False once it has not for :data:`CHECK_EVERY` seconds while the
        watch was more than :data:`BACKLOG` bytes behind."""
        while connection.write_paused and not connection.lost:
            try:
                async with asyncio.timeout(CHECK_EVERY):
                    await connection.writable()
            except TimeoutError:
                if self.position.behind(self.watches) + connection.buffered() > BACKLOG:
                    return False
        return not connection.lost


def watch_response(request: Request, service: ObjectService, hub: ChangeHub, info: KindInfo, version: str,
                   namespace: str | None, selected: Callable[[dict[str, Any]], bool] | None, as_table: bool,
                   start: str, timeout: float, selection: tuple[str, str]) -> Response:
    """The response to a watch request (see :func:`watch_stream` for the arguments)."""
    position = Position((info.group, info.plural, namespace))
    stream = watch_stream(request, service, hub, info, version, namespace, selected, as_table, start, timeout,
                          selection=selection, position=position)
    return WatchResponse(stream, position, hub.watches, caller(request.state).user)

