"""The uvicorn servers a process runs on its sockets, and its event loop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

from flexq.server.connection import bounded_protocol

__all__ = ["Server", "loop_factory", "uvicorn_servers"]

_CLOSE_STREAMS = 3
"""Seconds a stopping server waits for open streams (the dashboard's change events, followed logs, watches) before
it closes them: they would otherwise keep it running as long as a browser tab stays open."""
_KEEP_IDLE = 90
"""Seconds an idle keep-alive connection stays open, as the Kubernetes API server keeps it (the keep-alive time of
Go's default transport, which client-go uses): a client that reuses a pooled connection after a pause finds it open,
where uvicorn's five seconds would close it under the client's next request."""

class Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its process (two of them run in one process)."""

    def install_signal_handlers(self) -> None:
        return


def uvicorn_servers(app: ASGIApp, sockets: list[socket.socket], tls: tuple[str, str] | None,
                    log_level: str) -> list[tuple[Server, socket.socket]]:
    """A uvicorn server for each socket: plain HTTP on the first, HTTPS (``tls``: certificate and key files) on the
    second where there is one."""
    def server(**extra: str) -> Server:
        # The protocol bounds what a client may hold: slow headers and bodies, responses it does not read.
        return Server(uvicorn.Config(app, log_level=log_level, access_log=False, ws="wsproto",
                                      http=bounded_protocol(), timeout_graceful_shutdown=_CLOSE_STREAMS,
                                      timeout_keep_alive=_KEEP_IDLE, **extra))  # type: ignore[arg-type]

    servers = [(server(), sockets[0])]
    if tls is not None:
        servers.append((server(ssl_certfile=tls[0], ssl_keyfile=tls[1]), sockets[1]))
    return servers


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (its transports write to sockets in C), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
