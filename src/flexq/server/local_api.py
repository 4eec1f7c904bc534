"""flexq's CLI's way in: the server's Unix socket in ``FLEXQ_HOME/run``.

A loopback port is anybody's to take: once a server has stopped or died, a job's process (any local program) may
bind its plain-HTTP port and read the token of the next command sent there. So the server also serves its whole
application on a Unix socket, ``FLEXQ_HOME/run/api.sock`` (:func:`flexq.config.local_socket`), in a folder of its
user alone (0700), made afresh at its start beside a record of the ports it serves (``listen.json``) and removed at
its stop. On that socket it answers only peers of its own user and root, by the credentials the kernel gives for
the connection (``SO_PEERCRED``): another user's program is refused before anything it sends is read. flexq's CLI
sends its token to a plain-HTTP server of its ``FLEXQ_HOME`` through this socket, and to no other plain-HTTP server
(:mod:`flexq.client`).

A ``FLEXQ_HOME`` too deep for a socket's address (107 bytes) is reached through a descriptor of the folder
(``/proc/self/fd/N/api.sock``); where even that cannot be had, no socket is served and the CLI uses the server's
HTTPS port with its CA (from the record).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import stat
import struct
from pathlib import Path
from typing import Any, Final, cast

from starlette.types import ASGIApp
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from flexq.config import listen_record, local_socket, unix_address, write_private
from flexq.server.serving import Server, uvicorn_servers

__all__ = ["LocalApi", "admitted_peer", "peer_uid"]

log = logging.getLogger("flexq.server")

_BACKLOG: Final = 512
_REFUSED_WAIT: Final = 5.0
"""Seconds a refused connection stays open for its peer to read the answer."""
_CREDENTIALS: Final = struct.Struct("3i")
"""``struct ucred``: pid, uid, gid."""
_REFUSED: Final = b"this socket serves the flexq server's own user and root only\n"
_REFUSAL: Final = (b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nconnection: close\r\ncontent-length: "
                   + str(len(_REFUSED)).encode() + b"\r\n\r\n" + _REFUSED)


def peer_uid(transport: asyncio.BaseTransport) -> int | None:
    """The user id of the process at the other end of a Unix socket's connection (None where the platform does
    not tell)."""
    option = getattr(socket, "SO_PEERCRED", None)
    sock: Any = transport.get_extra_info("socket")
    if option is None or sock is None:
        return None
    try:
        _pid, uid, _gid = _CREDENTIALS.unpack(sock.getsockopt(socket.SOL_SOCKET, option, _CREDENTIALS.size))
    except OSError:
        return None
    return int(uid)


def admitted_peer(uid: int | None) -> bool:
    """Whether a peer of ``uid`` may use the socket: the server's own user, or root. Where the platform does not
    tell a peer's user (no ``SO_PEERCRED``), the folder's mode is the only check."""
    if uid is None:
        return getattr(socket, "SO_PEERCRED", None) is None
    return uid in (os.geteuid(), 0)


class _PeerChecked(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's HTTP protocol, behind a check of the peer's user: another user's connection is answered 403 and
    closed, what it sends read and dropped (so that the answer reaches it, not a reset) and never served."""

    _refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        uid = peer_uid(transport)
        if admitted_peer(uid):
            super().connection_made(transport)
            return
        log.warning("refused a connection on the API socket from user id %s: it serves the server's own user and "
                    "root only", uid)
        self._refused = True
        stream = cast(asyncio.Transport, transport)  # uvloop's transports are not asyncio's classes
        stream.write(_REFUSAL)
        if stream.can_write_eof():
            stream.write_eof()
        asyncio.get_running_loop().call_later(_REFUSED_WAIT, stream.close)

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def eof_received(self) -> bool | None:
        return None if self._refused else super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._refused:
            super().connection_lost(exc)

    def pause_writing(self) -> None:
        if not self._refused:
            super().pause_writing()

    def resume_writing(self) -> None:
        if not self._refused:
            super().resume_writing()


def _fresh_folder(folder: Path) -> os.stat_result:
    """``folder`` made anew, empty, 0700 (what was there, from a server that died, removed)."""
    folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        found = os.lstat(folder)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(found.st_mode):
            shutil.rmtree(folder)
        else:
            folder.unlink()
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    return os.lstat(folder)


class LocalApi:
    """A serving server's ``FLEXQ_HOME/run``: its socket (None where no address can be had for it) and the record
    of what it serves. Made at the server's start (raises OSError where the folder cannot be made), removed by
    :meth:`close`."""

    def __init__(self, home: Path, http_port: int, https: str | None) -> None:
        path = local_socket(home)
        self.folder = path.parent
        self._made = _fresh_folder(self.folder)
        self.path = path
        self.socket: socket.socket | None = None
        address = unix_address(path)
        if address is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(address)
                os.chmod(path, 0o600)
                sock.listen(_BACKLOG)
            except OSError:
                sock.close()
                raise
            self.socket = sock
        write_private(listen_record(home), json.dumps({"pid": os.getpid(), "http_port": http_port, "https": https,
                                                       "socket": self.socket is not None}) + "\n")

    def servers(self, app: ASGIApp, log_level: str) -> list[tuple[Server, socket.socket]]:
        """A uvicorn server on the socket (none without one), set up as the ports' servers are, with the peer check
        first on each connection; the application's start and stop are left to the ports' servers."""
        if self.socket is None:
            return []
        ((server, sock),) = uvicorn_servers(app, [self.socket], None, log_level)
        server.config.http = _PeerChecked
        server.config.lifespan = "off"
        return [(server, sock)]

    def close(self) -> None:
        """Close the socket and remove the folder, unless another server of this home has made it again since."""
        if self.socket is not None:
            self.socket.close()
        with contextlib.suppress(OSError):
            if os.path.samestat(os.lstat(self.folder), self._made):
                shutil.rmtree(self.folder)
