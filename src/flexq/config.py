"""Where flexq keeps its state and where its server listens.

- ``FLEXQ_HOME``: the state directory (the SQLite store ``flexq.db``). Default: the user's data
  directory, ``$XDG_DATA_HOME/flexq`` or ``~/.local/share/flexq``, so every shell of a user sees the
  same queues wherever it is started, as with ``~/.kube``.
- ``FLEXQ_SERVER``: the server the CLI talks to. Default ``http://127.0.0.1:8585``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "default_server_url", "flexq_home"]

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
