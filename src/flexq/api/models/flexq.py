"""flexq's own kinds (``flexq.dev/v1alpha1``): clusters and node pools, as gcloud creates them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from flexq.api.models.common import K8sModel, StrictBool, StrictInt, StrictStr, TopLevel


class ClusterSpec(K8sModel):
    location: StrictStr | None = None
    project: StrictStr | None = None
    machineType: StrictStr | None = None
    numNodes: Annotated[StrictInt, Field(ge=0)] | None = None
    version: StrictStr | None = None


class Cluster(TopLevel):
    spec: ClusterSpec | None = None


class Autoscaling(K8sModel):
    enabled: StrictBool | None = None
    minNodeCount: Annotated[StrictInt, Field(ge=0)] | None = None
    maxNodeCount: Annotated[StrictInt, Field(ge=0)] | None = None


class NodePoolSpec(K8sModel):
    cluster: StrictStr
    machineType: StrictStr | None = None
    rayAddress: StrictStr | None = None
    location: StrictStr | None = None
    tpuTopology: StrictStr | None = None
    reservationAffinity: StrictStr | None = None
    initialNodeCount: Annotated[StrictInt, Field(ge=0)] | None = None
    autoscaling: Autoscaling | None = None
    flexStart: StrictBool | None = None
    queuedProvisioning: StrictBool | None = None
    maxRunDurationSeconds: Annotated[StrictInt, Field(ge=1)] | None = None


class NodePool(TopLevel):
    spec: NodePoolSpec
