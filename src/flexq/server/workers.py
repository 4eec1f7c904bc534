"""The owner's side of ``--workers``: who serves the ports, and the API workers kept running.

Without workers the server's own process serves its ports, as it always has. With N workers, it listens on the
ports (so that connections wait in the kernel's queue while the workers start), serves its whole application and
the commit desk on its socket (:mod:`flexq.server.owner_link`), and runs N worker processes that accept on the
ports (:mod:`flexq.server.worker`); one that dies is started again, and all stop when the owner stops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Final

from starlette.types import ASGIApp

from flexq.server.change_feed import ChangeFeed, changes_socket
from flexq.server.owner_link import CommitServer, GroupCommit, commit_socket, owner_socket, unix_listener
from flexq.server.serving import Server, uvicorn_servers
from flexq.server.worker import ENV, WorkerSpec
from flexq.server.worker_record import forget, identify, record
from flexq.store import BaseStore

__all__ = ["Front"]

log = logging.getLogger("flexq.server")

_BACKLOG: Final = 2048
_STOP_WAIT: Final = 10.0
"""Seconds a stopping owner waits for its workers to finish their open requests before it kills them."""
_RESTART_PAUSE: Final = 1.0


class Front:
    """Who answers on ``sockets``: this process (``workers`` 0), or ``workers`` API worker processes."""

    def __init__(self, home: Path, store: BaseStore, sockets: list[socket.socket], tls: tuple[str, str] | None,
                 workers: int, spec: WorkerSpec) -> None:
        self.home = home
        self.store = store
        self.sockets = sockets
        self.tls = tls
        self.count = workers
        self.spec = dataclasses.replace(spec, fds=[s.fileno() for s in sockets])
        self._processes: list[subprocess.Popen[bytes]] = []
        self._stopping = threading.Event()
        self._guard: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._commits: CommitServer | None = None
        self._feed: ChangeFeed | None = None

    def servers(self, app: ASGIApp, log_level: str) -> list[tuple[Server, socket.socket]]:
        """The servers this process runs: on the ports, or (with workers, started here) on the owner's socket."""
        if not self.count:
            return uvicorn_servers(app, self.sockets, self.tls, log_level)
        for sock in self.sockets:
            sock.listen(_BACKLOG)
        if self.spec.postgres is None:  # with PostgreSQL the workers write to the database themselves
            self._commits = CommitServer(commit_socket(self.home), GroupCommit(self.store))
            self._feed = ChangeFeed(changes_socket(self.home), self.store)
        self._socket = unix_listener(owner_socket(self.home), _BACKLOG)
        self._processes = [self._start(i) for i in range(self.count)]
        self._record()
        self._guard = threading.Thread(target=self._keep, name="flexq-workers", daemon=True)
        self._guard.start()
        return uvicorn_servers(app, [self._socket], None, log_level)

    def _start(self, index: int) -> subprocess.Popen[bytes]:
        env = {**os.environ, ENV: self.spec.to_env()}
        return subprocess.Popen([sys.executable, "-m", "flexq.server.worker", str(index)], env=env,
                                pass_fds=self.spec.fds, stdin=subprocess.DEVNULL)

    def _keep(self) -> None:
        """Start a worker again where one stopped while the owner serves."""
        while not self._stopping.wait(_RESTART_PAUSE):
            for index, process in enumerate(self._processes):
                if process.poll() is None or self._stopping.is_set():
                    continue
                log.warning("API worker %d (pid %d) stopped (exit %s): starting another", index, process.pid,
                            process.returncode)
                self._processes[index] = self._start(index)
                self._record()

    def _record(self) -> None:
        """Who runs on this home, for a server started after this one is killed (see
        :mod:`flexq.server.worker_record`)."""
        record(self.home, identify(os.getpid()), [identify(p.pid) for p in self._processes])

    def stop(self) -> None:
        """Stop the workers (they finish their open requests first), and remove the owner's socket."""
        self._stopping.set()
        if self._guard is not None:
            self._guard.join(timeout=5)
        running = list(self._processes)
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        deadline = time.monotonic() + _STOP_WAIT
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if running:
            forget(self.home)
        if self._commits is not None:
            self._commits.close()
        if self._feed is not None:
            self._feed.close()
        if self._socket is not None:
            self._socket.close()
            with contextlib.suppress(FileNotFoundError):
                owner_socket(self.home).unlink()
