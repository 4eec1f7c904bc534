"""What a web page must not be able to do through a server on the user's machine: the checks in front of everything.

A browser lets any page it shows send requests to ``127.0.0.1``: a ``text/plain`` or form POST needs no CORS
preflight, and a DNS-rebinding page reaches the server under a name of the attacker's. So, before
authentication and whatever the mode:

- **Host**: a request must name the server by one of its own names (its bind address, ``localhost``, the loopback
  addresses, the certificate's names, the machine's name where it listens on every address, ``--allowed-host``)
  or by an IP address (a rebinding page can only use a name it controls): else 403.
- **Origin**: a request from a page (an ``Origin`` header) must come from the server's own origin (the scheme and
  the Host it was sent to): else 403, for writes, reads and WebSockets alike. kubectl, gcloud and flexq's CLI
  send no Origin. The one exception: a job's Ray dashboard, sandboxed (an opaque origin, ``Origin: null``), calls
  its own API under a capability path (:mod:`flexq.server.raycap`), which authorizes nothing else.
- **Content type**: a write is read as JSON, YAML, a patch type or protobuf, as the API server reads it (no
  content type: JSON, its default); ``text/plain``, forms, multipart and anything else get 415.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit

from flexq.server.authn import ASGIApp, Receive, Scope, Send, google_error, is_gke, reply
from flexq.server.raycap import capability_path
from flexq.server.status import status_body

__all__ = ["ACCEPTED_MEDIA_TYPES", "RequestGuard"]

ACCEPTED_MEDIA_TYPES: Final = (
    "application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
    "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
"""The media types a request body may have (Kubernetes' own list, and the patch types)."""

_WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")


def _host_name(value: str) -> str:
    """The name in a Host header (``name[:port]``, ``[v6]:port``), lowercased, without the port."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") > 1:  # a bare IPv6 address
        return value
    return value.partition(":")[0]


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _header(scope: Scope, name: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _default_port(scheme: str) -> int:
    return 443 if scheme in ("https", "wss") else 80


def _same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether ``origin`` is the origin of a page served at ``scheme://host`` (this request's own)."""
    try:
        theirs = urlsplit(origin)
        ours = urlsplit(f"{scheme}://{host}")
        their_port = theirs.port or _default_port(theirs.scheme)
        our_port = ours.port or _default_port(scheme)
    except ValueError:
        return False
    http_scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    return (theirs.scheme == http_scheme and (theirs.hostname or "") == (ours.hostname or "")
            and their_port == our_port)


class RequestGuard:
    """The checks above, in front of ``app``. ``names``: the names the server answers to besides the loopback
    ones; ``"*"`` among them turns the Host check off (a server behind a proxy that rewrites Host)."""

    def __init__(self, app: ASGIApp, names: Iterable[str] = ()) -> None:
        self.app = app
        given = {_host_name(n) for n in names if n}
        self.any_host = "*" in given
        self.names = frozenset(given | set(_LOOPBACK_NAMES))

    def host_allowed(self, host: str) -> bool:
        name = _host_name(host)
        return self.any_host or name in self.names or _is_address(name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "/")
        host = _header(scope, b"host")
        if host is not None and not self.host_allowed(host):
            await self._refuse(scope, send, path, 403, "Forbidden",
                               f"the Host header names {_host_name(host)!r}, which is not this server's: a page "
                               "that reached it through another name (DNS rebinding) is refused; start the server "
                               "with --allowed-host NAME to answer to that name")
            return
        origin = _header(scope, b"origin")
        sandboxed = origin == "null" and capability_path(path) is not None
        if origin is not None and not sandboxed and not _same_origin(origin, scope.get("scheme", "http"), host or ""):
            await self._refuse(scope, send, path, 403, "Forbidden",
                               f"a request from the web page of {origin} is refused: only this server's own "
                               "pages may call its API from a browser")
            return
        if scope["type"] == "http" and scope.get("method") in _WRITES:
            kind = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if kind and kind not in ACCEPTED_MEDIA_TYPES:
                await self._refuse(scope, send, path, 415, "UnsupportedMediaType",
                                   f"the body of the request was in an unknown format - accepted media types "
                                   f"include: {', '.join(ACCEPTED_MEDIA_TYPES)} (got {kind})")
                return
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, path: str, code: int, reason: str, message: str) -> None:
        body: dict[str, Any] = google_error(code, message) if is_gke(path) else status_body(code, reason, message)
        await reply(scope, send, code, body)

