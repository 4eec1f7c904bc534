"""A job's Ray dashboard through the server: ``/ui/ray/<namespace>/<rayjob>/...`` is passed on to the dashboard of
the job's running Ray cluster (no port-forward needed; same origin as the rest of the dashboard).

Ray's dashboard addresses its pages, scripts and API with relative URLs, so it works under the prefix as it is.
Hop-by-hop headers are not passed on either way; a redirect to the cluster's own address is turned back into one
under the prefix.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

import httpx
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse, StreamingResponse
from starlette.background import BackgroundTask

__all__ = ["PREFIX", "ray_proxy_router"]

PREFIX: Final = "/ui/ray"
_HOP: Final = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                         "transfer-encoding", "upgrade", "host", "content-length",
                         # the caller's credentials stay here: the dashboard runs as the job's user
                         "authorization", "cookie", "x-csrf-token"})
_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
_STARTING: Final = 30.0


async def _send(client: httpx.AsyncClient, request: httpx.Request,
                running: Callable[[], bool]) -> httpx.Response | httpx.HTTPError:
    """Send ``request``; while the cluster is ``running`` but its dashboard refuses connections (it comes up a few
    seconds after the head), try again for up to :data:`_STARTING` seconds."""
    deadline = time.monotonic() + _STARTING
    while True:
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            if time.monotonic() > deadline or not running():
                return exc
            await asyncio.sleep(0.5)
        except httpx.HTTPError as exc:
            return exc


def ray_proxy_router(dashboard_port: Callable[[str, str], int | None] | None) -> APIRouter:
    """``dashboard_port(namespace, rayjob)``: the running cluster's dashboard port on 127.0.0.1, or None."""
    router = APIRouter(include_in_schema=False)

    @router.get(PREFIX + "/{namespace}/{name}")
    async def bare(namespace: str, name: str) -> Response:
        return RedirectResponse(f"{name}/", status_code=307)

    @router.api_route(PREFIX + "/{namespace}/{name}/{path:path}", methods=_METHODS)
    async def proxy(request: Request, namespace: str, name: str, path: str) -> Response:
        ports = dashboard_port
        port = ports(namespace, name) if ports is not None else None
        if ports is None or port is None:
            why = ("this server does not run jobs (--runtime none)" if ports is None else
                   f"the Ray cluster of RayJob {namespace}/{name} is not running (it starts when the job is "
                   "admitted and goes when it finishes)")
            return PlainTextResponse(f"no Ray dashboard: {why}\n", status_code=404)
        origin = f"http://127.0.0.1:{port}"
        client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        upstream = client.build_request(request.method, f"{origin}/{path}", params=request.url.query,
                                        headers=headers, content=await request.body())
        answer = await _send(client, upstream, lambda: ports(namespace, name) == port)
        if isinstance(answer, httpx.HTTPError):
            await client.aclose()
            return PlainTextResponse(f"the Ray dashboard of RayJob {namespace}/{name} did not answer: {answer}\n",
                                     status_code=502)
        out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        location = out.get("location")
        if location is not None and location.startswith(origin):
            out["location"] = f"{PREFIX}/{namespace}/{name}" + location[len(origin):]

        async def close() -> None:
            await answer.aclose()
            await client.aclose()

        return StreamingResponse(answer.aiter_raw(), status_code=answer.status_code, headers=out,
                                 background=BackgroundTask(close))

    return router
