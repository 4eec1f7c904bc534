"""An API worker: one of the processes that serve the server's ports in front of the owner.

``flexq server --workers N`` runs the store and the controllers in one process (the owner) and the ports in N
others, as the Kubernetes API server serves requests in front of etcd: each worker accepts connections on the
ports the owner bound (it inherits the sockets), checks the Host, authenticates and authorizes every request, and
serves the Kubernetes API's reads, lists (one page; a longer list is the owner's, which keeps it between pages) and
watches itself: reads from the owner's database file (:class:`~flexq.store.replica.ReplicaStore`), watches from the
changes the owner sends as it commits them (:mod:`flexq.server.change_feed`). Its writes are parsed,
validated, converted and defaulted here, then committed by the owner in one message each
(:mod:`flexq.store.foreign`); with PostgreSQL a worker reads and writes the database itself. What needs the
controllers or the jobs' processes (the dashboard, flexq's API, the GKE API, ``/metrics``, Kueue's visibility API,
pod logs, port-forwards) is passed to the owner as it came (:mod:`flexq.server.owner_proxy`).

The owner starts its workers with ``python -m flexq.server.worker`` and a :class:`WorkerSpec` in the environment,
starts another where one dies, and stops them when it stops; a worker ends at once when its owner dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import re
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from flexq.api import KueueConfig
from flexq.auth import TokenBook
from flexq.capacity import node_pool_webhook
from flexq.jobs import job_webhook_for
from flexq.objects import Lister, ListPages, ObjectService, Page, Unchanged
from flexq.server.authn import Authenticator, AuthMiddleware
from flexq.server.bodylimit import BodyLimit
from flexq.server.change_feed import FeedReader, changes_socket
from flexq.server.guard import RequestGuard
from flexq.server.hub import ChangeHub
from flexq.server.k8s import KubeApi, PagedElsewhere
from flexq.server.lane import VERBS
from flexq.server.offload import set_threads
from flexq.server.owner_link import OwnerLink, commit_socket, owner_socket
from flexq.server.owner_proxy import OwnerProxy
from flexq.server.serving import loop_factory, uvicorn_servers
from flexq.store import BaseStore, ReplicaStore, open_store

__all__ = ["ENV", "OWNER_EXIT", "WorkerSpec", "end_with_owner", "worker_app"]

ENV: Final = "FLEXQ_WORKER"
"""The environment variable that carries a worker's :class:`WorkerSpec` (JSON)."""

_OWNERS: Final = re.compile(
    r"^/api/v1/namespaces/[^/]+/(?:pods/[^/]+/(?:log|portforward|exec|attach)|services/[^/]+/proxy)(?:/|$)"
    r"|^/apis/visibility\.kueue\.x-k8s\.io(?:/|$)")
"""Paths of the Kubernetes API that the owner answers: what reads the controllers or the jobs' processes."""
_PR_SET_PDEATHSIG: Final = 1
OWNER_EXIT: Final = 1.0
"""Seconds a worker that lost its owner's sockets waits to see whether the owner is exiting (this process handed
to another parent) before it answers that the owner cannot be reached."""
WRITE_THREADS: Final = 16
"""Writes a worker prepares and sends at once, at the most: each waits for the owner's commit (not for this
interpreter), and the owner commits those that came meanwhile together."""


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker needs from its owner."""

    home: str
    database: str
    fds: list[int]
    """The listening sockets: plain HTTP, then HTTPS where there is one."""
    tls: tuple[str, str] | None
    """The certificate and key files for the HTTPS socket."""
    anonymous: bool
    names: list[str] | None
    frameworks: list[str]
    log_level: str
    follow: float
    owner: int
    """The owner's pid: a worker whose parent is another process stops."""
    postgres: str | None = None
    """The owner's PostgreSQL store, which a worker reads and writes itself (as another server would), where it
    has one; else the worker reads the owner's SQLite file (``database``) and the owner commits its writes."""

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, text: str) -> WorkerSpec:
        doc = json.loads(text)
        tls = doc.pop("tls")
        return cls(tls=tuple(tls) if tls else None, **doc)


