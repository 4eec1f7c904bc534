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
from pathlib import Path
from typing import Final

import aiohttp
from starlette.types import Receive, Scope, Send

__all__ = ["OwnerProxy"]

_HOP: Final = frozenset({b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"te", b"trailer",
                         b"proxy-connection", b"content-length"})
"""Headers that belong to one connection, not to the request or answer passed on."""
_WS_OWN: Final = frozenset({"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
                            "sec-websocket-protocol", "connection", "upgrade", "host", "content-length"})


class OwnerProxy:
    """An ASGI application that answers every request with the owner's answer to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
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
            async with self._client().request(scope["method"], _target(scope), headers=headers,
                                              data=body or None, allow_redirects=False) as answer:
                await send({"type": "http.response.start", "status": answer.status,
                            "headers": [(k, v) for k, v in answer.raw_headers if k.lower() not in _HOP]})
                async for chunk in answer.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except aiohttp.ClientConnectionError as exc:
            body = f'{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server\'s owner process ' \
                   f'cannot be reached: {_plain(str(exc))}","reason":"ServiceUnavailable","code":503}}'.encode()
            with contextlib.suppress(RuntimeError, OSError):  # the answer had begun: the connection just ends
                await send({"type": "http.response.start", "status": 503,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": body})

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
                   if k.decode("latin-1").lower() not in _WS_OWN}
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        try:
            upstream = await self._client().ws_connect(_target(scope), protocols=tuple(scope.get("subprotocols", ())),
                                                       headers=headers, autoping=False, max_msg_size=0)
        except aiohttp.WSServerHandshakeError as exc:
            await send({"type": "websocket.http.response.start", "status": exc.status, "headers": []}
                       if "websocket.http.response" in scope.get("extensions", {}) else
                       {"type": "websocket.close", "code": 1008})
            if "websocket.http.response" in scope.get("extensions", {}):
                await send({"type": "websocket.http.response.body", "body": exc.message.encode()})
            return
        except aiohttp.ClientConnectionError:
            await send({"type": "websocket.close", "code": 1011})
            return
        async with upstream:
            await send({"type": "websocket.accept", "subprotocol": upstream.protocol})
            await _bridge(upstream, receive, send)


async def _bridge(upstream: aiohttp.ClientWebSocketResponse, receive: Receive, send: Send) -> None:
    async def down() -> None:
        async for message in upstream:
            if message.type is aiohttp.WSMsgType.BINARY:
                await send({"type": "websocket.send", "bytes": message.data})
            elif message.type is aiohttp.WSMsgType.TEXT:
                await send({"type": "websocket.send", "text": message.data})
        with contextlib.suppress(RuntimeError, OSError):
            await send({"type": "websocket.close", "code": upstream.close_code or 1000})

    async def up() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                await upstream.close(code=int(message.get("code", 1000)))
                return
            if message.get("bytes") is not None:
                await upstream.send_bytes(message["bytes"])
            elif message.get("text") is not None:
                await upstream.send_str(message["text"])

    tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
