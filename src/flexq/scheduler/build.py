"""From stored objects (storage version, defaulted) to the scheduler's typed configuration."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from flexq.api import parse_quantity
from flexq.objects import PROVISIONING_CONTROLLER, admission_check_state, cluster_queue_state
from flexq.scheduler.model import (
    ClusterQueueSpec,
    CohortSpec,
    ConcurrentPolicy,
    FlavorResource,
    FlavorSpec,
    Fungibility,
    LabelSelector,
    NodeSelectorTerm,
    PodSetUpdate,
    PreemptionPolicy,
    Quota,
    Requirement,
    ResourceGroup,
    Strategy,
    Taint,
    Toleration,
)
from flexq.scheduler.queue_config import NAME_LABEL
from flexq.scheduler.scheduler import Config

__all__ = ["build_config", "label_selector", "milli", "node_affinity", "pod_set_update_objects", "pod_set_updates",
           "taint", "toleration", "toleration_object"]


def milli(value: Any) -> int:
    return parse_quantity(value).milli()


def taint(obj: Mapping[str, Any]) -> Taint:
    return Taint(str(obj.get("key", "")), str(obj.get("value") or ""), str(obj.get("effect", "")))


def toleration(obj: Mapping[str, Any]) -> Toleration:
    seconds = obj.get("tolerationSeconds")
    return Toleration(str(obj.get("key") or ""), str(obj.get("operator") or "Equal"), str(obj.get("value") or ""),
                      str(obj.get("effect") or ""), int(seconds) if isinstance(seconds, int) else None)


def pod_set_updates(raw: Any) -> dict[str, PodSetUpdate]:
    """An admission check's ``podSetUpdates`` (as a Workload's status lists them), by pod set."""
    def strings(value: Any) -> dict[str, str]:
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}

    return {str(u["name"]): PodSetUpdate(strings(u.get("annotations")), strings(u.get("labels")),
                                         strings(u.get("nodeSelector")),
                                         tuple(toleration(t) for t in u.get("tolerations") or []
                                               if isinstance(t, Mapping)))
            for u in raw or [] if isinstance(u, Mapping) and u.get("name")}


def pod_set_update_objects(updates: Mapping[str, PodSetUpdate]) -> list[dict[str, Any]]:
    """``updates`` as a Workload's status lists them (by pod set name; fields left empty are left out)."""
    return [{"name": name, **({"labels": dict(u.labels)} if u.labels else {}),
             **({"annotations": dict(u.annotations)} if u.annotations else {}),
             **({"nodeSelector": dict(u.node_selector)} if u.node_selector else {}),
             **({"tolerations": [toleration_object(t) for t in u.tolerations]} if u.tolerations else {})}
            for name, u in sorted(updates.items())]


def toleration_object(t: Toleration) -> dict[str, Any]:
    """``t`` as a pod spec lists it."""
    return {**({"key": t.key} if t.key else {}), "operator": t.operator, **({"value": t.value} if t.value else {}),
            **({"effect": t.effect} if t.effect else {}),
            **({"tolerationSeconds": t.seconds} if t.seconds is not None else {})}


def node_affinity(spec: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """A pod spec's required node affinity (``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution``):
    its ``nodeSelectorTerms``, each with its ``matchExpressions`` and ``matchFields`` (empty: none)."""
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, Mapping) else None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node, Mapping) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not isinstance(terms, list):
        return ()
    return tuple(NodeSelectorTerm(_requirements(term.get("matchExpressions")), _requirements(term.get("matchFields")))
                 if isinstance(term, Mapping) else NodeSelectorTerm() for term in terms)


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(Requirement(str(e.get("key", "")), str(e.get("operator", "")),
                             tuple(str(v) for v in e.get("values") or ()))
                 for e in raw if isinstance(e, Mapping))


