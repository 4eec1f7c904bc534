"""`flexq port-forward`'s client: the ports it parses, and the protocol against the server's own side of it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, WebSocket

from flexq.cli.forward import PortPair, forward, parse_ports
from flexq.client import CliError
from flexq.server.portforward import PortError, deny, serve_websocket
from tests.conftest import free_port


@pytest.mark.parametrize(("specs", "pairs"), [
    (["8265"], [PortPair(8265, 8265)]),
    (["8266:8265", ":6379"], [PortPair(8266, 8265), PortPair(0, 6379)]),
])
def test_ports_take_kubectls_forms(specs: list[str], pairs: list[PortPair]) -> None:
    assert parse_ports(specs) == pairs


@pytest.mark.parametrize("spec", ["http", "8265:", "70000", "1:0", "a:8265"])
def test_a_bad_port_is_named(spec: str) -> None:
    with pytest.raises(CliError, match=f"'{spec}': a port is a number from 1 to 65535"):
        parse_ports([spec])


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def _server(echo_port: int) -> AsyncIterator[str]:
    """The server's side of the protocol, for pod ``head`` whose port 8265 is the local echo server."""
    app = FastAPI()

    def target(port: int) -> int:
        if port != 8265:
            raise PortError(f"pod head does not serve port {port}")
        return echo_port

    @app.websocket("/api/v1/namespaces/{namespace}/pods/{name}/portforward")
    async def endpoint(websocket: WebSocket, namespace: str, name: str) -> None:
        if name != "head":
            await deny(websocket, 404, "NotFound", f'pods "{name}" not found')
            return
        await serve_websocket(websocket, target)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="wsproto",
                                           lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _roundtrip(port: int, payload: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    await writer.drain()
    writer.write_eof()
    received = b""
    while chunk := await reader.read(65536):
        received += chunk
    writer.close()
    return received


def test_connections_are_forwarded_both_ways_and_a_refused_port_is_reported() -> None:
    out: list[str] = []
    err: list[str] = []

    async def scenario() -> None:
        echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
        async with _server(int(echo.sockets[0].getsockname()[1])) as url:
            bound: asyncio.Future[list[PortPair]] = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(forward(url, "default", "head", [PortPair(0, 8265), PortPair(0, 6379)],
                                               out=out.append, err=err.append, ready=bound.set_result))
            dashboard, gcs = await asyncio.wait_for(bound, 10)
            big = bytes(range(256)) * 4096  # 1 MiB: many data frames each way
            answers = await asyncio.wait_for(asyncio.gather(
                _roundtrip(dashboard.local, big), _roundtrip(dashboard.local, b"second")), 30)
            assert answers == [big, b"second"]
            assert await asyncio.wait_for(_roundtrip(gcs.local, b"ping"), 10) == b"", "closed: nothing to reach"
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        echo.close()

    asyncio.run(scenario())
    assert out[0].startswith("Forwarding from 127.0.0.1:") and out[0].endswith(" -> 8265")
    assert out.count("Handling connection for 8265") == 2 and out.count("Handling connection for 6379") == 1
    assert err == ["error: an error occurred forwarding 6379: pod head does not serve port 6379"]


def test_a_refused_upgrade_gives_the_servers_reason() -> None:
    async def scenario() -> Any:
        async with _server(1) as url:
            with pytest.raises(CliError) as caught:
                await forward(url, "default", "nobody", [PortPair(0, 8265)], out=print, err=print)
            return caught.value.message

    assert asyncio.run(scenario()) == 'error: the server refused the port-forward (404): pods "nobody" not found'


def test_a_job_with_no_head_service_is_named(flexq: Any, server: Any) -> None:
    result = flexq("port-forward", "rayjob/missing", "8265")
    assert result.code == 1
    assert result.err.strip() == 'Error from server (NotFound): services "missing-head-svc" not found'
    result = flexq("port-forward", "deployment/x", "8265")
    assert result.code == 1
    assert "port-forward takes pod/NAME, service/NAME, rayjob/NAME or raycluster/NAME" in result.err
    result = flexq("port-forward", "raycluster/missing", "8265")
    assert result.err.strip() == 'Error from server (NotFound): services "missing-head-svc" not found'
