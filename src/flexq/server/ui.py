"""The web dashboard: pages under ``/ui/`` and the JSON behind them under ``/flexq/v1/dashboard/``.

Pages are plain HTML, CSS and JavaScript shipped in the package (:mod:`flexq.ui`); they read the JSON endpoints
(same origin, relative URLs) and refresh when the store changes, told by server-sent events
(``/flexq/v1/dashboard/changes``, one ``change`` event per burst of commits). The jobs table is filtered, sorted
and paged by the server (:mod:`flexq.server.ui_jobs`), so a page moves a page of rows whatever the number of
workloads.

A page signed in by the session cookie carries the session's CSRF token in ``<meta name="flexq-csrf">`` (the cookie
itself is HttpOnly: no page's script reads it), which its writes send back in ``X-CSRF-Token``.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
import threading
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse, StreamingResponse

import flexq.server.ui_data as ui_data
import flexq.server.ui_history as ui_history
from flexq.auth import Attributes, Role, authorize
from flexq.controller import RayRuntime, Sample, Tally
from flexq.objects import ObjectService
from flexq.server.authn import CSRF_COOKIE, caller
from flexq.server.hub import ChangeHub
from flexq.server.offload import off_loop
from flexq.server.raycap import capability, capability_key
from flexq.server.rayproxy import PREFIX, ray_proxy_router
from flexq.server.status import status_body
from flexq.server.ui_history import PoolHistory
from flexq.server.ui_jobs import JobTable
from flexq.server.ui_models import History, JobDetail, JobPage, Overview, Report
from flexq.store import BaseStore, Key, NotFound

__all__ = ["ui_router"]

_PAGES: Final = {"overview": ("Overview", "/ui/"), "jobs": ("Jobs", "/ui/jobs"), "job": ("Job", "/ui/jobs"),
                  "reports": ("Simulator reports", "/ui/reports")}
"""Each page: its title, and the navigation link it falls under; its ``<main>`` is ``static/NAME.html``."""
_NAV: Final = (("/ui/", "Overview"), ("/ui/jobs", "Jobs"), ("/ui/reports", "Simulator reports"), ("/docs", "API"))
_TYPES: Final = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")
Sort = Literal["created", "name", "queue", "state", "priority", "wait", "cost"]
State = Literal["pending", "reserved", "admitted", "running", "succeeded", "failed", "inactive"]
"""As :data:`flexq.server.ui_data.STATES`."""


def _assets() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("flexq.ui") / "static"
    out = {}
    for entry in folder.iterdir():
        suffix = Path(entry.name).suffix
        if entry.is_file() and suffix in _TYPES:
            out[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return out


_CHARSET: Final = b'<meta charset="utf-8">\n'


def _page(name: str, main: bytes, executes: bool) -> bytes:
    """A whole page: the head and navigation every page shares, ``main`` (its ``<main>``), then its scripts. Where
    the server does not run jobs (``executes`` false), every page says so under its header."""
    title, current = _PAGES[name]
    mark = ' aria-current="page"'
    links = "".join(f'<a href="{href}"{mark if href == current else ""}>{text}</a>' for href, text in _NAV)
    head = ('<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<title>flexq · {title}</title>\n<link rel="icon" href="data:,">\n'
            '<link rel="stylesheet" href="/ui/static/app.css">\n</head>\n<body>\n'
            f'<header><span class="brand">flexq</span><nav aria-label="Dashboard">{links}</nav>'
            '<span class="live" id="live" role="status">connecting…</span></header>\n'
            + ("" if executes else '<p class="notice" id="not-executed">This server runs with <code>--runtime '
               'none</code>: jobs are queued and admitted, but not executed (no pods run, no logs).</p>\n')
            + '<div class="error" id="error" role="alert" hidden></div>\n')
    tail = (f'<script src="/ui/static/common.js"></script>\n<script src="/ui/static/{name}.js"></script>\n'
            '</body>\n</html>\n')
    return head.encode() + main + tail.encode()


class Observed(Protocol):
    """Where the controller's state is read from (under its lock): the metrics' figures (the counters and where things
    stand, or where things stand alone), and each workload's cost so far, runs still going included."""

    def observe(self) -> tuple[Tally, Sample]: ...

    def standing(self) -> Sample: ...

    def costs(self) -> dict[str, float]: ...


