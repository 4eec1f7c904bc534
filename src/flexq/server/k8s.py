"""The Kubernetes API front door: ``/api/v1/...`` and ``/apis/<group>/<version>/...``.

Paths, verbs, query parameters, Table output, watch streams and Status errors follow the API server,
so that the real kubectl works against flexq unchanged.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
from fastapi import Request, Response, WebSocket
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from flexq.api import (
    MAX_NESTING,
    FieldCheck,
    FieldError,
    InputError,
    InvalidObject,
    KindInfo,
    UnknownKind,
    by_gvk,
    by_resource,
    load_yaml,
    nesting,
    numbers_only,
    parse_field_validation,
    text_only,
)
from flexq.auth import resource_path
from flexq.errors import FlexqError
from flexq.objects import (
    BadRequest,
    ListPages,
    ObjectService,
    Page,
    field_labels,
    field_selector,
    label_selector,
    table,
)
from flexq.runtime import END_MARKER, pod_log_file
from flexq.server.access import review
from flexq.server.authn import caller
from flexq.server.bodylimit import MAX_REQUEST_BYTES, too_large
from flexq.server.crds import CRD_GROUP, crd_answer
from flexq.server.discovery import (
    REVIEW_RESOURCES,
    VISIBILITY_GROUP,
    api_group_list,
    api_versions,
    group_versions,
    resource_list,
)
from flexq.server.hub import ChangeHub
from flexq.server.logs import follow_log, read_log
from flexq.server.offload import off_loop, write_off_loop
from flexq.server.portforward import TUNNEL_PROTOCOL, PortError, deny, serve_websocket
from flexq.server.protobuf import ProtobufError, decode_delete_options, decode_object
from flexq.server.status import error_response, status_body
from flexq.server.visibility import PendingWorkloads
from flexq.server.watch import watch_response
from flexq.store import BaseStore, NotFound, loads

__all__ = ["KubeApi", "PagedElsewhere", "whole_number"]

_PATCH_TYPES: Final = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


@dataclass(frozen=True, slots=True)
class Target:
    info: KindInfo
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None


PortMap = Callable[[str, Mapping[str, Any]], dict[int, int]]
"""(namespace, pod) -> the pod's ports -> ports on 127.0.0.1; raises LookupError with the reason."""


