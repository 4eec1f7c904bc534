"""The GKE Container API (v1) front door, as much as gcloud uses for the guide and common scripts.

``gcloud config set api_endpoint_overrides/container http://HOST:PORT/`` sends every ``gcloud container``
call here. Clusters and node pools are the same ``flexq.dev/v1alpha1`` objects that ``flexq container``
manages; a create or delete answers its Operation once the controller has written (or removed) the pool's Node
objects, or RUNNING (gcloud polls it) if that takes longer. Errors use Google's error body.
Both path styles are served: ``projects/P/locations/L/...`` and the older ``projects/P/zones/Z/...``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from flexq.api import KINDS, MAX_NESTING, ApiError, InvalidObject, nesting, resolve
from flexq.capacity import GKE_VERSION, gke_node_pool, initial_nodes_written, node_pool_of
from flexq.objects import BOOT_NAMESPACES, BadRequest, ObjectService
from flexq.store import AlreadyExists, NotFound

__all__ = ["gke_router"]

_AFFINITY = {"NO_RESERVATION": "none", "ANY_RESERVATION": "any", "SPECIFIC_RESERVATION": "specific"}


async def _json(request: Request) -> dict[str, Any] | JSONResponse:
    """The request's JSON object, or the 400 that Google's APIs give a body that is not one (or nests too deep)."""
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as exc:
        return _error(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {str(exc)[:200]}")
    if not isinstance(body, dict):
        return _error(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Expected an object.")
    if nesting(body) > MAX_NESTING:
        return _error(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. Nested deeper than {MAX_NESTING} "
                      "levels.")
    return body


def _error(code: int, status: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, "status": status}}, status_code=code)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_SETTLE: Final = 2.0
"""How long a create or delete waits for its Node objects before it answers an Operation still RUNNING (gcloud then
polls it): the controller writes them at its next step, well within this on a server that is not overloaded."""
_GIVE_UP: Final = 60.0
"""An Operation whose Node objects have not come (or gone) by then is answered DONE all the same."""


class _Operations:
    """The Operations of the Container API. One that creates or deletes a pool's nodes stays RUNNING until the
    controller has written (or removed) their Node objects, as GKE's ends once its nodes are there: a script's
    ``kubectl get nodes`` after ``gcloud container node-pools create`` sees them."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(int(time.time()))
        self._running: dict[str, tuple[Callable[[], bool], float]] = {}
        """Operation name -> (whether its work is done, when it is answered DONE regardless)."""

    def start(self, project: str, location: str, kind: str, target: str,
              finished: Callable[[], bool] | None = None) -> dict[str, Any]:
        """A new Operation: DONE at once, or RUNNING until ``finished()`` says so."""
        name = f"operation-{next(self._ids)}-{abs(hash(target)) % 10**8:08d}"
        base = f"https://container.googleapis.com/v1/projects/{project}/locations/{location}"
        op = {"name": name, "zone": location, "location": location, "operationType": kind, "status": "RUNNING",
              "selfLink": f"{base}/operations/{name}", "targetLink": f"{base}/{target}", "startTime": _stamp()}
        self.items[name] = op
        if finished is None:
            op.update(status="DONE", endTime=_stamp())
        else:
            self._running[name] = (finished, time.monotonic() + _GIVE_UP)
        return self.get(name) or op

    def get(self, name: str) -> dict[str, Any] | None:
        """The Operation as it stands now (a RUNNING one is DONE once its work is)."""
        op = self.items.get(name)
        running = self._running.get(name)
        if op is not None and running is not None and (running[0]() or time.monotonic() >= running[1]):
            del self._running[name]
            op.update(status="DONE", endTime=_stamp())
        return op

    async def settled(self, op: dict[str, Any]) -> JSONResponse:
        """The answer to a create or delete: the Operation once it is DONE, or still RUNNING after :data:`_SETTLE`."""
        deadline = time.monotonic() + _SETTLE
        while op["status"] != "DONE" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            op = self.get(op["name"]) or op
        return JSONResponse(op)


