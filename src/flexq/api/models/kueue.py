"""Kueue's kinds (``kueue.x-k8s.io`` v1beta1 and v1beta2), as far as flexq reads them.

Field names and enums follow Kueue's API types; where v1beta2 renamed a value (``MayStopSearch`` for
``Borrow``/``Preempt``) or a field (``cohortName`` for ``cohort``), both spellings are accepted and
:mod:`flexq.api.versions` converts between them.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field

from flexq.api.models.common import (
    K8sModel,
    LabelKey,
    LabelSelector,
    LabelValue,
    Name,
    PodTemplateSpec,
    Quantity,
    StrictBool,
    StrictInt,
    StrictStr,
    Taint,
    Toleration,
    TopLevel,
    check_qualified_name,
)

ResourceName = Annotated[StrictStr, AfterValidator(check_qualified_name)]
StopPolicy = Literal["None", "Hold", "HoldAndDrain"]


# --- ResourceFlavor -------------------------------------------------------------------------------


class ResourceFlavorSpec(K8sModel):
    nodeLabels: Annotated[dict[LabelKey, LabelValue], Field(max_length=8)] | None = None
    nodeTaints: Annotated[list[Taint], Field(max_length=8)] | None = None
    tolerations: Annotated[list[Toleration], Field(max_length=8)] | None = None
    topologyName: StrictStr | None = None


class ResourceFlavor(TopLevel):
    spec: ResourceFlavorSpec | None = None


# --- Topology (topology-aware scheduling) ----------------------------------------------------------

HOSTNAME_LABEL = "kubernetes.io/hostname"


class TopologyLevel(K8sModel):
    nodeLabel: Annotated[LabelKey, Field(min_length=1, max_length=316)]


def _check_levels(levels: list[TopologyLevel]) -> list[TopologyLevel]:
    """Kueue's rules for ``spec.levels``: each label once, ``kubernetes.io/hostname`` only as the lowest level."""
    labels = [level.nodeLabel for level in levels]
    if len(set(labels)) != len(labels):
        raise ValueError("must be unique")
    if HOSTNAME_LABEL in labels[:-1]:
        raise ValueError(f"the {HOSTNAME_LABEL} label can only be used at the lowest level of topology")
    return levels


class TopologySpec(K8sModel):
    levels: Annotated[list[TopologyLevel], Field(min_length=1, max_length=16), AfterValidator(_check_levels)]


class Topology(TopLevel):
    spec: TopologySpec


# --- ClusterQueue and Cohort ----------------------------------------------------------------------


class ResourceQuota(K8sModel):
    name: ResourceName
    nominalQuota: Quantity
    borrowingLimit: Quantity | None = None
    lendingLimit: Quantity | None = None


class FlavorQuotas(K8sModel):
    name: Name
    resources: Annotated[list[ResourceQuota], Field(min_length=1, max_length=64)]


class ResourceGroup(K8sModel):
    coveredResources: Annotated[list[ResourceName], Field(min_length=1, max_length=64)]
    flavors: Annotated[list[FlavorQuotas], Field(min_length=1, max_length=64)]


class FlavorFungibility(K8sModel):
    whenCanBorrow: Literal["Borrow", "MayStopSearch", "TryNextFlavor"] | None = None
    whenCanPreempt: Literal["Preempt", "MayStopSearch", "TryNextFlavor"] | None = None
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = None


class BorrowWithinCohort(K8sModel):
    policy: Literal["Never", "LowerPriority"] | None = None
    maxPriorityThreshold: StrictInt | None = None


class Preemption(K8sModel):
    reclaimWithinCohort: Literal["Never", "LowerPriority", "Any"] | None = None
    borrowWithinCohort: BorrowWithinCohort | None = None
    withinClusterQueue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] | None = None


class AdmissionCheckStrategyRule(K8sModel):
    name: Name
    onFlavors: list[Name] | None = None


class AdmissionChecksStrategy(K8sModel):
    admissionChecks: list[AdmissionCheckStrategyRule] | None = None


class FairSharing(K8sModel):
    weight: Quantity | None = None


class AdmissionScope(K8sModel):
    admissionMode: Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"] | None = None


class ConcurrentAdmissionConstraints(K8sModel):
    lastAcceptableFlavorName: Name | None = None


class ConcurrentAdmissionMigration(K8sModel):
    mode: Literal["TryPreferredFlavors", "RetainFirstAdmission"]
    constraints: ConcurrentAdmissionConstraints | None = None


class ConcurrentAdmissionPolicy(K8sModel):
    """v1beta2 only (Kueue v0.18+, alpha): v1beta1 has no such field (see :mod:`flexq.api.validation`)."""

    migration: ConcurrentAdmissionMigration


class ClusterQueueWorkloadDefaults(K8sModel):
    """KEP-7029 (proposed, served as an alpha under ``ClusterQueueMaxExecutionTime``): what the ClusterQueue's
    workloads get where their job does not say."""
    maximumExecutionTimeSeconds: Annotated[StrictInt, Field(ge=1)] | None = None


