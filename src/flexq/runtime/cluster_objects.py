"""What KubeRay shows for a RayCluster of the user's own: its status, its head Service and its Pods.

The Service ``<name>-head-svc`` (ports ``gcs-server`` 6379, ``dashboard`` 8265, ``client`` 10001) selects the
head pod ``<name>-head-<hash>``; worker pods are ``<name>-<group>-worker-<hash>``, one per pod of each group.
All carry KubeRay's labels (``ray.io/cluster``, ``ray.io/node-type``, ``ray.io/group``) and are owned by the
RayCluster, so ``kubectl port-forward service/<name>-head-svc 8265`` reaches the cluster's dashboard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from flexq.jobs import pod_requests
from flexq.runtime.kuberay_view import HEAD_PORTS, pod_object
from flexq.scheduler import format_amount
from flexq.store import Key

__all__ = ["cluster_status", "head_service_name", "raycluster_objects"]

_SHOWN: Final = {"cpu": "desiredCPU", "memory": "desiredMemory", "nvidia.com/gpu": "desiredGPU",
                 "google.com/tpu": "desiredTPU"}


def head_service_name(name: str) -> str:
    return f"{name}-head-svc"


def _suffix(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:5]


def _groups(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any], int]]:
    """(group, pod template, pods) of each worker group."""
    return [(str(g.get("groupName")), g.get("template") or {}, int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1)))
            for g in spec.get("workerGroupSpecs") or []]


def _amount(resource: str, milli: int) -> str:
    """As KubeRay sums them: memory in decimal units when they divide it (``3G``), else binary ones."""
    if resource == "memory" and milli % 1000 == 0 and milli:
        for suffix, size in (("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)):
            if (milli // 1000) % size == 0:
                return f"{milli // 1000 // size}{suffix}"
    return format_amount(resource, milli)


def cluster_status(obj: Mapping[str, Any], state: str, reason: str = "", ready_time: str = "",
                   stamp: str = "") -> dict[str, Any]:
    """The RayCluster's status as KubeRay writes it, for ``state`` ("" while starting, ``ready``, ``failed``,
    ``suspended``)."""
    spec = obj.get("spec") or {}
    name = obj["metadata"]["name"]
    workers = sum(pods for _, _, pods in _groups(spec))
    totals: dict[str, int] = {}
    head = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    for template, pods in [(head, 1), *(((t.get("spec") or {}), p) for _, t, p in _groups(spec))]:
        for resource, amount in pod_requests(template).items():
            totals[resource] = totals.get(resource, 0) + amount * pods
    ready = state == "ready"
    status: dict[str, Any] = {
        "desiredWorkerReplicas": workers,
        "minWorkerReplicas": sum(int(g.get("minReplicas", 0)) * int(g.get("numOfHosts", 1))
                                 for g in spec.get("workerGroupSpecs") or []),
        "maxWorkerReplicas": sum(int(g.get("maxReplicas", g.get("replicas", 0))) * int(g.get("numOfHosts", 1))
                                 for g in spec.get("workerGroupSpecs") or []),
        "availableWorkerReplicas": workers if ready else 0,
        "readyWorkerReplicas": workers if ready else 0,
        **{field: _amount(resource, totals.get(resource, 0)) for resource, field in _SHOWN.items()},
        "observedGeneration": obj["metadata"].get("generation", 1),
        "conditions": [
            {"type": "HeadPodReady", "status": "True" if ready else "False",
             "reason": "HeadPodRunningAndReady" if ready else "HeadPodNotFound"},
            {"type": "RayClusterProvisioned", "status": "True" if ready else "False",
             "reason": "AllPodRunningAndReadyFirstTime" if ready else "RayClusterPodsProvisioning"},
            {"type": "RayClusterSuspended", "status": "True" if state == "suspended" else "False",
             "reason": "RayClusterSuspended" if state == "suspended" else "RayClusterNotSuspended"},
        ],
    }
    if state:
        status["state"] = state
    if reason:
        status["reason"] = reason
    if stamp:
        status["lastUpdateTime"] = stamp
    if ready:
        status["endpoints"] = {port_name: str(number) for number, port_name in sorted(HEAD_PORTS.items())}
        status["head"] = {"podIP": "127.0.0.1", "serviceIP": "127.0.0.1", "podName": f"{name}-head-{_suffix(name)}",
                          "serviceName": head_service_name(name)}
        if ready_time:
            status["stateTransitionTimes"] = {"ready": ready_time}
    return status


def raycluster_objects(obj: Mapping[str, Any], phase: str, nodes: Mapping[str, Sequence[str]], log: str,
                       started: str) -> list[tuple[Key, dict[str, Any]]]:
    """The head Service and the Pods of the cluster, the pods in ``phase`` (Pending, Running, Failed), on
    ``nodes`` by pod set where they were placed."""
    meta = obj["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "default")
    spec = obj.get("spec") or {}
    owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name, "uid": meta.get("uid", ""),
             "controller": True, "blockOwnerDeletion": True}
    labels = {"ray.io/cluster": name, "app.kubernetes.io/created-by": "kuberay-operator",
              "app.kubernetes.io/name": "kuberay", "ray.io/is-ray-node": "yes"}
    out: list[tuple[Key, dict[str, Any]]] = [(Key("", "services", namespace, head_service_name(name)), {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": head_service_name(name), "namespace": namespace, "labels": dict(labels),
                     "ownerReferences": [owner]},
        "spec": {"type": str((spec.get("headGroupSpec") or {}).get("serviceType") or "ClusterIP"), "clusterIP": "None",
                 "selector": {"ray.io/cluster": name, "ray.io/node-type": "head"},
                 "ports": [{"name": port_name, "port": number, "targetPort": number, "protocol": "TCP"}
                           for number, port_name in sorted(HEAD_PORTS.items())]},
    })]
    head = (spec.get("headGroupSpec") or {}).get("template") or {}
    head_nodes = list(nodes.get("head") or [])
    out.append(pod_object(f"{name}-head-{_suffix(name)}", namespace,
                          {**labels, "ray.io/node-type": "head", "ray.io/group": "headgroup"}, head, owner, phase,
                          head_nodes[0] if head_nodes else "", log, started))
    for group, template, pods in _groups(spec):
        placed = list(nodes.get(group) or [])
        for i in range(pods):
            out.append(pod_object(f"{name}-{group}-worker-{_suffix(f'{name}-{group}-{i}')}", namespace,
                                  {**labels, "ray.io/node-type": "worker", "ray.io/group": group}, template, owner,
                                  phase, placed[i] if i < len(placed) else "", log, started))
    return out
