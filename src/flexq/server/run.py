"""Running the server: open the store under FLEXQ_HOME, serve until interrupted."""

from __future__ import annotations

import logging
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
from flexq.store import Store

__all__ = ["serve"]


def serve(home: Path, host: str, port: int, *, log_level: str = "warning",
          capacity: CapacityConfig | None = None, runtime: str = "ray") -> None:
    """Serve on ``host:port`` until SIGINT/SIGTERM; the store is closed on the way out."""
    home.mkdir(parents=True, exist_ok=True)
    store = Store(home / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook, node_pool_webhook])
    ray = RayRuntime(store, home) if runtime == "ray" else None
    controller = QueueController(service, RealClock(), capacity, ray)
    try:
        controller.start()
        app = create_app(service, f"{host}:{port}", ray)
        logging.getLogger("uvicorn.error").setLevel(log_level.upper())
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)
    finally:
        controller.stop()
        store.close()
