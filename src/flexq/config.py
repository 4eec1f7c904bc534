"""Where flexq keeps its state and where its server listens.

- ``FLEXQ_HOME``: the state directory (the SQLite store ``flexq.db``). Default: the user's data
  directory, ``$XDG_DATA_HOME/flexq`` or ``~/.local/share/flexq``, so every shell of a user sees the
  same queues wherever it is started, as with ``~/.kube``.
- ``FLEXQ_SERVER``: the server the CLI talks to. Default ``http://127.0.0.1:8585``.
- ``FLEXQ_TOKEN``: the bearer token the CLI presents. Default: the administrator's token in
  ``FLEXQ_HOME/auth/admin.token`` where this user can read it, else none (anonymous, on a server that allows it).
- ``FLEXQ_CA``: the CA certificate that an ``https://`` server is verified with. Default: the server's local CA,
  ``FLEXQ_HOME/tls/ca.crt``, where it exists, else the system's.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "caller_token", "default_server_url", "flexq_home", "server_ca",
           "write_private"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8585


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
