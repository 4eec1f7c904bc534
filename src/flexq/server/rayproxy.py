"""A job's Ray dashboard through the server: ``/ui/ray/<namespace>/<rayjob>/...`` is passed on to the dashboard of
the job's running Ray cluster (no port-forward needed; same origin as the rest of the dashboard).

Ray's dashboard addresses its pages, scripts and API with relative URLs, so it works under the prefix as it is.
Hop-by-hop headers are not passed on either way; a redirect to the cluster's own address is turned back into one
under the prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import httpx
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse, StreamingResponse
from starlette.background import BackgroundTask

__all__ = ["PREFIX", "ray_proxy_router"]

PREFIX: Final = "/ui/ray"
_HOP: Final = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                         "transfer-encoding", "upgrade", "host", "content-length"})
_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def ray_proxy_router(dashboard_port: Callable[[str, str], int | None] | None) -> APIRouter:
    """``dashboard_port(namespace, rayjob)``: the running cluster's dashboard port on 127.0.0.1, or None."""
    router = APIRouter(include_in_schema=False)

    @router.get(PREFIX + "/{namespace}/{name}")
    async def bare(namespace: str, name: str) -> Response:
        return RedirectResponse(f"{name}/", status_code=307)

    @router.api_route(PREFIX + "/{namespace}/{name}/{path:path}", methods=_METHODS)
    async def proxy(request: Request, namespace: str, name: str, path: str) -> Response:
        port = dashboard_port(namespace, name) if dashboard_port is not None else None
        if port is None:
            why = ("this server does not run jobs (--runtime none)" if dashboard_port is None else
                   f"the Ray cluster of RayJob {namespace}/{name} is not running (it starts when the job is "
                   "admitted and goes when it finishes)")
            return PlainTextResponse(f"no Ray dashboard: {why}\n", status_code=404)
        origin = f"http://127.0.0.1:{port}"
        client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        upstream = client.build_request(request.method, f"{origin}/{path}", params=request.url.query,
                                        headers=headers, content=await request.body())
        try:
            answer = await client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            await client.aclose()
            return PlainTextResponse(f"the Ray dashboard of RayJob {namespace}/{name} did not answer: {exc}\n",
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