class KubeApi:
    """Request handlers over an :class:`ObjectService`; ``ports`` serves ``port-forward`` (None: no pod has any)."""

    def __init__(self, service: ObjectService, hub: ChangeHub, ports: PortMap | None = None,
                 visibility: PendingWorkloads | None = None, home: Path | None = None) -> None:
        self.service = service
        self.home = home
        """The running server's ``FLEXQ_HOME``, under which the logs of the jobs it runs are (None: it runs none)."""
        self.hub = hub
        self.ports = ports
        self.pages = ListPages()
        self.visibility = visibility or PendingWorkloads(service.store, None)
        """Kueue's visibility API (without a controller behind it: 503)."""
        self.elsewhere: ASGIApp | None = None
        """Who answers the lists this process does not page (:class:`PagedElsewhere`): an API worker's owner."""

    # --- routing -----------------------------------------------------------------------------------

    async def core(self, request: Request, path: str) -> Response:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return JSONResponse(api_versions(_address(request)))
        if parts[0] != "v1":
            return _not_found(f"the server could not find the requested resource (version {parts[0]})")
        return await self._resource(request, "", "v1", parts[1:])

    async def groups(self, request: Request, path: str) -> Response:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return JSONResponse(api_group_list())
        group = parts[0]
        if group == CRD_GROUP:
            code, body = crd_answer(request.method, parts[1:])
            return JSONResponse(body, code)
        versions = group_versions().get(group)
        if not versions or group == "":
            return _not_found(f"the server could not find the requested resource (group {group})")
        if len(parts) == 1:
            gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
            return JSONResponse({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs,
                                 "preferredVersion": gvs[0]})
        if group in REVIEW_RESOURCES and len(parts) == 3 and parts[2] in REVIEW_RESOURCES[group]:
            return await self._review(request, group, parts[1], parts[2])
        if group == VISIBILITY_GROUP and len(parts) > 2:
            return await self.visibility.answer(request, parts[1], parts[2:])
        return await self._resource(request, group, parts[1], parts[2:])

    async def _review(self, request: Request, group: str, version: str, plural: str) -> Response:
        if version != "v1" or request.method != "POST":
            return JSONResponse(status_body(405, "MethodNotAllowed", f"{plural} can only be created (POST)"), 405)
        try:
            return JSONResponse(review(caller(request.state), group, version, plural, await _body(request)), 201)
        except Exception as exc:
            return error_response(exc)

    async def _resource(self, request: Request, group: str, version: str, rest: list[str]) -> Response:
        if not rest:
            doc = resource_list(group, version)
            return JSONResponse(doc) if doc else _not_found("the server could not find the requested resource")
        where = resource_path(group, rest)
        namespace, plural, name, sub = where.namespace, where.resource, where.name or None, where.subresource or None
        info = by_resource(group, plural)
        if info is None or version not in info.versions or where.depth > 3:
            gr = f"{plural}.{group}" if group else plural
            return _not_found(f"the server could not find the requested resource ({gr})")
        if sub == "log" and info.kind == "Pod" and name is not None and request.method == "GET":
            return await self._pod_log(request, info, namespace or "default", name)
        if sub == "portforward" and info.kind == "Pod" and name is not None:
            # Reached by the SPDY upgrade kubectl tries when the WebSocket one was refused.
            refused = self._forwardable(namespace or "default", name)
            if refused is not None:
                return JSONResponse(status_body(*refused), refused[0])
            return JSONResponse(status_body(400, "BadRequest", f"port-forward is served over WebSocket (subprotocol "
                                            f"{TUNNEL_PROTOCOL}, kubectl 1.30 or later), not SPDY"), 400)
        if sub is not None and (sub != "status" or not info.status_subresource):
            return _not_found(f"the server could not find the requested resource ({plural}/{sub})")
        if info.namespaced is False and namespace is not None:
            return _not_found(f"the server could not find the requested resource ({plural} is not namespaced)")
        target = Target(info, version, namespace, name, sub)
        try:
            return await self._dispatch(request, target)
        except Exception as exc:
            return error_response(exc, info, name or "")

    async def _dispatch(self, request: Request, t: Target) -> Response:
        q = request.query_params
        dry_run = q.get("dryRun") == "All"
        try:
            fields = FieldCheck(parse_field_validation(q.get("fieldValidation")))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        response = await self._write_or_read(request, t, fields, dry_run)
        for warning in fields.warnings:
            response.headers.append("Warning", f'299 - "{_quote(warning)}"')
        return response

    async def _write_or_read(self, request: Request, t: Target, fields: FieldCheck, dry_run: bool) -> Response:
        method = request.method
        q = request.query_params
        if method == "GET":
            if t.name is None:
                if q.get("watch") in ("1", "true", "True"):
                    return await self._watch(request, t)
                return await self._list(request, t)
            obj = self.service.get(t.info, t.namespace, t.name, t.version)
            return self._respond(request, t, obj)
        if method == "POST" and t.name is None:
            body = _typed(t, _object(await _body(request, fields=fields)))
            # Writes run off the event loop: one waiting for the database (locked by another process) holds no reads.
            obj = await write_off_loop(self._grouped(), False, self.service.create, t.info, t.namespace, body,
                                       t.version, dry_run=dry_run, fields=fields)
            return self._respond(request, t, obj, 201)
        if method == "PUT" and t.name is not None:
            body = _typed(t, _object(await _body(request, fields=fields)))
            obj = await write_off_loop(self._grouped(), t.subresource == "status", self.service.replace, t.info,
                                       t.namespace, t.name, body, t.version, subresource=t.subresource,
                                       dry_run=dry_run, fields=fields)
            return self._respond(request, t, obj)
        if method == "PATCH" and t.name is not None:
            kind = request.headers.get("content-type", "").split(";")[0].strip()
            if kind not in _PATCH_TYPES:
                raise BadRequest(f"the body of the request was in an unknown format ({kind or 'none'}); "
                                 f"accepted: {', '.join(_PATCH_TYPES)}", 415, "UnsupportedMediaType")
            if kind == "application/apply-patch+yaml":
                return await self._server_side_apply(request, t, fields)
            body = await _body(request)
            obj = await write_off_loop(self._grouped(), t.subresource == "status", self.service.patch, t.info,
                                       t.namespace, t.name, kind, body, t.version, subresource=t.subresource,
                                       dry_run=dry_run, fields=fields)
            return self._respond(request, t, obj)
        if method == "DELETE":
            if t.name is None:
                items, _ = self.service.list_objects(t.info, t.namespace, t.version,
                                             labels=q.get("labelSelector"), fields=q.get("fieldSelector"))
                for item in items:
                    await off_loop(self.service.delete, t.info, item["metadata"].get("namespace"),
                                   item["metadata"]["name"])
                return JSONResponse(_list_body(t, items, str(self.service.store.current_rv())))
            options = await _body(request, optional=True) or {}
            if not isinstance(options, dict) or not isinstance(options.get("preconditions") or {}, dict):
                raise BadRequest("the body of a delete must be DeleteOptions: an object, whose preconditions (if "
                                 "any) are an object")
            rv = (options.get("preconditions") or {}).get("resourceVersion")
            obj = await write_off_loop(self._grouped(), False, self.service.delete, t.info, t.namespace, t.name,
                                       t.version, resource_version=rv)
            return self._respond(request, t, obj)
        return JSONResponse(status_body(405, "MethodNotAllowed", f"{method} is not supported here"),
                            status_code=405)

    def _grouped(self) -> BaseStore | None:
        """The store a write is committed in with the other writes waiting for it (:func:`write_off_loop`), where
        it may be (None: a replica, whose owner commits its workers' writes in groups)."""
        store = self.service.store
        return store if store.shares_batches else None

    async def _pod_log(self, request: Request, info: KindInfo, namespace: str, name: str) -> Response:
        """A pod's log: its own run's output, or, for the pods of a RayJob or RayCluster, the job's driver log or the
        head's log (followed with ``follow=true``). Where the log is comes from the server's own layout
        (:func:`~flexq.runtime.pod_log_file`), never from a path an object carries."""
        try:
            pod = self.service.get(info, namespace, name)
        except Exception as exc:
            return error_response(exc, info, name)
        tail = request.query_params.get("tailLines")
        try:
            lines = None if not tail else whole_number("tailLines", tail)
        except BadRequest as exc:
            return JSONResponse(status_body(400, "BadRequest", exc.message), status_code=400)
        if self.home is None:
            return PlainTextResponse("")
        log = pod_log_file(self.home, pod)
        if request.query_params.get("follow") in ("true", "1"):
            if not log.exists() and (pod.get("status") or {}).get("phase", "Pending") == "Pending":
                containers: list[dict[str, Any]] = (pod.get("spec") or {}).get("containers") or [{}]
                container = str(containers[0].get("name", ""))
                return JSONResponse(status_body(400, "BadRequest", f'container "{container}" in pod "{name}" is '
                                                                   "waiting to start: ContainerCreating"), 400)
            return StreamingResponse(follow_log(log, lambda: self.hub.closed), media_type="text/plain")
        text = read_log(log).replace(END_MARKER, "")
        if lines is not None:
            text = "".join(text.splitlines(keepends=True)[-lines:]) if lines else ""
        return PlainTextResponse(text)

    def _forwardable(self, namespace: str, name: str) -> tuple[int, str, str] | None:
        """Why ``port-forward`` to this pod cannot start (code, reason, message), or None."""
        try:
            pod = self.service.get(_POD, namespace, name)
        except NotFound:
            return 404, "NotFound", f'pods "{name}" not found'
        phase = (pod.get("status") or {}).get("phase", "Unknown")
        if phase != "Running":
            return 400, "BadRequest", f"unable to forward port because pod is not running. Current status={phase}"
        return None

    async def port_forward(self, websocket: WebSocket, namespace: str, name: str) -> None:
        """``kubectl port-forward``: each of the pod's ports reaches the port on this machine that stands for it."""
        refused = self._forwardable(namespace, name)
        if refused is not None:
            await deny(websocket, *refused)
            return

        def target(port: int) -> int:
            prefix = f"error forwarding port {port} to pod {name}"
            if self.ports is None:
                raise PortError(f"{prefix}: this server does not run jobs (--runtime none)")
            try:
                pod = self.service.get(_POD, namespace, name)
                ports = self.ports(namespace, pod)
            except (LookupError, NotFound) as exc:
                raise PortError(f"{prefix}: {exc.args[0] if exc.args else exc}") from None
            if port not in ports:
                known = ", ".join(str(p) for p in sorted(ports)) or "none"
                raise PortError(f"{prefix}: the pod has no port {port} that reaches its Ray cluster "
                                f"(ports that do: {known})")
            return ports[port]

        await serve_websocket(websocket, target)

    async def _server_side_apply(self, request: Request, t: Target, fields: FieldCheck) -> Response:
        assert t.name is not None
        body = _object(await _body(request, fields=fields))
        try:
            self.service.get(t.info, t.namespace, t.name, t.version)
        except Exception:
            body.setdefault("metadata", {})["name"] = t.name
            return self._respond(request, t, await off_loop(self.service.create, t.info, t.namespace, body,
                                                            t.version, fields=fields), 201)
        obj = await off_loop(self.service.patch, t.info, t.namespace, t.name, "application/merge-patch+json",
                             body, t.version, subresource=t.subresource, fields=fields)
        return self._respond(request, t, obj)

    # --- responses ---------------------------------------------------------------------------------

    def _respond(self, request: Request, t: Target, obj: dict[str, Any], code: int = 200) -> Response:
        if _wants_table(request):
            rv = obj["metadata"].get("resourceVersion", "")
            return JSONResponse(table(t.info, [obj], rv, include_object=request.query_params.get(
                "includeObject", "Metadata")), status_code=code)
        return _Json(obj, status_code=code)

    async def _list(self, request: Request, t: Target) -> Response:
        q = request.query_params
        too_new = await self._too_new(_resource_version(q.get("resourceVersion")))
        if too_new is not None:
            return too_new
        limit, token = _limit(q.get("limit")), q.get("continue") or ""
        if token and q.get("resourceVersion") not in (None, "", "0"):
            raise BadRequest("specifying resource version is not allowed when using continue")
        labels, fields = q.get("labelSelector") or "", q.get("fieldSelector") or ""
        what = (t.info.group, t.info.plural, t.namespace if t.info.namespaced else None, labels, fields)
        try:
            page = self.pages.page(
                what, limit, token, lambda: self.service.selected(t.info, t.namespace, labels=labels, fields=fields),
                lambda rv: self.service.unchanged_since(t.info, rv), counted=not (labels or fields))
        except PagedElsewhere:
            if self.elsewhere is None:
                raise
            return _Passed(self.elsewhere)
        items = [self.service.served(t.info, o, t.version) for o in page.items]
        rv = str(page.resource_version)
        if _wants_table(request):
            body = table(t.info, items, rv, include_object=q.get("includeObject", "Metadata"))
            body["metadata"].update(_paging(page))
            return JSONResponse(body)
        listed = _list_body(t, items, rv)
        listed["metadata"].update(_paging(page))
        return _Json(listed)

    async def _watch(self, request: Request, t: Target) -> Response:
        q = request.query_params
        match_labels = label_selector(q.get("labelSelector"))
        match_fields = field_selector(q.get("fieldSelector"), field_labels(t.info.group, t.info.plural))
        as_table = _wants_table(request)
        start = _resource_version(q.get("resourceVersion"))
        timeout = float(whole_number("timeoutSeconds", q.get("timeoutSeconds") or "1800",
                                     "must be a whole number of seconds"))
        too_new = await self._too_new(start)
        if too_new is not None:
            return too_new

        def selected(obj: dict[str, Any]) -> bool:
            return match_labels(obj) and match_fields(obj)

        selection = (q.get("labelSelector") or "", q.get("fieldSelector") or "")
        return watch_response(request, self.service, self.hub, t.info, t.version, t.namespace,
                              selected if any(selection) else None, as_table, start, timeout, selection)

    async def _too_new(self, start: str) -> Response | None:
        """The API server's 504 for a resourceVersion the store has not reached :data:`FRESH_WAIT` seconds after it
        was asked for (None: it has, or none was asked for)."""
        if not start:
            return None
        wanted = int(start)
        deadline = time.monotonic() + FRESH_WAIT
        while (current := self.service.store.current_rv()) < wanted:
            left = deadline - time.monotonic()
            if left <= 0:
                body = status_body(504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: {current}",
                                   {"causes": [{"reason": "ResourceVersionTooLarge",
                                                "message": "Too large resource version"}], "retryAfterSeconds": 1})
                return JSONResponse(body, 504, headers={"Retry-After": "1"})
            await self.hub.wait(min(left, 0.5))
        return None