def _pool_object(body: dict[str, Any], cluster: str, location: str) -> dict[str, Any]:
    """The NodePool object a GKE ``NodePool`` resource describes."""
    config = body.get("config") or {}
    auto = body.get("autoscaling") or {}
    spec: dict[str, Any] = {
        "cluster": cluster, "location": location, "machineType": config.get("machineType") or "e2-medium",
        "initialNodeCount": int(body.get("initialNodeCount", 0)),
        "autoscaling": {"enabled": bool(auto.get("enabled", False))},
    }
    if auto.get("enabled"):
        spec["autoscaling"].update({"minNodeCount": int(auto.get("minNodeCount", 0)),
                                    "maxNodeCount": int(auto.get("maxNodeCount", 0))})
    topology = (body.get("placementPolicy") or {}).get("tpuTopology")
    if topology:
        spec["tpuTopology"] = topology
    affinity = (config.get("reservationAffinity") or {}).get("consumeReservationType")
    if affinity in _AFFINITY:
        spec["reservationAffinity"] = _AFFINITY[affinity]
    if config.get("flexStart"):
        spec["flexStart"] = True
    if (body.get("queuedProvisioning") or {}).get("enabled"):
        spec["queuedProvisioning"] = True
    return {"apiVersion": "flexq.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": body.get("name", "")},
            "spec": spec}