class ClusterQueueSpec(K8sModel):
    resourceGroups: Annotated[list[ResourceGroup], Field(max_length=16)] | None = None
    cohort: Name | None = None
    cohortName: Name | None = None
    queueingStrategy: Literal["StrictFIFO", "BestEffortFIFO"] | None = None
    namespaceSelector: LabelSelector | None = None
    flavorFungibility: FlavorFungibility | None = None
    preemption: Preemption | None = None
    admissionChecks: list[Name] | None = None
    admissionChecksStrategy: AdmissionChecksStrategy | None = None
    stopPolicy: StopPolicy | None = None
    fairSharing: FairSharing | None = None
    concurrentAdmissionPolicy: ConcurrentAdmissionPolicy | None = None
    admissionScope: AdmissionScope | None = None
    workloadDefaults: ClusterQueueWorkloadDefaults | None = None


class ClusterQueue(TopLevel):
    spec: ClusterQueueSpec


class CohortSpec(K8sModel):
    parent: Name | None = None
    parentName: Name | None = None
    resourceGroups: Annotated[list[ResourceGroup], Field(max_length=16)] | None = None
    fairSharing: FairSharing | None = None


class Cohort(TopLevel):
    spec: CohortSpec | None = None


# --- LocalQueue -----------------------------------------------------------------------------------


class LocalQueueSpec(K8sModel):
    clusterQueue: Name
    stopPolicy: StopPolicy | None = None
    fairSharing: FairSharing | None = None


class LocalQueue(TopLevel):
    spec: LocalQueueSpec


# --- Admission checks and provisioning ------------------------------------------------------------


class AdmissionCheckParametersReference(K8sModel):
    apiGroup: StrictStr
    kind: StrictStr
    name: Name


class AdmissionCheckSpec(K8sModel):
    controllerName: StrictStr
    retryDelayMinutes: Annotated[StrictInt, Field(ge=0)] | None = None
    parameters: AdmissionCheckParametersReference | None = None


class AdmissionCheck(TopLevel):
    spec: AdmissionCheckSpec


class ProvisioningRequestRetryStrategy(K8sModel):
    backoffLimitCount: Annotated[StrictInt, Field(ge=0)] | None = None
    backoffBaseSeconds: Annotated[StrictInt, Field(ge=0)] | None = None
    backoffMaxSeconds: Annotated[StrictInt, Field(ge=0)] | None = None


class ProvisioningRequestPodSetUpdatesNodeSelector(K8sModel):
    key: Annotated[LabelKey, Field(min_length=1, max_length=317)]
    valueFromProvisioningClassDetail: Annotated[StrictStr, Field(min_length=1, max_length=32768)]


def _check_selector_keys(rows: list[ProvisioningRequestPodSetUpdatesNodeSelector]) -> list[
        ProvisioningRequestPodSetUpdatesNodeSelector]:
    """``nodeSelector`` is a list map keyed by ``key``: each key once."""
    keys = [row.key for row in rows]
    if len(set(keys)) != len(keys):
        raise ValueError("each key may appear once")
    return rows


class ProvisioningRequestPodSetUpdates(K8sModel):
    nodeSelector: Annotated[list[ProvisioningRequestPodSetUpdatesNodeSelector], Field(max_length=8),
                            AfterValidator(_check_selector_keys)] | None = None


class ProvisioningRequestConfigSpec(K8sModel):
    provisioningClassName: Annotated[StrictStr, Field(min_length=1, max_length=253)]
    parameters: Annotated[dict[StrictStr, StrictStr], Field(max_length=100)] | None = None
    managedResources: Annotated[list[ResourceName], Field(max_length=100)] | None = None
    retryStrategy: ProvisioningRequestRetryStrategy | None = None
    podSetUpdates: ProvisioningRequestPodSetUpdates | None = None
    podSetMergePolicy: Literal["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"] | None = None


class ProvisioningRequestConfig(TopLevel):
    spec: ProvisioningRequestConfigSpec


# --- Priorities and workloads ---------------------------------------------------------------------


class WorkloadPriorityClass(TopLevel):
    value: StrictInt
    description: StrictStr | None = None


class PodSetTopologyRequest(K8sModel):
    """Kueue's ``PodSetTopologyRequest`` (v1beta2), made from a pod template's ``podset-*`` annotations."""

    required: StrictStr | None = None
    preferred: StrictStr | None = None
    unconstrained: StrictBool | None = None
    podIndexLabel: StrictStr | None = None
    subGroupIndexLabel: StrictStr | None = None
    subGroupCount: StrictInt | None = None
    podSetGroupName: Annotated[StrictStr, Field(max_length=256)] | None = None
    """Pod sets of the same group are placed together (``kueue.x-k8s.io/podset-group-name``)."""
    podSetSliceRequiredTopology: StrictStr | None = None
    podSetSliceSize: StrictInt | None = None
    podsetSliceRequiredTopologyConstraints: Annotated[list[dict[str, Any]], Field(max_length=3)] | None = None


class PodSet(K8sModel):
    name: Annotated[StrictStr, Field(min_length=1, max_length=63)]
    count: Annotated[StrictInt, Field(ge=0)]
    minCount: Annotated[StrictInt, Field(ge=0)] | None = None
    template: PodTemplateSpec
    topologyRequest: PodSetTopologyRequest | None = None


class WorkloadSpec(K8sModel):
    podSets: Annotated[list[PodSet], Field(min_length=1, max_length=8)]
    queueName: StrictStr | None = None
    priorityClassName: StrictStr | None = None
    priority: StrictInt | None = None
    priorityClassSource: StrictStr | None = None
    active: StrictBool | None = None
    maximumExecutionTimeSeconds: Annotated[StrictInt, Field(ge=1)] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"preemptionGates", "priorityClassRef"})


class Workload(TopLevel):
    spec: WorkloadSpec
