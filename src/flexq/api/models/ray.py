"""KubeRay's kinds (``ray.io/v1``): RayJob and RayCluster, as far as flexq reads them."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field

from flexq.api.models.common import K8sModel, PodTemplateSpec, StrictBool, StrictInt, StrictStr, TopLevel

CLUSTER_SELECTOR_KEY: Final = "ray.io/cluster"
"""The key of a RayJob's ``spec.clusterSelector`` that names the existing RayCluster it runs on (KubeRay's)."""


class HeadGroupSpec(K8sModel):
    rayStartParams: dict[StrictStr, Any] | None = None
    serviceType: StrictStr | None = None
    template: PodTemplateSpec

    more_fields: ClassVar[frozenset[str]] = frozenset({"enableIngress", "headService", "ingressOptions", "labels",
        "resources"})


class WorkerGroupSpec(K8sModel):
    groupName: Annotated[StrictStr, Field(min_length=1, max_length=63)]
    replicas: Annotated[StrictInt, Field(ge=0)] | None = None
    minReplicas: Annotated[StrictInt, Field(ge=0)] | None = None
    maxReplicas: Annotated[StrictInt, Field(ge=0)] | None = None
    numOfHosts: Annotated[StrictInt, Field(ge=1)] | None = None
    suspend: StrictBool | None = None
    rayStartParams: dict[StrictStr, Any] | None = None
    template: PodTemplateSpec

    more_fields: ClassVar[frozenset[str]] = frozenset({"idleTimeoutSeconds", "labels", "priority", "resources",
        "scaleStrategy"})


class RayClusterSpec(K8sModel):
    rayVersion: StrictStr | None = None
    enableInTreeAutoscaling: StrictBool | None = None
    autoscalerOptions: dict[str, Any] | None = None
    suspend: StrictBool | None = None
    headGroupSpec: HeadGroupSpec
    workerGroupSpecs: list[WorkerGroupSpec] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"authOptions", "gcsFaultToleranceOptions",
        "headServiceAnnotations", "historyServerOptions", "managedBy", "networkPolicy", "tlsOptions",
        "upgradeStrategy"})


class RayCluster(TopLevel):
    spec: RayClusterSpec


class RayJobSpec(K8sModel):
    entrypoint: StrictStr | None = None
    runtimeEnvYAML: StrictStr | None = None
    jobId: StrictStr | None = None
    submissionMode: Literal["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"] | None = None
    shutdownAfterJobFinishes: StrictBool | None = None
    ttlSecondsAfterFinished: Annotated[StrictInt, Field(ge=0)] | None = None
    activeDeadlineSeconds: Annotated[StrictInt, Field(ge=1)] | None = None
    backoffLimit: Annotated[StrictInt, Field(ge=0)] | None = None
    suspend: StrictBool | None = None
    rayClusterSpec: RayClusterSpec | None = None
    clusterSelector: dict[StrictStr, StrictStr] | None = None
    entrypointNumCpus: float | None = None
    entrypointNumGpus: float | None = None
    entrypointResources: StrictStr | None = None
    submitterPodTemplate: PodTemplateSpec | None = None
    metadata: dict[StrictStr, StrictStr] | None = None

    more_fields: ClassVar[frozenset[str]] = frozenset({"deletionStrategy", "managedBy", "preRunningDeadlineSeconds",
        "submitterConfig"})


class RayJob(TopLevel):
    spec: RayJobSpec
