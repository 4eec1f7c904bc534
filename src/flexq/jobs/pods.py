"""Kueue's Pod integration: plain Pods under the queue, alone or in groups.

A Pod labelled ``kueue.x-k8s.io/queue-name`` is created with Kueue's scheduling gate
(``kueue.x-k8s.io/admission``) and the label ``kueue.x-k8s.io/managed: "true"``, so no scheduler binds it.
A Pod alone gets a Workload of its own (``pod-<name>-<hash>``, one pod set ``main``). Pods labelled
``kueue.x-k8s.io/pod-group-name`` with the annotation ``kueue.x-k8s.io/pod-group-total-count`` form a
group: one Workload named after the group, owned by every pod, made once all the pods exist; its pod sets
are the group's roles (pods of the same shape: containers, requests, node selector, tolerations, priority
class), each named by a hash of its shape, as Kueue names them. On admission the gate is removed and the
flavors' node labels and tolerations are added to each pod; the workload finishes when every pod has
Succeeded or Failed (Failed if any failed).

Pods without the label are not Kueue's: they are stored as written and never run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from flexq.api import FieldError, InvalidObject
from flexq.jobs.workload import QUEUE_LABEL, pod_requests
from flexq.scheduler import PodSet, node_affinity, toleration

__all__ = [
    "GATE",
    "GROUP_LABEL",
    "GROUP_TOTAL",
    "MANAGED_LABEL",
    "ROLE_HASH",
    "gated_status",
    "group_of",
    "group_podsets",
    "group_total",
    "is_queued",
    "outcome",
    "pod_webhook",
    "role",
]

GATE: Final = "kueue.x-k8s.io/admission"
GROUP_LABEL: Final = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL: Final = "kueue.x-k8s.io/pod-group-total-count"
MANAGED_LABEL: Final = "kueue.x-k8s.io/managed"
ROLE_HASH: Final = "kueue.x-k8s.io/role-hash"
"""On a group's pod: its role, fixed at creation (admission adds node selectors, which would change it)."""
TERMINAL: Final = frozenset({"Succeeded", "Failed"})


def is_queued(pod: Mapping[str, Any]) -> bool:
    """A pod the integration manages: it asked for a queue when it was created."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return QUEUE_LABEL in labels and labels.get(MANAGED_LABEL) == "true"


def group_of(pod: Mapping[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL)


def group_total(pod: Mapping[str, Any]) -> int:
    return int(((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_TOTAL, "1"))


def gated_status() -> dict[str, Any]:
    """A gated pod's status, as the API server shows it (``kubectl get pods``: SchedulingGated)."""
    return {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
        "message": "Scheduling is blocked due to non-empty scheduling gates"}]}


def pod_webhook(obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Gate a queued pod at creation; keep what the queue set (gates, node selector, tolerations) on updates.

    Raises InvalidObject for a group without a valid total count, naming the annotation."""
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    if QUEUE_LABEL not in labels:
        return
    spec = obj.setdefault("spec", {})
    if old is not None:
        if is_queued(old):
            labels[MANAGED_LABEL] = "true"
            recorded = (old["metadata"].get("annotations") or {}).get(ROLE_HASH)
            if recorded:
                meta.setdefault("annotations", {})[ROLE_HASH] = recorded
            for field in ("schedulingGates", "nodeSelector", "tolerations", "nodeName"):
                spec.pop(field, None)
                if field in (old.get("spec") or {}):
                    spec[field] = old["spec"][field]
        return
    if GROUP_LABEL in labels:
        raw = (meta.get("annotations") or {}).get(GROUP_TOTAL)
        path = f"metadata.annotations[{GROUP_TOTAL}]"
        if raw is None:
            raise InvalidObject("request", 0, "Pod", meta.get("name", ""), [FieldError(
                path, f"Required value: a pod of group {labels[GROUP_LABEL]!r} says how many pods the group has")])
        if not raw.isdigit() or int(raw) < 1:
            raise InvalidObject("request", 0, "Pod", meta.get("name", ""), [FieldError(
                path, f"Invalid value: {raw!r}: the number of pods in the group, a whole number of at least 1")])
    labels[MANAGED_LABEL] = "true"
    meta["labels"] = labels
    if GROUP_LABEL in labels:
        meta.setdefault("annotations", {})[ROLE_HASH] = role(obj)
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != GATE]
    spec["schedulingGates"] = [*gates, {"name": GATE}]
    obj["status"] = gated_status()


def _shape(pod: Mapping[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec") or {}
    containers = [{k: c.get(k) for k in ("image", "command", "args", "resources", "ports")}
                  for c in spec.get("containers") or []]
    shape: dict[str, Any] = {
        "containers": containers, "init": [c.get("resources") for c in spec.get("initContainers") or []],
        "nodeSelector": spec.get("nodeSelector"), "tolerations": spec.get("tolerations"),
        "priorityClassName": spec.get("priorityClassName")}
    if spec.get("affinity") is not None:  # pods of different affinities are different roles (as Kueue's role hash)
        shape["affinity"] = spec["affinity"]
    return shape


def role(pod: Mapping[str, Any]) -> str:
    """The pod set a group's pod belongs to: a hash of its shape (Kueue's role hash), 8 hex digits; the one its
    ``kueue.x-k8s.io/role-hash`` annotation records, if any."""
    recorded = ((pod.get("metadata") or {}).get("annotations") or {}).get(ROLE_HASH)
    if recorded:
        return str(recorded)
    return hashlib.sha256(json.dumps(_shape(pod), sort_keys=True).encode()).hexdigest()[:8]


def group_podsets(pods: Sequence[Mapping[str, Any]]) -> tuple[tuple[PodSet, ...], dict[str, dict[str, Any]]]:
    """The group's pod sets (by role, in order of first appearance) and each pod set's template."""
    counts: dict[str, int] = {}
    templates: dict[str, dict[str, Any]] = {}
    for pod in pods:
        name = role(pod)
        counts[name] = counts.get(name, 0) + 1
        templates.setdefault(name, template(pod))
    sets = []
    for name, count in counts.items():
        spec = templates[name]["spec"]
        sets.append(PodSet(name=name, count=count, requests=pod_requests(spec),
                           node_selector=dict(spec.get("nodeSelector") or {}),
                           tolerations=tuple(toleration(t) for t in spec.get("tolerations") or []),
                           affinity=node_affinity(spec)))
    return tuple(sets), templates


def template(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as a pod template (what the Workload keeps): its labels and spec, without Kueue's gate."""
    spec = json.loads(json.dumps(pod.get("spec") or {}))
    gates = [g for g in spec.pop("schedulingGates", None) or [] if g.get("name") != GATE]
    if gates:
        spec["schedulingGates"] = gates
    spec.pop("nodeName", None)
    labels = dict((pod.get("metadata") or {}).get("labels") or {})
    return {"metadata": {"labels": labels}, "spec": spec}


def outcome(phases: Sequence[str]) -> str | None:
    """"Succeeded" or "Failed" once every pod has ended (Failed if any failed), else None."""
    if not phases or any(p not in TERMINAL for p in phases):
        return None
    return "Failed" if "Failed" in phases else "Succeeded"
