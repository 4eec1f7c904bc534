"""``kubectl port-forward``: the pod port-forward protocol, each forwarded port reaching a port on this machine.

kubectl resolves ``service/NAME`` to a running pod itself, then opens ``/api/v1/namespaces/NS/pods/POD/portforward``
as a WebSocket with the subprotocol ``SPDY/3.1+portforward.k8s.io`` and speaks SPDY/3.1 through it (see
:mod:`flexq.server.spdy`). For each connection made to its local port it opens two streams with the headers
``streamType`` (``error``, then ``data``), ``port`` (the pod's port) and ``requestID`` (the same for both). The
server answers each stream (SYN_REPLY), connects the pair's data stream to the target port and copies both ways;
a connection that cannot be made is reported as a message on the error stream. When the target closes, the data
stream is closed (FIN), then the error stream; a client's FIN half-closes the target connection, its RST_STREAM
drops it. PINGs are answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from flexq.errors import FlexqError
from flexq.server.spdy import Data, Decoder, Encoder, GoAway, Ping, ProtocolError, RstStream, SynStream
from flexq.server.status import status_body

__all__ = ["TUNNEL_PROTOCOL", "PortError", "PortForwardSession", "Target", "deny", "serve_websocket"]

log = logging.getLogger("flexq.server.portforward")

TUNNEL_PROTOCOL: Final = "SPDY/3.1+portforward.k8s.io"
_CHUNK: Final = 32 * 1024
_REFUSED_STREAM: Final = 3
_PROTOCOL_ERROR: Final = 1
_PORT: Final = re.compile(r"[0-9]{1,5}")
"""A port in a stream's headers: ASCII digits (``str.isdigit`` takes ``²`` too, which ``int`` refuses)."""


class PortError(FlexqError):
    """A port that cannot be forwarded; the message goes to kubectl on the pair's error stream."""


Target = Callable[[int], int]
"""The pod's port -> the port on 127.0.0.1 to connect to; raises :class:`PortError` with a reason."""


@dataclass
class _Pair:
    port: int
    error_id: int = 0
    data_id: int = 0
    inbound: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(64))
    task: asyncio.Task[None] | None = None


