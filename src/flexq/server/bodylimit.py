"""Request bodies bounded before anything reads them: 413 past the limit, as the API server's ``--max-request-bytes``.

The Kubernetes API server refuses a body over 3 MiB with ``413 RequestEntityTooLarge`` ("Request entity too large:
limit is 3145728"). The same holds here for ``/api`` and ``/apis``; flexq's own API, whose apply takes whole
manifests (up to :data:`~flexq.api.documents.MAX_INPUT_BYTES` a source) as JSON text, is bounded a little above
that. A ``Content-Length`` over the limit is refused before a byte is read; a body without one (chunked) is read
chunk by chunk and refused as soon as it passes the limit, so that no request makes the server hold more than the
limit; the connection is closed after the 413, as Go's server does, so that the rest is not read either. The
check runs in front of authentication and authorization. The Ray dashboard's proxy (``/ui/ray``), which
forwards job packages to Ray, is not bounded here.
"""

from __future__ import annotations

import json
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flexq.api import MAX_INPUT_BYTES
from flexq.server.authn import google_error, is_gke
from flexq.server.rayproxy import PREFIX as RAY_PREFIX
from flexq.server.status import status_body

__all__ = ["MAX_MANIFEST_REQUEST_BYTES", "MAX_REQUEST_BYTES", "BodyLimit", "body_limit", "too_large"]

MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
"""The largest body of a Kubernetes API request: the API server's ``--max-request-bytes`` default."""
MAX_MANIFEST_REQUEST_BYTES: Final = MAX_INPUT_BYTES + MAX_INPUT_BYTES // 4
"""The largest body of a request to flexq's own API: a manifest of :data:`MAX_INPUT_BYTES`, escaped as JSON text."""


def body_limit(path: str) -> int | None:
    """The most bytes a request body to ``path`` may have (None: not bounded here)."""
    if path == "/api" or path.startswith(("/api/", "/apis")):
        return MAX_REQUEST_BYTES
    if path.startswith(RAY_PREFIX + "/"):
        return None
    return MAX_MANIFEST_REQUEST_BYTES


def too_large(limit: int) -> str:
    """The API server's message for a body over ``limit`` bytes."""
    return f"Request entity too large: limit is {limit}"


class BodyLimit:
    """Reads the body of every request that may carry one up to its limit, then hands it to ``app`` whole."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "/")
        limit = body_limit(path) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
        length = next((value for key, value in headers if key == b"content-length"), None)
        if length is not None and length.strip().isdigit() and int(length) > limit:
            await self._refuse(scope, send, path, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # The client went, or its body stopped coming and the server let it go (see flexq.server.connection):
                # there is no one to answer, and half a body to act on is nothing to hand on.
                return
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(scope, send, path, limit)
                return
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        chunks.clear()
        await self.app(scope, _replay({"type": "http.request", "body": body, "more_body": False}, receive), send)

    @staticmethod
    async def _refuse(scope: Scope, send: Send, path: str, limit: int) -> None:
        """The 413, on a connection then closed: the rest of the body is not read."""
        message = too_large(limit)
        body = google_error(413, message) if is_gke(path) else status_body(413, "RequestEntityTooLarge", message)
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})


def _replay(first: Message, receive: Receive) -> Receive:
    """A ``receive`` that gives ``first``, then what ``receive`` gives (the client's disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if not given:
            given = True
            return first
        return await receive()

    return replay
