"""Core (``v1``), batch (``batch/v1``) and autoscaling (``autoscaling.x-k8s.io/v1``) kinds."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from flexq.api.models.common import K8sModel, PodSpec, PodTemplateSpec, StrictBool, StrictInt, StrictStr, TopLevel


class ConfigMap(TopLevel):
    data: dict[StrictStr, StrictStr] | None = None
    binaryData: dict[StrictStr, StrictStr] | None = None
    immutable: StrictBool | None = None


class Namespace(TopLevel):
    spec: dict[str, Any] | None = None


class EventSource(K8sModel):
    component: StrictStr | None = None
    host: StrictStr | None = None


class Event(TopLevel):
    involvedObject: dict[str, Any]
    reason: StrictStr | None = None
    message: StrictStr | None = None
    type: StrictStr | None = None
    count: StrictInt | None = None
    firstTimestamp: StrictStr | None = None
    lastTimestamp: StrictStr | None = None
    source: EventSource | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"action", "eventTime", "related", "reportingComponent",
        "reportingInstance", "series"})


class JobSpec(K8sModel):
    template: PodTemplateSpec
    parallelism: Annotated[StrictInt, Field(ge=0)] | None = None
    completions: Annotated[StrictInt, Field(ge=0)] | None = None
    completionMode: Literal["NonIndexed", "Indexed"] | None = None
    backoffLimit: Annotated[StrictInt, Field(ge=0)] | None = None
    activeDeadlineSeconds: Annotated[StrictInt, Field(ge=1)] | None = None
    ttlSecondsAfterFinished: Annotated[StrictInt, Field(ge=0)] | None = None
    suspend: StrictBool | None = None
    selector: dict[str, Any] | None = None
    manualSelector: StrictBool | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"backoffLimitPerIndex", "managedBy", "maxFailedIndexes",
        "podFailurePolicy", "podReplacementPolicy", "successPolicy"})


class Job(TopLevel):
    spec: JobSpec


class PodTemplateRef(K8sModel):
    name: StrictStr


class ProvisioningRequestPodSet(K8sModel):
    podTemplateRef: PodTemplateRef
    count: Annotated[StrictInt, Field(ge=1)]


class ProvisioningRequestSpec(K8sModel):
    provisioningClassName: Annotated[StrictStr, Field(min_length=1)]
    podSets: Annotated[list[ProvisioningRequestPodSet], Field(min_length=1, max_length=32)]
    parameters: dict[StrictStr, StrictStr] | None = None


class ProvisioningRequest(TopLevel):
    spec: ProvisioningRequestSpec


class PriorityClass(TopLevel):
    """``scheduling.k8s.io/v1`` PriorityClass: Kueue takes a workload's priority from its pods' class."""

    value: StrictInt
    globalDefault: StrictBool | None = None
    description: StrictStr | None = None
    preemptionPolicy: Literal["PreemptLowerPriority", "Never"] | None = None


class Node(TopLevel):
    spec: dict[str, Any] | None = None


class Pod(TopLevel):
    """``v1`` Pod: a pod of the user's own is validated as one (a queued pod is Kueue's pod integration's); the
    pods flexq shows for Ray clusters and Jobs are written by flexq itself."""

    spec: PodSpec


class Service(TopLevel):
    spec: dict[str, Any] | None = None
