"""The HTTP client of a flexq server, the CLI's and the exporter's: the Kubernetes API paths of the server, and
its errors for people.

The caller's token goes only where it is safe (:func:`route`): to the server of ``FLEXQ_HOME`` through its Unix
socket, where the URL names that server's plain-HTTP port on loopback (a port is anybody's to take once the
server has gone; the socket's folder is its user's alone); over HTTPS, verified (the local CA where there is
one); and over plain HTTP elsewhere only with ``FLEXQ_INSECURE_HTTP=1``.
"""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, quote, urlsplit

import httpx

from flexq.api import KindInfo
from flexq.config import (
    INSECURE_HTTP,
    caller_token,
    flexq_home,
    insecure_http,
    listen_record,
    local_socket,
    server_ca,
    unix_address,
)
from flexq.errors import FlexqError

__all__ = ["CliError", "Client", "Route", "ServerError", "close_clients", "route", "verification"]


class CliError(FlexqError):
    """A failure to report to the user: a message, no traceback, a non-zero exit."""

    def __init__(self, message: str, code: int = 1) -> None:
        self.message = message
        self.code = code
        super().__init__(message)


class ServerError(CliError):
    """The server refused a request. Commands branch on ``status`` and ``reason`` (the Kubernetes Status reason:
    NotFound, Invalid, BadRequest, ...), never on the text; ``detail`` is the server's own message and ``causes``
    the Status's field causes (``message``, ``field``, ``line``)."""

    def __init__(self, status: int, reason: str, detail: str, causes: list[dict[str, Any]] | None = None) -> None:
        self.status = status
        self.reason = reason
        self.detail = detail
        self.causes = causes or []
        super().__init__(f"Error from server ({reason}): {detail}")


def verification(server: str) -> ssl.SSLContext | bool:
    """The TLS verification to reach ``server`` with: an ``https://`` one against ``FLEXQ_CA`` or the local CA where
    there is one, else the system's."""
    ca = server_ca()
    if server.startswith("https://") and ca is not None:
        return ssl.create_default_context(cafile=str(ca))
    return True


