"""Running the server: open the store under FLEXQ_HOME, bind its listeners, serve until interrupted."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI

from flexq.api import DEFAULT_KUEUE_CONFIG, KueueConfig
from flexq.auth import TokenBook
from flexq.capacity import CapacityConfig, node_pool_webhook
from flexq.clock import RealClock
from flexq.controller import DEFAULT_EVENT_TTL, EventExpiry, QueueController, RayRuntime
from flexq.errors import FlexqError
from flexq.jobs import job_webhook_for
from flexq.objects import ObjectService
from flexq.runtime import JobUser, reap_all
from flexq.runtime import configure as configure_job_user
from flexq.server.app import create_app
from flexq.server.authn import Authenticator
from flexq.server.heap import HeapPolicy
from flexq.server.leader import Leadership, leader_router
from flexq.server.listen import ListenError, ListenPlan
from flexq.server.local_api import LocalApi
from flexq.server.serving import Server, loop_factory
from flexq.server.tls import ensure_certificates
from flexq.server.worker import WorkerSpec
from flexq.server.worker_record import LEFTOVER_WAIT, await_leftovers
from flexq.server.workers import Front
from flexq.store import BaseStore, StoreOptionError, is_postgres, open_lease, open_store, shown, sqlite_path

log = logging.getLogger("flexq.server")

__all__ = ["CapacityFile", "ListenError", "StoreOptionError", "serve"]

FOLLOW_EVERY = 0.005
"""Seconds between two looks at a shared SQLite file for the other servers' commits."""


