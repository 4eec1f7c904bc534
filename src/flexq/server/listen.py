"""Where the server listens and who it lets in: ``--host``, ``--port``, ``--tls-port``, ``--no-tls``, ``--auth``.

By default the server serves HTTPS (``--tls-port``, ``--port`` + 1 unless given; its local CA under
``FLEXQ_HOME/tls``), the endpoint gcloud's ``get-credentials`` points kubectl at, and plain HTTP on loopback; flexq's
own CLI reaches it through its Unix socket in ``FLEXQ_HOME/run`` (:mod:`flexq.server.local_api`), never sending
a token in clear to whatever holds the port. Every request needs a token, on loopback too (flexq's CLI, ``flexq
env`` and ``flexq kubeconfig`` present the administrator's from its 0600 file): a loopback port is open to every
local user and to every web page the user's browser shows. ``--auth anonymous`` (loopback only) makes a caller
without a token the administrator. On any other address HTTPS is the only way in from outside (plain HTTP stays on
127.0.0.1), and asking for anonymous access or no TLS there is refused. The names the server answers to (its Host
check) are its addresses, ``localhost``, the certificate's names and ``--allowed-host``.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Literal

from flexq.errors import FlexqError

__all__ = ["ListenError", "ListenPlan", "is_loopback", "plan_listeners"]

AuthMode = Literal["anonymous", "token"]


class ListenError(FlexqError):
    """A combination of listening options that is refused, with the reason and what to do instead."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ListenPlan:
    http_host: str
    http_port: int
    tls_host: str | None
    tls_port: int | None
    """0: any free port."""
    auth: AuthMode
    endpoint_host: str
    """The address clients are told to reach the HTTPS endpoint at (in the GKE cluster's ``endpoint``)."""
    allowed_hosts: tuple[str, ...] = ()
    """``--allowed-host``: more names the server answers to (``*``: any)."""

    @property
    def anonymous(self) -> bool:
        return self.auth == "anonymous"

    def certificate_names(self) -> list[str]:
        return [self.endpoint_host] if self.tls_host is not None else []

    def host_names(self) -> list[str]:
        """The names a request's Host may give: the listening addresses, the endpoint, the machine's names where
        the server listens on every address, and ``--allowed-host``."""
        names = [self.http_host, self.endpoint_host, *self.allowed_hosts]
        if self.tls_host is not None:
            names.append(self.tls_host)
        if self.tls_host in ("0.0.0.0", "::"):
            names += [socket.gethostname(), socket.getfqdn()]
        return names


def plan_listeners(host: str, port: int, tls_port: int | None, tls: bool, auth: str | None,
                   allowed_hosts: tuple[str, ...] = ()) -> ListenPlan:
    loopback = is_loopback(host)
    if auth not in (None, "anonymous", "token"):
        raise ListenError(f"--auth {auth!r}: expected anonymous or token")
    mode: AuthMode = "token" if auth is None else auth  # type: ignore[assignment]
    for name in allowed_hosts:
        if not name or any(c in name for c in "/ @"):
            raise ListenError(f"--allowed-host {name!r}: expected a host name or address (or * for any)")
    if not loopback and mode == "anonymous":
        raise ListenError(f"refusing anonymous access on {host}, which is not a loopback address: anyone who can "
                          "reach it would be the administrator. Use --auth token (the default there), or "
                          "--host 127.0.0.1")
    if not loopback and not tls:
        raise ListenError(f"refusing to serve {host} without TLS: tokens would cross the network in clear. "
                          "Drop --no-tls (HTTPS is served on --tls-port), or use --host 127.0.0.1")
    if not 0 <= port <= 65535 or (tls_port is not None and not 0 <= tls_port <= 65535):
        raise ListenError("--port and --tls-port must be between 0 and 65535")
    chosen = (port + 1 if port else 0) if tls_port is None else tls_port
    if tls and chosen == port and port:
        raise ListenError(f"--tls-port {chosen} is --port too: HTTPS and HTTP need ports of their own")
    if host in ("0.0.0.0", "::"):
        endpoint = socket.gethostname()
    elif loopback:
        endpoint = "127.0.0.1"
    else:
        endpoint = host
    return ListenPlan(http_host=host if loopback else "127.0.0.1", http_port=port,
                      tls_host=host if tls else None, tls_port=chosen if tls else None, auth=mode,
                      endpoint_host=endpoint, allowed_hosts=tuple(allowed_hosts))
