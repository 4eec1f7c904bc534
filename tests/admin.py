"""HTTP to a test's flexq server as its administrator: httpx's functions, with the administrator's token added for
the servers registered here (as flexq's CLI presents it from ``FLEXQ_HOME/auth/admin.token``).

A server requires a token on loopback too; tests that speak HTTP to it call ``admin.get(url)`` where they would call
``httpx.get(url)``. A request that brings its own ``Authorization`` header or cookies is sent as it is (the tests of
authentication); a URL of no registered server (a Ray dashboard) gets nothing added.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from flexq.auth import read_token

__all__ = ["client", "delete", "get", "headers_for", "patch", "post", "put", "register", "request", "stream",
           "token_of", "unregister"]

_HOMES: dict[str, Path] = {}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def register(url: str, home: Path) -> None:
    """Requests to ``url``'s origin present the administrator's token of the server whose state is ``home``."""
    _HOMES[_origin(url)] = home


def unregister(url: str) -> None:
    _HOMES.pop(_origin(url), None)


def token_of(home: Path) -> str:
    token = read_token(home)
    assert token is not None, f"the server under {home} has made no administrator's token"
    return token


def headers_for(url: str, given: Any = None) -> dict[str, str]:
    """``given`` with the administrator's ``Authorization`` added where ``url`` is a registered server's."""
    headers = dict(given or {})
    home = _HOMES.get(_origin(url))
    token = read_token(home) if home is not None else None
    if token is not None and not any(k.lower() in ("authorization", "cookie") for k in headers):
        headers["Authorization"] = f"Bearer {token}"
    return headers


TIMEOUT = 30.0
"""Seconds a request waits for an answer unless it says otherwise (httpx's 5 s is short on a loaded machine)."""


def request(method: str, url: str, **kw: Any) -> httpx.Response:
    kw.setdefault("timeout", TIMEOUT)
    if "cookies" not in kw:
        kw["headers"] = headers_for(url, kw.get("headers"))
    return httpx.request(method, url, **kw)


def get(url: str, **kw: Any) -> httpx.Response:
    return request("GET", url, **kw)


def post(url: str, **kw: Any) -> httpx.Response:
    return request("POST", url, **kw)


def put(url: str, **kw: Any) -> httpx.Response:
    return request("PUT", url, **kw)


def patch(url: str, **kw: Any) -> httpx.Response:
    return request("PATCH", url, **kw)


def delete(url: str, **kw: Any) -> httpx.Response:
    return request("DELETE", url, **kw)


def stream(method: str, url: str, **kw: Any) -> AbstractContextManager[httpx.Response]:
    kw.setdefault("timeout", TIMEOUT)
    if "cookies" not in kw:
        kw["headers"] = headers_for(url, kw.get("headers"))
    return httpx.stream(method, url, **kw)


def client(base_url: str, **kw: Any) -> httpx.Client:
    """An ``httpx.Client`` for ``base_url`` that presents the administrator's token."""
    kw.setdefault("timeout", TIMEOUT)
    return httpx.Client(base_url=base_url, headers=headers_for(base_url, kw.pop("headers", None)), **kw)