FRESH_WAIT: Final = 3.0
"""Seconds a list or watch from a resourceVersion newer than the store's waits for the store to reach it (the API
server's watch cache waits as long), before its 504."""


def _resource_version(value: str | None) -> str:
    """A list's or watch's ``resourceVersion`` ("" where none is given); :class:`BadRequest` for one that is not a
    whole number."""
    start = value or ""
    if start:
        whole_number("resourceVersion", start, "must be a resourceVersion this server gave (a whole number)")
    return start


def _limit(value: str | None) -> int:
    """A list's ``limit`` (0: none); :class:`BadRequest` for one that is not a whole number."""
    raw = value or "0"
    if raw.startswith("-") and _WHOLE.fullmatch(raw[1:]) is not None:
        raise BadRequest("list limit must not be negative")
    return whole_number("limit", raw, "must be a whole number")


_WHOLE: Final = re.compile(r"[0-9]{1,19}")
"""A whole number in a query parameter, as Go's ``strconv.ParseInt`` reads one for the API server: ASCII digits
(``str.isdigit`` takes ``²`` and ``٣`` too, which ``int`` refuses), no more than an int64 holds."""


def whole_number(name: str, raw: str, what: str = "must be a non-negative integer") -> int:
    """The query parameter ``name``'s value ``raw`` as a whole number; :class:`BadRequest` (400, one line, naming
    the parameter and what was given) for anything else."""
    if _WHOLE.fullmatch(raw) is None or int(raw) >= 1 << 63:
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise BadRequest(f"{name}: Invalid value: {json.dumps(shown, ensure_ascii=False)}: {what}")
    return int(raw)