def _cluster_objects(body: dict[str, Any], project: str, location: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Cluster object and its first NodePool that a GKE ``clusters.create`` body describes."""
    name = str(body.get("name", ""))
    node_config = body.get("nodeConfig") or {}
    initial = int(body.get("initialNodeCount") or 0)
    given = body.get("nodePools") or []
    if given:
        node_config = given[0].get("config") or node_config
        initial = int(given[0].get("initialNodeCount") or initial)
    machine = node_config.get("machineType") or "e2-medium"
    obj = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Cluster", "metadata": {"name": name},
           "spec": {"location": location, "project": project, "machineType": machine,
                    "numNodes": initial or 3, "version": body.get("initialClusterVersion")}}
    pool = _pool_object({"name": (given[0].get("name") if given else None) or "default-pool",
                         "config": {"machineType": machine}, "initialNodeCount": initial or 3}, name, location)
    return obj, pool


def _refused(exc: Exception) -> JSONResponse:
    """A write the object layer refused, as Google's error body."""
    if isinstance(exc, InvalidObject):
        return _error(400, "INVALID_ARGUMENT", "; ".join(e.message for e in exc.errors))
    if isinstance(exc, AlreadyExists):
        return _error(409, "ALREADY_EXISTS", f"Already exists: {exc.key.name}.")
    if isinstance(exc, NotFound):
        return _error(404, "NOT_FOUND", f"Not found: {exc.key.name}.")
    if isinstance(exc, BadRequest | ApiError):
        return _error(400, "INVALID_ARGUMENT", str(exc))
    raise exc


def _no_cluster(project: str, location: str, cluster: str) -> JSONResponse:
    return _error(404, "NOT_FOUND", f"Not found: projects/{project}/locations/{location}/clusters/{cluster}.")


def _set_pool(spec: dict[str, Any], action: str, body: dict[str, Any]) -> bool:
    """Apply ``nodePools/NAME:ACTION`` (setAutoscaling, setSize) to a NodePool's spec; False for another action."""
    if action == "setAutoscaling":
        auto = body.get("autoscaling") or {}
        spec["autoscaling"] = {"enabled": bool(auto.get("enabled")),
                               **({"minNodeCount": int(auto.get("minNodeCount", 0)),
                                   "maxNodeCount": int(auto.get("maxNodeCount", 0))}
                                  if auto.get("enabled") else {})}
    elif action == "setSize":
        spec["initialNodeCount"] = int(body.get("nodeCount", 0))
    else:
        return False
    return True


class _Gke:
    """The handlers of the Container API: clusters, node pools and operations over the object service."""

    def __init__(self, service: ObjectService, endpoint: str, ca_pem: bytes) -> None:
        self.service = service
        self.endpoint = endpoint
        self.ca_pem = ca_pem
        self.ops = _Operations()
        self.clusters, self.pools, self.nodes = resolve("clusters.flexq.dev"), resolve("nodepool"), resolve("node")

    def _cluster_resource(self, obj: dict[str, Any], project: str, location: str) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        node_pools = [gke_node_pool(p, project, location) for p in self.service.list_objects(self.pools, None)[0]
                      if p["spec"]["cluster"] == name]
        spec = obj.get("spec") or {}
        return {
            "name": name, "location": spec.get("location") or location, "zone": spec.get("location") or location,
            "status": "RUNNING", "endpoint": self.endpoint, "initialClusterVersion": spec.get("version") or "1.34",
            "currentMasterVersion": GKE_VERSION, "currentNodeVersion": GKE_VERSION,
            "masterAuth": {"clusterCaCertificate": base64.b64encode(self.ca_pem).decode() if self.ca_pem else ""},
            "nodePools": node_pools,
            "currentNodeCount": sum(p.get("currentNodeCount", p.get("initialNodeCount", 0)) for p in node_pools),
            "selfLink": f"https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{name}",
            "createTime": obj["metadata"].get("creationTimestamp", ""),
            "addonsConfig": {"rayOperatorConfig": {"enabled": True}},
        }

    def _cluster(self, name: str) -> dict[str, Any] | None:
        try:
            return self.service.get(self.clusters, None, name)
        except NotFound:
            return None

    def _pool(self, cluster: str, name: str) -> dict[str, Any] | None:
        try:
            pool = self.service.get(self.pools, None, name)
        except NotFound:
            return None
        return pool if pool["spec"]["cluster"] == cluster else None

    def _has_nodes(self, pool: str) -> bool:
        """Whether the controller has written the pool's initial nodes (its status counts them once it has)."""
        try:
            return initial_nodes_written(self.service.get(self.pools, None, pool))
        except NotFound:
            return True

    def _nodes_of(self, pools: list[str]) -> list[str]:
        """The Node objects still there of these pools."""
        return [node["metadata"]["name"] for node in self.service.list_objects(self.nodes, None)[0]
                if node_pool_of(node) in pools]

    def _cluster_pools(self, cluster: str) -> list[dict[str, Any]]:
        return [p for p in self.service.list_objects(self.pools, None)[0] if p["spec"]["cluster"] == cluster]

    async def create_cluster(self, project: str, location: str, request: Request) -> JSONResponse:
        payload = await _json(request)
        if isinstance(payload, JSONResponse):
            return payload
        obj, pool = _cluster_objects(payload.get("cluster") or {}, project, location)
        try:
            with self.service.store.transaction():
                self.service.create(self.clusters, None, obj)
                self.service.create(self.pools, None, pool)
        except Exception as exc:
            return _refused(exc)
        first = pool["metadata"]["name"]
        return await self.ops.settled(self.ops.start(project, location, "CREATE_CLUSTER",
                                                     f"clusters/{obj['metadata']['name']}",
                                                     lambda: self._has_nodes(first)))

    async def list_clusters(self, project: str, location: str) -> JSONResponse:
        items = self.service.list_objects(self.clusters, None)[0]
        return JSONResponse({"clusters": [self._cluster_resource(c, project, location) for c in items]})

    async def get_cluster(self, project: str, location: str, cluster: str) -> JSONResponse:
        obj = self._cluster(cluster)
        if obj is None:
            return _no_cluster(project, location, cluster)
        return JSONResponse(self._cluster_resource(obj, project, location))

    async def delete_cluster(self, project: str, location: str, cluster: str) -> JSONResponse:
        if self._cluster(cluster) is None:
            return _no_cluster(project, location, cluster)
        pools = [pool["metadata"]["name"] for pool in self._cluster_pools(cluster)]
        with self.service.store.transaction():
            for name in pools:
                self.service.delete(self.pools, None, name)
            self.service.delete(self.clusters, None, cluster)
            if not self.service.list_objects(self.clusters, None)[0]:
                _empty_kubernetes(self.service)
        return await self.ops.settled(self.ops.start(project, location, "DELETE_CLUSTER", f"clusters/{cluster}",
                                                     lambda: not self._nodes_of(pools)))

    async def create_pool(self, project: str, location: str, cluster: str, request: Request) -> JSONResponse:
        if self._cluster(cluster) is None:
            return _no_cluster(project, location, cluster)
        payload = await _json(request)
        if isinstance(payload, JSONResponse):
            return payload
        body = payload.get("nodePool") or {}
        try:
            made = self.service.create(self.pools, None, _pool_object(body, cluster, location))
        except Exception as exc:
            return _refused(exc)
        name = made["metadata"]["name"]
        return await self.ops.settled(self.ops.start(project, location, "CREATE_NODE_POOL",
                                                     f"clusters/{cluster}/nodePools/{name}",
                                                     lambda: self._has_nodes(name)))

    async def list_pools(self, project: str, location: str, cluster: str) -> JSONResponse:
        items = self._cluster_pools(cluster)
        if not items and self._cluster(cluster) is None:
            return _no_cluster(project, location, cluster)
        return JSONResponse({"nodePools": [gke_node_pool(p, project, location) for p in items]})

    async def get_pool(self, project: str, location: str, cluster: str, pool: str) -> JSONResponse:
        obj = self._pool(cluster, pool)
        if obj is None:
            return _error(404, "NOT_FOUND", f"Not found: projects/{project}/locations/{location}/clusters/"
                          f"{cluster}/nodePools/{pool}.")
        return JSONResponse(gke_node_pool(obj, project, location))

    async def delete_pool(self, project: str, location: str, cluster: str, pool: str) -> JSONResponse:
        if self._pool(cluster, pool) is None:
            return _error(404, "NOT_FOUND", f"Not found: node pool {pool}.")
        self.service.delete(self.pools, None, pool)
        return await self.ops.settled(self.ops.start(project, location, "DELETE_NODE_POOL",
                                                     f"clusters/{cluster}/nodePools/{pool}",
                                                     lambda: not self._nodes_of([pool])))

    async def pool_action(self, project: str, location: str, cluster: str, pool_action: str,
                          request: Request) -> JSONResponse:
        pool, _, action = pool_action.partition(":")
        obj = self._pool(cluster, pool)
        if obj is None:
            return _error(404, "NOT_FOUND", f"Not found: node pool {pool}.")
        body = await _json(request)
        if isinstance(body, JSONResponse):
            return body
        if not _set_pool(obj["spec"], action, body):
            return _error(400, "INVALID_ARGUMENT", f"unknown node pool action {action!r}")
        try:
            self.service.replace(self.pools, None, pool, obj)
        except Exception as exc:
            return _refused(exc)
        kind = "SET_NODE_POOL_SIZE" if action == "setSize" else "UPDATE_CLUSTER"
        return JSONResponse(self.ops.start(project, location, kind, f"clusters/{cluster}/nodePools/{pool}"))

    async def get_operation(self, project: str, location: str, operation: str) -> JSONResponse:
        op = self.ops.get(operation)
        if op is None:
            return _error(404, "NOT_FOUND", f"Not found: operation {operation}.")
        return JSONResponse(op)

    async def list_operations(self, project: str, location: str) -> JSONResponse:
        return JSONResponse({"operations": [self.ops.get(name) for name in list(self.ops.items)]})


async def _service_usage(project: str, service_name: str) -> JSONResponse:
    # gcloud asks Service Usage whether an API is enabled (e.g. for --enable-image-streaming): all are.
    return JSONResponse({"name": f"projects/{project}/services/{service_name}", "state": "ENABLED",
                         "parent": f"projects/{project}"})


async def _describe_project(project: str) -> JSONResponse:
    # Resource Manager's projects.get, for `gcloud projects describe` (the guide's env.sh asks for the
    # project number): any project exists; its number is derived from its id.
    number = int(hashlib.sha256(project.encode()).hexdigest(), 16) % 10**12
    return JSONResponse({"projectId": project, "name": project, "projectNumber": str(number),
                         "lifecycleState": "ACTIVE", "createTime": "2025-01-01T00:00:00.000Z"})


def gke_router(service: ObjectService, endpoint: str, ca_pem: bytes = b"") -> APIRouter:
    """The Container API's routes, under both path styles, with Service Usage and Resource Manager beside."""
    router = APIRouter(include_in_schema=False)
    gke = _Gke(service, endpoint, ca_pem)
    router.get("/v1/projects/{project}/services/{service_name}")(_service_usage)
    router.get("/v1/projects/{project}")(_describe_project)
    for style in ("locations", "zones"):
        base = f"/v1/projects/{{project}}/{style}/{{location}}"
        router.post(f"{base}/clusters")(gke.create_cluster)
        router.get(f"{base}/clusters")(gke.list_clusters)
        router.get(f"{base}/clusters/{{cluster}}")(gke.get_cluster)
        router.delete(f"{base}/clusters/{{cluster}}")(gke.delete_cluster)
        router.post(f"{base}/clusters/{{cluster}}/nodePools")(gke.create_pool)
        router.get(f"{base}/clusters/{{cluster}}/nodePools")(gke.list_pools)
        router.get(f"{base}/clusters/{{cluster}}/nodePools/{{pool}}")(gke.get_pool)
        router.delete(f"{base}/clusters/{{cluster}}/nodePools/{{pool}}")(gke.delete_pool)
        router.post(f"{base}/clusters/{{cluster}}/nodePools/{{pool_action}}")(gke.pool_action)
        router.get(f"{base}/operations/{{operation}}")(gke.get_operation)
        router.get(f"{base}/operations")(gke.list_operations)
    return router


def _empty_kubernetes(service: ObjectService) -> None:
    """The last cluster is gone, and with it what ran in it: every object of the Kubernetes API (jobs first,
    so that their Ray clusters stop), every namespace but the ones a cluster starts with."""
    order = sorted(KINDS, key=lambda k: (k.kind not in ("RayJob", "Job"), k.kind == "Namespace"))
    for info in order:
        if info.group == "flexq.dev":
            continue
        for obj in service.list_objects(info, None)[0]:
            meta = obj["metadata"]
            if info.kind == "Namespace" and meta["name"] in BOOT_NAMESPACES:
                continue
            with contextlib.suppress(NotFound):
                service.delete(info, meta.get("namespace"), meta["name"])
