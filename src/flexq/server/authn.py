"""Authentication and authorization in front of every route: bearer tokens, the two roles, Kubernetes' answers.

A request names its caller with ``Authorization: Bearer <token>`` (kubectl, gcloud, flexq's CLI) or the
``flexq-token`` cookie (the dashboard in a browser). No valid token: 401, except for the public paths
(``/healthz``, ``/version``) and, on a server in anonymous mode (loopback only, the single-user default),
where a caller without a recognised token acts as the administrator. A caller whose role may not do what it
asks: 403, worded as Kubernetes words it (verb, resource, API group, namespace). The caller is left in the
request's state (``request.state.identity``) for handlers that authorize per object.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qsl

from flexq.auth import ANONYMOUS, Identity, TokenBook, authorize, forbidden_message, request_attributes
from flexq.auth.rbac import PUBLIC_PATHS
from flexq.server.status import status_body

__all__ = ["COOKIE", "AuthMiddleware", "Authenticator", "caller"]

COOKIE: Final = "flexq-token"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Authenticator:
    """Who a token names. ``anonymous``: a caller with no recognised token is the administrator."""

    book: TokenBook
    anonymous: bool

    def identify(self, token: str | None) -> Identity | None:
        found = self.book.identify(token) if token else None
        if found is None and self.anonymous:
            return ANONYMOUS
        return found


def caller(state: Any) -> Identity:
    """The caller a handler serves (the administrator where no authentication runs, as in embedded use)."""
    who = getattr(state, "identity", None)
    return who if isinstance(who, Identity) else ANONYMOUS


def _token(scope: Scope) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for key, value in headers:
        if key == b"authorization":
            scheme, _, credential = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credential.strip():
                return credential.strip()
        elif key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                continue
            if COOKIE in jar:
                return str(jar[COOKIE].value)
    return None


def _is_gke(path: str) -> bool:
    return path.startswith("/v1/projects")


async def _reply(scope: Scope, send: Send, code: int, body: dict[str, Any]) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": body.get("message", "")[:120]})
        return
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if code == 401:
        headers.append((b"www-authenticate", b'Bearer realm="flexq"'))
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _google(code: int, message: str) -> dict[str, Any]:
    status = "UNAUTHENTICATED" if code == 401 else "PERMISSION_DENIED"
    return {"error": {"code": code, "message": message, "status": status}}


_COOKIE_AGE: Final = 12 * 3600


class AuthMiddleware:
    def __init__(self, app: ASGIApp, auth: Authenticator) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "/")
        method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if scope["type"] == "http" and path.startswith("/ui") and "token" in query:
            await self._sign_in(scope, send, path, query["token"])
            return
        who = self.auth.identify(_token(scope))
        if who is None:
            if path in PUBLIC_PATHS:
                await self.app(scope, receive, send)
                return
            text = "Unauthorized: a valid bearer token is required (flexq token create; flexq env)"
            await _reply(scope, send, 401, _google(401, text) if _is_gke(path)
                         else status_body(401, "Unauthorized", "Unauthorized"))
            return
        attrs = request_attributes(method, path, query)
        if attrs is not None and not authorize(who, attrs):
            message = forbidden_message(who, attrs)
            details = {"name": attrs.name, "group": attrs.group, "kind": attrs.resource} if attrs.resource else None
            await _reply(scope, send, 403, _google(403, message) if _is_gke(path)
                         else status_body(403, "Forbidden", message, details))
            return
        scope.setdefault("state", {})["identity"] = who
        await self.app(scope, receive, send)

    async def _sign_in(self, scope: Scope, send: Send, path: str, token: str) -> None:
        """``/ui/...?token=T`` (what ``flexq dashboard`` prints where tokens are required): the token becomes an
        HttpOnly cookie, so that the pages and their event stream, which cannot send headers, are authorized,
        and the browser is sent on to the address without it."""
        if self.auth.book.identify(token) is None:
            await _reply(scope, send, 401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={_COOKIE_AGE}{secure}"
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", path.encode()), (b"set-cookie", cookie.encode()),
                                (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
