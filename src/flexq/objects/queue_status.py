"""The Active condition of ClusterQueues, LocalQueues and AdmissionChecks, as Kueue reports it.

Dangling references are accepted and reported, as in Kueue: a ClusterQueue naming a missing
ResourceFlavor or AdmissionCheck, or a LocalQueue naming a missing ClusterQueue, is stored and shows
``Active: False`` with Kueue's reason and message until the reference appears.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = ["PROVISIONING_CONTROLLER", "QueueState", "admission_check_state", "cluster_queue_state", "local_queue_state"]

PROVISIONING_CONTROLLER: Final = "kueue.x-k8s.io/provisioning-request"


@dataclass(frozen=True, slots=True)
class QueueState:
    active: bool
    reason: str
    message: str


def admission_check_state(check: dict[str, Any], configs: set[str]) -> QueueState:
    """An AdmissionCheck is active when its controller can act on it."""
    spec = check.get("spec", {})
    if spec.get("controllerName") == PROVISIONING_CONTROLLER:
        params = spec.get("parameters")
        if params is None:
            return QueueState(True, "Active", "The admission check is active")
        if params.get("apiGroup") != "kueue.x-k8s.io" or params.get("kind") != "ProvisioningRequestConfig":
            return QueueState(False, "BadParametersRef",
                              f"Unsupported parameters reference: {params.get('apiGroup')}/{params.get('kind')}")
        if params.get("name") not in configs:
            return QueueState(False, "BadParametersRef",
                              f'ProvisioningRequestConfig.kueue.x-k8s.io "{params.get("name")}" not found')
        return QueueState(True, "Active", "The admission check is active")
    return QueueState(True, "Active",
                      "No flexq controller acts on this check: set its state by hand or from a scenario")


def cluster_queue_state(cq: dict[str, Any], flavors: set[str], checks: dict[str, bool]) -> QueueState:
    """Kueue's ``inactiveReason``: the first reason names the condition, the message lists all."""
    spec = cq.get("spec", {})
    if cq.get("metadata", {}).get("deletionTimestamp"):
        return QueueState(False, "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    reasons: list[str] = []
    parts: list[str] = []
    if spec.get("stopPolicy", "None") != "None":
        reasons.append("Stopped")
        parts.append("is stopped")
    missing_flavors = [
        f["name"] for group in spec.get("resourceGroups") or [] for f in group.get("flavors", [])
        if f["name"] not in flavors
    ]
    if missing_flavors:
        reasons.append("FlavorNotFound")
        parts.append("references missing ResourceFlavor(s): " + ",".join(missing_flavors))
    wanted = sorted({rule["name"] for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []}
                    | set(spec.get("admissionChecks") or []))
    missing_checks = [c for c in wanted if c not in checks]
    if missing_checks:
        reasons.append("AdmissionCheckNotFound")
        parts.append("references missing AdmissionCheck(s): " + ",".join(missing_checks))
    inactive = [c for c in wanted if c in checks and not checks[c]]
    if inactive:
        reasons.append("AdmissionCheckInactive")
        parts.append("references inactive AdmissionCheck(s): " + ",".join(inactive))
    if not reasons:
        return QueueState(True, "Ready", "Can admit new workloads")
    return QueueState(False, reasons[0], "Can't admit new workloads: " + ", ".join(parts) + ".")


def local_queue_state(lq: dict[str, Any], cluster_queues: dict[str, bool]) -> QueueState:
    spec = lq.get("spec", {})
    if spec.get("stopPolicy", "None") != "None":
        return QueueState(False, "Stopped", "LocalQueue is stopped")
    cq = spec.get("clusterQueue")
    if cq not in cluster_queues:
        return QueueState(False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    if not cluster_queues[cq]:
        return QueueState(False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    return QueueState(True, "Ready", "Can submit new workloads to localQueue")