def flavor_spec(obj: Mapping[str, Any], topologies: Mapping[str, tuple[str, ...]] | None = None) -> FlavorSpec:
    """A ResourceFlavor; ``topologies``: the levels of each Topology, by name (a flavor naming one that does not
    exist is topology-aware with no levels: it places nothing)."""
    spec = obj.get("spec") or {}
    topology = str(spec.get("topologyName") or "")
    return FlavorSpec(
        obj["metadata"]["name"],
        dict(spec.get("nodeLabels") or {}),
        tuple(taint(t) for t in spec.get("nodeTaints") or []),
        tuple(toleration(t) for t in spec.get("tolerations") or []),
        topology,
        (topologies or {}).get(topology, ()) if topology else (),
    )


def topology_levels(objects: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, ...]]:
    """Each Topology's levels (node labels, highest first), by name."""
    return {o["metadata"]["name"]: tuple(str(level["nodeLabel"]) for level in (o.get("spec") or {}).get("levels") or [])
            for o in objects}


def label_selector(raw: Any) -> LabelSelector | None:
    """A ``metav1.LabelSelector`` as Kueue reads it (``LabelSelectorAsSelector``): absent (None) selects nothing,
    ``{}`` everything."""
    if not isinstance(raw, Mapping):
        return None
    expressions = tuple(Requirement(str(e.get("key", "")), str(e.get("operator", "")),
                                    tuple(str(v) for v in e.get("values") or ()))
                        for e in raw.get("matchExpressions") or ())
    labels = tuple(sorted((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items()))
    return LabelSelector(labels, expressions)


def _groups(raw: Iterable[Mapping[str, Any]]) -> tuple[ResourceGroup, ...]:
    groups = []
    for group in raw:
        quotas: dict[FlavorResource, Quota] = {}
        for flavor in group.get("flavors", []):
            for res in flavor.get("resources", []):
                quotas[(flavor["name"], res["name"])] = Quota(
                    milli(res["nominalQuota"]),
                    milli(res["borrowingLimit"]) if res.get("borrowingLimit") is not None else None,
                    milli(res["lendingLimit"]) if res.get("lendingLimit") is not None else None,
                )
        groups.append(ResourceGroup(tuple(group.get("coveredResources", [])),
                                    tuple(f["name"] for f in group.get("flavors", [])), quotas))
    return tuple(groups)


def _policy(value: Any) -> PreemptionPolicy:
    return PreemptionPolicy(value or "Never")


def concurrent_policy(spec: Mapping[str, Any]) -> ConcurrentPolicy | None:
    """``spec.concurrentAdmissionPolicy`` (v1beta2), if any."""
    raw = spec.get("concurrentAdmissionPolicy")
    if not isinstance(raw, Mapping):
        return None
    migration = raw.get("migration") or {}
    constraints = migration.get("constraints") or {}
    return ConcurrentPolicy(migrate=migration.get("mode", "TryPreferredFlavors") != "RetainFirstAdmission",
                            last_acceptable=constraints.get("lastAcceptableFlavorName") or None)


def cluster_queue_spec(obj: Mapping[str, Any], active: bool = True) -> ClusterQueueSpec:
    spec = obj.get("spec") or {}
    fungibility = spec.get("flavorFungibility") or {}
    preemption = spec.get("preemption") or {}
    borrow = preemption.get("borrowWithinCohort") or {}
    checks: list[tuple[str, frozenset[str] | None]] = [(name, None) for name in spec.get("admissionChecks") or []]
    for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
        only = rule.get("onFlavors")
        checks.append((rule["name"], frozenset(only) if only else None))
    return ClusterQueueSpec(
        name=obj["metadata"]["name"],
        cohort=spec.get("cohortName") or spec.get("cohort") or None,
        groups=_groups(spec.get("resourceGroups") or []),
        strategy=Strategy(spec.get("queueingStrategy") or "BestEffortFIFO"),
        fungibility=Fungibility(
            stop_when_borrowing=fungibility.get("whenCanBorrow", "MayStopSearch") in ("MayStopSearch", "Borrow"),
            stop_when_preempting=fungibility.get("whenCanPreempt", "TryNextFlavor") in ("MayStopSearch", "Preempt"),
            prefer_preemption_over_borrowing=fungibility.get("preference") == "PreemptionOverBorrowing",
        ),
        within_cluster_queue=_policy(preemption.get("withinClusterQueue")),
        reclaim_within_cohort=_policy(preemption.get("reclaimWithinCohort")),
        borrow_within_cohort=_policy(borrow.get("policy")),
        borrow_within_cohort_threshold=borrow.get("maxPriorityThreshold"),
        checks=tuple(checks),
        active=active,
        concurrent=concurrent_policy(spec),
        namespace_selector=label_selector(spec.get("namespaceSelector")),
        stop_policy=str(spec.get("stopPolicy") or "None"),
        fair_admission=(spec.get("admissionScope") or {}).get("admissionMode") == "UsageBasedAdmissionFairSharing",
        fair_weight=fair_weight(spec),
        default_max_exec_seconds=(spec.get("workloadDefaults") or {}).get("maximumExecutionTimeSeconds"),
    )


def fair_weight(spec: Mapping[str, Any]) -> float:
    """``spec.fairSharing.weight`` as a number (Kueue's ``AsFloat64Slow``; absent: 1)."""
    weight = (spec.get("fairSharing") or {}).get("weight")
    return 1.0 if weight is None else float(parse_quantity(weight).value)


def cohort_spec(obj: Mapping[str, Any]) -> CohortSpec:
    spec = obj.get("spec") or {}
    return CohortSpec(obj["metadata"]["name"], spec.get("parentName") or spec.get("parent") or None,
                      _groups(spec.get("resourceGroups") or []), fair_weight(spec))


def build_config(objects: Mapping[str, list[dict[str, Any]]]) -> Config:
    """``objects`` by kind (ResourceFlavor, Topology, ClusterQueue, Cohort, AdmissionCheck, ProvisioningRequestConfig,
    and the LocalQueues and Namespaces for their stop policies and labels)."""
    topologies = topology_levels(objects.get("Topology", []))
    flavors = {o["metadata"]["name"]: flavor_spec(o, topologies) for o in objects.get("ResourceFlavor", [])}
    configs = {o["metadata"]["name"] for o in objects.get("ProvisioningRequestConfig", [])}
    checks: dict[str, bool] = {}
    delays: dict[str, float] = {}
    provisioning = set()
    for check in objects.get("AdmissionCheck", []):
        name = check["metadata"]["name"]
        checks[name] = admission_check_state(check, configs).active
        if (check.get("spec") or {}).get("controllerName") == PROVISIONING_CONTROLLER:
            provisioning.add(name)
        minutes = (check.get("spec") or {}).get("retryDelayMinutes")
        if minutes is not None:
            delays[name] = float(minutes) * 60
    queues = {}
    for cq in objects.get("ClusterQueue", []):
        active = cluster_queue_state(cq, set(flavors), checks).active
        queues[cq["metadata"]["name"]] = cluster_queue_spec(cq, active)
    cohorts = {o["metadata"]["name"]: cohort_spec(o) for o in objects.get("Cohort", [])}
    namespaces = {}
    for ns in objects.get("Namespace", []):
        name = ns["metadata"]["name"]
        namespaces[name] = {**(ns["metadata"].get("labels") or {}), NAME_LABEL: name}
    stopped = {}
    weights = {}
    for lq in objects.get("LocalQueue", []):
        place = (str(lq["metadata"].get("namespace") or "default"), lq["metadata"]["name"])
        policy = (lq.get("spec") or {}).get("stopPolicy") or "None"
        if policy != "None":
            stopped[place] = str(policy)
        weight = ((lq.get("spec") or {}).get("fairSharing") or {}).get("weight")
        if weight is not None:
            weights[place] = float(parse_quantity(weight).value)
    return Config(flavors, queues, cohorts, delays, frozenset(provisioning), namespaces=namespaces,
                  stopped_queues=stopped, queue_weights=weights)
