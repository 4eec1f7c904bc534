"""Defaulting, as Kueue's CRD schemas and webhooks, KubeRay's CRDs and the API server default.

:func:`apply_defaults` mutates an object already validated and converted to its storage version.
Defaults are written into the object (and so shown back by ``get -o yaml``), as the API server does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

__all__ = ["apply_defaults", "job_labels", "job_selector"]


def _setdefaults(target: dict[str, Any], **values: Any) -> None:
    for key, value in values.items():
        target.setdefault(key, value)


def _cluster_queue(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    _setdefaults(spec, queueingStrategy="BestEffortFIFO", stopPolicy="None")
    fungibility = spec.setdefault("flavorFungibility", {})
    _setdefaults(fungibility, whenCanBorrow="MayStopSearch", whenCanPreempt="TryNextFlavor")
    preemption = spec.setdefault("preemption", {})
    _setdefaults(preemption, reclaimWithinCohort="Never", withinClusterQueue="Never")
    _setdefaults(preemption.setdefault("borrowWithinCohort", {}), policy="Never")


def _local_queue(obj: dict[str, Any]) -> None:
    _setdefaults(obj["spec"], stopPolicy="None")


def _provisioning_request_config(obj: dict[str, Any]) -> None:
    retry = obj["spec"].setdefault("retryStrategy", {})
    _setdefaults(retry, backoffLimitCount=3, backoffBaseSeconds=60, backoffMaxSeconds=1800)


def _workload(obj: dict[str, Any]) -> None:
    spec = obj["spec"]
    _setdefaults(spec, active=True)
    for podset in spec["podSets"]:
        _setdefaults(podset, name="main", count=1)


def _worker_groups(cluster: dict[str, Any]) -> None:
    for group in cluster.get("workerGroupSpecs") or []:
        _setdefaults(group, replicas=0, minReplicas=0, maxReplicas=2147483647, numOfHosts=1)


def _ray_job(obj: dict[str, Any]) -> None:
    spec = obj["spec"]
    _setdefaults(spec, submissionMode="K8sJobMode", backoffLimit=0, ttlSecondsAfterFinished=0)
    if isinstance(spec.get("rayClusterSpec"), dict):
        _worker_groups(spec["rayClusterSpec"])


def _ray_cluster(obj: dict[str, Any]) -> None:
    _worker_groups(obj["spec"])


def _job(obj: dict[str, Any]) -> None:
    spec = obj["spec"]
    if "parallelism" not in spec and "completions" not in spec:
        _setdefaults(spec, completions=1)  # the API server sets both to 1 only when neither is given
    _setdefaults(spec, parallelism=1, backoffLimit=6, completionMode="NonIndexed", suspend=False)


def job_labels(name: str, uid: str) -> dict[str, str]:
    """The labels the API server gives a Job's pod template, and its controller the Job's pods."""
    return {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
            "controller-uid": uid, "job-name": name}


def job_selector(obj: dict[str, Any], uid: str) -> None:
    """A new Job (``uid``, given at its creation) as the API server prepares it: unless ``manualSelector``, its
    ``selector`` matches its controller-uid and its template carries :func:`job_labels`."""
    spec = obj.setdefault("spec", {})
    if spec.get("manualSelector") is True:
        return
    labels = job_labels(str(obj.get("metadata", {}).get("name", "")), uid)
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    meta = spec.setdefault("template", {}).setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}


def _namespace(obj: dict[str, Any]) -> None:
    obj.setdefault("status", {}).setdefault("phase", "Active")
    name = obj.get("metadata", {}).get("name")
    if name:  # the API server's NamespaceDefaultLabelName: always the name, whatever was written
        labels = obj["metadata"].get("labels")
        known = labels if isinstance(labels, dict) else {}
        obj["metadata"]["labels"] = {**known, "kubernetes.io/metadata.name": name}


_DEFAULTERS: Final[dict[str, Callable[[dict[str, Any]], None]]] = {
    "ClusterQueue": _cluster_queue,
    "LocalQueue": _local_queue,
    "ProvisioningRequestConfig": _provisioning_request_config,
    "Workload": _workload,
    "RayJob": _ray_job,
    "RayCluster": _ray_cluster,
    "Job": _job,
    "Namespace": _namespace,
}


def apply_defaults(kind: str, obj: dict[str, Any]) -> None:
    """Fill in the defaults of ``kind`` in ``obj`` (in place)."""
    defaulter = _DEFAULTERS.get(kind)
    if defaulter is not None:
        defaulter(obj)
