"""Node pools as GKE describes them (the Container API's JSON, what gcloud prints), and back.

One model, two front doors: ``flexq container node-pools ...`` and (later) the GKE API that the real
gcloud talks to both store ``flexq.dev/v1alpha1`` NodePool objects; this module turns those objects into
the GKE ``NodePool`` resource shape and into :class:`~flexq.capacity.pools.NodePoolSpec`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flexq.api import FieldError, InvalidObject, KindInfo
from flexq.capacity.catalog import UnknownMachineType, machine_type
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.raypool import RAY_MACHINE, RayAddressError, dashboard_address

__all__ = ["NODE_POOL_LABEL", "gke_node_pool", "initial_nodes_written", "node_pool_of", "node_pool_spec",
           "node_pool_webhook"]

GKE_VERSION = "1.34.1-gke.1000"
_AFFINITY = {"any": "ANY_RESERVATION", "none": "NO_RESERVATION", "specific": "SPECIFIC_RESERVATION"}
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
"""The label that names a node's pool."""


def initial_nodes_written(obj: Mapping[str, Any]) -> bool:
    """Whether the controller has written a stored NodePool's initial Node objects: its status counts the pool's
    nodes from the step that writes them."""
    count = (obj.get("status") or {}).get("nodeCount")
    return count is not None and int(count) >= int((obj.get("spec") or {}).get("initialNodeCount") or 0)


def node_pool_of(node: Mapping[str, Any]) -> str:
    """The pool a Node object is of (empty: none)."""
    return str((node.get("metadata", {}).get("labels") or {}).get(NODE_POOL_LABEL, ""))


def node_pool_spec(obj: Mapping[str, Any]) -> NodePoolSpec:
    """A stored NodePool to the capacity model (raises UnknownMachineType, ValueError for a bad topology)."""
    spec = obj.get("spec") or {}
    auto = spec.get("autoscaling") or {}
    initial = int(spec.get("initialNodeCount") or 0)
    enabled = bool(auto.get("enabled", False))
    ray = dashboard_address(str(spec["rayAddress"]), "spec.rayAddress") if spec.get("rayAddress") else ""
    return NodePoolSpec(
        name=obj["metadata"]["name"],
        machine=RAY_MACHINE if ray else machine_type(str(spec.get("machineType", ""))),
        ray_address=ray,
        topology=spec.get("tpuTopology") or None,
        min_nodes=int(auto.get("minNodeCount", 0)) if enabled else initial,
        max_nodes=int(auto.get("maxNodeCount", 0)) if enabled else initial,
        initial_nodes=initial,
        autoscaling=enabled,
        flex_start=bool(spec.get("flexStart", False)),
        queued_provisioning=bool(spec.get("queuedProvisioning", False)),
        cluster=str(spec.get("cluster", "")),
        location=str(spec.get("location") or ""),
        max_run_seconds=float(spec["maxRunDurationSeconds"]) if spec.get("maxRunDurationSeconds") else None,
    )


def node_pool_webhook(service: object, info: KindInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Refuse node pools gcloud would refuse (unknown machine type, bad slice sizes, queued w/o autoscaling)."""
    if info.kind != "NodePool":
        return
    name = obj["metadata"].get("name", "")
    try:
        problems = node_pool_spec(obj).check()
        field = "spec"
    except RayAddressError as exc:
        problems, field = [str(exc)], "spec.rayAddress"
    except UnknownMachineType as exc:
        problems, field = [str(exc)], "spec.machineType"
    except ValueError as exc:
        problems, field = [str(exc)], "spec.tpuTopology"
    if problems:
        raise InvalidObject("request", 0, "NodePool", name, [FieldError(field, p) for p in problems])


def gke_node_pool(obj: Mapping[str, Any], project: str = "", location: str = "") -> dict[str, Any]:
    """The GKE Container API v1 NodePool resource for a stored NodePool."""
    spec = obj.get("spec") or {}
    pool = node_pool_spec(obj)
    auto = spec.get("autoscaling") or {}
    config: dict[str, Any] = {
        "machineType": pool.machine.name,
        "diskSizeGb": 100,
        "diskType": "pd-balanced",
        "imageType": "COS_CONTAINERD",
        "labels": {},
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect.upper().replace("NOSCHEDULE", "NO_SCHEDULE")}
                   for t in pool.taints()],
        "reservationAffinity": {"consumeReservationType": _AFFINITY.get(
            str(spec.get("reservationAffinity") or "any"), "ANY_RESERVATION")},
    }
    if pool.flex_start:
        config["flexStart"] = True
    where = location or str(spec.get("location") or "")
    out: dict[str, Any] = {
        "name": pool.name,
        "config": config,
        "initialNodeCount": pool.initial_nodes,
        "autoscaling": {"enabled": bool(auto.get("enabled", False)),
                        **({"minNodeCount": pool.min_nodes, "maxNodeCount": pool.max_nodes}
                           if auto.get("enabled") else {})},
        "management": {"autoRepair": True, "autoUpgrade": True},
        "status": "RUNNING",
        "version": GKE_VERSION,
        "locations": [where] if where else [],
        "selfLink": f"https://container.googleapis.com/v1/projects/{project}/locations/{where}/clusters/"
                    f"{pool.cluster}/nodePools/{pool.name}",
    }
    if pool.topology:
        out["placementPolicy"] = {"tpuTopology": pool.topology}
    if pool.queued_provisioning:
        out["queuedProvisioning"] = {"enabled": True}
    status = obj.get("status") or {}
    if "nodeCount" in status:
        out["currentNodeCount"] = status["nodeCount"]
    return out
