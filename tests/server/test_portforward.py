"""The port-forward protocol: SPDY/3.1 frames, and a session forwarding streams to a real local TCP server."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import struct
import subprocess
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from flexq.runtime.kuberay_view import head_port_map
from flexq.server.portforward import PortError, PortForwardSession
from flexq.server.spdy import (
    DICTIONARY,
    Data,
    Decoder,
    Encoder,
    Frame,
    Ping,
    ProtocolError,
    RstStream,
    SynReply,
    SynStream,
)
from tests import admin
from tests.conftest import Server, free_port


def test_the_dictionary_is_spdy3s() -> None:
    # SPDY/3 draft, section 2.6.10.1: 1,423 bytes, starting with the length-prefixed "options".
    assert len(DICTIONARY) == 1423
    assert DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")
    assert hashlib.sha256(DICTIONARY).hexdigest() == (
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02")


def test_header_blocks_share_one_compression_stream_and_survive_any_split() -> None:
    client, decoder = Encoder(), Decoder()
    wire = b"".join(client.syn_stream(i, {"streamType": kind, "port": "8265", "requestID": str(i // 4)})
                    for i, kind in ((1, "error"), (3, "data"), (5, "error"), (7, "data")))
    wire += client.data(3, b"x" * 70000, fin=True) + client.ping(9) + client.rst_stream(7, 5)
    frames = [f for i in range(len(wire)) for f in decoder.feed(wire[i:i + 1])]  # one byte at a time
    assert frames[:4] == [SynStream(1, {"streamtype": "error", "port": "8265", "requestid": "0"}, False),
                          SynStream(3, {"streamtype": "data", "port": "8265", "requestid": "0"}, False),
                          SynStream(5, {"streamtype": "error", "port": "8265", "requestid": "1"}, False),
                          SynStream(7, {"streamtype": "data", "port": "8265", "requestid": "1"}, False)]
    assert frames[4:] == [Data(3, b"x" * 70000, True), Ping(9), RstStream(7, 5)]


def test_a_header_block_is_a_zlib_stream_primed_with_the_dictionary() -> None:
    block = Encoder().syn_reply(1, {"a": "b"})[12:]
    raw = zlib.decompressobj(zdict=DICTIONARY).decompress(block)
    assert raw == struct.pack(">I", 1) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 1) + b"b"


def test_other_spdy_versions_are_refused() -> None:
    frame = bytearray(Encoder().ping(1))
    frame[1] = 2
    with pytest.raises(ProtocolError, match="SPDY version 2"):
        Decoder().feed(bytes(frame))


class Harness:
    """A session fed by a client-side encoder; what it sends is decoded into ``frames``."""

    def __init__(self, target: Callable[[int], int]) -> None:
        self.client = Encoder()
        self.decoder = Decoder()
        self.frames: list[Frame] = []

        async def send(data: bytes) -> None:
            self.frames.extend(self.decoder.feed(data))

        self.session = PortForwardSession(send, target)
        self.request = 0

    async def open(self, port: int = 8265) -> tuple[int, int]:
        error, data = 4 * self.request + 1, 4 * self.request + 3
        for stream, kind in ((error, "error"), (data, "data")):
            await self.session.feed(self.client.syn_stream(stream, {"streamType": kind, "port": str(port),
                                                                    "requestID": str(self.request)}))
        self.request += 1
        return error, data

    async def until(self, done: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not done():
            assert asyncio.get_running_loop().time() < deadline, f"timed out; frames: {self.frames}"
            await asyncio.sleep(0.01)

    def received(self, stream: int) -> bytes:
        return b"".join(f.data for f in self.frames if isinstance(f, Data) and f.stream_id == stream)

    def finished(self, stream: int) -> bool:
        return any(isinstance(f, Data) and f.stream_id == stream and f.fin for f in self.frames)


def _run(test: Callable[..., Awaitable[None]], *args: Any) -> None:
    asyncio.run(asyncio.wait_for(test(*args), 30))


async def _echo_server() -> tuple[asyncio.Server, int, list[bytes]]:
    seen: list[bytes] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read()  # until the client's FIN
        seen.append(data)
        writer.write(data.upper())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def test_a_forwarded_connection_copies_both_ways_and_closes_in_order() -> None:
    async def scenario() -> None:
        server, port, seen = await _echo_server()
        h = Harness(lambda p: port if p == 8265 else 0)
        error, data = await h.open()
        assert h.frames[:2] == [SynReply(error, {}), SynReply(data, {})], "each stream is answered"
        payload = b"hello " * 50000  # 300 kB: several frames each way
        await h.session.feed(h.client.data(data, payload[:100000]))
        await h.session.feed(h.client.data(data, payload[100000:], fin=True))
        await h.until(lambda: h.finished(error))
        assert seen == [payload], "the client's FIN half-closed the target connection"
        assert h.received(data) == payload.upper()
        assert h.received(error) == b"", "no error"
        fins = [f.stream_id for f in h.frames if isinstance(f, Data) and f.fin]
        assert fins == [data, error], "the data stream ends first, then the error stream"
        server.close()
        await h.session.close()

    _run(scenario)


def test_two_connections_at_once_and_a_ping() -> None:
    async def scenario() -> None:
        server, port, _ = await _echo_server()
        h = Harness(lambda _p: port)
        (e1, d1), (e2, d2) = await h.open(), await h.open()
        await h.session.feed(h.client.ping(7))
        await h.session.feed(h.client.data(d2, b"second", fin=True))
        await h.session.feed(h.client.data(d1, b"first", fin=True))
        await h.until(lambda: h.finished(e1) and h.finished(e2))
        assert (h.received(d1), h.received(d2)) == (b"FIRST", b"SECOND")
        assert Ping(7) in h.frames
        server.close()
        await h.session.close()

    _run(scenario)


def test_a_port_that_cannot_be_forwarded_is_reported_on_the_error_stream() -> None:
    async def scenario() -> None:
        def target(port: int) -> int:
            raise PortError(f"error forwarding port {port} to pod p: no such port")

        h = Harness(target)
        error, data = await h.open(1234)
        await h.until(lambda: h.finished(error) and h.finished(data))
        assert h.received(error) == b"error forwarding port 1234 to pod p: no such port"

        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            closed = sock.getsockname()[1]
        h2 = Harness(lambda _p: closed)
        error, data = await h2.open()
        await h2.until(lambda: h2.finished(error))
        assert f"connecting to 127.0.0.1:{closed}".encode() in h2.received(error)

    _run(scenario)


def test_a_reset_drops_the_target_connection_and_bad_streams_are_refused() -> None:
    async def scenario() -> None:
        dropped = asyncio.Event()

        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"banner")
            await reader.read()  # returns when the session closes its side
            dropped.set()
            writer.close()

        server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        h = Harness(lambda _p: port)
        error, data = await h.open()
        await h.until(lambda: h.received(data) == b"banner")
        await h.session.feed(h.client.rst_stream(data, 5))
        await asyncio.wait_for(dropped.wait(), 10)
        await h.until(lambda: h.finished(error))
        await h.session.feed(h.client.syn_stream(99, {"streamType": "bogus", "port": "80"}))
        assert h.frames[-1] == RstStream(99, 3)
        server.close()
        await h.session.close()

    _run(scenario)


def test_a_head_pods_ports_map_to_its_ray_clusters_by_kuberay_names() -> None:
    local = {"gcs-server": 40001, "dashboard": 40002, "client": 40003}
    guide = {"spec": {"containers": [{"ports": [{"containerPort": 6379, "name": "gcs-server"},
                                                {"containerPort": 8265, "name": "dashboard"},
                                                {"containerPort": 10001, "name": "client"}]}]}}
    assert head_port_map(guide, local) == {6379: 40001, 8265: 40002, 10001: 40003}
    moved = {"spec": {"containers": [{"ports": [{"containerPort": 9000, "name": "dashboard"},
                                                {"containerPort": 6379, "name": "redis"}]}]}}
    assert head_port_map(moved, local) == {9000: 40002, 8265: 40002, 10001: 40003}


def _running_pod(server: Server, name: str) -> None:
    pods = f"{server.url}/api/v1/namespaces/default/pods"
    made = admin.post(pods, json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {
        "ray.io/cluster": "job-raycluster", "ray.io/node-type": "head"}}, "spec": {"containers": [{"name": "c"}]}})
    assert made.status_code == 201, made.text
    assert admin.put(f"{pods}/{name}/status", json={**made.json(), "status": {"phase": "Running"}}).status_code == 200


@pytest.mark.kubectl
def test_real_kubectl_gets_the_reason_on_its_error_stream(server: Server, kubectl: Any) -> None:
    # A server that runs no jobs: kubectl's WebSocket is accepted, the connection's error stream says why.
    _running_pod(server, "head")
    local = free_port()
    config = server.home.parent / "kubeconfig"
    forward = subprocess.Popen(["kubectl", "port-forward", "pod/head", f"{local}:8265"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**server.env(), "KUBECONFIG": str(config), "HOME": str(server.home.parent)})
    try:
        deadline = time.monotonic() + 30
        while True:  # until kubectl listens; then one connection through it
            assert time.monotonic() < deadline and forward.poll() is None, forward.communicate()
            try:
                with socket.create_connection(("127.0.0.1", local), timeout=10) as sock:
                    sock.sendall(b"GET /api/version HTTP/1.0\r\n\r\n")
                    assert sock.recv(1024) == b"", "closed without an answer"
                break
            except ConnectionRefusedError:
                time.sleep(0.2)
        _, err = forward.communicate(timeout=30)  # kubectl ends the forward on an error from the server
    finally:
        if forward.poll() is None:
            forward.kill()
            forward.communicate()
    assert f"an error occurred forwarding {local} -> 8265: error forwarding port 8265 to pod head: this server " \
           "does not run jobs (--runtime none)" in err
    assert forward.returncode == 1


def test_an_upgrade_is_refused_with_a_status_when_the_pod_cannot_forward(server: Server) -> None:
    def upgrade(pod: str, protocol: str, method: str = "GET") -> tuple[int, dict[str, Any]]:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"{method} /api/v1/namespaces/default/pods/{pod}/portforward HTTP/1.1\r\n"
                         f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {server.token}\r\n"
                         "Connection: Upgrade\r\nUpgrade: websocket\r\n"
                         "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                         f"Sec-WebSocket-Protocol: {protocol}\r\nContent-Length: 0\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), json.loads(body[body.index(b"{"):body.rindex(b"}") + 1])

    code, status = upgrade("nope", "SPDY/3.1+portforward.k8s.io")
    assert (code, status["reason"], status["message"]) == (404, "NotFound", 'pods "nope" not found')
    pods = f"{server.url}/api/v1/namespaces/default/pods"
    admin.post(pods, json={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "idle"},
                           "spec": {"containers": [{"name": "c"}]}})
    code, status = upgrade("idle", "SPDY/3.1+portforward.k8s.io")
    assert code == 400 and "pod is not running" in status["message"]
    _running_pod(server, "head")
    code, status = upgrade("head", "v4.channel.k8s.io")
    assert code == 400 and "SPDY/3.1+portforward.k8s.io" in status["message"], "the protocol kubectl speaks"
    # kubectl's SPDY fallback (a POST with Upgrade: SPDY/3.1) is answered with the reason too.
    fallback = admin.post(f"{pods}/head/portforward", headers={"Upgrade": "SPDY/3.1", "Connection": "Upgrade"})
    assert fallback.status_code == 400 and "WebSocket" in fallback.json()["message"]