def _paging(page: Page) -> dict[str, Any]:
    """What a list's ``metadata`` says of the pages after it."""
    more: dict[str, Any] = {}
    if page.continue_token:
        more["continue"] = page.continue_token
    if page.remaining is not None:
        more["remainingItemCount"] = page.remaining
    return more


def _pod_kind() -> KindInfo:
    info = by_resource("", "pods")
    assert info is not None
    return info


_POD: Final = _pod_kind()


def _object(body: Any) -> dict[str, Any]:
    """A create or replace body: an object, whose ``metadata`` (where given) is an object too."""
    if not isinstance(body, dict):
        raise BadRequest(f"the request body must be an object, not {'null' if body is None else type(body).__name__}")
    if not isinstance(body.get("metadata", {}), dict):
        raise BadRequest("metadata: must be an object")
    return body


_BUILT_IN: Final = {"": "core", "batch": "batch", "scheduling.k8s.io": "scheduling"}
"""The groups of Kubernetes' own kinds (the rest are custom resources), each with its internal package's name."""
_SCHEME: Final = "pkg/api/legacyscheme/scheme.go:30"
"""Where the API server's scheme of its own kinds is made, as its decoder names it."""


def _typed(t: Target, body: dict[str, Any]) -> dict[str, Any]:
    """A create or update body with the ``apiVersion`` and ``kind`` of the request's URL where it leaves them out
    (as the API server decodes it, and as the Python client sends a typed model); one that names others is refused
    as the API server refuses it."""
    expected = t.info.api_version(t.version)
    api_version, kind = body.get("apiVersion") or expected, body.get("kind") or t.info.kind
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return body  # not text: validation words it
    if t.info.group in _BUILT_IN and (api_version, kind) != (expected, t.info.kind):
        # Kubernetes' own kinds: decoded into the kind the URL names, or refused with the decoder's words.
        version = api_version.rpartition("/")[2]
        try:
            found = by_gvk(api_version, kind)
        except UnknownKind:
            found = None
        if found is None or found.group not in _BUILT_IN:
            why = f'no kind "{kind}" is registered for version "{api_version}" in scheme "{_SCHEME}"'
        elif kind != t.info.kind:
            why = f"converting ({version}.{kind}) to ({_BUILT_IN[t.info.group]}.{t.info.kind}): unknown conversion"
        else:
            why = ""
        if why:
            raise BadRequest(f'{kind} in version "{version}" cannot be handled as a {t.info.kind}: {why}')
    if api_version != expected:
        raise BadRequest(f"the API version in the data ({api_version}) does not match the expected API version "
                         f"({expected})")
    if kind != t.info.kind:
        name = body["metadata"].get("name", "") if isinstance(body.get("metadata"), dict) else ""
        raise InvalidObject("request", 0, kind, name if isinstance(name, str) else "",
                            [FieldError("kind", f'Invalid value: "{kind}": must be {t.info.kind}')])
    return {**body, "apiVersion": api_version, "kind": kind}


