"""``POST /flexq/v1/forecast``: where and when jobs would start if submitted now (``flexq forecast -f job.yaml``);
``POST /flexq/v1/simulate``: every waiting job's start under a changed capacity (``flexq simulate --from-server``).

A dry run in Kubernetes' sense: the jobs are checked as a create would check them (the caller needs the right to
create each), their workloads are made, and the controller's plane is forked and run ahead with them in the copy
only. Nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from flexq.api import InputError, InvalidObject, KindInfo, normalize
from flexq.auth import Attributes, Identity, authorize, forbidden_message
from flexq.controller import QueueController
from flexq.forecast import CapacityChangeError, Forecast, describe, reshape
from flexq.jobs import JOB_KINDS, JobError
from flexq.server.access import refusal
from flexq.server.authn import caller
from flexq.server.offload import off_loop
from flexq.server.sources import ApplySource, read_sources
from flexq.server.status import error_response, field_causes, not_leading, status_body
from flexq.sim import parse_capacity

__all__ = ["forecast_router"]


class ForecastRequest(BaseModel):
    """Jobs (RayJobs, RayClusters, Jobs) to forecast as if submitted now."""

    sources: list[ApplySource]
    namespace: str = Field(default="default", description="namespace for jobs that name none")


class FlavorForecast(BaseModel):
    """Where and when the job would start held to one flavor (and the flavors its other pod sets share)."""

    flavor: str
    start: float | None = Field(description="Unix time it would start at (null: none foreseen)")
    waitSeconds: float | None
    flavors: list[str]
    basis: str
    message: str
    costUsd: float | None


class JobForecast(BaseModel):
    kind: str
    namespace: str
    name: str
    clusterQueue: str
    start: float | None = Field(description="Unix time it would start at (null: none foreseen)")
    waitSeconds: float | None
    flavors: list[str]
    basis: str = Field(description="Declared, Limit, Estimated or Unknown: what the run times it rests on are")
    earliestStart: float | None = Field(default=None, description="with estimated run times: the earliest start of "
                                                                  "the forecast's runs (Unix time)")
    latestStart: float | None = Field(default=None, description="with estimated run times: the latest start of its "
                                                                "runs (the start falls in that range a little "
                                                                "over half the time)")
    message: str
    costUsd: float | None = Field(description="what its run would cost, where capacity is modelled and its run "
                                              "time is declared")
    byFlavor: list[FlavorForecast] = Field(description="the same held to each flavor it could race on, most "
                                                       "preferred first (empty: only one flavor could hold it)")


class ForecastResponse(BaseModel):
    items: list[JobForecast]


class SimulateRequest(BaseModel):
    """A change of the live capacity to run the live state ahead under."""

    capacity: str | None = Field(default=None, description="a capacity file's text (the server's --capacity format): "
                                                           "its pools replace those of their names, or are added")
    capacitySource: str = Field(default="-", description="where that text came from, for error messages")
    maxNodes: dict[str, int] = Field(default_factory=dict, description="node pool -> its maximum nodes")
    available: dict[str, int] = Field(default_factory=dict, description="node pool -> machines the cloud has for it")


class Foreseen(BaseModel):
    start: float | None
    flavors: list[str]
    basis: str
    message: str


class SimulatedJob(BaseModel):
    workload: str
    clusterQueue: str
    now: Foreseen = Field(description="its forecast as things stand")
    changed: Foreseen | None = Field(description="its forecast under the changed capacity")


class SimulateResponse(BaseModel):
    items: list[SimulatedJob]


def forecast_router(leader: Callable[[], QueueController | None]) -> APIRouter:
    """The routes; ``leader`` gives the controller of this server while it leads (None: it does not)."""
    router = APIRouter()

    @router.post("/flexq/v1/forecast", response_model=ForecastResponse, tags=["forecast"],
                 responses={403: {"description": "the caller may not create one of the jobs"},
                            422: {"description": "not a job, or an invalid one"},
                            503: {"description": "no controller runs in this server"}})
    async def forecast(body: ForecastRequest, request: Request) -> Response:
        """Where and when each job would start if submitted now, and what its run would cost; nothing is written."""
        controller = leader()
        return await off_loop(_forecast, controller.what_if if controller is not None else None, body,
                              caller(request.state))

    @router.post("/flexq/v1/simulate", response_model=SimulateResponse, tags=["forecast"],
                 responses={403: {"description": "the caller may not list every namespace's workloads"},
                            422: {"description": "an invalid capacity file, or a change naming no pool"},
                            503: {"description": "no controller runs in this server"}})
    async def simulate(body: SimulateRequest, request: Request) -> Response:
        """Every waiting job's forecast as things stand and under a changed capacity (what if Plan A had two more
        slices?); nothing is written."""
        return await off_loop(_simulate, leader(), body, caller(request.state))

    return router


_LIST_ALL = Attributes("list", "kueue.x-k8s.io", "workloads", "", None)


def _foreseen(f: Forecast) -> Foreseen:
    return Foreseen(start=f.start, flavors=list(f.flavors), basis=f.basis.word, message=describe(f))


def _simulate(controller: QueueController | None, body: SimulateRequest, who: Identity) -> Response:
    if controller is None:
        return not_leading()
    if not authorize(who, _LIST_ALL):
        return JSONResponse(status_body(403, "Forbidden", forbidden_message(who, _LIST_ALL)), 403)
    try:
        file = parse_capacity(body.capacity, body.capacitySource) if body.capacity is not None else None
        now, changed = controller.simulate(lambda current: reshape(current, file, body.maxNodes, body.available))
    except (InvalidObject, InputError, CapacityChangeError) as exc:
        causes = {"causes": field_causes(exc)} if isinstance(exc, InvalidObject) else None
        return JSONResponse(status_body(422, "Invalid", str(exc), causes), 422)
    after = {f.workload: f for f in changed}
    items = [SimulatedJob(workload=f.workload, clusterQueue=f.cluster_queue, now=_foreseen(f),
                          changed=_foreseen(after[f.workload]) if f.workload in after else None) for f in now]
    return JSONResponse(SimulateResponse(items=items).model_dump())


WhatIf = Callable[[list[tuple[KindInfo, dict[str, Any]]]], list[tuple[Forecast, dict[str, Forecast]]]]
"""Jobs -> for each, its forecast and, by flavor, its forecast held to that flavor."""


def _cost(f: Forecast) -> float | None:
    return round(f.cost, 4) if f.cost is not None else None


def _forecast(what_if: WhatIf | None,
              body: ForecastRequest, who: Identity) -> Response:
    if what_if is None:
        return not_leading()
    try:
        docs = read_sources(body.sources, "no jobs to forecast")
        refused = refusal(who, docs, body.namespace)
        if refused is not None:
            return JSONResponse(status_body(403, "Forbidden", refused), 403)
        jobs = []
        for doc in docs:
            info, obj = normalize(doc)
            if info.kind not in JOB_KINDS:
                raise InputError(doc.source, f"{info.kind} is not a job: a forecast is for a RayJob, a RayCluster "
                                 "or a Job")
            obj["metadata"].setdefault("namespace", body.namespace)
            jobs.append((info, obj))
        made = what_if(jobs)
    except (InvalidObject, InputError, JobError) as exc:
        code = 422 if isinstance(exc, (InvalidObject, JobError)) else error_response(exc).status_code
        causes = {"causes": field_causes(exc)} if isinstance(exc, InvalidObject) else None
        return JSONResponse(status_body(code, "Invalid" if code == 422 else "BadRequest", str(exc), causes), code)
    items = [JobForecast(kind=info.kind, namespace=obj["metadata"]["namespace"], name=obj["metadata"]["name"],
                         clusterQueue=f.cluster_queue, start=f.start, waitSeconds=f.wait, flavors=list(f.flavors),
                         basis=f.basis.word, earliestStart=f.likely[0] if f.likely else None,
                         latestStart=f.likely[1] if f.likely else None, message=describe(f), costUsd=_cost(f),
                         byFlavor=[FlavorForecast(flavor=flavor, start=g.start, waitSeconds=g.wait,
                                                  flavors=list(g.flavors), basis=g.basis.word, message=describe(g),
                                                  costUsd=_cost(g)) for flavor, g in held.items()])
             for (info, obj), (f, held) in zip(jobs, made, strict=True)]
    return JSONResponse(ForecastResponse(items=items).model_dump())