@dataclass(frozen=True, slots=True)
class Route:
    """How requests reach a server. ``url``: the address they are made to (over the socket, the server's own URL,
    which gives their Host); ``headers``: the caller's token; ``verify``: TLS verification; ``socket``: the address
    of the local socket they go through, or None (TCP)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict)
    verify: ssl.SSLContext | bool = True
    socket: str | None = None

    def client(self, timeout: float) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=self.socket) if self.socket is not None else None
        return httpx.Client(base_url=self.url, timeout=timeout, headers=self.headers, verify=self.verify,
                            transport=transport)


@dataclass(frozen=True, slots=True)
class _Served:
    """The record of the server of a ``FLEXQ_HOME`` (:func:`flexq.config.listen_record`)."""

    http_port: int
    https: str | None
    socket: bool


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _served(home: Path) -> _Served | None:
    """What the server of ``home`` serves, where its folder is one this user may trust (a folder only its owner
    may write to, owned by this user, root or the home's owner); None where no server of ``home`` is serving."""
    folder = local_socket(home).parent
    try:
        found = os.lstat(folder)
        owners = {os.geteuid(), 0, os.stat(home).st_uid}
        if not stat.S_ISDIR(found.st_mode) or found.st_mode & 0o022 or found.st_uid not in owners:
            return None
        doc = json.loads(listen_record(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("http_port"), int):
        return None
    https = doc.get("https")
    return _Served(doc["http_port"], https if isinstance(https, str) else None, doc.get("socket") is True)


def _local(server: str, parts: SplitResult, home: Path, served: _Served | None,
           headers: dict[str, str]) -> Route | None:
    """The way to the server of ``home`` where ``server`` names its plain-HTTP port on loopback: its socket, else
    (no socket could be had) its HTTPS port, verified against its own CA alone."""
    try:
        port = parts.port or 80
    except ValueError:
        return None
    if served is None or not _loopback(parts.hostname) or port != served.http_port:
        return None
    address = unix_address(local_socket(home)) if served.socket else None
    if address is not None:
        return Route(server, headers, True, address)
    ca = home / "tls" / "ca.crt"
    if served.https is not None and ca.exists():
        return Route(served.https, headers, ssl.create_default_context(cafile=str(ca)))
    return None


def route(server: str, *, token: bool = True) -> Route:
    """How to reach ``server`` with the caller's token (none with ``token`` false). Raises :class:`CliError` where the
    token would go over plain HTTP to something that may not be a flexq server: any ``http://`` URL but the
    plain-HTTP port of the server of ``FLEXQ_HOME`` (reached through its socket), unless ``FLEXQ_INSECURE_HTTP=1``."""
    server = server.rstrip("/")
    secret = caller_token() if token else None
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    parts = urlsplit(server)
    if parts.scheme != "http":
        return Route(server, headers, verification(server))
    home = flexq_home()
    served = _served(home)
    local = _local(server, parts, home, served, headers)
    if local is not None:
        return local
    if not secret or insecure_http():
        return Route(server, headers)
    anyway = f"({INSECURE_HTTP}=1 sends the token in clear anyway)"
    if not _loopback(parts.hostname):
        raise CliError(f"refusing to send a token over plain HTTP to {server}: it would cross the network in clear. "
                       f"Use the server's https:// address {anyway}")
    if served is not None:
        raise CliError(f"refusing to send a token over plain HTTP to {server}: it is not the server of FLEXQ_HOME "
                       f"({home}, on port {served.http_port}), which flexq's CLI reaches through its socket. Use the "
                       f"server's https:// address, or set FLEXQ_HOME to its home {anyway}")
    raise CliError(f"cannot reach the flexq server at {server}: no server of FLEXQ_HOME ({home}) is running, and "
                   "flexq's CLI sends a token over plain HTTP only to that server, through its socket.\n"
                   "Start one with `flexq server` (in another shell, or `flexq server &`), or point --server / "
                   f"FLEXQ_SERVER at a running one's https:// address {anyway}.")


_OPEN: set[Client] = set()


def close_clients() -> None:
    """Close every client a command opened (the CLI's ``main`` does, on the way out)."""
    for client in list(_OPEN):
        client.close()


class Client:
    """A server's API as the caller. Its way there (:func:`route`) is found at the first request, whose
    :class:`CliError` says why a server cannot be reached safely."""

    def __init__(self, server: str, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self._timeout = timeout
        self._client: httpx.Client | None = None
        _OPEN.add(self)

    @property
    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = route(self.server).client(self._timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        _OPEN.discard(self)

    @staticmethod
    def path(info: KindInfo, namespace: str | None, name: str | None = None) -> str:
        base = f"/apis/{info.group}/{info.storage_version}" if info.group else "/api/v1"
        if info.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{info.plural}"
        return f"{base}/{quote(name, safe='')}" if name else base

    def request(self, method: str, url: str, *, json: Any = None, params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None, ok_missing: bool = False) -> Any:
        try:
            response = self._http.request(method, url, json=json, params=params, headers=headers)
        except httpx.ConnectError:
            raise CliError(
                f"cannot reach the flexq server at {self.server} (connection refused).\n"
                "Start one with `flexq server` (in another shell, or `flexq server &`), "
                "or point --server / FLEXQ_SERVER at a running one."
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise CliError(f"request to the flexq server at {self.server} failed: {exc}") from None
        if response.status_code == 404 and ok_missing:
            return None
        if response.status_code >= 400:
            raise _server_error(response)
        return response.json() if response.content else None

    def submit(self, url: str, body: Any) -> Any:
        """POST input the user gave (manifests, a capacity file) to one of flexq's own endpoints: where the server
        finds the input itself at fault (Invalid, BadRequest), its message (which names the file and line) is the
        whole error."""
        try:
            return self.request("POST", url, json=body)
        except ServerError as exc:
            if exc.reason in ("Invalid", "BadRequest"):
                raise CliError(f"error: {exc.detail}") from None
            raise

    def request_text(self, method: str, url: str) -> str:
        try:
            response = self._http.request(method, url)
        except httpx.ConnectError:
            raise CliError(f"cannot reach the flexq server at {self.server} (connection refused).\n"
                           "Start one with `flexq server`.") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise CliError(f"request to the flexq server at {self.server} failed: {exc}") from None
        if response.status_code >= 400:
            raise _server_error(response)
        return response.text

    def stream_text(self, url: str, params: dict[str, str], headers: dict[str, str] | None = None) -> Iterator[str]:
        try:
            with self._http.stream("GET", url, params=params, headers=headers, timeout=None) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _server_error(response)
                yield from response.iter_text()
        except httpx.ConnectError:
            raise CliError(f"cannot reach the flexq server at {self.server} (connection refused).") from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise CliError(f"request to the flexq server at {self.server} failed: {exc}") from None


def _server_error(response: httpx.Response) -> ServerError:
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        return ServerError(status, str(status), response.text.strip()[:500])
    if isinstance(body, dict) and body.get("kind") == "Status":
        causes = (body.get("details") or {}).get("causes") or []
        return ServerError(status, str(body.get("reason") or status), str(body.get("message", "")), list(causes))
    return ServerError(status, str(status), str(body))
