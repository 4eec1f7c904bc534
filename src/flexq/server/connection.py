"""The HTTP/1.1 connection as the server reads and writes it: uvicorn's httptools protocol with the limits Go's server
(the API server's) puts on a client.

uvicorn reads a request's headers and body for as long as its client takes: a client that sends its headers a byte a
minute, or stops half way through a body, holds its connection (and whatever it sent) for good; and a response whose
client does not read waits in its write buffer for good. Here, as :class:`Limits` sets them:

* the headers must have come whole within ``header_seconds`` of the connection (or, on a kept-alive connection, of
  the next request's first byte), as Go's ``ReadHeaderTimeout``: else the connection is closed, without an answer
  (Go gives none either); and they may not pass ``header_bytes`` (``MaxHeaderBytes``): 431, and closed;
* a body may not stop for ``body_idle_seconds`` (while the server itself reads on): 408, and closed;
* a response whose client reads nothing for ``write_stall_seconds`` while its writes wait (the transport's buffer past
  ``write_high_water`` bytes) is cut off: the connection is aborted, its buffer dropped.

Once a request has come whole nothing limits how long its answer takes: watches, followed logs and port-forward's
WebSockets (another protocol once upgraded) stay open as long as their clients read.

Each request's scope carries its :class:`Connection` (see :func:`connection_of`): a long response (a watch) asks it
whether its writes wait, how much is buffered, and cuts its client off when it falls too far behind.

One timer a connection serves every limit: it is set for the earliest deadline, and moved only when a nearer one
comes, so that a request on a kept-alive connection does not cost a timer of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["EXTENSION", "LIMITS", "Connection", "Limits", "bounded_protocol", "connection_of"]

EXTENSION: Final = "flexq.connection"
"""The key of a request scope's ``extensions`` under which its :class:`Connection` is found (as ``{"handle": c}``)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Seconds and bytes a client is given: see the module's docstring for what each bounds."""

    header_seconds: float = 10.0
    header_bytes: int = 1 << 20
    body_idle_seconds: float = 30.0
    write_stall_seconds: float = 60.0
    write_high_water: int = 16 * 1024


LIMITS: Final = Limits()
"""The server's: headers within 10 s and 1 MiB (Go's default ``MaxHeaderBytes``), a body never idle for 30 s, a
client that reads nothing for 60 s cut off."""


class _Phase(enum.IntEnum):
    HEAD = 1
    """Reading a request's line and headers."""
    BODY = 2
    """Reading a request's body."""
    REST = 3
    """Between requests (uvicorn's keep-alive timeout applies), or serving one whose body came whole."""


_TIMEOUT_BODY: Final = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":' \
    b'"the request body stopped coming: the connection is closed","reason":"Timeout","code":408}'
_TOO_LARGE_BODY: Final = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":' \
    b'"the request headers are too large","reason":"RequestHeaderFieldsTooLarge","code":431}'


def _answer(status: bytes, body: bytes) -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class Connection:
    """What a response may ask of the connection it is written on."""

    __slots__ = ("_protocol",)

    def __init__(self, protocol: BoundedHttpProtocol) -> None:
        self._protocol = protocol

    @property
    def write_paused(self) -> bool:
        """Whether writes wait: the transport's buffer passed its high-water mark and has not drained since."""
        return self._protocol.flow.write_paused

    @property
    def lost(self) -> bool:
        """Whether the connection is closed or closing (the client went, or the server cut it off)."""
        return self._protocol.transport.is_closing()

    def buffered(self) -> int:
        """Bytes written and not yet taken by the socket."""
        return self._protocol.transport.get_write_buffer_size()

    async def writable(self) -> None:
        """Return once writes no longer wait (or the connection is lost)."""
        await self._protocol.flow.drain()

    async def abort(self) -> None:
        """Cut the client off, dropping what is buffered for it; return once the server has seen the connection
        end (the response's later writes go nowhere, and its end is not taken for an application's error)."""
        self._protocol.transport.abort()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await self._protocol.lost.wait()


