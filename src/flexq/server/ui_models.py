"""The dashboard's JSON: response models of ``/flexq/v1/dashboard/...`` (documented in the OpenAPI at ``/docs``)."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = [
    "Cohort", "FlavorQuota", "FlavorTry", "History", "JobDetail", "JobPage", "JobRow", "MetricPoint", "Overview",
    "Phase", "Pool", "Provisioning", "Queue", "Report", "ResourceUse", "Series", "TimelineEntry", "Variant",
]


class ResourceUse(BaseModel):
    resource: str
    used: float = Field(description="in the resource's unit (cores, bytes, chips)")
    nominal: float
    usedText: str = Field(description="as Kueue writes it (``64Gi``)")
    nominalText: str = Field(description="``unlimited`` for a quota of a billion units or more (``1000000000Gi``, "
                                         "as Kueue's examples write no limit)")
    unlimited: bool = False


class FlavorQuota(BaseModel):
    flavor: str
    resources: list[ResourceUse]


class Queue(BaseModel):
    name: str
    cohort: str
    active: bool
    reason: str = Field(description="why the ClusterQueue is not active, when it is not")
    pending: int
    reserving: int
    admitted: int
    flavors: list[FlavorQuota]
    nextStartSeconds: float | None = Field(default=None, description="the forecast wait of the pending workload "
                                                                     "expected to start first, from now")
    allStartedSeconds: float | None = Field(default=None, description="the forecast wait of the one expected to "
                                                                      "start last (those with a start foreseen)")


class Cohort(BaseModel):
    name: str
    parent: str = Field(default="", description="the cohort it belongs to (a Cohort object's ``spec.parentName``)")
    queues: list[str]
    flavors: list[FlavorQuota] = Field(description="its ClusterQueues' quota and usage summed, per flavor and "
                                                   "resource")


class Pool(BaseModel):
    name: str
    machineType: str
    capacityType: str = Field(description="on-demand, flex-start or queued")
    ready: int
    booting: int
    notReady: int = Field(default=0, description="nodes NotReady after they were ready (down, their pods not moved "
                          "yet)")
    idle: int = Field(description="ready nodes no pod runs on (known where the server runs the capacity model)")
    maxNodes: int | None
    pricePerNodeHour: float | None
    costPerHour: float = Field(description="what the pool's nodes cost an hour now, USD")


class Provisioning(BaseModel):
    namespace: str
    name: str
    workload: str
    state: str = Field(description="the ProvisioningRequest's latest true condition (Accepted, Provisioned, ...)")
    message: str
    created: str
    eta: str | None = Field(description="when the capacity is expected (RFC 3339), where the cloud says")


class Overview(BaseModel):
    now: str
    executes: bool = Field(default=True, description="whether this server runs jobs (false under --runtime none)")
    resourceVersion: int
    queues: list[Queue]
    cohorts: list[Cohort]
    pools: list[Pool]
    provisioning: list[Provisioning] = Field(description="ProvisioningRequests not yet provisioned or failed")


class JobRow(BaseModel):
    namespace: str
    name: str = Field(description="the Workload's name")
    jobKind: str = Field(description="RayJob or Job")
    jobName: str
    queue: str = Field(description="the LocalQueue")
    clusterQueue: str
    state: str = Field(description="pending, reserved, admitted, running, succeeded, failed or inactive")
    priority: int
    flavors: str = Field(description="each pod set's flavors (``head=default-cpu,tpu-group=on-demand``)")
    created: str
    waitSeconds: float = Field(description="from creation to admission, or to now while it waits")
    reason: str = Field(description="the one-line why-pending reason `flexq get workloads` prints")
    eta: str | None = Field(description="when it is expected to start (its forecast), else when what it waits for is "
                                        "expected (RFC 3339), where known")
    forecast: str = Field(default="", description="its forecast in words: what it waits for, when it starts, where")
    forecastBasis: str = Field(default="", description="what the forecast rests on: Declared, Limit, Estimated or "
                                                       "Unknown run times")
    costUsd: float


class JobPage(BaseModel):
    total: int = Field(description="rows that pass the filters")
    offset: int
    limit: int
    items: list[JobRow]
    queues: list[str] = Field(description="every LocalQueue seen, for the filter")
    states: list[str]
    flavors: list[str]


class TimelineEntry(BaseModel):
    time: str
    source: str = Field(description="condition, event or provisioning")
    what: str
    detail: str


class FlavorTry(BaseModel):
    podSet: str
    flavor: str
    mode: str
    borrowing: bool
    reasons: list[str]


class Variant(BaseModel):
    name: str
    flavor: str
    state: str
    message: str


class MetricPoint(BaseModel):
    report: int
    values: dict[str, float]


class Phase(BaseModel):
    name: str = Field(description="queued, racing, provisioning, waiting for checks, running or admitted")
    start: str
    end: str | None = Field(description="None while it lasts")
    detail: str


class JobDetail(BaseModel):
    job: JobRow
    why: str = Field(description="the whole message behind the one-line reason, while the job is not admitted")
    timeline: list[TimelineEntry]
    considered: list[FlavorTry] = Field(description="every flavor the last nomination tried and why it was refused")
    variants: list[Variant] = Field(description="the flavors it races on, while it races")
    metrics: list[MetricPoint] = Field(description="every train.report of the driver log, in order")
    jobStatus: str = Field(description="the job's own status (a RayJob's jobStatus)")
    logUrl: str | None
    rayDashboardUrl: str | None = Field(description="the job's Ray dashboard through this server, while it runs")
    phases: list[Phase] = Field(default_factory=list, description="the job's story as spans of time, oldest first")
    executes: bool = Field(default=True, description="whether this server runs jobs (false under --runtime none: "
                                                     "jobs are admitted, never executed)")


class Report(BaseModel):
    name: str
    url: str
    modified: str


class Series(BaseModel):
    name: str
    points: list[tuple[float, float]] = Field(description="(epoch seconds, value) at each change, the first at the "
                                                          "window's start; the value holds until the next point")


class History(BaseModel):
    now: float = Field(description="epoch seconds")
    since: float = Field(description="the window's start, epoch seconds")
    step: float = Field(description="the width of an admissions bucket, seconds")
    admissions: list[int] = Field(description="workloads admitted in each bucket from ``since``, oldest first")
    waiting: list[Series] = Field(description="per ClusterQueue, its jobs waiting (created, not yet admitted)")
    pools: list[Series] = Field(description="per node pool, its nodes (ready or booting), since the server started")
