"""A job's Ray dashboard through the server: ``/ui/ray/<namespace>/<rayjob>/...`` is passed on to the dashboard of
the job's running Ray cluster (no port-forward needed).

Ray's dashboard has no authentication, and what answers on a cluster's dashboard port is the job's to serve (its
processes run there). So every answer under the prefix is sandboxed (``Content-Security-Policy: sandbox
allow-scripts allow-forms allow-popups``): an opaque origin, whose scripts can neither read the dashboard's
cookies nor call flexq's API with them. A browser sends such a page's requests without the dashboard's cookies,
so a caller allowed to see a job's Ray dashboard is sent on from ``/ui/ray/<namespace>/<rayjob>/`` to
``/ui/ray/<namespace>/<rayjob>/~<capability>/`` (:mod:`flexq.server.raycap`), which authorizes that job's Ray
dashboard alone, and which Ray's relative URLs keep; there the answers let the sandboxed page read them (CORS, for
``Origin: null``) and leak no address (``Referrer-Policy: no-referrer``), and an HTML page gets, before its own
scripts, one that gives it the cookies and storage that a sandboxed page cannot have: none, and storage that lasts
as long as the page.

Ray's dashboard addresses its pages, scripts and API with relative URLs, so it works under the prefix as it is.
Hop-by-hop headers are not passed on either way; a redirect to the cluster's own address is turned back into one
under the prefix.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Final

import httpx
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse, RedirectResponse, StreamingResponse
from starlette.background import BackgroundTask

from flexq.server.raycap import MARK

__all__ = ["PREFIX", "SANDBOX", "ray_proxy_router"]

PREFIX: Final = "/ui/ray"
SANDBOX: Final = "sandbox allow-scripts allow-forms allow-popups"
"""The Content-Security-Policy of every answer under :data:`PREFIX`."""
_HOP: Final = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                         "transfer-encoding", "upgrade", "host", "content-length",
                         # the caller's credentials stay here: the dashboard runs as the job's user
                         "authorization", "cookie", "x-csrf-token", "set-cookie", "origin"})
_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_STARTING: Final = 30.0
_OPENED: Final = {"access-control-allow-origin": "*", "referrer-policy": "no-referrer"}
"""What answers on a capability path carry besides the sandbox."""
_SHIM: Final = b"""<script>(() => {
  "use strict";
  // A sandboxed page (an opaque origin) has no cookies and no storage: reading them throws. Ray's dashboard reads
  // both; it is given none, and storage that lasts as long as the page.
  const storage = () => {
    const items = new Map();
    return {
      getItem: (key) => items.has(String(key)) ? items.get(String(key)) : null,
      setItem: (key, value) => { items.set(String(key), String(value)); },
      removeItem: (key) => { items.delete(String(key)); },
      clear: () => { items.clear(); },
      key: (index) => Array.from(items.keys())[index] ?? null,
      get length() { return items.size; },
    };
  };
  try { Object.defineProperty(document, "cookie", {get: () => "", set: () => {}, configurable: true}); } catch (_) {}
  for (const name of ["localStorage", "sessionStorage"]) {
    try { Object.defineProperty(window, name, {value: storage(), configurable: true}); } catch (_) {}
  }
})();</script>"""


def _sandboxed(headers: Mapping[str, str], opened: bool) -> dict[str, str]:
    """``headers`` with the sandbox added to whatever policy they carry (each policy of a list is enforced), and
    the capability path's headers where ``opened``."""
    out = dict(headers)
    theirs = out.pop("content-security-policy", None)
    out["content-security-policy"] = f"{theirs}, {SANDBOX}" if theirs else SANDBOX
    if opened:
        out.update(_OPENED)
    return out


def _with_shim(html: bytes) -> bytes:
    """``html`` with :data:`_SHIM` first in its head (else first of all)."""
    lowered = html[:4096].lower()
    at = lowered.find(b"<head")
    end = lowered.find(b">", at) + 1 if at >= 0 else 0
    return html[:end] + _SHIM + html[end:]


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


