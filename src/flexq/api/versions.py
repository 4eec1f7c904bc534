"""Conversion between the served versions of a kind.

Kueue stores v1beta2 and serves v1beta1 too; flexq does the same: objects are stored in the kind's
storage version and converted when read in another. v1beta1 -> v1beta2 follows Kueue's conversion
(``cohort`` -> ``cohortName``; ``admissionChecks`` -> ``admissionChecksStrategy``; ``Borrow`` and
``Preempt`` -> ``MayStopSearch``, one way); v1beta2 -> v1beta1 renames ``cohortName`` back and drops
``concurrentAdmissionPolicy``, which v1beta1 does not have (as Kueue's conversion does: a v1beta1 update
of such a ClusterQueue then changes an immutable field and is refused). A LocalQueue's ``status.flavorsUsage``
is v1beta1's ``flavorUsage``; a Workload's ``spec.priorityClassRef`` (group, kind, name) is v1beta1's
``priorityClassName`` and ``priorityClassSource``; its pod sets' ``topologyAssignment`` lists domains in v1beta1 and
packs them into slices in v1beta2 (:mod:`flexq.api.topology_assignment`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from flexq.api.jsoncopy import copy_json
from flexq.api.kinds import KindInfo
from flexq.api.topology_assignment import from_v1beta1, to_v1beta1

__all__ = ["convert"]


def convert(info: KindInfo, obj: dict[str, Any], version: str) -> dict[str, Any]:
    """Return ``obj`` in ``version`` of its kind (a copy when anything changes)."""
    current = obj.get("apiVersion", "").rpartition("/")[2]
    if current == version:
        return obj
    out = copy_json(obj)
    out["apiVersion"] = info.api_version(version)
    if info.kind == "ClusterQueue" and isinstance(out.get("spec"), dict):
        spec = out["spec"]
        if version == "v1beta2":
            _to_v1beta2_cluster_queue(spec)
        elif version == "v1beta1":
            _to_v1beta1_cluster_queue(spec)
    elif info.kind == "LocalQueue" and isinstance(out.get("status"), dict):
        # v1beta2 renamed v1beta1's flavorUsage to flavorsUsage (as the ClusterQueue's is called in both).
        old, new = ("flavorsUsage", "flavorUsage") if version == "v1beta1" else ("flavorUsage", "flavorsUsage")
        if old in out["status"]:
            out["status"][new] = out["status"].pop(old)
    elif info.kind == "Workload" and isinstance(out.get("spec"), dict):
        if version == "v1beta1":
            _to_v1beta1_priority(out["spec"])
        elif version == "v1beta2":
            _to_v1beta2_priority(out["spec"])
        _topology_assignments(out, to_v1beta1 if version == "v1beta1" else from_v1beta1)
    elif info.kind == "Cohort" and isinstance(out.get("spec"), dict) and version == "v1beta2":
        spec = out["spec"]
        if "parent" in spec:
            spec["parentName"] = spec.pop("parent")
    return out


def _topology_assignments(obj: dict[str, Any], form: Callable[[Any], Any]) -> None:
    """v1beta2 packs a pod set's ``topologyAssignment`` into slices where v1beta1 lists its domains."""
    admission = (obj.get("status") or {}).get("admission")
    for ps in (admission or {}).get("podSetAssignments") or [] if isinstance(admission, dict) else []:
        if isinstance(ps, dict) and "topologyAssignment" in ps:
            ps["topologyAssignment"] = form(ps["topologyAssignment"])


def _to_v1beta2_cluster_queue(spec: dict[str, Any]) -> None:
    if "cohort" in spec:
        cohort = spec.pop("cohort")
        spec.setdefault("cohortName", cohort)
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
    fungibility = spec.get("flavorFungibility")
    if isinstance(fungibility, dict):
        if fungibility.get("whenCanBorrow") == "Borrow":
            fungibility["whenCanBorrow"] = "MayStopSearch"
        if fungibility.get("whenCanPreempt") == "Preempt":
            fungibility["whenCanPreempt"] = "MayStopSearch"


def _to_v1beta1_cluster_queue(spec: dict[str, Any]) -> None:
    if "cohortName" in spec:
        spec["cohort"] = spec.pop("cohortName")
    spec.pop("concurrentAdmissionPolicy", None)  # not in v1beta1: Kueue's conversion drops it


_PRIORITY_SOURCES: Final = {
    "kueue.x-k8s.io": ("kueue.x-k8s.io/workloadpriorityclass", "WorkloadPriorityClass"),
    "scheduling.k8s.io": ("scheduling.k8s.io/priorityclass", "PriorityClass"),
}
"""A priority class's group -> v1beta1's ``priorityClassSource`` for it, and its kind."""


def _to_v1beta1_priority(spec: dict[str, Any]) -> None:
    ref = spec.pop("priorityClassRef", None)
    if isinstance(ref, dict) and ref.get("name"):
        spec["priorityClassName"] = ref["name"]
        spec["priorityClassSource"] = _PRIORITY_SOURCES.get(ref.get("group") or "", ("", ""))[0]


def _to_v1beta2_priority(spec: dict[str, Any]) -> None:
    name = spec.pop("priorityClassName", None)
    source = spec.pop("priorityClassSource", None)
    if name:
        group = next((g for g, (s, _) in _PRIORITY_SOURCES.items() if s == source), "scheduling.k8s.io")
        spec["priorityClassRef"] = {"group": group, "kind": _PRIORITY_SOURCES[group][1], "name": name}
