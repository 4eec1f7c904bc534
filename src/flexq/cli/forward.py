"""``flexq port-forward``: local ports to a pod's ports through the flexq server, as ``kubectl port-forward``.

The client speaks what the server serves kubectl (:mod:`flexq.server.portforward`): SPDY/3.1 inside a WebSocket
with the subprotocol ``SPDY/3.1+portforward.k8s.io``. Each connection made to a local port opens a pair of
streams (``error``, then ``data``) with the pod's port and a request id of its own; bytes are copied both ways;
a message on the error stream (a port the pod does not serve, a cluster that stopped) is printed and ends that
connection. The WebSocket itself is a small client on ``wsproto`` over asyncio streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Final
from urllib.parse import urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)

from flexq.client import Client, CliError, ServerError, route
from flexq.server import MAX_LENGTH, TUNNEL_PROTOCOL, Data, Decoder, Encoder, GoAway, RstStream
from flexq.server import Ping as SpdyPing

__all__ = ["PortPair", "forward", "parse_ports", "resolve_pod"]

_CHUNK: Final = min(32 * 1024, MAX_LENGTH)


@dataclass(frozen=True, slots=True)
class PortPair:
    local: int
    """0: any free port."""
    remote: int


def parse_ports(specs: list[str]) -> list[PortPair]:
    """kubectl's forms: ``8265`` (the same port here), ``8266:8265``, ``:8265`` (any free local port)."""
    if not specs:
        raise CliError("error: at least one port is required: [LOCAL_PORT:]REMOTE_PORT")
    pairs = []
    for spec in specs:
        local_text, sep, remote_text = spec.rpartition(":")
        if not sep:
            local_text = remote_text
        local = 0 if sep and local_text == "" else _port(local_text, spec, allow_zero=True)
        pairs.append(PortPair(local, _port(remote_text, spec, allow_zero=False)))
    return pairs


def _port(text: str, spec: str, *, allow_zero: bool) -> int:
    if not text.isdigit() or not (0 if allow_zero else 1) <= int(text) < 65536:
        raise CliError(f"error: {spec!r}: a port is a number from 1 to 65535 ([LOCAL_PORT:]REMOTE_PORT)")
    return int(text)