def _preflight(request: Request) -> Response:
    """The answer to a sandboxed page's CORS preflight on a capability path: what it asks for, allowed."""
    asked = request.headers.get("access-control-request-headers", "")
    return Response(status_code=204, headers=_sandboxed({
        "access-control-allow-methods": ", ".join(m for m in _METHODS if m != "OPTIONS"),
        "access-control-allow-headers": asked, "access-control-max-age": "600"}, opened=True))


def ray_proxy_router(dashboard_port: Callable[[str, str], int | None] | None,
                     capability: Callable[[str, str], str | None] | None = None) -> APIRouter:
    """``dashboard_port(namespace, rayjob)``: the running cluster's dashboard port on 127.0.0.1, or None.
    ``capability(namespace, rayjob)``: a capability path segment for that job's Ray dashboard (where a caller
    who opens its first page is sent on), or None."""
    router = APIRouter(include_in_schema=False)

    @router.get(PREFIX + "/{namespace}/{name}")
    async def bare(namespace: str, name: str) -> Response:
        return RedirectResponse(f"{name}/", status_code=307, headers=_sandboxed({}, opened=False))

    @router.api_route(PREFIX + "/{namespace}/{name}/{path:path}", methods=_METHODS)
    async def proxy(request: Request, namespace: str, name: str, path: str) -> Response:
        base = f"{PREFIX}/{namespace}/{name}"
        opened = path.startswith(MARK)  # a capability path (checked before anything is routed here)
        if opened:
            segment, slash, path = path.partition("/")
            if not slash:
                return RedirectResponse(f"{segment}/", status_code=307, headers=_sandboxed({}, opened=True))
            base += f"/{segment}"
            if request.method == "OPTIONS" and "access-control-request-method" in request.headers:
                return _preflight(request)
        elif not path and request.method == "GET" and capability is not None:
            minted = capability(namespace, name)
            if minted is not None:  # a browser's way in: its sandboxed page is authorized by the path
                return RedirectResponse(f"{minted}/", status_code=307, headers=_sandboxed({}, opened=False))
        ports = dashboard_port
        port = ports(namespace, name) if ports is not None else None
        if ports is None or port is None:
            why = ("this server does not run jobs (--runtime none)" if ports is None else
                   f"the Ray cluster of RayJob {namespace}/{name} is not running (it starts when the job is "
                   "admitted and goes when it finishes)")
            return PlainTextResponse(f"no Ray dashboard: {why}\n", status_code=404,
                                     headers=_sandboxed({}, opened))
        origin = f"http://127.0.0.1:{port}"
        client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, connect=5.0))
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]
        upstream = client.build_request(request.method, f"{origin}/{path}", params=request.url.query,
                                        headers=headers, content=await request.body())
        answer = await _send(client, upstream, lambda: ports(namespace, name) == port)
        if isinstance(answer, httpx.HTTPError):
            await client.aclose()
            return PlainTextResponse(f"the Ray dashboard of RayJob {namespace}/{name} did not answer: {answer}\n",
                                     status_code=502, headers=_sandboxed({}, opened))
        return await _relay(answer, client, origin, base, opened)

    return router


async def _relay(answer: httpx.Response, client: httpx.AsyncClient, origin: str, base: str,
                 opened: bool) -> Response:
    """The job's dashboard's ``answer`` (from ``origin``) passed back: sandboxed, a redirect to its own address
    turned into one under ``base``, an HTML page on a capability path (``opened``) given :data:`_SHIM`; ``answer``
    and ``client`` closed once it is sent."""
    out = _sandboxed({k: v for k, v in answer.headers.items() if k.lower() not in _HOP}, opened)
    location = out.get("location")
    if location is not None and location.startswith(origin):
        out["location"] = base + location[len(origin):]
    if opened and answer.headers.get("content-type", "").startswith("text/html"):
        try:
            body = await answer.aread()  # decoded: the shim goes into the page's text
        finally:
            await answer.aclose()
            await client.aclose()
        out.pop("content-encoding", None)
        return Response(_with_shim(body), status_code=answer.status_code, headers=out)

    async def close() -> None:
        await answer.aclose()
        await client.aclose()

    return StreamingResponse(answer.aiter_raw(), status_code=answer.status_code, headers=out,
                             background=BackgroundTask(close))
