"""Running the server: open the store under FLEXQ_HOME, serve until interrupted."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from pathlib import Path

import uvicorn

from flexq.capacity.config import CapacityConfig
from flexq.capacity.gke import node_pool_webhook
from flexq.clock import RealClock
from flexq.controller.queue import QueueController
from flexq.controller.runtime import RayRuntime
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.server.app import create_app
from flexq.server.tls import ensure_certificates
from flexq.store import Store

__all__ = ["serve"]


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signal handling to :func:`serve` (two of them run in one process)."""

    def install_signal_handlers(self) -> None:
        return


def serve(home: Path, host: str, port: int, *, log_level: str = "warning",
          capacity: CapacityConfig | None = None, runtime: str = "ray", tls_port: int | None = None) -> None:
    """Serve on ``host:port`` until SIGINT/SIGTERM; the store is closed on the way out."""
    home.mkdir(parents=True, exist_ok=True)
    store = Store(home / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook, node_pool_webhook])
    ray = RayRuntime(store, home) if runtime == "ray" else None
    controller = QueueController(service, RealClock(), capacity, ray)
    tls = ensure_certificates(home) if tls_port is not None else None
    endpoint = f"{host}:{tls_port}" if tls_port is not None else f"{host}:{port}"
    try:
        controller.start()
        app = create_app(service, endpoint, ray, tls.ca_pem() if tls is not None else b"", controller.observe)
        logging.getLogger("uvicorn.error").setLevel(log_level.upper())
        servers = [_Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                                          ws="wsproto"))]
        if tls is not None and tls_port is not None:
            servers.append(_Server(uvicorn.Config(app, host=host, port=tls_port, log_level=log_level,
                                                  access_log=False, ws="wsproto", ssl_certfile=str(tls.cert),
                                                  ssl_keyfile=str(tls.key))))
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve_all(servers))
    finally:
        controller.stop()
        store.close()


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (its transports write to sockets in C), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve_all(servers: list[_Server]) -> None:
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for server in servers:
            server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    await asyncio.gather(*(server.serve() for server in servers))
