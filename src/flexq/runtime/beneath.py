"""Files in a folder a job can write, opened by the server without following the job's links.

A job's working directory belongs to the job's user, who can put anything there: a symbolic link to
``/etc/shadow`` or to the administrator's token, a FIFO that blocks a reader, a hard link. The server (root, often)
still writes a job's ConfigMap files into it and reads what Ray's processes leave in a cluster's temp dir. Every such
access goes through this module:

- the path is resolved beneath the folder and no link is followed on the way: Linux's ``openat2`` with
  ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the kernel has it (5.6 and later), else a
  walk one component at a time with ``O_NOFOLLOW`` (a ``..`` component or an absolute path is refused either way);
- a file is read only when it is a regular file (not a FIFO, a device or a socket: opened ``O_NONBLOCK``, then
  checked) owned by the folder's owner and with a single link (a hard link to another user's file is not read);
- a file is written only when it is new (``O_CREAT | O_EXCL``): nothing the job left is truncated or appended to.

:class:`OutsideError` (an ``OSError``) says why an access was refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from pathlib import Path
from typing import Final

from flexq.errors import FlexqError

__all__ = ["OutsideError", "makedirs_beneath", "open_beneath", "read_beneath", "write_beneath"]


class OutsideError(FlexqError, OSError):
    """A path that would leave its folder, pass through a link, or name what is not a plain file of the folder's
    owner."""


_SYS_OPENAT2: Final = 437  # the same number on every architecture Linux gives openat2
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - every Linux has a C library
    _libc = None
_HAS_OPENAT2: bool | None = None


def _parts(relative: str) -> list[str]:
    if relative.startswith("/") or "\0" in relative:
        raise OutsideError(errno.EXDEV, "an absolute path or a NUL byte", relative)
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if ".." in parts or not parts:
        raise OutsideError(errno.EXDEV, "a path that leaves its folder", relative)
    return parts


def _openat2(dir_fd: int, relative: str, flags: int, mode: int) -> int | None:
    """``openat2`` beneath ``dir_fd`` with no link followed; None where the kernel has no ``openat2``."""
    global _HAS_OPENAT2
    if _libc is None or _HAS_OPENAT2 is False:
        return None
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0,
                   _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = int(_libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(relative)),
                           ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how))))
    if fd >= 0:
        _HAS_OPENAT2 = True
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and _HAS_OPENAT2 is None:  # no openat2 here (or a filter refuses it)
        _HAS_OPENAT2 = False
        return None
    if err == errno.ELOOP:
        raise OutsideError(err, "a symbolic link on the way", relative)
    if err == errno.EXDEV:
        raise OutsideError(err, "a path that leaves its folder", relative)
    raise OSError(err, os.strerror(err), relative)


def _walk_open(dir_fd: int, parts: list[str], flags: int, mode: int) -> int:
    """The component-by-component fallback: each folder opened ``O_NOFOLLOW | O_DIRECTORY`` from the last."""
    fd = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise OutsideError(exc.errno, "a symbolic link on the way", "/".join(parts)) from None
                raise
            os.close(fd)
            fd = nxt
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutsideError(exc.errno, "a symbolic link", "/".join(parts)) from None
            raise
    finally:
        os.close(fd)


def open_beneath(folder: Path, relative: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """A file descriptor for ``folder/relative``, resolved beneath ``folder`` with no symbolic link followed
    (``folder`` itself is opened as given: it is the server's choice, not the job's)."""
    parts = _parts(relative)
    root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = _openat2(root, "/".join(parts), flags, mode)
        return fd if fd is not None else _walk_open(root, parts, flags, mode)
    finally:
        os.close(root)


def read_beneath(folder: Path, relative: str, limit: int = 1 << 20) -> bytes:
    """The last ``limit`` bytes at most of the regular file ``folder/relative``, owned by ``folder``'s owner, with
    one link. Raises :class:`OutsideError` for anything else, ``FileNotFoundError`` where there is nothing."""
    owner = os.stat(folder).st_uid
    fd = open_beneath(folder, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OutsideError(errno.EINVAL, "not a regular file", relative)
        if info.st_uid not in (owner, os.geteuid()) or info.st_nlink != 1:
            raise OutsideError(errno.EPERM, "a file of another user, or a hard link", relative)
        size = info.st_size
        if size > limit:
            os.lseek(fd, size - limit, os.SEEK_SET)
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def makedirs_beneath(folder: Path, relative: str, mode: int = 0o755) -> None:
    """Make the folders of ``relative`` beneath ``folder`` (those there already are kept, when they are folders and
    not links)."""
    parts = _parts(relative)
    for at in range(1, len(parts) + 1):
        step = "/".join(parts[:at])
        with contextlib.suppress(FileExistsError):
            parent = open_beneath(folder, "/".join(parts[:at - 1]), os.O_RDONLY | os.O_DIRECTORY) if at > 1 else \
                os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.mkdir(parts[at - 1], mode, dir_fd=parent)
            finally:
                os.close(parent)
        os.close(open_beneath(folder, step, os.O_RDONLY | os.O_DIRECTORY))  # a folder, reached without links


def write_beneath(folder: Path, relative: str, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to the new file ``folder/relative`` (its folders made beneath ``folder`` as needed). Refused
    where anything is there already, a link above all."""
    parts = _parts(relative)
    if len(parts) > 1:
        makedirs_beneath(folder, "/".join(parts[:-1]))
    fd = open_beneath(folder, relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