def connection_of(scope: Mapping[str, Any]) -> Connection | None:
    """The connection a request came on (None where the server is not flexq's: an in-process test's)."""
    extension = scope.get("extensions", {}).get(EXTENSION)
    handle = extension.get("handle") if isinstance(extension, dict) else None
    return handle if isinstance(handle, Connection) else None


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol under :attr:`LIMITS` (see the module's docstring)."""

    LIMITS: ClassVar[Limits] = LIMITS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = self.LIMITS
        self.lost = asyncio.Event()
        self._handle = Connection(self)
        self._phase = _Phase.HEAD
        self._head_deadline = 0.0
        self._head_bytes = 0
        self._body_at = 0.0
        self._stalled_at: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    # --- the transport's calls ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        with contextlib.suppress(AttributeError, NotImplementedError):
            self.transport.set_write_buffer_limits(high=self.limits.write_high_water)
        self._phase = _Phase.HEAD
        self._head_deadline = self.loop.time() + self.limits.header_seconds
        self._ensure(self._head_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        self.lost.set()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase is _Phase.HEAD:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._phase is _Phase.HEAD and self._head_bytes > self.limits.header_bytes \
                and not self.transport.is_closing():
            self._cancel()
            self.transport.write(_answer(b"431 Request Header Fields Too Large", _TOO_LARGE_BODY))
            self.transport.close()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled_at is None:
            self._stalled_at = self.loop.time()
            self._ensure(self._stalled_at + self.limits.write_stall_seconds)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stalled_at = None

    def handle_websocket_upgrade(self) -> None:
        self._cancel()  # the WebSocket protocol serves the connection from here on
        self._phase = _Phase.REST
        super().handle_websocket_upgrade()

    # --- the parser's calls ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope.setdefault("extensions", {})[EXTENSION] = {"handle": self._handle}
        if self._phase is not _Phase.HEAD:  # the next request on a kept-alive connection: from its first byte
            self._phase = _Phase.HEAD
            self._head_deadline = self.loop.time() + self.limits.header_seconds
            self._ensure(self._head_deadline)

    def on_headers_complete(self) -> None:
        self._head_bytes = 0
        if self.parser.should_upgrade() and self._should_upgrade():
            self._phase = _Phase.REST
        else:
            self._phase = _Phase.BODY  # until the message completes: at once where there is no body
            self._body_at = self.loop.time()
            self._ensure(self._body_at + self.limits.body_idle_seconds)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._body_at = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._phase is _Phase.BODY:
            self._phase = _Phase.REST
        super().on_message_complete()

    # --- the timer ---------------------------------------------------------------------------------

    def _ensure(self, at: float) -> None:
        """The timer set for ``at`` at the latest."""
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_at(at, self._check)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self.transport is None or (self.transport.is_closing() and self._stalled_at is None):
            return
        now = self.loop.time()
        due: list[float] = []
        if self._stalled_at is not None:
            if now - self._stalled_at >= self.limits.write_stall_seconds:
                self.transport.abort()
                return
            due.append(self._stalled_at + self.limits.write_stall_seconds)
        if self._phase is _Phase.HEAD and not self.transport.is_closing():
            if now >= self._head_deadline:
                self.transport.close()
                return
            due.append(self._head_deadline)
        elif self._phase is _Phase.BODY and not self.transport.is_closing():
            if self.flow.read_paused:  # the server does not read meanwhile: the client is not to blame
                self._body_at = now
            elif now - self._body_at >= self.limits.body_idle_seconds:
                self._body_stopped()
                return
            due.append(self._body_at + self.limits.body_idle_seconds)
        if due:
            self._ensure(min(due))

    def _body_stopped(self) -> None:
        """The 408, where no answer has begun; the connection closed either way, and the application told that its
        client went (its answer, if it makes one, goes nowhere)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self.transport.write(_answer(b"408 Request Timeout", _TIMEOUT_BODY))
        if cycle is not None:
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()


def bounded_protocol(limits: Limits = LIMITS) -> type[BoundedHttpProtocol]:
    """The protocol class a uvicorn ``Config(http=...)`` takes, under ``limits``."""
    if limits == LIMITS:
        return BoundedHttpProtocol
    return type("BoundedHttpProtocol", (BoundedHttpProtocol,), {"LIMITS": limits})
