"""The Kubernetes API's own lane through the HTTP application.

kubectl's and controllers' requests are nearly all under ``/api`` and ``/apis``, and :class:`~flexq.server.k8s.KubeApi`
routes them itself (group, version, resource, name, subresource). Through the web framework each one would first be
matched against every route of the application and have its parameters solved, for nothing: under load that was a
tenth of the server's time. This middleware hands them to :class:`KubeApi` directly; the rest of the application
(flexq's API, the dashboard, the GKE API, the port-forward WebSocket) is served as before. It sits inside
authentication, so every request it serves has been authenticated and authorized first.
"""

from __future__ import annotations

from typing import Final

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from flexq.server.k8s import KubeApi

__all__ = ["VERBS", "KubeLane"]

VERBS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE")
"""The methods the Kubernetes API answers (others get the application's 405)."""


class KubeLane:
    def __init__(self, app: ASGIApp, kube: KubeApi) -> None:
        self.app = app
        self.kube = kube

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in VERBS:
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "/")
        if path == "/api" or path.startswith("/api/"):
            response = await self.kube.core(Request(scope, receive), path[5:])
        elif path == "/apis" or path.startswith("/apis/"):
            response = await self.kube.groups(Request(scope, receive), path[6:])
        else:
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)