class PortForwardSession:
    """One port-forward connection: frames in through :meth:`feed`, frames out through ``send``."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], target: Target) -> None:
        self._send_raw = send
        self._target = target
        self._decoder = Decoder()
        self._encoder = Encoder()
        self._lock = asyncio.Lock()
        self._pairs: dict[str, _Pair] = {}
        self._by_stream: dict[int, _Pair] = {}
        self._last_stream = 0
        self.closed = False

    async def feed(self, chunk: bytes) -> None:
        """Handle the bytes of one WebSocket message; raises :class:`ProtocolError` on a broken stream."""
        for frame in self._decoder.feed(chunk):
            if isinstance(frame, SynStream):
                await self._open(frame)
            elif isinstance(frame, Data):
                pair = self._by_stream.get(frame.stream_id)
                if pair is not None and frame.stream_id == pair.data_id:
                    if frame.data:
                        await _deliver(pair, frame.data)
                    if frame.fin:
                        await _deliver(pair, None)
            elif isinstance(frame, RstStream):
                pair = self._by_stream.get(frame.stream_id)
                if pair is not None and pair.task is not None and frame.stream_id == pair.data_id:
                    pair.task.cancel()
            elif isinstance(frame, Ping):
                await self._send(partial(Encoder.ping, ping_id=frame.id))
            elif isinstance(frame, GoAway):
                self.closed = True

    async def close(self) -> None:
        """Stop every forwarded connection (the client went away)."""
        self.closed = True
        tasks = [p.task for p in self._pairs.values() if p.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def protocol_error(self) -> None:
        await self._send(lambda e: e.goaway(self._last_stream, _PROTOCOL_ERROR))

    async def _open(self, frame: SynStream) -> None:
        self._last_stream = max(self._last_stream, frame.stream_id)
        kind, port_text = frame.headers.get("streamtype", ""), frame.headers.get("port", "")
        request = frame.headers.get("requestid", port_text)
        if kind not in ("error", "data") or not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
            log.info("port-forward: refused stream %d with headers %s", frame.stream_id, frame.headers)
            await self._send(lambda e: e.rst_stream(frame.stream_id, _REFUSED_STREAM))
            return
        pair = self._pairs.setdefault(request, _Pair(int(port_text)))
        if kind == "error":
            pair.error_id = frame.stream_id
        else:
            pair.data_id = frame.stream_id
        self._by_stream[frame.stream_id] = pair
        await self._send(lambda e: e.syn_reply(frame.stream_id))
        if pair.error_id and pair.data_id and pair.task is None:
            pair.task = asyncio.create_task(self._forward(request, pair))

    async def _forward(self, request: str, pair: _Pair) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            try:
                local = self._target(pair.port)
                reader, writer = await asyncio.open_connection("127.0.0.1", local)
            except PortError as exc:
                await self._fail(pair, str(exc))
                return
            except OSError as exc:
                await self._fail(pair, f"error forwarding port {pair.port}: connecting to 127.0.0.1:{local}: "
                                       f"{exc.strerror or exc}")
                return
            upstream = asyncio.create_task(_upstream(pair.inbound, writer))
            try:
                while chunk := await reader.read(_CHUNK):
                    await self._send(partial(Encoder.data, stream_id=pair.data_id, data=chunk))
                await self._send(lambda e: e.data(pair.data_id, fin=True))
            finally:
                upstream.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await upstream
            await self._send(lambda e: e.data(pair.error_id, fin=True))
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await self._send(lambda e: e.data(pair.error_id, fin=True))
        except (ConnectionError, OSError) as exc:
            with contextlib.suppress(Exception):
                await self._fail(pair, f"error forwarding port {pair.port}: {exc}")
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            self._pairs.pop(request, None)
            self._by_stream.pop(pair.data_id, None)
            self._by_stream.pop(pair.error_id, None)

    async def _fail(self, pair: _Pair, message: str) -> None:
        log.info("port-forward: %s", message)
        await self._send(lambda e: e.data(pair.error_id, message.encode(), fin=True))
        await self._send(lambda e: e.data(pair.data_id, fin=True))

    async def _send(self, make: Callable[[Encoder], bytes]) -> None:
        # Header blocks share one compression stream: encode and send in one step, in order.
        async with self._lock:
            if not self.closed:
                await self._send_raw(make(self._encoder))


async def _deliver(pair: _Pair, item: bytes | None) -> None:
    """Queue data for the target; waits while the queue is full, unless the pair ends meanwhile."""
    if pair.task is None or pair.task.done():
        return
    put = asyncio.ensure_future(pair.inbound.put(item))
    await asyncio.wait({put, pair.task}, return_when=asyncio.FIRST_COMPLETED)
    if not put.done():
        put.cancel()


async def _upstream(inbound: asyncio.Queue[bytes | None], writer: asyncio.StreamWriter) -> None:
    while (chunk := await inbound.get()) is not None:
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def deny(websocket: WebSocket, code: int, reason: str, message: str) -> None:
    """Refuse the upgrade with a Kubernetes Status body (kubectl then tries SPDY, which is refused alike)."""
    await websocket.send_denial_response(JSONResponse(status_body(code, reason, message), code))


async def serve_websocket(websocket: WebSocket, target: Target) -> None:
    """Run the port-forward protocol over an (unaccepted) WebSocket until either side closes it."""
    if TUNNEL_PROTOCOL not in websocket.scope.get("subprotocols", []):
        offered = ", ".join(websocket.scope.get("subprotocols", [])) or "none"
        await deny(websocket, 400, "BadRequest", f"port-forward is served over the WebSocket subprotocol "
                                                 f"{TUNNEL_PROTOCOL} (kubectl 1.30 or later); offered: {offered}")
        return
    await websocket.accept(subprotocol=TUNNEL_PROTOCOL)

    async def send(data: bytes) -> None:
        await websocket.send_bytes(data)

    session = PortForwardSession(send, target)
    try:
        while not session.closed:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            data = message.get("bytes")
            if data is None:
                raise ProtocolError("a text message arrived where SPDY frames were expected")
            await session.feed(data)
    except ProtocolError as exc:
        log.info("port-forward: %s", exc)
        with contextlib.suppress(Exception):
            await session.protocol_error()
    except WebSocketDisconnect:
        pass
    finally:
        await session.close()
        with contextlib.suppress(Exception):
            await websocket.close()
