"""Where flexq keeps its state and where its server listens.

- ``FLEXQ_HOME``: the state directory (the SQLite store ``flexq.db``). Default: the user's data
  directory, ``$XDG_DATA_HOME/flexq`` or ``~/.local/share/flexq``, so every shell of a user sees the
  same queues wherever it is started, as with ``~/.kube``.
- ``FLEXQ_SERVER``: the server the CLI talks to. Default ``http://127.0.0.1:8585``. Where that is the plain-HTTP
  port of the server of ``FLEXQ_HOME``, the CLI reaches it through its Unix socket instead
  (:func:`local_socket`), so that the token goes to that server and nothing else that might hold the port.
- ``FLEXQ_TOKEN``: the bearer token the CLI presents. Default: the administrator's token in
  ``FLEXQ_HOME/auth/admin.token`` where this user can read it, else none (anonymous, on a server that allows it).
- ``FLEXQ_CA``: the CA certificate that an ``https://`` server is verified with. Default: the server's local CA,
  ``FLEXQ_HOME/tls/ca.crt``, where it exists, else the system's.
- ``FLEXQ_INSECURE_HTTP=1``: send the token over plain HTTP to a server that is not the one of ``FLEXQ_HOME``
  (refused otherwise: whatever listens on a port may not be a flexq server).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "INSECURE_HTTP", "caller_token", "default_server_url", "flexq_home",
           "insecure_http", "listen_record", "local_socket", "server_ca", "unix_address", "write_private"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8585
INSECURE_HTTP: Final = "FLEXQ_INSECURE_HTTP"
_UNIX_PATH_MAX: Final = 107
"""Bytes a Unix socket's path may have (``sun_path`` holds 108, its NUL included)."""


def flexq_home() -> Path:
    explicit = os.environ.get("FLEXQ_HOME")
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "flexq"


def default_server_url() -> str:
    return os.environ.get("FLEXQ_SERVER") or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"


def caller_token() -> str | None:
    explicit = os.environ.get("FLEXQ_TOKEN")
    if explicit:
        return explicit.strip()
    try:
        return (flexq_home() / "auth" / "admin.token").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def insecure_http() -> bool:
    return os.environ.get(INSECURE_HTTP, "").strip().lower() in ("1", "true", "yes")


def local_socket(home: Path) -> Path:
    """Where the server of ``home`` serves flexq's CLI: a Unix socket in ``home/run``, a folder of the server's
    user alone (0700), made afresh at the server's start and removed at its stop."""
    return home / "run" / "api.sock"


def listen_record(home: Path) -> Path:
    """What the server of ``home`` serves, beside its socket (``{"http_port": ..., "https": URL or null}``): the
    CLI reaches that server's plain-HTTP port through the socket, and nothing else there."""
    return home / "run" / "listen.json"


_FOLDERS: dict[Path, int] = {}
"""The folders this process reaches sockets in by descriptor (see :func:`unix_address`), kept open while it runs."""


def unix_address(path: Path) -> str | None:
    """``path`` as a Unix socket's address: itself where it fits in ``sun_path`` (107 bytes), else, on Linux,
    ``/proc/self/fd/N/NAME`` through a descriptor of its folder that this process keeps open (a deep
    ``FLEXQ_HOME``); None where neither can be had."""
    if len(os.fsencode(path)) <= _UNIX_PATH_MAX:
        return str(path)
    if not Path("/proc/self/fd").is_dir():
        return None
    folder = path.parent
    try:
        now = os.stat(folder)
        held = _FOLDERS.get(folder)
        if held is not None and os.path.samestat(os.fstat(held), now):
            fd = held
        else:  # first asked, or the folder was made again since (a server's next start)
            fd = os.open(folder, getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY)
            _FOLDERS[folder] = fd
            if held is not None:
                os.close(held)
    except OSError:
        return None
    address = f"/proc/self/fd/{fd}/{path.name}"
    return address if len(os.fsencode(address)) <= _UNIX_PATH_MAX else None


def server_ca() -> Path | None:
    explicit = os.environ.get("FLEXQ_CA")
    if explicit:
        return Path(explicit).expanduser()
    local = flexq_home() / "tls" / "ca.crt"
    return local if local.exists() else None


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only (0600; a folder it makes, 0700), whole or not at all."""
    if not path.parent.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
