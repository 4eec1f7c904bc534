"""The HTTP application: the Kubernetes API for kubectl, flexq's own API beside it (docs at ``/docs``)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, Response, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from flexq import __version__
from flexq.api import FieldCheck, FieldValidation, InputError, InvalidObject
from flexq.auth import Identity, Role
from flexq.controller import RayRuntime
from flexq.objects import BadRequest, ObjectService
from flexq.runtime import END_MARKER
from flexq.server.access import refusal
from flexq.server.authn import Authenticator, AuthMiddleware, caller
from flexq.server.bodylimit import BodyLimit
from flexq.server.discovery import version_info
from flexq.server.gke import gke_router
from flexq.server.guard import RequestGuard
from flexq.server.hub import ChangeHub
from flexq.server.k8s import KubeApi
from flexq.server.lane import VERBS, KubeLane
from flexq.server.logs import follow_log, read_log
from flexq.server.offload import off_loop
from flexq.server.openapi import gv_document, root_document
from flexq.server.openapi_pb import OPENAPI_V2_PROTOBUF, OPENAPI_V2_PROTOBUF_TYPE, encode_document
from flexq.server.openapi_v2 import v2_document
from flexq.server.prometheus import render_chunks
from flexq.server.sources import ApplySource, read_sources
from flexq.server.status import error_response, field_causes, status_body
from flexq.server.token_api import tokens_router
from flexq.server.ui import Observed, ui_router
from flexq.server.visibility import Leader, PendingWorkloads
from flexq.store import BaseStore, Key, NotFound

__all__ = ["create_app"]

_VERBS = list(VERBS)


class ApplyRequest(BaseModel):
    """Manifests to apply as a whole: every document of every source is written, or none."""

    sources: list[ApplySource]
    namespace: str = Field(default="default", description="namespace for namespaced objects that name none")
    fieldValidation: FieldValidation = Field(
        default=FieldValidation.STRICT, description="Strict: refuse fields the schema does not declare, with their "
        "lines; Warn: drop them and say so; Ignore: drop them")


class ApplyResult(BaseModel):
    kind: str
    group: str
    name: str
    namespace: str
    action: str


class ApplyResponse(BaseModel):
    results: list[ApplyResult]
    warnings: list[str] = Field(default_factory=list, description="fields dropped under fieldValidation=Warn")


def create_app(service: ObjectService, endpoint: str = "127.0.0.1:8585", runtime: RayRuntime | None = None,
               ca_pem: bytes = b"", observed: Observed | None = None,
               home: Path | None = None, auth: Authenticator | None = None,
               names: Iterable[str] | None = None, leader: Leader | None = None) -> FastAPI:
    """The whole HTTP surface. With ``auth``, every request is authenticated and authorized (see
    :mod:`flexq.server.authn`); without, every caller is the administrator (embedded use, tests). With ``names``
    (the names the server answers to), the Host, Origin and content-type checks of :mod:`flexq.server.guard` run in
    front of everything. ``leader`` gives the controller while this server leads: Kueue's visibility API reads its
    queues (without it, that API answers 503)."""
    hub = ChangeHub()
    service.store.subscribe(hub.committed)
    kube = KubeApi(service, hub, runtime.head_ports if runtime is not None else None,
                   PendingWorkloads(service.store, leader), runtime.home if runtime is not None else None)
    app = _bare_app(hub)
    app.state.hub = hub  # closed by the process that serves the app when it stops: open streams end
    app.include_router(gke_router(service, endpoint, ca_pem))
    app.include_router(ui_router(service, hub, runtime, home, observed))
    lane: ASGIApp = KubeLane(app.framework, kube)
    if auth is not None:
        app.include_router(tokens_router(auth.book))
        lane = AuthMiddleware(lane, auth)  # outside the lane: every request it serves was authorized first
    lane = BodyLimit(lane)  # a body over its limit is refused before authentication reads anything
    if names is not None:
        lane = RequestGuard(lane, names)  # outermost: what a web page sends is refused before anything reads it
    app.front = lane
    _cluster_routes(app, endpoint, ca_pem, observed, service.store)
    _kube_routes(app, kube)
    _flexq_routes(app, service, runtime)
    return app


class _App(FastAPI):
    """FastAPI with authentication and the Kubernetes API's lane in front of its own middleware: the API's
    requests (nearly all of them under load) skip the framework's error, telemetry and body-limit layers, which
    they do not use (the Kubernetes API answers its own errors and bounds its bodies), and those layers' cost on
    every request. Everything else goes on to the framework, authenticated."""

    front: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is None or scope["type"] == "lifespan":
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        await self.front(scope, receive, send)

    async def framework(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The application as FastAPI serves it (what the lane does not)."""
        await super().__call__(scope, receive, send)