def _bind(host: str, port: int, option: str, patience: float = 0.0) -> socket.socket:
    """A socket bound to ``host:port``; one in use is tried again for ``patience`` seconds (the last server of this
    home was killed: what it left may still hold the port a moment)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + patience
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            raise ListenError(f"cannot listen on {host}:{port} ({option}): {exc.strerror or exc}") from None


def _disk_warning(store: BaseStore) -> str:
    """The banner's line where the store's disk is full (writes refused: a restart on a full disk says so) or nearly
    full; "" where it has room."""
    space = store.refusing() or store.low_space()
    return f"\n  WARNING: {space}" if space is not None else ""


def _writable(home: Path) -> None:
    """``home`` found writable (where it is not there yet: the folder it would be made in), without making it:
    :class:`StoreOptionError` naming it where not (a read-only file system, another user's folder), before anything
    is written there."""
    try:
        if home.exists():
            tempfile.TemporaryFile(dir=home).close()
            return
        above = next(p for p in home.absolute().parents if p.exists())
        if os.statvfs(above).f_flag & os.ST_RDONLY:
            raise OSError(errno.EROFS, f"{above} is on a read-only file system")
        if not os.access(above, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, f"{above} cannot be written")
    except OSError as exc:
        raise StoreOptionError(f"FLEXQ_HOME {home} cannot be written ({exc.strerror or exc}): the server keeps its "
                               "store, tokens and logs there; choose another with --home") from None


def _settle(home: Path, runtime: str, run_as: str | None) -> JobUser | None:
    """What the server writes is its user's alone from now on (umask 077), in a ``home`` it can write
    (:func:`_writable`); who its jobs run as."""
    _writable(home)
    os.umask(0o077)
    return configure_job_user(run_as, home) if runtime == "ray" else None


def _secure(home: Path, searchable: bool) -> None:
    """``FLEXQ_HOME`` made, and this user's alone (0700; 0711 where jobs run as another user, who must reach their
    working directories under ``runtime/`` and nothing else), its store and logs 0600, however they were made."""
    home.mkdir(parents=True, exist_ok=True)
    home.chmod(0o711 if searchable else 0o700)
    for pattern in ("flexq.db*", "*.log", "kubeconfig"):
        for path in home.glob(pattern):
            if path.is_file():
                path.chmod(0o600)
    for folder in ("auth", "tls", "records"):
        if (home / folder).is_dir():
            (home / folder).chmod(0o700)
    runtime = home / "runtime"
    if runtime.is_dir():
        runtime.chmod(0o711 if searchable else 0o700)


def _banner(plan: ListenPlan, http_port: int, tls_port: int | None, home: Path, store_spec: str | None,
            user: JobUser | None, local: LocalApi) -> str:
    state = f"objects in {shown(store_spec)}, the rest in {home}" if store_spec else f"state in {home}"
    cli = (f"{local.path} (flexq's CLI)" if local.socket is not None else
           "no socket for flexq's CLI (FLEXQ_HOME is too deep: it uses HTTPS)")
    lines = [f"flexq server: http://{plan.http_host}:{http_port}, {cli}, {state}"]
    if tls_port is not None:
        lines.append(f"  https://{plan.endpoint_host}:{tls_port} (kubectl after gcloud get-credentials; "
                     f"CA {home / 'tls' / 'ca.crt'})")
    if plan.anonymous:
        lines.append(f"  WARNING: anonymous mode: every program and every local user that can reach {plan.http_host}:"
                     f"{http_port} acts as the administrator, and may run commands as this server's user through "
                     "the jobs it creates (drop --auth anonymous to require tokens)")
    else:
        lines.append("  tokens required (flexq's CLI, flexq env and flexq kubeconfig present the administrator's); "
                     "flexq token create --role developer --namespace NS")
        if tls_port is None:
            lines.append("  --no-tls: kubectl sends tokens only over HTTPS, so only flexq's CLI can sign in here")
    lines.append(f"  administrator's token: {home / 'auth' / 'admin.token'}")
    if user is not None:
        lines.append(f"  jobs run as {user.name}" + (", apart from the server's secrets" if user.separate else
                                                      " (this server's own user: they can read its files)"))
        if user.searchable:
            lines.append(f"  {user.name} may search (not list) {', '.join(map(str, user.searchable))}, to reach the "
                         "interpreter")
        if user.note:
            lines.append(f"  WARNING: {user.note}")
    return "\n".join(lines)


def serve(home: Path, plan: ListenPlan, *, log_level: str = "warning",
          capacity: CapacityFile | None = None, runtime: str = "ray", store_spec: str | None = None,
          lease_duration: float = 15.0, event_ttl: float = DEFAULT_EVENT_TTL, shared: bool = False,
          run_as: str | None = None, kueue: KueueConfig = DEFAULT_KUEUE_CONFIG, workers: int = 0) -> None:
    """Serve as ``plan`` says until SIGINT/SIGTERM, then close the store; the ``capacity`` file is read again on SIGHUP
    (see :class:`CapacityFile`). ``store_spec`` is ``--store`` (see :mod:`flexq.store.url`); on PostgreSQL the
    servers elect a leader with leases of ``lease_duration`` seconds (see :mod:`flexq.server.leader`); so do servers
    ``shared`` on one SQLite file, each following the others' commits. Events go ``event_ttl`` s after they were last
    seen (0: kept). ``kueue``: Kueue's Configuration; flexq's CLI has a socket (:mod:`flexq.server.local_api`).

    Jobs run as ``run_as`` (see :mod:`flexq.runtime.job_user`); what the server writes is its user's alone (umask
    077: files 0600, folders 0700). With ``workers``, that many API worker processes serve the ports and this one
    the store and the controllers (see :mod:`flexq.server.worker`).

    Raises :class:`ListenError` (before anything starts) when a port cannot be bound, :class:`JobUserError` when
    ``run_as`` cannot be honoured, and :class:`StoreOptionError` when the store cannot be opened."""
    user = _settle(home, runtime, run_as)
    sockets, store, local = _open(plan, store_spec, home, shared)
    _secure(home, user is not None and user.separate)
    http_port = sockets[0].getsockname()[1]
    tls_port = sockets[1].getsockname()[1] if len(sockets) > 1 else None
    book = TokenBook(home)
    book.ensure_admin()
    tls = ensure_certificates(home, plan.certificate_names()) if tls_port is not None else None
    endpoint = f"{plan.endpoint_host}:{tls_port}" if tls_port is not None else f"{plan.http_host}:{http_port}"
    service = ObjectService(store, hooks=[job_webhook_for(kueue.manages), node_pool_webhook])
    ray = RayRuntime(store, home) if runtime == "ray" else None
    capacity_file = capacity or CapacityFile(None)
    identity = f"{socket.gethostname()}_{os.getpid()}_{http_port}"
    capacity_file.leadership = leadership = Leadership(
        open_lease(store_spec, home, identity, duration=lease_duration, shared=shared),
        lambda: QueueController(service, RealClock(), capacity_file.config, ray, kueue), identity)
    expiry = EventExpiry(store, event_ttl)
    try:
        if ray is not None:
            ray.recover()  # the Ray clusters the last server left running, before anything could start them again
        else:
            reap_all(home)  # no orphans: this server will not follow them
        leadership.start()
        if ray is not None:
            ray.resume()
        expiry.start()
        app = create_app(service, endpoint, ray, tls.ca_pem() if tls is not None else b"", leadership,
                         home, Authenticator(book, plan.anonymous), plan.host_names(), leadership.leader)
        app.include_router(leader_router(leadership))
        logging.getLogger("uvicorn.error").setLevel(log_level.upper())
        files = (str(tls.cert), str(tls.key)) if tls is not None else None
        front = Front(home, store, sockets, files, workers, WorkerSpec(
            str(home), str(sqlite_path(store_spec, home) or ""), [], files, plan.anonymous,
            sorted(plan.host_names()), sorted(kueue.frameworks), log_level, FOLLOW_EVERY, os.getpid(),
            store_spec if is_postgres(store_spec) else None))
        print(_banner(plan, http_port, tls_port, home, store_spec, user, local) + _disk_warning(store), file=sys.stderr)
        _run(front, app, log_level, capacity_file.reload, local)
    finally:
        local.close()
        expiry.stop()
        leadership.stop()
        store.close()
        for sock in sockets:
            sock.close()


def _run(front: Front, app: FastAPI, log_level: str, reload: Callable[[], None], local: LocalApi) -> None:
    """Serve until SIGINT or SIGTERM: here, or (with API workers) on the owner's socket while the workers serve; and
    here on the CLI's socket."""
    try:
        with HeapPolicy(), asyncio.Runner(loop_factory=loop_factory()) as runner:
            servers = front.servers(app, log_level) + local.servers(app, log_level)
            runner.run(_serve_all(servers, app.state.hub.close, reload))
    finally:
        front.stop()