def ui_router(service: ObjectService, hub: ChangeHub, runtime: RayRuntime | None, home: Path | None,
              observed: Observed | None) -> APIRouter:
    """The dashboard's pages, assets, JSON, change stream, report files and the Ray dashboard proxy."""
    router = APIRouter()
    table = JobTable(service.store)
    threading.Thread(target=table.warm, name="dashboard-jobs", daemon=True).start()
    reports_dir = home / "reports" if home is not None else None
    _page_routes(router, reports_dir, runtime is not None)
    _data_routes(router, service.store, table, runtime, observed)
    _history_route(router, table, PoolHistory(service.store))
    _reports_route(router, reports_dir)
    _changes_route(router, service.store, hub)
    key = capability_key(home) if home is not None else None
    router.include_router(ray_proxy_router(runtime.dashboard_port if runtime is not None else None,
                                           (lambda ns, name: capability(key, ns, name, time.time()))
                                           if key is not None else None))
    return router


def _page_routes(router: APIRouter, reports_dir: Path | None, executes: bool) -> None:
    """The pages, their assets, and the files of simulator reports."""
    assets = _assets()
    pages = {name: _page(name, assets.pop(f"{name}.html")[0], executes) for name in _PAGES}

    def page(name: str, request: Request) -> Response:
        body = pages[name]
        csrf = request.cookies.get(CSRF_COOKIE)
        if csrf:  # the session's, for this page's writes
            body = body.replace(_CHARSET, _CHARSET + f'<meta name="flexq-csrf" content="{html.escape(csrf)}">\n'
                                .encode(), 1)
        return Response(body, media_type=_TYPES[".html"], headers={"Cache-Control": "no-store"})

    @router.get("/ui", include_in_schema=False)
    async def ui_root() -> Response:
        return RedirectResponse("/ui/", status_code=307)

    @router.get("/ui/", include_in_schema=False)
    async def overview_page(request: Request) -> Response:
        return page("overview", request)

    @router.get("/ui/jobs", include_in_schema=False)
    async def jobs_page(request: Request) -> Response:
        return page("jobs", request)

    @router.get("/ui/jobs/{namespace}/{name}", include_in_schema=False)
    async def job_page(request: Request, namespace: str, name: str) -> Response:
        return page("job", request)

    @router.get("/ui/reports", include_in_schema=False)
    async def reports_page(request: Request) -> Response:
        return page("reports", request)

    @router.get("/ui/static/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in assets:
            return PlainTextResponse("not found\n", status_code=404)
        body, kind = assets[name]
        return Response(body, media_type=kind, headers={"Cache-Control": "max-age=300"})

    @router.get("/ui/reports/{report}/{file}", include_in_schema=False)
    async def report_file(report: str, file: str) -> Response:
        if reports_dir is None or not _NAME.match(report) or not _NAME.match(file):
            return PlainTextResponse("not found\n", status_code=404)
        path = reports_dir / report / file
        if not path.is_file():
            return PlainTextResponse(f"no file {file} in report {report}\n", status_code=404)
        return FileResponse(path)



def _data_routes(router: APIRouter, store: BaseStore, table: JobTable, runtime: RayRuntime | None,
                 observed: Observed | None) -> None:
    """The JSON behind the overview, the jobs table and a job's page."""
    @router.get("/flexq/v1/dashboard/overview", response_model=Overview, tags=["dashboard"])
    def overview(request: Request) -> Overview:
        """ClusterQueues (and cohorts) with quota and usage per flavor and resource, node pools with their nodes
        and cost, and ProvisioningRequests in flight with their ETA (``flexq top``'s figures). A developer sees the
        ProvisioningRequests of their namespace only."""
        who = caller(request.state)
        rv = store.current_rv()
        rows = ui_data.queues(store.list_objects("kueue.x-k8s.io", "clusterqueues")[0])
        sample = observed.standing() if observed is not None else None
        if sample is not None:
            rows = [row.model_copy(update={"nextStartSeconds": round(min(waits)),
                                           "allStartedSeconds": round(max(waits))})
                    if (waits := sample.estimated_waits.get(row.name)) else row for row in rows]
        return Overview(now=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), resourceVersion=rv, queues=rows,
                        executes=runtime is not None,
                        cohorts=ui_data.cohorts(rows, store.list_objects("kueue.x-k8s.io", "cohorts")[0]),
                        pools=ui_data.pools(store.list_objects("flexq.dev", "nodepools")[0],
                                            store.list_objects("", "nodes")[0], sample),
                        provisioning=ui_data.provisioning(
                            p for p in store.list_objects("autoscaling.x-k8s.io", "provisioningrequests")[0]
                            if authorize(who, Attributes("list", "autoscaling.x-k8s.io", "provisioningrequests",
                                                         namespace=p["metadata"].get("namespace")))))

    @router.get("/flexq/v1/dashboard/jobs", response_model=JobPage, tags=["dashboard"])
    def jobs(request: Request,
             queue: Annotated[str | None, Query(description="a LocalQueue or ClusterQueue")] = None,
             state: State | None = None,
             flavor: str | None = None,
             sort: Sort = "created", order: Literal["asc", "desc"] = "asc",
             offset: Annotated[int, Query(ge=0)] = 0, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> JobPage:
        """Every job (one row per workload; a racing workload's variants are not rows), filtered, sorted and
        paged: priority, flavors per pod set, wait so far, the one-line why-pending reason and ETA, cost. A developer
        sees their namespace's jobs only."""
        who = caller(request.state)
        scope = who.namespace if who.role is Role.DEVELOPER else None
        costs = observed.costs() if observed is not None else None
        return table.page(queue, state, flavor, sort, order == "desc", offset, limit, scope, costs)

    @router.get("/flexq/v1/dashboard/jobs/{namespace}/{name}", response_model=JobDetail, tags=["dashboard"],
                responses={404: {"description": "no such workload"}})
    def job(namespace: str, name: str) -> Any:
        """One job, by its workload's name or its job's: its row, a timeline (conditions, Events,
        ProvisioningRequests) and its phases, the flavors considered and why each was refused, its racing variants,
        the metrics its script reported, and where its log and Ray dashboard are."""
        return _job_detail(store, table, runtime, namespace, name, observed.costs() if observed is not None else None)


def _workload(store: BaseStore, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return store.get(Key("kueue.x-k8s.io", "workloads", namespace, name))
    except NotFound:
        return None


def _job_detail(store: BaseStore, table: JobTable, runtime: RayRuntime | None, namespace: str, name: str,
                costs: Mapping[str, float] | None) -> Any:
    wl = _workload(store, namespace, name)
    if wl is None:  # a job's name, as people know their jobs
        owned = table.workload_of(namespace, name)
        wl = _workload(store, namespace, owned) if owned is not None else None
        if wl is None:
            return JSONResponse(status_body(404, "NotFound", f'no workload or job "{name}" in namespace '
                                            f'{namespace}'), 404)
        name = str(wl["metadata"]["name"])
    row = table.row(namespace, name, costs)
    if row is None:
        return JSONResponse(status_body(404, "NotFound", f"workload {name} is a racing variant: open its "
                                        "workload"), 404)
    own = {name, row.jobName} | {v.name for v in ui_data.variants(wl)}
    events = [e for e in store.list_objects("", "events", namespace)[0]
              if (e.get("involvedObject") or {}).get("name") in own]
    variant = ui_data.variant_prefix(name)  # a race's variants are gone from its status once it is over
    requests = [p for p in store.list_objects("autoscaling.x-k8s.io", "provisioningrequests", namespace)[0]
                if any(r.get("name") in own or str(r.get("name", "")).startswith(variant)
                       for r in p["metadata"].get("ownerReferences") or [])]
    job_status, log_url, ray_url, metrics = "", None, None, []
    if row.jobKind == "RayJob":
        with contextlib.suppress(NotFound):
            job_status = str((store.get(RayRuntime.key(namespace, row.jobName)).get("status") or {})
                             .get("jobStatus") or "")
        if runtime is not None:
            path = runtime.log_path(namespace, row.jobName)
            if path.exists():
                log_url = f"/flexq/v1/namespaces/{namespace}/rayjobs/{row.jobName}/logs"
                metrics = ui_data.metric_points(path.read_text(encoding="utf-8", errors="replace"))
            if runtime.dashboard_port(namespace, row.jobName) is not None:
                ray_url = f"{PREFIX}/{namespace}/{row.jobName}/"
    return JobDetail(job=row, why=ui_data.why(wl), timeline=ui_data.timeline(wl, events, requests),
                     considered=ui_data.considered(wl), variants=ui_data.variants(wl), metrics=metrics,
                     jobStatus=job_status, logUrl=log_url, rayDashboardUrl=ray_url,
                     phases=ui_data.phases(wl, events, requests, row.state == "running", runtime is not None),
                     executes=runtime is not None)


def _history_route(router: APIRouter, table: JobTable, pools: PoolHistory) -> None:
    @router.get("/flexq/v1/dashboard/history", response_model=History, tags=["dashboard"])
    def history(request: Request,
                minutes: Annotated[int, Query(ge=1, le=7 * 24 * 60, description="the window, up to now")] = 60
                ) -> History:
        """Over the last ``minutes``: jobs waiting per ClusterQueue and admissions per bucket (from the workloads'
        own times), and each node pool's nodes (since the server started). A developer sees their namespace's
        jobs only."""
        who = caller(request.state)
        now = time.time()
        since = now - minutes * 60
        scope = who.namespace if who.role is Role.DEVELOPER else None
        names = (str(p["metadata"]["name"]) for p in table.store.list_objects("flexq.dev", "nodepools")[0])
        return ui_history.history(table.entries(scope), pools.series(since, names), since, now)


def _reports_route(router: APIRouter, reports_dir: Path | None) -> None:
    @router.get("/flexq/v1/dashboard/reports", response_model=list[Report], tags=["dashboard"])
    def reports() -> list[Report]:
        """Simulator reports under ``FLEXQ_HOME/reports/<name>/`` (``flexq simulate --report``), newest first."""
        if reports_dir is None or not reports_dir.is_dir():
            return []
        found = [(p.stat().st_mtime, p.parent.name) for p in reports_dir.glob("*/report.html")
                 if _NAME.match(p.parent.name)]
        return [Report(name=name, url=f"/ui/reports/{name}/report.html",
                       modified=datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
                for at, name in sorted(found, reverse=True)]


def _changes_route(router: APIRouter, store: BaseStore, hub: ChangeHub) -> None:
    @router.get("/flexq/v1/dashboard/changes", tags=["dashboard"],
                responses={200: {"content": {"text/event-stream": {}},
                                 "description": "a `change` event (data: the store's resourceVersion) per burst"}})
    async def changes(request: Request) -> StreamingResponse:
        """Server-sent events: ``change`` whenever the store commits (bursts coalesced to one a second at most),
        a comment every 15 s to keep the connection open. The stream ends after 10 minutes (EventSource
        reconnects by itself)."""

        async def stream() -> AsyncIterator[bytes]:
            yield b"retry: 2000\n\n"
            last = -1
            deadline = quiet = time.monotonic()
            deadline += 600.0
            while time.monotonic() < deadline and not hub.closed and not await request.is_disconnected():
                rv = await off_loop(store.current_rv)  # the store's lock may be held by a long write
                if rv != last:
                    yield f"event: change\ndata: {rv}\n\n".encode()
                    last, quiet = rv, time.monotonic()
                    await asyncio.sleep(1.0)  # what commits meanwhile is told by the next event
                    continue
                if time.monotonic() - quiet > 15.0:
                    yield b": idle\n\n"
                    quiet = time.monotonic()
                await hub.wait(2.0)  # short: a commit just before the wait began is seen on the next round

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
