"""Authentication and authorization in front of every route: bearer tokens, the two roles, Kubernetes' answers.

A request names its caller with ``Authorization: Bearer <token>`` (kubectl, gcloud, flexq's CLI) or the
``flexq-token`` cookie (the dashboard in a browser, signed in with ``/ui/?code=C``, a one-time code a token's holder
asks for at :data:`SIGN_IN_CODES`, or ``/ui/?token=T``; its writes must also carry the session's CSRF token). No
valid token: 401, except for the public paths (``/healthz``, ``/version``) and, on a server in anonymous mode
(``--auth anonymous``, loopback only), where a caller without a recognised token acts as the administrator. A path
to a job's Ray dashboard that carries a capability (:mod:`flexq.server.raycap`) is authorized by it alone, whatever
else the request presents; one that carries an invalid one is refused. A caller whose role may not do what it
asks: 403, worded as Kubernetes words it (verb, resource, API group, namespace). The caller is left in the
request's state (``request.state.identity``) for handlers that authorize per object.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qsl

from flexq.auth import ANONYMOUS, PUBLIC_PATHS, Identity, TokenBook, authorize, forbidden_message, request_attributes
from flexq.server.raycap import capability_key, capability_path, valid
from flexq.server.status import status_body

__all__ = ["COOKIE", "CSRF_COOKIE", "CSRF_HEADER", "AuthMiddleware", "Authenticator", "caller", "google_error",
           "is_gke", "reply"]

COOKIE: Final = "flexq-token"
CSRF_COOKIE: Final = "flexq-csrf"
"""The dashboard session's CSRF token: an HttpOnly cookie, which no page's script reads; the server gives it to the
dashboard's own pages (a ``<meta name="flexq-csrf">``), which send it back in :data:`CSRF_HEADER` with every
write. A page of another site can neither read it nor set it."""
CSRF_HEADER: Final = "x-csrf-token"
_SAFE: Final = frozenset({"GET", "HEAD", "OPTIONS"})

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


@dataclass(frozen=True, slots=True)
class Presented:
    """What a request presents: its token, whether that came from the dashboard's cookie, and the session's CSRF
    token (its cookie) and the copy a page sent in :data:`CSRF_HEADER`."""

    token: str | None = None
    by_cookie: bool = False
    csrf_cookie: str | None = None
    csrf_header: str | None = None

    def csrf_ok(self) -> bool:
        return bool(self.csrf_cookie) and hmac.compare_digest(self.csrf_cookie or "", self.csrf_header or "")


def _presented(scope: Scope) -> Presented:
    bearer: str | None = None
    cookies: dict[str, str] = {}
    header: str | None = None
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for key, value in headers:
        if key == b"authorization" and bearer is None:
            scheme, _, credential = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credential.strip():
                bearer = credential.strip()
        elif key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:
                continue
            cookies.update({name: str(morsel.value) for name, morsel in jar.items()})
        elif key == CSRF_HEADER.encode():
            header = value.decode("latin-1").strip()
    if bearer is not None:
        return Presented(bearer)
    return Presented(cookies.get(COOKIE), COOKIE in cookies, cookies.get(CSRF_COOKIE), header)


def is_gke(path: str) -> bool:
    return path.startswith("/v1/projects")


async def reply(scope: Scope, send: Send, code: int, body: dict[str, Any]) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": body.get("message", "")[:120]})
        return
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if code == 401:
        headers.append((b"www-authenticate", b'Bearer realm="flexq"'))
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def google_error(code: int, message: str) -> dict[str, Any]:
    status = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}.get(code, "INVALID_ARGUMENT")
    return {"error": {"code": code, "message": message, "status": status}}


_COOKIE_AGE: Final = 12 * 3600
SIGN_IN_CODES: Final = "/flexq/v1/sign-in-codes"
"""``POST`` with a token: a code that signs a browser in once, within :data:`_CODE_AGE` seconds (``/ui/?code=C``)."""
_CODE_AGE: Final = 60.0


class AuthMiddleware:
    def __init__(self, app: ASGIApp, auth: Authenticator) -> None:
        self.app = app
        self.auth = auth
        self._ray_key: bytes | None = None
        self._codes: dict[str, tuple[str, float]] = {}
        """Sign-in code -> (the token it stands for, when it expires): what ``flexq dashboard`` gives the browser
        instead of the token, so that the address it opens over plain HTTP carries nothing a program that took the
        port could use."""

    def _new_code(self, token: str) -> str:
        now = time.monotonic()
        self._codes = {c: (t, until) for c, (t, until) in self._codes.items() if until > now}
        code = secrets.token_urlsafe(24)
        self._codes[code] = (token, now + _CODE_AGE)
        return code

    def _redeem(self, code: str) -> str:
        """The token a code stands for (once; empty where the code is unknown or expired)."""
        token, until = self._codes.pop(code, ("", 0.0))
        return token if until > time.monotonic() else ""

    def _capability(self, path: str) -> bool | None:
        """Whether the Ray dashboard capability ``path`` carries is valid; None where it carries none."""
        found = capability_path(path)
        if found is None:
            return None
        if self._ray_key is None:
            self._ray_key = capability_key(self.auth.book.folder.parent)
        namespace, name, segment = found
        return self._ray_key is not None and valid(self._ray_key, segment, namespace, name, time.time())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "/")
        method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        granted = self._capability(path)
        if granted is not None:  # the path alone says: no cookie of a sandboxed page's request is looked at
            if granted:
                await self.app(scope, receive, send)
            else:
                await reply(scope, send, 403, status_body(403, "Forbidden", "this Ray dashboard address has expired "
                                                          "or is not valid: open it again from the job's page"))
            return
        if scope["type"] == "http" and path.startswith("/ui") and ("token" in query or "code" in query):
            await self._sign_in(scope, send, path, query.get("token") or self._redeem(query.get("code", "")))
            return
        presented = _presented(scope)
        who = self.auth.identify(presented.token)
        if scope["type"] == "http" and path == SIGN_IN_CODES and method == "POST" and who is not None \
                and presented.token and not presented.by_cookie:
            await reply(scope, send, 201, {"code": self._new_code(presented.token), "expiresInSeconds": _CODE_AGE})
            return
        if who is None:
            if path in PUBLIC_PATHS:
                await self.app(scope, receive, send)
                return
            text = "Unauthorized: a valid bearer token is required (flexq token create; flexq env)"
            await reply(scope, send, 401, google_error(401, text) if is_gke(path)
                         else status_body(401, "Unauthorized", "Unauthorized"))
            return
        if presented.by_cookie and scope["type"] == "http" and method not in _SAFE and not presented.csrf_ok():
            text = (f"a write from the dashboard's session must carry its CSRF token (the {CSRF_COOKIE} cookie's, "
                    f"given to its pages, in the {CSRF_HEADER} header)")
            await reply(scope, send, 403, google_error(403, text) if is_gke(path)
                        else status_body(403, "Forbidden", text))
            return
        attrs = request_attributes(method, path, query)
        if attrs is not None and not authorize(who, attrs):
            message = forbidden_message(who, attrs)
            details = {"name": attrs.name, "group": attrs.group, "kind": attrs.resource} if attrs.resource else None
            await reply(scope, send, 403, google_error(403, message) if is_gke(path)
                         else status_body(403, "Forbidden", message, details))
            return
        scope.setdefault("state", {})["identity"] = who
        await self.app(scope, receive, send)

    async def _sign_in(self, scope: Scope, send: Send, path: str, token: str) -> None:
        """``/ui/...?code=C`` (what ``flexq dashboard`` prints where tokens are required) or ``?token=T``: the token
        becomes an HttpOnly cookie, so that the pages and their event stream, which cannot send headers, are
        authorized, and the browser is sent on to the address without it."""
        if not token or self.auth.book.identify(token) is None:
            await reply(scope, send, 401, status_body(401, "Unauthorized", "Unauthorized: the sign-in address has "
                                                                           "expired or was used: run flexq "
                                                                           "dashboard again"))
            return
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        cookie = f"{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={_COOKIE_AGE}{secure}"
        csrf = (f"{CSRF_COOKIE}={secrets.token_urlsafe(24)}; Path=/; HttpOnly; SameSite=Strict; Max-Age={_COOKIE_AGE}"
                f"{secure}")
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", path.encode()), (b"set-cookie", cookie.encode()),
                                (b"set-cookie", csrf.encode()), (b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
