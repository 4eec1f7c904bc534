"""An API worker's requests for the owner: passed on over the owner's socket as they came, answered as it answers.

What a worker does not serve itself (the dashboard, flexq's API, the GKE API, ``/metrics``, Kueue's visibility API,
pod logs and port-forwards: what needs the controllers or the jobs' processes) goes to the owner's whole application
on its Unix socket (:func:`~flexq.server.owner_link.owner_socket`): the method, path, query, headers (the caller's
token with them: the owner checks it again) and body as received, the answer streamed back as it comes (followed
logs, the dashboard's change events). A WebSocket (kubectl's port-forward) is opened to the owner with the same
subprotocols and headers, and its messages are passed both ways until either side closes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiohttp
from starlette.types import Receive, Scope, Send
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    TextMessage,
)
from wsproto.events import Request as WsRequest
from wsproto.utilities import LocalProtocolError

__all__ = ["OwnerProxy"]

_HOP: Final = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"te", b"trailer",
                         b"proxy-connection", b"content-length"})
"""Headers that belong to one connection, not to the request or answer passed on."""
_OWN_HEADERS: Final = ("Content-Type", "User-Agent", "Accept", "Accept-Encoding")
"""Headers the HTTP client would add of its own: only the caller's go on."""
_ANSWERED: Final = _HOP | {b"date", b"server"}
"""Headers of the owner's answer that this process's server writes itself."""
_WS_OWN: Final = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                            "sec-websocket-protocol", "connection", "upgrade", "content-length", "host"})
"""Headers of an upgrade that belong to its own handshake (the one to the owner makes its own)."""


class OwnerProxy:
    """An ASGI application that answers every request with the owner's answer to it. ``lost`` is called (in a
    thread) when the owner cannot be reached, before the request is answered: a worker whose owner is gone ends
    there, and its client sees the connection lost (see :func:`flexq.server.worker.end_with_owner`)."""

    def __init__(self, path: Path, lost: Callable[[], None] = lambda: None) -> None:
        self.path = path
        self.lost = lost
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.path), limit=0), auto_decompress=False,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k.lower() not in _HOP]
        body = await _body(receive)
        try:
            async with self._client().request(scope["method"], _target(scope), headers=headers, data=body or None,
                                              allow_redirects=False, skip_auto_headers=_OWN_HEADERS) as answer:
                await send({"type": "http.response.start", "status": answer.status,
                            "headers": [(k, v) for k, v in answer.raw_headers if k.lower() not in _ANSWERED]})
                async for chunk in answer.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except aiohttp.ClientConnectionError as exc:
            await asyncio.to_thread(self.lost)
            body = f'{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server\'s owner process ' \
                   f'cannot be reached: {_plain(str(exc))}","reason":"ServiceUnavailable","code":503}}'.encode()
            with contextlib.suppress(RuntimeError, OSError):  # the answer had begun: the connection just ends
                await send({"type": "http.response.start", "status": 503,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.path))
        except OSError:
            await send({"type": "websocket.close", "code": 1011})
            return
        try:
            link = _Upstream(reader, writer)
            answer = await link.open(scope)
            if isinstance(answer, Refusal):
                await _refuse(scope, send, answer)
                return
            await send({"type": "websocket.accept", "subprotocol": answer})
            await link.bridge(receive, send)
        finally:
            writer.close()
            with contextlib.suppress(OSError, ConnectionError):
                await writer.wait_closed()


@dataclass
class Refusal:
    """The owner's answer to an upgrade it refused: passed on to the caller whole."""

    status: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""


class _Upstream:
    """A WebSocket to the owner over its socket (wsproto's client side), and its messages passed to and fro."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.ws = WSConnection(ConnectionType.CLIENT)

    async def open(self, scope: Scope) -> str | Refusal | None:
        """The subprotocol the owner accepted, or its refusal."""
        headers = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() not in _WS_OWN]
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"host"), "owner")
        target = _target(scope).removeprefix("http://owner")
        self.writer.write(self.ws.send(WsRequest(host=host, target=target, extra_headers=headers,
                                                 subprotocols=list(scope.get("subprotocols", ())))))
        refusal: Refusal | None = None
        while chunk := await self.reader.read(65536):
            self.ws.receive_data(chunk)
            for event in self.ws.events():
                if isinstance(event, AcceptConnection):
                    return event.subprotocol
                if isinstance(event, RejectConnection):
                    kept = [(k, v) for k, v in event.headers if k.lower() not in _ANSWERED]
                    refusal = Refusal(event.status_code, kept)
                    if not event.has_body:
                        return refusal
                elif isinstance(event, RejectData) and refusal is not None:
                    refusal.body += event.data
                    if event.body_finished:
                        return refusal
        return refusal or Refusal(502, [], b"the owner closed the connection")

    async def bridge(self, receive: Receive, send: Send) -> None:
        tasks = [asyncio.ensure_future(self._down(send)), asyncio.ensure_future(self._up(receive))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _down(self, send: Send) -> None:
        parts: list[bytes | bytearray | str] = []
        code = 1000
        while chunk := await self.reader.read(65536):
            self.ws.receive_data(chunk)
            for event in self.ws.events():
                if isinstance(event, BytesMessage | TextMessage):
                    parts.append(event.data)
                    if event.message_finished:
                        await send(_message(parts))
                        parts = []
                elif isinstance(event, Ping):
                    self.writer.write(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    code = event.code
                    with contextlib.suppress(LocalProtocolError):
                        self.writer.write(self.ws.send(event.response()))
                    break
        with contextlib.suppress(RuntimeError, OSError):
            await send({"type": "websocket.close", "code": code})

    async def _up(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                with contextlib.suppress(LocalProtocolError):
                    self.writer.write(self.ws.send(CloseConnection(code=int(message.get("code", 1000)))))
                return
            if message.get("bytes") is not None:
                self.writer.write(self.ws.send(BytesMessage(data=message["bytes"])))
            elif message.get("text") is not None:
                self.writer.write(self.ws.send(TextMessage(data=message["text"])))
            await self.writer.drain()


def _message(parts: list[bytes | bytearray | str]) -> dict[str, object]:
    """One message of the owner's, from its frames, as the caller's WebSocket sends it."""
    if parts and isinstance(parts[0], str):
        return {"type": "websocket.send", "text": "".join(p for p in parts if isinstance(p, str))}
    return {"type": "websocket.send", "bytes": b"".join(bytes(p) for p in parts if not isinstance(p, str))}


async def _refuse(scope: Scope, send: Send, refusal: Refusal) -> None:
    """The owner's refusal of an upgrade, as the owner gave it (status, headers, body) where the server can answer
    a WebSocket with a response; else the WebSocket closed."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "websocket.http.response.start", "status": refusal.status, "headers": refusal.headers})
    await send({"type": "websocket.http.response.body", "body": refusal.body})


def _target(scope: Scope) -> str:
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string", b"")
    return "http://owner" + raw.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")


async def _body(receive: Receive) -> bytes:
    """The request's body (bounded by :mod:`flexq.server.bodylimit` in front of the proxy)."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)
        body += message.get("body", b"")
        if not message.get("more_body"):
            return bytes(body)


def _plain(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "'")