def resolve_pod(client: Client, target: str, namespace: str) -> str:
    """The pod ``target`` names: ``pod/NAME`` (or ``NAME``), ``service/NAME`` (a running pod it selects), or
    ``rayjob/NAME`` or ``raycluster/NAME`` (its head pod, as ``service/NAME-head-svc``)."""
    kind, sep, name = target.partition("/")
    if not sep:
        kind, name = "pod", target
    kind = kind.lower()
    if not name:
        raise CliError(f"error: {target!r}: expected TYPE/NAME")
    if kind in ("pod", "pods", "po"):
        return name
    if kind in ("rayjob", "rayjobs", "raycluster", "rayclusters"):
        kind, name = "service", f"{name}-head-svc"
    if kind not in ("service", "services", "svc"):
        raise CliError(f"error: {target!r}: port-forward takes pod/NAME, service/NAME, rayjob/NAME or "
                       "raycluster/NAME")
    service = client.request("GET", f"/api/v1/namespaces/{namespace}/services/{name}", ok_missing=True)
    if service is None:
        raise ServerError(404, "NotFound", f'services "{name}" not found')
    selector = (service.get("spec") or {}).get("selector") or {}
    pods = client.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                          params={"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))})
    items = pods.get("items") or []
    running = [p for p in items if (p.get("status") or {}).get("phase") == "Running"]
    if not running:
        phase = (items[0].get("status") or {}).get("phase", "Unknown") if items else "no pod"
        raise CliError(f"error: unable to forward port because pod is not running. Current status={phase}")
    return str(running[0]["metadata"]["name"])


class _WebSocket:
    """A WebSocket client connection on ``wsproto``: binary messages in and out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._ws = WSConnection(ConnectionType.CLIENT)
        self._pending: list[Event] = []

    @classmethod
    async def connect(cls, server: str, path: str, subprotocol: str) -> _WebSocket:
        way = route(server)
        url = urlsplit(way.url)
        secure = url.scheme == "https"
        context = way.verify if isinstance(way.verify, ssl.SSLContext) else ssl.create_default_context()
        try:
            if way.socket is not None:  # the server of FLEXQ_HOME, through its socket
                reader, writer = await asyncio.open_unix_connection(way.socket)
            else:
                reader, writer = await asyncio.open_connection(url.hostname or "127.0.0.1",
                                                               url.port or (443 if secure else 80),
                                                               ssl=context if secure else None)
        except OSError as exc:
            raise CliError(f"cannot reach the flexq server at {server}: {exc.strerror or exc}") from None
        sock = cls(reader, writer)
        extra = [(k.lower().encode(), v.encode()) for k, v in way.headers.items()]
        sock._write(sock._ws.send(Request(host=url.netloc, target=path, subprotocols=[subprotocol],
                                          extra_headers=extra)))
        body = b""
        status = 0
        while True:
            event = await sock._event()
            if isinstance(event, AcceptConnection):
                return sock
            if isinstance(event, RejectConnection):
                status = event.status_code
                if not event.has_body:
                    break
            elif isinstance(event, RejectData):
                body += event.data
                if event.body_finished:
                    break
            elif event is None:
                break
        writer.close()
        raise CliError(_rejection(status, body))

    async def send(self, data: bytes) -> None:
        self._write(self._ws.send(BytesMessage(data=data)))
        await self._writer.drain()

    async def receive(self) -> bytes | None:
        """The next binary message's bytes (a part of one, if it came in parts); None once closed."""
        while True:
            event = await self._event()
            if event is None or isinstance(event, CloseConnection):
                return None
            if isinstance(event, BytesMessage):
                return bytes(event.data)
            if isinstance(event, Ping):
                self._write(self._ws.send(event.response()))
            elif isinstance(event, TextMessage):
                raise CliError("error: the server sent text where port-forward frames were expected")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._writer.close()

    async def _event(self) -> Event | None:
        while not self._pending:
            chunk = await self._reader.read(65536)
            self._ws.receive_data(chunk or None)
            self._pending.extend(self._ws.events())
            if not chunk and not self._pending:
                return None
        return self._pending.pop(0)

    def _write(self, data: bytes) -> None:
        self._writer.write(data)


def _rejection(status: int, body: bytes) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    message = str(parsed.get("message", "")) if isinstance(parsed, dict) else body.decode(errors="replace").strip()
    return f"error: the server refused the port-forward ({status}): {message or 'no reason given'}"


@dataclass
class _Connection:
    request_id: int
    remote: int
    inbound: asyncio.Queue[bytes | None] = field(default_factory=lambda: asyncio.Queue(64))
    error: bytearray = field(default_factory=bytearray)


class _Forwarder:
    def __init__(self, socket: _WebSocket, out: Callable[[str], None], err: Callable[[str], None]) -> None:
        self._socket = socket
        self._out, self._err = out, err
        self._encoder = Encoder()
        self._decoder = Decoder()
        self._lock = asyncio.Lock()
        self._next_stream = 1
        self._next_request = 0
        self._by_stream: dict[int, tuple[_Connection, str]] = {}

    async def serve(self, pairs: list[PortPair], address: str, ready: Callable[[list[PortPair]], None]) -> None:
        servers = []
        bound: list[PortPair] = []
        try:
            for pair in pairs:
                try:
                    server = await asyncio.start_server(partial(self._connection, remote=pair.remote), address,
                                                        pair.local)
                except OSError as exc:
                    raise CliError(f"error: unable to listen on port {pair.local}: {exc.strerror or exc}") from None
                servers.append(server)
                local = int(server.sockets[0].getsockname()[1])
                bound.append(PortPair(local, pair.remote))
                self._out(f"Forwarding from {address}:{local} -> {pair.remote}")
            ready(bound)
            await self._read()
        finally:
            for server in servers:
                server.close()
            self._socket.close()

    async def _read(self) -> None:
        while True:
            message = await self._socket.receive()
            if message is None:
                self._err("error: lost connection to the flexq server")
                return
            for frame in self._decoder.feed(message):
                if isinstance(frame, Data):
                    entry = self._by_stream.get(frame.stream_id)
                    if entry is None:
                        continue
                    conn, kind = entry
                    if kind == "error":
                        conn.error += frame.data
                        if frame.fin and conn.error:
                            self._err(f"error: an error occurred forwarding {conn.remote}: "
                                      f"{conn.error.decode(errors='replace')}")
                            await conn.inbound.put(None)
                    else:
                        if frame.data:
                            await conn.inbound.put(frame.data)
                        if frame.fin:
                            await conn.inbound.put(None)
                elif isinstance(frame, RstStream):
                    entry = self._by_stream.get(frame.stream_id)
                    if entry is not None:
                        await entry[0].inbound.put(None)
                elif isinstance(frame, SpdyPing):
                    await self._send(self._encoder.ping(frame.id))
                elif isinstance(frame, GoAway):
                    self._err("error: the flexq server ended the port-forward")
                    return

    async def _send(self, data: bytes) -> None:
        async with self._lock:
            await self._socket.send(data)

    async def _open(self, conn: _Connection) -> tuple[int, int]:
        async with self._lock:  # stream ids and the header compression stream go in the order sent
            error_id, data_id = self._next_stream, self._next_stream + 2
            self._next_stream += 4
            headers = {"port": str(conn.remote), "requestID": str(conn.request_id)}
            self._by_stream[error_id] = (conn, "error")
            self._by_stream[data_id] = (conn, "data")
            await self._socket.send(self._encoder.syn_stream(error_id, {"streamType": "error", **headers}))
            await self._socket.send(self._encoder.syn_stream(data_id, {"streamType": "data", **headers}))
        return error_id, data_id

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, remote: int) -> None:
        self._out(f"Handling connection for {remote}")
        conn = _Connection(self._next_request, remote)
        self._next_request += 1
        error_id, data_id = await self._open(conn)
        upstream = asyncio.create_task(self._upstream(reader, data_id))
        try:
            while (chunk := await conn.inbound.get()) is not None:
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            await self._send(self._encoder.rst_stream(data_id, 5))  # CANCEL: the local side went away
        finally:
            upstream.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await upstream
            for stream in (error_id, data_id):
                self._by_stream.pop(stream, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _upstream(self, reader: asyncio.StreamReader, data_id: int) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while chunk := await reader.read(_CHUNK):
                await self._send(self._encoder.data(data_id, chunk))
        await self._send(self._encoder.data(data_id, fin=True))


async def forward(server: str, namespace: str, pod: str, pairs: list[PortPair], address: str = "127.0.0.1", *,
                  out: Callable[[str], None], err: Callable[[str], None],
                  ready: Callable[[list[PortPair]], None] = lambda _bound: None) -> None:
    """Forward ``pairs`` until the server closes the connection (or the task is cancelled)."""
    ports = "&".join(f"ports={p.remote}" for p in pairs)
    socket = await _WebSocket.connect(server, f"/api/v1/namespaces/{namespace}/pods/{pod}/portforward?{ports}",
                                      TUNNEL_PROTOCOL)
    await _Forwarder(socket, out, err).serve(pairs, address, ready)


def run(server: str, namespace: str, pod: str, pairs: list[PortPair], address: str,
        out: Callable[[str], None], err: Callable[[str], None]) -> None:
    """:func:`forward` from synchronous code (the CLI), until interrupted."""
    asyncio.run(forward(server, namespace, pod, pairs, address, out=out, err=err))
