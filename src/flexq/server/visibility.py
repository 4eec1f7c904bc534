"""Kueue's on-demand visibility API (``visibility.kueue.x-k8s.io``, v1beta2 and v1beta1): a queue's pending workloads.

- ``GET /apis/visibility.kueue.x-k8s.io/VERSION/clusterqueues/NAME/pendingworkloads``: the ClusterQueue's line;
- ``GET /apis/visibility.kueue.x-k8s.io/VERSION/namespaces/NS/localqueues/NAME/pendingworkloads``: the workloads
  of that LocalQueue in its ClusterQueue's line.

Both answer a ``PendingWorkloadsSummary``: each workload's name, namespace, creation time and owners, its priority
and LocalQueue, and its positions (from 0) in the ClusterQueue and in the LocalQueue, in the order the ClusterQueue
would try them (higher priority first, then earlier queue time; workloads set aside as inadmissible in their
place). Workloads holding quota are not in line. ``limit`` (1000 when absent or 0, at most 100,000) and ``offset``
(from 0) page through it, as Kueue's do: in the LocalQueue's view, the offset counts that LocalQueue's workloads.

Authorization is the API server's (RBAC on ``clusterqueues/pendingworkloads``, cluster-scoped, and on
``localqueues/pendingworkloads`` in the namespace), before the request gets here. The line is the controller's:
a server that does not lead answers 503. An unknown ClusterQueue or LocalQueue is 404, in Kueue's words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from flexq.controller import InLine, QueueController
from flexq.server.discovery import VISIBILITY_GROUP, VISIBILITY_VERSIONS
from flexq.server.offload import off_loop
from flexq.server.status import not_leading, status_body
from flexq.store import BaseStore, Key, NotFound, rfc3339

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "Leader", "PendingWorkloads", "cluster_queue_page", "local_queue_page"]

DEFAULT_LIMIT: Final = 1000
"""Kueue's default ``limit`` (also for ``limit=0``)."""
MAX_LIMIT: Final = 100_000
"""Kueue's bound on ``limit``."""

_INTEGER: Final = re.compile(r"[+-]?[0-9]{1,18}")

Leader = Callable[[], QueueController | None]
"""The controller of this server while it leads (None: it does not)."""


class PendingWorkloads:
    """The visibility API's answers over the stored Workloads (their metadata) and ``leader``'s lines (None: no
    controller runs with this application, as in embedded use)."""

    def __init__(self, store: BaseStore, leader: Leader | None) -> None:
        self.store = store
        self.leader = leader

    async def answer(self, request: Request, version: str, rest: list[str]) -> Response:
        """A request under ``/apis/visibility.kueue.x-k8s.io/VERSION/``; ``rest`` is the path's segments after it
        (at least one)."""
        if version not in VISIBILITY_VERSIONS:
            return _no_resource(f"{VISIBILITY_GROUP}/{version}")
        if len(rest) == 3 and rest[0] == "clusterqueues" and rest[2] == "pendingworkloads":
            namespace, name = None, rest[1]
        elif len(rest) == 5 and rest[0] == "namespaces" and rest[2] == "localqueues" and rest[4] == "pendingworkloads":
            namespace, name = rest[1], rest[3]
        else:
            return _no_resource("/".join(rest))
        if request.method != "GET":
            return JSONResponse(status_body(405, "MethodNotAllowed", "the server does not allow this method on the "
                                            "requested resource"), 405)
        try:
            limit, offset = _paging(request.query_params.get("limit"), request.query_params.get("offset"))
        except ValueError as exc:
            return JSONResponse(status_body(400, "BadRequest", str(exc)), 400)
        controller = self.leader() if self.leader is not None else None
        if controller is None:
            return not_leading()
        return await off_loop(self._summary, controller, version, namespace, name, limit, offset)

    def _summary(self, controller: QueueController, version: str, namespace: str | None, name: str, limit: int,
                 offset: int) -> Response:
        if namespace is None:
            line = controller.in_line(name)
            if line is None:
                return _not_found("clusterqueue", name)
            page = cluster_queue_page(line, limit, offset)
        else:
            cluster_queue = controller.cluster_queue_of(namespace, name)
            if cluster_queue is None:
                return _not_found("localqueue", name)
            page = local_queue_page(controller.in_line(cluster_queue) or [], namespace, name, limit, offset)
        items = [self._item(wl, in_cq, in_lq) for wl, in_cq, in_lq in page]
        return JSONResponse({"kind": "PendingWorkloadsSummary", "apiVersion": f"{VISIBILITY_GROUP}/{version}",
                             "metadata": {"creationTimestamp": None}, "items": items})

    def _item(self, wl: InLine, in_cq: int, in_lq: int) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": wl.name, "namespace": wl.namespace,
                                "creationTimestamp": rfc3339(datetime.fromtimestamp(wl.created, UTC))}
        try:
            stored = self.store.get(Key("kueue.x-k8s.io", "workloads", wl.namespace, wl.name))["metadata"]
        except NotFound:  # deleted since the line was read: what the controller held
            stored = {}
        if stored.get("creationTimestamp"):
            meta["creationTimestamp"] = stored["creationTimestamp"]
        owners = [{key: ref[key] for key in ("apiVersion", "kind", "name", "uid") if key in ref}
                  for ref in stored.get("ownerReferences") or [] if isinstance(ref, dict)]
        if owners:
            meta["ownerReferences"] = owners
        return {"metadata": meta, "priority": wl.priority, "localQueueName": wl.local_queue,
                "positionInClusterQueue": in_cq, "positionInLocalQueue": in_lq}


