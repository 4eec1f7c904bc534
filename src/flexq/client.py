"""The HTTP client of a flexq server, the CLI's and the exporter's: the Kubernetes API paths of the server, and
its errors for people."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx

from flexq.api import KindInfo
from flexq.config import caller_token, server_ca
from flexq.errors import FlexqError

__all__ = ["CliError", "Client", "ServerError", "close_clients", "credentials"]


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


def credentials(server: str) -> tuple[dict[str, str], ssl.SSLContext | bool]:
    """The headers (the caller's token) and the TLS verification to reach ``server`` with."""
    token = caller_token()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    ca = server_ca()
    if server.startswith("https://") and ca is not None:
        return headers, ssl.create_default_context(cafile=str(ca))
    return headers, True


_OPEN: set[Client] = set()


def close_clients() -> None:
    """Close every client a command opened (the CLI's ``main`` does, on the way out)."""
    for client in list(_OPEN):
        client.close()


class Client:
    def __init__(self, server: str, timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        headers, verify = credentials(self.server)
        self._http = httpx.Client(base_url=self.server, timeout=timeout, headers=headers, verify=verify)
        _OPEN.add(self)

    def close(self) -> None:
        self._http.close()
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