def _bare_app(hub: ChangeHub) -> _App:
    """The application with no routes: its lifespan binds ``hub`` to the loop; bad requests get a plain 422."""
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        hub.bind(asyncio.get_running_loop())
        yield

    app = _App(title="flexq", version=__version__, lifespan=lifespan,
               description="flexq's own API. The Kubernetes API is served beside it under /api and /apis.")

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's 422, without echoing the input (which may not be text) back."""
        errors = [{"loc": [str(part) for part in e.get("loc", ())], "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    return app


def _cluster_routes(app: FastAPI, endpoint: str, ca_pem: bytes,
                    observed: Observed | None, store: BaseStore) -> None:
    """What describes the server itself: metrics, cluster-info, version, health and the OpenAPI documents."""
    @app.get("/metrics", tags=["metrics"], summary="Prometheus metrics: Kueue's names, and flexq's own (a "
             "developer's: their namespace's and the cluster-wide series)", response_class=PlainTextResponse)
    async def metrics(request: Request) -> Response:
        if observed is None:
            return PlainTextResponse("no controller runs in this server\n", status_code=404)
        who = caller(request.state)
        namespace = None if who.role is Role.ADMIN else who.namespace or ""
        # In threads, and sent as it is written: a server of a thousand queues writes tens of megabytes a scrape (and
        # waits for the controller's step to read its figures), while the event loop serves the other requests.
        tally, sample = await asyncio.to_thread(observed.observe)
        return StreamingResponse(render_chunks(tally, sample, namespace), media_type=CONTENT_TYPE_LATEST)

    @app.get("/flexq/v1/cluster-info", tags=["cluster"], summary="The HTTPS endpoint and its CA (public, as "
             "Kubernetes' cluster-info)")
    async def cluster_info() -> dict[str, str | None]:
        """Where kubectl reaches this server over HTTPS and the CA that signs it; ``server`` is null when the
        server serves plain HTTP only. ``flexq kubeconfig`` and ``flexq env`` write kubeconfigs from it."""
        if not ca_pem:
            return {"server": None, "certificateAuthorityData": None}
        return {"server": f"https://{endpoint}", "certificateAuthorityData": base64.b64encode(ca_pem).decode()}

    @app.get("/version", include_in_schema=False)
    async def version() -> dict[str, str]:
        return version_info()

    @app.get("/healthz", include_in_schema=False)
    @app.get("/livez", include_in_schema=False)
    async def healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> PlainTextResponse:
        """Ready while the store takes writes; 503 with the reason while it refuses them (its disk full), as the API
        server's readyz fails its etcd check."""
        refusing = store.refusing()
        if refusing is None:
            return PlainTextResponse("ok")
        return PlainTextResponse(f"[-]store failed: {refusing}\nreadyz check failed\n", status_code=503)

    _openapi_routes(app)


@cache
def _v2_protobuf() -> bytes:
    return encode_document(v2_document())


@cache
def _v2_json() -> bytes:
    return json.dumps(v2_document(), separators=(",", ":")).encode()


def _openapi_routes(app: FastAPI) -> None:
    """Kubernetes' OpenAPI documents, which kubectl reads to validate and explain: v3 per group-version, and the
    single v2 document in JSON or, as kubectl asks for it, gnostic's protobuf."""
    @app.get("/openapi/v2", include_in_schema=False)
    async def openapi_v2(request: Request) -> Response:
        if OPENAPI_V2_PROTOBUF in request.headers.get("accept", ""):
            return Response(await off_loop(_v2_protobuf), media_type=OPENAPI_V2_PROTOBUF_TYPE)
        return Response(await off_loop(_v2_json), media_type="application/json")  # made once, off the loop

    @app.get("/openapi/v3", include_in_schema=False)
    async def openapi_root() -> dict[str, Any]:
        return root_document()

    @app.get("/openapi/v3/api/{version}", include_in_schema=False)
    async def openapi_core(version: str) -> Response:
        doc = gv_document("", version)
        return JSONResponse(doc) if doc else JSONResponse(status_body(404, "NotFound", "not found"), 404)

    @app.get("/openapi/v3/apis/{group}/{version}", include_in_schema=False)
    async def openapi_group(group: str, version: str) -> Response:
        doc = gv_document(group, version)
        return JSONResponse(doc) if doc else JSONResponse(status_body(404, "NotFound", "not found"), 404)


def _kube_routes(app: FastAPI, kube: KubeApi) -> None:
    """The Kubernetes API: the core group under /api, the others under /apis, and pods' port-forward."""
    @app.api_route("/api", methods=_VERBS, include_in_schema=False)
    @app.api_route("/api/{path:path}", methods=_VERBS, include_in_schema=False)
    async def core(request: Request, path: str = "") -> Response:
        return await kube.core(request, path)

    @app.websocket("/api/v1/namespaces/{namespace}/pods/{name}/portforward")
    async def pod_port_forward(websocket: WebSocket, namespace: str, name: str) -> None:
        await kube.port_forward(websocket, namespace, name)

    @app.api_route("/apis", methods=_VERBS, include_in_schema=False)
    @app.api_route("/apis/{path:path}", methods=_VERBS, include_in_schema=False)
    async def groups(request: Request, path: str = "") -> Response:
        return await kube.groups(request, path)


def _flexq_routes(app: FastAPI, service: ObjectService, runtime: RayRuntime | None) -> None:
    """flexq's own API: a RayJob's driver log, and apply as a whole."""
    hub: ChangeHub = app.state.hub

    @app.get("/flexq/v1/namespaces/{namespace}/rayjobs/{name}/logs", tags=["jobs"],
             responses={404: {"description": "no such RayJob, or it has not run"}})
    async def rayjob_logs(namespace: str, name: str, follow: bool = False) -> Response:
        """The RayJob's driver log (``flexq logs rayjob/NAME [-f]``); with ``follow``, streamed until it ends."""
        try:
            service.store.get(Key("ray.io", "rayjobs", namespace, name))
        except NotFound:
            return JSONResponse(status_body(404, "NotFound", f'rayjobs.ray.io "{name}" not found'), 404)
        if runtime is None:
            return JSONResponse(status_body(404, "NotFound", "this server does not run jobs (--runtime none)"), 404)
        path = runtime.log_path(namespace, name)
        if not follow:
            if not path.exists():
                return JSONResponse(status_body(404, "NotFound", f"RayJob {name} has not started yet"), 404)
            return PlainTextResponse(read_log(path).replace(END_MARKER, ""))
        return StreamingResponse(follow_log(path, lambda: hub.closed), media_type="text/plain")

    @app.post("/flexq/v1/apply", response_model=ApplyResponse, tags=["objects"],
              responses={400: {"description": "unreadable input"}, 422: {"description": "an invalid object"}})
    async def apply(body: ApplyRequest, request: Request) -> Response:
        """Apply a multi-document manifest all-or-nothing (``flexq apply -f``)."""
        # Off the event loop: a write waiting for the store's lock must not stop reads.
        return await off_loop(_apply, service, body, caller(request.state))


def _apply(service: ObjectService, body: ApplyRequest, who: Identity) -> Response:
    try:
        docs = read_sources(body.sources, "no objects passed to apply")
        refused = refusal(who, docs, body.namespace)
        if refused is not None:
            return JSONResponse(status_body(403, "Forbidden", refused), 403)
        fields = FieldCheck(body.fieldValidation)
        outcomes = service.apply(docs, body.namespace, fields)
    except (InvalidObject, InputError, BadRequest) as exc:
        code = error_response(exc).status_code
        text = exc.message if isinstance(exc, BadRequest) else str(exc)
        causes = {"causes": field_causes(exc)} if isinstance(exc, InvalidObject) else None
        return JSONResponse(status_body(code, "Invalid" if code == 422 else "BadRequest", text, causes), code)
    except Exception as exc:
        return error_response(exc)
    return JSONResponse({"results": [
        {"kind": o.kind, "group": o.group, "name": o.name, "namespace": o.namespace, "action": o.action}
        for o in outcomes], "warnings": fields.warnings})
