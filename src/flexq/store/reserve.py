"""Room kept for deletes when the disk fills: a file beside the SQLite database, given back to the disk then.

SQLite needs free pages to delete (the write-ahead log grows by every page a delete changes, and the log of
changes keeps the deleted object), so on a full disk a delete is refused like any write, and space cannot be
freed through the API. The store keeps :data:`RESERVE` bytes aside in ``flexq.db-reserve`` (allocated, not
sparse). When the disk's free space falls below that, or the database refuses a write for a full disk, the file
is removed and the store takes deletes only, as etcd does past its space quota (its ``NOSPACE`` alarm): the other
writes are refused up front (:class:`~flexq.store.refusals.StoreUnavailable`, ``DiskFull``), so they cannot use
the room the deletes need. Once the disk has room again (twice the reserve: the file and as much again), the file
is made again and every write is taken. A store opened on a disk with less room than that (a restart on a full
disk) starts so, taking deletes only.

Lifecycle: :meth:`Reserve.check` before each write transaction; :meth:`Reserve.release` when the database says
the disk is full; :meth:`Reserve.refusing` says why writes other than deletes are refused (None: they are not).
Thread-safe.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from pathlib import Path
from typing import Final

__all__ = ["LOW_SPACE", "RESERVE", "Reserve", "free_bytes"]

RESERVE: Final = 8 * 2**20
"""Bytes kept aside for deletes (at most a sixteenth of the disk's size: a small disk keeps less)."""
LOW_SPACE: Final = 64 * 2**20
"""Free bytes below which the server warns at its start that the store's disk is nearly full."""

_CHUNK: Final = 2**20


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``folder``'s file system (None: it cannot be asked)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


class Reserve:
    """The room kept for deletes beside the database ``database`` (see the module); ``size``: bytes wanted."""

    def __init__(self, database: Path, size: int = RESERVE) -> None:
        self.path = database.with_name(database.name + "-reserve")
        self._lock = threading.Lock()
        self._full: str | None = None
        """Why writes other than deletes are refused (None: they are not)."""
        try:
            st = os.statvfs(database.parent)
            self.size = min(size, st.f_blocks * st.f_frsize // 16)
        except OSError:
            self.size = 0
        if self.size > 0 and not self._held():
            self._full = self._why()  # given back before (the disk filled): made again once there is room
        self.check()

    def check(self) -> None:
        """Before a write transaction: give the reserve back where the disk has less free than it (the write may be
        a delete, which needs the room), or make it again where the disk has room once more."""
        if self.size <= 0:
            return
        with self._lock:
            free = free_bytes(self.path.parent)
            if free is None:
                return
            if self._full is None and free < self.size:
                self._let_go()
            elif self._full is not None and free >= 2 * self.size and self._keep():
                self._full = None

    def release(self) -> None:
        """The database refused a write for a full disk: the reserve goes back to the disk, for deletes."""
        if self.size <= 0:
            return
        with self._lock:
            self._let_go()

    def refusing(self) -> str | None:
        """Why writes other than deletes are refused now (None: they are taken), looked at again while they are."""
        if self._full is None:
            return None
        self.check()
        return self._full

    def _let_go(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._full = self._why()

    def _why(self) -> str:
        free = free_bytes(self.path.parent)
        left = f"{free / 2**20:.1f} MiB left, kept for deletes" if free is not None else "no room left"
        return (f"the disk of {self.path.parent} is full ({left}): only deletes are taken until it has "
                f"{2 * self.size / 2**20:.1f} MiB free")

    def _held(self) -> bool:
        """Whether the reserve's file is there, whole."""
        try:
            return self.path.stat().st_size >= self.size
        except OSError:
            return False

    def _keep(self) -> bool:
        """Make the reserve's file (if it is not there, whole); False where the disk has no room for it."""
        if self._held():
            return True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            return False
        try:
            try:
                os.posix_fallocate(fd, 0, self.size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                zeros = bytes(_CHUNK)  # a file system without fallocate: written out, not sparse
                for at in range(0, self.size, _CHUNK):
                    os.pwrite(fd, zeros[:min(_CHUNK, self.size - at)], at)
            return True
        except OSError:
            with contextlib.suppress(OSError):
                self.path.unlink()
            return False
        finally:
            os.close(fd)