def _quote(text: str) -> str:
    """``text`` as the quoted string of an HTTP ``Warning`` header (RFC 7234), ASCII only."""
    return text.encode("ascii", "replace").decode().replace("\\", "\\\\").replace('"', '\\"')


def _list_body(t: Target, items: list[dict[str, Any]], rv: str) -> dict[str, Any]:
    return {"kind": t.info.list_kind, "apiVersion": t.info.api_version(t.version),
            "metadata": {"resourceVersion": rv}, "items": items}


def _wants_table(request: Request) -> bool:
    return "as=Table" in request.headers.get("accept", "")


def _address(request: Request) -> str:
    host = request.url.hostname or "127.0.0.1"
    return f"{host}:{request.url.port}" if request.url.port else host


class PagedElsewhere(FlexqError):
    """A list in more than one page, which this process does not keep between its pages: an API worker's (the
    owner keeps it, so that every page is of the same list, whichever worker a client's next request reaches)."""


class _Passed(Response):
    """The answer of another application to the same request."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__()
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


class _Json(JSONResponse):
    """An object or a list as JSON, encoded by orjson (what it refuses, integers beyond 64 bits, by the standard
    library): the answer to every create, read, patch and list."""

    def render(self, content: Any) -> bytes:
        try:
            return orjson.dumps(content)
        except (TypeError, orjson.JSONEncodeError):
            return super().render(content)


def _not_found(message: str) -> JSONResponse:
    return JSONResponse(status_body(404, "NotFound", message), status_code=404)


async def _body(request: Request, *, optional: bool = False, fields: FieldCheck | None = None) -> Any:
    """The request's body, read as its content type says; the keys it repeats go to ``fields.duplicates``."""
    raw = await request.body()
    if "protobuf" in request.headers.get("content-type", ""):
        try:
            if optional:
                return decode_delete_options(raw) if raw else None
            return decode_object(raw)
        except (ProtobufError, UnicodeDecodeError) as exc:
            raise BadRequest(f"the body of the request could not be read as protobuf: {exc}; "
                             "accepted media types include: application/json, application/yaml",
                             415, "UnsupportedMediaType") from None
    if len(raw) > MAX_REQUEST_BYTES:
        raise BadRequest(too_large(MAX_REQUEST_BYTES), 413, "RequestEntityTooLarge")
    if not raw.strip():
        if optional:
            return None
        raise BadRequest("the request has no body")
    duplicates = fields.duplicates if fields is not None else None
    try:
        if "yaml" in request.headers.get("content-type", ""):
            body = load_yaml(raw.decode("utf-8", errors="replace"), "the request body", duplicates)
            numbers_only(body, "the request body")
        else:
            body = loads(raw)  # orjson; the standard library reads (or words the error for) what it refuses
            if _WILD_NUMBER.search(raw):  # a long run of digits, a large exponent, NaN or Infinity: read exactly
                body = json.loads(raw)  # (orjson reads an integer beyond 64 bits as a float)
                numbers_only(body, "the request body")
            if duplicates is not None:
                duplicates.extend(_duplicate_fields(raw, body))
        if b"\\u" in raw and b"\\ud" in raw.lower():  # an escaped surrogate: a pair, or a lone one (not text)
            body = text_only(body, "the request body")
    except InputError as exc:
        raise BadRequest(str(exc)) from None
    except ValueError as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        body = None
        depth = MAX_NESTING + 1
    else:
        # A body with no more brackets than the limit cannot nest deeper (most bodies): not walked.
        depth = 0 if raw.count(b"{") + raw.count(b"[") <= MAX_NESTING else nesting(body)
    if depth > MAX_NESTING:
        raise BadRequest(f"the request body nests deeper than {MAX_NESTING} levels")
    return body


_WILD_NUMBER: Final = re.compile(rb"\d{19}|[eE][+-]?\d{3}|NaN|Infinity")
"""What a JSON number the API server cannot hold (beyond 64 bits, not finite) is written with, at least."""
_KEY: Final = re.compile(rb'"\s*:')
"""What ends every key of a JSON object (and, rarely, text within a string)."""


def _duplicate_fields(raw: bytes, body: Any) -> list[str]:
    """The keys that an object of the JSON text ``raw`` repeats (its reader kept the last): ``duplicate field
    "name"``, as the API server's strict reader words them. Looked for only where ``raw`` has more key endings
    than ``body``'s objects have keys (a body that repeats none: counted, not read again)."""
    keys, stack = 0, [body]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys += len(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    if sum(1 for _ in _KEY.finditer(raw)) <= keys:
        return []
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _value in items:
            if key in seen:
                found.append(f'duplicate field "{key}"')
            seen.add(key)
        return {}

    json.loads(raw, object_pairs_hook=pairs)
    return found