def _open(plan: ListenPlan, store_spec: str | None, home: Path,
          shared: bool) -> tuple[list[socket.socket], BaseStore, LocalApi]:
    """The listening sockets, the CLI's socket and the store, or none of them (a port that cannot be bound, a store
    that cannot open)."""
    # The API workers of a server of this home that was killed may still hold its ports: waited for (and what else
    # it left, a moment longer).
    patience = LEFTOVER_WAIT if await_leftovers(home) else 0.0
    sockets = [_bind(plan.http_host, plan.http_port, "--port", patience)]
    try:
        if plan.tls_host is not None and plan.tls_port is not None:
            sockets.append(_bind(plan.tls_host, plan.tls_port, "--tls-port", patience))
        store = open_store(store_spec, home, follow=FOLLOW_EVERY if shared else 0.0)
    except (ListenError, StoreOptionError):
        for sock in sockets:
            sock.close()
        raise
    try:
        return sockets, store, _local_api(home, plan, sockets)
    except ListenError:
        store.close()
        for sock in sockets:
            sock.close()
        raise


def _local_api(home: Path, plan: ListenPlan, sockets: list[socket.socket]) -> LocalApi:
    """The CLI's socket and the record of the ports in ``sockets`` (see :mod:`flexq.server.local_api`)."""
    https = f"https://{plan.endpoint_host}:{sockets[1].getsockname()[1]}" if len(sockets) > 1 else None
    try:
        return LocalApi(home, sockets[0].getsockname()[1], https)
    except OSError as exc:
        raise ListenError(f"cannot serve flexq's CLI on {home / 'run'}: {exc.strerror or exc}") from None


class CapacityFile:
    """The ``--capacity`` file, read again on SIGHUP: the controller models what it says from its next step on, its
    times still counted from the server's start (so a stock-out can be ended, or a pool given more machines, while
    jobs wait). A file that no longer reads is refused, with its error in the server's log, and the last capacity
    stays."""

    def __init__(self, read: Callable[[], CapacityConfig] | None) -> None:
        """``read`` reads the file (its errors: the user's to fix); None: no capacity modelled."""
        self.read = read
        self.config = read() if read is not None else None
        """What a controller made from now on models (one that leads later, with PostgreSQL)."""
        self.leadership: Leadership | None = None

    def reload(self) -> None:
        if self.read is None:
            log.warning("SIGHUP: no --capacity file to read again")
            return
        try:
            config = self.read()
        except (FlexqError, OSError) as exc:
            log.error("SIGHUP: the capacity file was not read again, the last one stays: %s", exc)
            return
        self.config = config
        if self.leadership is not None and (controller := self.leadership.leader()) is not None:
            controller.change_capacity(config)
        log.warning("SIGHUP: the capacity file was read again")


async def _serve_all(servers: list[tuple[Server, socket.socket]], closing: Callable[[], None],
                     reload: Callable[[], None]) -> None:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGHUP, reload)

    def stop() -> None:
        closing()
        for server, _ in servers:
            server.should_exit = True

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    await asyncio.gather(*(server.serve(sockets=[sock]) for server, sock in servers))
