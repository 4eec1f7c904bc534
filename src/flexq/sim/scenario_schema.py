"""The shape of a scenario file (``kind: Scenario``) and of its capacity section: what each field may hold, checked
strictly (unknown fields refused). :mod:`flexq.sim.scenario` reads a file into these and builds the run from them;
:mod:`flexq.sim.submit` turns their submissions into jobs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

__all__ = ["CapacitySection", "CheckEntry", "CloudEntry", "DelayPoint", "Duration", "Outages", "Poisson", "PoolEntry",
           "ScenarioFile", "ScenarioSpec", "StrictModel", "SubmitEntry", "TracePoint", "Window"]

Duration = StrictStr | StrictInt | float


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Poisson(StrictModel):
    ratePerHour: Annotated[float, Field(gt=0)]
    for_: Duration = Field(alias="for")


class SubmitEntry(StrictModel):
    at: Duration = 0
    file: StrictStr | None = None
    object: dict[str, Any] | None = None
    env: dict[StrictStr, StrictStr] | None = None
    runFor: Duration | dict[StrictStr, Any] | None = None
    podsReadyAfter: StrictStr | StrictInt | StrictFloat = 0
    """How long after a job starts its pods are all ready (waitForPodsReady), or ``never``."""
    count: Annotated[StrictInt, Field(ge=1)] = 1
    every: Duration = 0
    poisson: Poisson | None = None
    trace: StrictStr | None = None
    generator: StrictStr | None = None


class CheckEntry(StrictModel):
    at: Duration
    workload: StrictStr
    check: StrictStr
    state: Literal["Ready", "Retry", "Rejected", "Pending"]
    message: StrictStr | None = None
    podSetUpdates: list[dict[str, Any]] | None = None


class PoolEntry(StrictModel):
    name: StrictStr
    machineType: StrictStr
    tpuTopology: StrictStr | None = None
    minNodes: Annotated[StrictInt, Field(ge=0)] = 0
    maxNodes: Annotated[StrictInt, Field(ge=0)] = 0
    numNodes: Annotated[StrictInt, Field(ge=0)] = 0
    autoscaling: bool = True
    flexStart: bool = False
    queuedProvisioning: bool = False
    maxRunDuration: Duration | None = None
    pricePerHour: Annotated[float, Field(ge=0)] | None = None


class Window(StrictModel):
    from_: Duration = Field(alias="from")
    to: Duration


class TracePoint(StrictModel):
    at: Duration
    available: Annotated[StrictInt, Field(ge=0)]


class DelayPoint(StrictModel):
    at: Duration
    delay: Duration | Literal["never"]


class Outages(StrictModel):
    meanTimeBetween: Duration
    meanDuration: Duration
    seed: StrictInt | None = None
    from_: Duration = Field(0, alias="from")
    for_: Duration | None = Field(None, alias="for")


class HostDown(StrictModel):
    at: Duration
    for_: Duration | None = Field(None, alias="for")


class HostTaint(StrictModel):
    at: Duration
    for_: Duration | None = Field(None, alias="for")
    key: StrictStr
    value: StrictStr = ""
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule"]


class CloudEntry(StrictModel):
    available: Annotated[StrictInt, Field(ge=0)] | Literal["unlimited"] = "unlimited"
    stockouts: list[Window] | None = None
    outages: Outages | None = None
    trace: list[TracePoint] | None = None
    traceFile: StrictStr | None = None
    bootTime: Duration | None = None
    queuedDelay: Duration | Literal["never"] | dict[StrictStr, Any] = 0
    queuedDelayTrace: list[DelayPoint] | None = None
    revokeAfter: Duration | None = None
    hostFailures: list[Duration] | None = None
    hostNotReady: list[HostDown] | None = None
    hostTaints: list[HostTaint] | None = None


class CapacitySection(StrictModel):
    pools: list[PoolEntry] | None = None
    cloud: dict[StrictStr, CloudEntry] | None = None
    seed: StrictInt = 0
    provisioningTimeout: Duration = "5m"
    fallback: bool = True
    fallbackCooldown: Duration = "30m"
    scaleDownAfter: Duration = "10m"


class ScenarioSpec(StrictModel):
    capacity: CapacitySection | None = None
    kueueConfig: dict[StrictStr, Any] | StrictStr | None = None
    env: dict[StrictStr, StrictStr] | None = None
    include: list[StrictStr] | None = None
    objects: list[dict[str, Any]] | None = None
    submit: list[SubmitEntry] | None = None
    checks: list[CheckEntry] | None = None
    until: Duration | None = None
    seed: StrictInt = 0


class ScenarioFile(StrictModel):
    apiVersion: Literal["flexq.dev/v1alpha1"]
    kind: Literal["Scenario"]
    metadata: dict[str, Any]
    spec: ScenarioSpec