class WorkerLane:
    """The Kubernetes API's reads and writes served here; everything else passed to the owner."""

    def __init__(self, kube: KubeApi, owner: OwnerProxy, hub: ChangeHub) -> None:
        self.kube = kube
        self.owner = owner
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        path: str = scope.get("path", "/")
        if scope["type"] != "http" or scope.get("method") not in VERBS or _OWNERS.match(path):
            await self.owner(scope, receive, send)
        elif path == "/api" or path.startswith("/api/"):
            await (await self.kube.core(Request(scope, receive), path[5:]))(scope, receive, send)
        elif path == "/apis" or path.startswith("/apis/"):
            await (await self.kube.groups(Request(scope, receive), path[6:]))(scope, receive, send)
        else:
            await self.owner(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.hub.bind(asyncio.get_running_loop())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.owner.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


class OwnerPages(ListPages):
    """An API worker's lists: one page served here, a longer list by the owner (it keeps the list between its
    pages, so that a client's next page, whichever worker takes it, continues the same list)."""

    def page(self, what: tuple[Any, ...], limit: int, token: str, listed: Lister, unchanged: Unchanged,
             counted: bool) -> Page:
        if token:
            raise PagedElsewhere(token)
        found = super().page(what, limit, token, listed, unchanged, counted)
        if found.continue_token:
            raise PagedElsewhere(found.continue_token)
        return found

    def _keep(self, key: tuple[Any, ...], items: list[dict[str, Any]]) -> None:
        return


def worker_app(service: ObjectService, owner: OwnerProxy, auth: Authenticator,
               names: list[str] | None) -> tuple[ASGIApp, ChangeHub]:
    """A worker's application: the same checks in front as the owner's (Host, body size, authentication), the
    Kubernetes API behind them, the owner behind that."""
    hub = ChangeHub()
    service.store.subscribe(hub.committed)
    kube = KubeApi(service, hub)
    kube.pages, kube.elsewhere = OwnerPages(), owner
    app: ASGIApp = WorkerLane(kube, owner, hub)
    app = BodyLimit(AuthMiddleware(app, auth))
    if names is not None:
        app = RequestGuard(app, names)
    return app, hub


def _die_with_owner() -> None:
    """End at once when the owner dies (Linux kills the worker; elsewhere the owner's pid is checked each second).
    Killed, not stopped: the kernel resets the worker's connections, so that a client whose write was under way
    sees the connection lost, as when a server without workers is killed (the write may have been committed: it
    tries again), never an answer that says it was not."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def end_with_owner(owner: int, wait: float = OWNER_EXIT) -> None:
    """Where the owner's sockets failed under a request: if the owner is exiting (this process is handed to another
    parent within ``wait`` seconds), end now, by SIGKILL, as its death ends this worker anyway. The kernel closes an
    exiting owner's sockets before it signals its workers, and a worker answering in between would tell its client
    that a write whose commit it cannot know failed (``503``); ended, its client sees the connection lost, as when
    a server without workers is killed, and tries again. An owner that lives gets the answer it earned."""
    deadline = time.monotonic() + wait
    while os.getppid() == owner:
        if time.monotonic() >= deadline:
            return
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)


async def _watch_owner(owner: int, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if os.getppid() != owner:
            stop.set()
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


def _store(spec: WorkerSpec, home: Path) -> tuple[BaseStore, FeedReader | None]:
    """The owner's PostgreSQL database (written directly: it keeps writers in order itself), or a replica of its
    SQLite file whose writes the owner commits and whose changes it sends (:mod:`flexq.server.change_feed`)."""
    if spec.postgres is not None:
        return open_store(spec.postgres, home), None
    link = OwnerLink(commit_socket(home), lambda: end_with_owner(spec.owner))
    replica = ReplicaStore(Path(spec.database), link.commit, follow=0.0)  # fed instead
    return replica, FeedReader(changes_socket(home), replica, spec.follow)


def run(spec: WorkerSpec) -> None:
    _die_with_owner()
    set_threads(WRITE_THREADS)
    if os.getppid() != spec.owner:
        return
    home = Path(spec.home)
    sockets = [socket.socket(fileno=fd) for fd in spec.fds]
    store, feed = _store(spec, home)
    try:
        kueue = KueueConfig(frameworks=frozenset(spec.frameworks))
        service = ObjectService(store, hooks=[job_webhook_for(kueue.manages), node_pool_webhook])
        owner = OwnerProxy(owner_socket(home), lambda: end_with_owner(spec.owner))
        app, hub = worker_app(service, owner, Authenticator(TokenBook(home), spec.anonymous), spec.names)
        logging.getLogger("uvicorn.error").setLevel(spec.log_level.upper())
        servers = uvicorn_servers(app, sockets, spec.tls, spec.log_level)

        async def serve_all() -> None:
            loop = asyncio.get_running_loop()
            stop = asyncio.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            loop.add_signal_handler(signal.SIGHUP, lambda: None)  # the owner's to act on
            watcher = asyncio.ensure_future(_watch_owner(spec.owner, stop))
            serving = asyncio.gather(*(server.serve(sockets=[sock]) for server, sock in servers))
            await stop.wait()
            hub.close()
            for server, _ in servers:
                server.should_exit = True
            await serving
            watcher.cancel()

        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(serve_all())
    finally:
        if feed is not None:
            feed.close()
        store.close()
        for sock in sockets:
            sock.close()


def main() -> None:
    text = os.environ.get(ENV)
    if not text:
        print(f"flexq.server.worker: started by flexq server --workers (no {ENV})", file=sys.stderr)
        sys.exit(2)
    run(WorkerSpec.from_env(text))


if __name__ == "__main__":
    main()
