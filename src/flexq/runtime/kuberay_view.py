"""What KubeRay shows for a running RayJob, so that kubectl's view of it is the usual one.

A RayCluster ``<job>-raycluster``, its head Service ``<job>-head-svc`` (the guide port-forwards it), the
head and worker Pods (bound to the nodes the capacity driver placed them on), and the submitter Job
``<job>`` with its Pod, whose log is the job's driver log (``kubectl logs job/<job>``). Pods carry which log is
theirs in the annotation ``flexq.dev/log`` (``rayjobs/<job>`` or ``rayclusters/<cluster>``: a name, never a path);
the API serves that log, of the pod's own namespace, as the pod's log (:func:`pod_log_file`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from flexq.runtime.local_pods import pod_log_path
from flexq.store import Key

__all__ = ["HEAD_PORTS", "LOG_ANNOTATION", "PHASES", "head_port_map", "job_of_pod", "kuberay_objects", "pod_object"]

LOG_ANNOTATION: Final = "flexq.dev/log"
_REFERENCE: Final = re.compile(r"(rayjobs|rayclusters)/([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)")


def log_reference(plural: str, name: str) -> str:
    """What a pod shown for a RayJob or RayCluster carries in :data:`LOG_ANNOTATION`: whose log is its own."""
    return f"{plural}/{name}"


def ray_log_path(home: Path, plural: str, namespace: str, name: str) -> Path:
    """A RayJob's driver log or a RayCluster's head log: a file of the server's (``FLEXQ_HOME/logs``, 0700), never
    in a folder a job can write."""
    return home / "logs" / plural / namespace / f"{name}.log"


def pod_log_file(home: Path, pod: Mapping[str, Any]) -> Path:
    """Where the log of ``pod`` is: for a pod shown for a RayJob or RayCluster, that job's or cluster's log (its
    annotation names which, in the pod's own namespace: an annotation a user wrote can name nothing else), else
    the log of the pod's own run. The path is built by the server from names, never taken from the object."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    found = _REFERENCE.fullmatch(str((meta.get("annotations") or {}).get(LOG_ANNOTATION) or ""))
    if found is not None and ".." not in found.group(2):
        return ray_log_path(home, found.group(1), namespace, found.group(2))
    return pod_log_path(home, namespace, str(meta.get("name", "")), str(meta.get("uid", "")))
PHASES: Final = {"Initializing": "Pending", "Running": "Running", "Retrying": "Pending", "Complete": "Succeeded",
                 "Failed": "Failed"}

HEAD_PORTS: Final = {6379: "gcs-server", 8265: "dashboard", 10001: "client"}
"""The head's container ports as KubeRay names them (and the head Service exposes them)."""


def job_of_pod(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(RayJob name, node type) of a Ray cluster's pod, from KubeRay's labels; None for any other pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    cluster = str(labels.get("ray.io/cluster", ""))
    if not cluster.endswith("-raycluster"):
        return None
    return cluster.removesuffix("-raycluster"), str(labels.get("ray.io/node-type", ""))


def head_port_map(pod: Mapping[str, Any], local: Mapping[str, int]) -> dict[int, int]:
    """The head pod's container ports -> the local Ray cluster's ports (``local``: by KubeRay's port names).

    A container port named like one of KubeRay's (``dashboard``...) maps to that port; KubeRay's default
    numbers (8265...) map too, unless the pod gives the number to a port of another name."""
    named: dict[int, str] = dict(HEAD_PORTS)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            number, name = port.get("containerPort"), str(port.get("name", ""))
            if isinstance(number, int):
                named[number] = name
    return {number: local[name] for number, name in named.items() if name in local}


def _suffix(text: str, n: int = 5) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def _owner(job: Mapping[str, Any], api_version: str = "ray.io/v1", kind: str = "RayJob") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": job["metadata"]["name"],
            "uid": job["metadata"].get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def pod_object(name: str, namespace: str, labels: dict[str, str], template: Mapping[str, Any], owner: dict[str, Any],
         phase: str, node: str, log: str, started: str) -> tuple[Key, dict[str, Any]]:
    spec = dict(template.get("spec") or {})
    containers = [{k: v for k, v in c.items()} for c in spec.get("containers") or [{"name": "main"}]]
    running = phase == "Running"
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if running else "False"},
                       {"type": "PodScheduled", "status": "True" if node else "False"}],
        "containerStatuses": [{"name": c.get("name", "main"), "ready": running, "restartCount": 0,
                               "image": c.get("image", ""),
                               "state": {"running": {"startedAt": started}} if running else
                               {"terminated": {"reason": "Completed" if phase == "Succeeded" else "Error",
                                               "exitCode": 0 if phase == "Succeeded" else 1}}
                               if phase in ("Succeeded", "Failed") else {"waiting": {"reason": "ContainerCreating"}}}
                              for c in containers],
        "startTime": started,
    }
    if phase == "Running":
        status["podIP"] = "127.0.0.1"
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "labels": labels,
                        "annotations": {LOG_ANNOTATION: log, **(dict((template.get("metadata") or {})
                                                                    .get("annotations") or {}))},
                        "ownerReferences": [owner]},
           "spec": {**spec, "containers": containers, **({"nodeName": node} if node else {})},
           "status": status}
    return Key("", "pods", namespace, name), obj