def cluster_queue_page(line: Sequence[InLine], limit: int, offset: int) -> list[tuple[InLine, int, int]]:
    """The ClusterQueue's view: its line's workloads ``offset`` to ``offset + limit``, each with its position in the
    ClusterQueue and in its LocalQueue."""
    counted: dict[tuple[str, str], int] = {}
    page: list[tuple[InLine, int, int]] = []
    for index, wl in enumerate(line[:offset + limit]):
        queue = (wl.namespace, wl.local_queue)
        in_lq = counted.get(queue, 0)
        counted[queue] = in_lq + 1
        if index >= offset:
            page.append((wl, index, in_lq))
    return page


def local_queue_page(line: Sequence[InLine], namespace: str, name: str, limit: int,
                     offset: int) -> list[tuple[InLine, int, int]]:
    """The LocalQueue's view: its workloads in the ClusterQueue's line, ``offset`` to ``offset + limit`` of them, each
    with its position in the ClusterQueue and in the LocalQueue."""
    page: list[tuple[InLine, int, int]] = []
    seen = 0
    for index, wl in enumerate(line):
        if len(page) >= limit:
            break
        if wl.namespace != namespace or wl.local_queue != name:
            continue
        if seen >= offset:
            page.append((wl, index, seen))
        seen += 1
    return page


def _paging(limit: str | None, offset: str | None) -> tuple[int, int]:
    """``limit`` and ``offset`` as Kueue reads them: absent or 0 is the default limit, a negative one is 0, and the
    limit is bounded; a negative offset is 0. Raises ValueError for one that is not an integer."""
    return min(max(_integer("limit", limit) or DEFAULT_LIMIT, 0), MAX_LIMIT), max(_integer("offset", offset), 0)


def _integer(name: str, value: str | None) -> int:
    if not value:
        return 0
    if _INTEGER.fullmatch(value) is None:
        raise ValueError(f'{name}: invalid value "{value}": must be an integer')
    return int(value)


def _no_resource(what: str) -> JSONResponse:
    return JSONResponse(status_body(404, "NotFound", f"the server could not find the requested resource ({what})"),
                        404)


def _not_found(kind: str, name: str) -> JSONResponse:
    """Kueue's 404 for a queue it does not know (its resource named in the singular, as Kueue names it)."""
    return JSONResponse(status_body(404, "NotFound", f'{kind}.{VISIBILITY_GROUP} "{name}" not found',
                                    {"name": name, "group": VISIBILITY_GROUP, "kind": kind}), 404)