def kuberay_objects(job: Mapping[str, Any], deployment: str, nodes: Mapping[str, Sequence[str]], log: str,
                    started: str, with_cluster: bool, ended: str = "") -> list[tuple[Key, dict[str, Any]]]:
    """The objects for ``job`` in ``deployment`` state (jobDeploymentStatus); pods on ``nodes`` by pod set."""
    phase = PHASES.get(deployment, "Pending")
    out = _cluster_objects(job, phase, nodes, log, started) if with_cluster else []
    return out + _submitter_objects(job, phase, nodes, log, started, ended)


def _cluster_objects(job: Mapping[str, Any], phase: str, nodes: Mapping[str, Sequence[str]], log: str,
                     started: str) -> list[tuple[Key, dict[str, Any]]]:
    """The RayCluster ``<job>-raycluster``, its head Service and its head and worker Pods."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "default")
    cluster_name = f"{name}-raycluster"
    ray_spec = (job.get("spec") or {}).get("rayClusterSpec") or {}
    cluster_labels = {"ray.io/cluster": cluster_name, "app.kubernetes.io/created-by": "kuberay-operator"}
    cluster_uid = f"{meta.get('uid', '')}-cluster"
    cluster_owner = {**_owner({"metadata": {"name": cluster_name, "uid": cluster_uid}}, kind="RayCluster")}
    workers = sum(int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1))
                  for g in ray_spec.get("workerGroupSpecs") or [])
    out: list[tuple[Key, dict[str, Any]]] = [(Key("ray.io", "rayclusters", namespace, cluster_name), {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": cluster_name, "namespace": namespace, "labels": {"ray.io/originated-from-crd": "RayJob"},
                     "ownerReferences": [_owner(job)], "uid": cluster_uid},
        "spec": ray_spec,
        "status": {"state": "ready" if phase == "Running" else ("" if phase == "Pending" else "suspended"),
                   "desiredWorkerReplicas": workers, "availableWorkerReplicas": workers if phase == "Running" else 0},
    }), (Key("", "services", namespace, f"{name}-head-svc"), {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{name}-head-svc", "namespace": namespace, "labels": cluster_labels,
                     "ownerReferences": [cluster_owner]},
        "spec": {"type": "ClusterIP", "clusterIP": "None", "selector": {**cluster_labels, "ray.io/node-type": "head"},
                 "ports": [{"name": "gcs-server", "port": 6379, "protocol": "TCP"},
                           {"name": "dashboard", "port": 8265, "protocol": "TCP"},
                           {"name": "client", "port": 10001, "protocol": "TCP"}]},
    })]
    head = (ray_spec.get("headGroupSpec") or {}).get("template") or {}
    head_nodes = list(nodes.get("head") or [])
    out.append(pod_object(f"{cluster_name}-head-{_suffix(cluster_name)}", namespace,
                          {**cluster_labels, "ray.io/node-type": "head", "ray.io/group": "headgroup"}, head,
                          cluster_owner, phase, head_nodes[0] if head_nodes else "", log, started))
    for group in ray_spec.get("workerGroupSpecs") or []:
        group_name = str(group.get("groupName"))
        count = int(group.get("replicas", 0)) * int(group.get("numOfHosts", 1))
        group_nodes = list(nodes.get(group_name) or [])
        for i in range(count):
            pod_name = f"{cluster_name}-{group_name}-worker-{_suffix(f'{cluster_name}-{group_name}-{i}')}"
            out.append(pod_object(pod_name, namespace, {**cluster_labels, "ray.io/node-type": "worker",
                                                        "ray.io/group": group_name},
                                  group.get("template") or {}, cluster_owner, phase,
                                  group_nodes[i] if i < len(group_nodes) else "", log, started))
    return out


def _submitter_objects(job: Mapping[str, Any], phase: str, nodes: Mapping[str, Sequence[str]], log: str,
                       started: str, ended: str) -> list[tuple[Key, dict[str, Any]]]:
    """The submitter Job ``<job>`` and its Pod, whose log is the job's driver log."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "default")
    controller_uid = f"{meta.get('uid', '')}-submitter"
    job_labels = {"batch.kubernetes.io/job-name": name, "job-name": name,
                  "batch.kubernetes.io/controller-uid": controller_uid, "controller-uid": controller_uid}
    done = phase in ("Succeeded", "Failed")
    submitter_status: dict[str, Any] = {"startTime": started, "active": 0 if done else 1,
                                        "succeeded": 1 if phase == "Succeeded" else 0,
                                        "failed": 1 if phase == "Failed" else 0}
    if done:
        submitter_status["conditions"] = [{"type": "Complete" if phase == "Succeeded" else "Failed",
                                           "status": "True"}]
        if ended:
            submitter_status["completionTime"] = ended
    entrypoint = str((job.get("spec") or {}).get("entrypoint", ""))
    submitter_pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "ray-job-submitter",
                                                                          "image": "rayproject/ray"}]}}
    return [(Key("batch", "jobs", namespace, name), {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"ray.io/originated-from-crd": "RayJob"},
                     "ownerReferences": [_owner(job)], "uid": controller_uid},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 2, "suspend": False,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": controller_uid}},
                 "template": {"metadata": {"labels": job_labels},
                              "spec": {"restartPolicy": "Never", "containers": [{
                                  "name": "ray-job-submitter", "image": "rayproject/ray",
                                  "command": ["ray", "job", "submit", "--", entrypoint]}]}}},
        "status": submitter_status,
    }), pod_object(f"{name}-{_suffix(name)}", namespace, job_labels, submitter_pod,
                   _owner({"metadata": {"name": name, "uid": controller_uid}}, "batch/v1", "Job"), phase,
                   (nodes.get("head") or [""])[0], log, started)]
