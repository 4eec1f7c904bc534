"""The jobs' side of the queue controller: a queued job gets its Workload; a finished, resized or deleted job
changes it; a RayJob on an existing RayCluster runs without one."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from flexq.api import ApiError, KindInfo, resolve
from flexq.control import JobDeleted, JobFinished, JobQueued, JobResized, JobStarted, PodsReady
from flexq.controller.job_sync import finish_message, finished, templates
from flexq.controller.object_sync import JOB_UID_LABEL, REPLACEMENT_FOR, workload_from_object, workload_object
from flexq.controller.queue_state import COMPONENT, ControllerState
from flexq.durations import DurationError, parse_duration
from flexq.jobs import MAX_EXEC_LABEL, RAY_KINDS, JobError, podsets, selected_cluster, workload_name
from flexq.objects import BadRequest
from flexq.runtime import ELASTIC_ANNOTATION, is_elastic
from flexq.scheduler import Workload, WorkloadState
from flexq.store import NotFound, StoreError, record_event

if TYPE_CHECKING:
    from flexq.scheduler import Scheduler

__all__ = ["MAX_EXEC_LABEL", "RUN_TIME_ANNOTATION", "JobEvents", "declared_run_time"]

RUN_TIME_ANNOTATION: Final = "flexq.dev/expected-run-time"
_COMPONENT: Final = COMPONENT


def declared_run_time(job: Mapping[str, Any]) -> float | None:
    """The run time a job declares (``flexq.dev/expected-run-time``), None where it declares none or no duration."""
    raw = (job["metadata"].get("annotations") or {}).get(RUN_TIME_ANNOTATION)
    try:
        return parse_duration(raw) if isinstance(raw, str) else None
    except DurationError:
        return None


def pods_ready(kind: str, job: Mapping[str, Any]) -> bool:
    """Whether a running job's status says all its pods are ready (Kueue's PodsReady): a RayJob's Ray cluster is up
    with all its worker slices and the job submitted to it (KubeRay's ``jobDeploymentStatus`` Running, or past it);
    a RayCluster's state is ``ready``."""
    status = job.get("status") or {}
    if kind == "RayJob":
        return status.get("jobDeploymentStatus") in ("Running", "Complete")
    return kind == "RayCluster" and status.get("state") == "ready"


_UNREADY: Final = {"RayJob": ("jobDeploymentStatus", frozenset({"Initializing", "Retrying"})),
                   "RayCluster": ("state", frozenset({"failed", "unhealthy"}))}
"""What a running Ray job's status says when its pods are not all ready any more: a RayJob whose Ray cluster is made
anew (KubeRay's ``Retrying`` after a failed attempt, then ``Initializing``), a RayCluster whose head is gone."""


def pods_unready(kind: str, job: Mapping[str, Any]) -> bool:
    """Whether a job whose pods were all ready says some are not any more (Kueue's ``WaitForRecovery``)."""
    field, states = _UNREADY.get(kind, ("", frozenset()))
    return bool(field) and (job.get("status") or {}).get(field) in states


def _running(kind: str, job: Mapping[str, Any]) -> bool:
    """Whether a job's status says its own work runs: a RayJob's Ray job is RUNNING (its cluster is up and its
    entrypoint started), a Job has active pods."""
    status = job.get("status") or {}
    if kind == "RayJob":
        return status.get("jobStatus") == "RUNNING"
    return kind == "Job" and int(status.get("active") or 0) > 0


class JobEvents:
    """What a job's changes do to its workload: made, finished, resized, deleted (with its job's run stopped).
    ``run_workload`` starts an admitted workload's job (where no capacity is modelled, a resized one runs anew)."""

    def __init__(self, state: ControllerState, run_workload: Callable[[str, float], None]) -> None:
        self.state = state
        self.service, self.store, self.clock = state.service, state.store, state.clock
        self.plane, self.capacity, self.runtime = state.plane, state.capacity, state.runtime
        self.run_workload = run_workload

    @property
    def scheduler(self) -> Scheduler:
        return self.state.scheduler

    def _workload_for(self, job: Mapping[str, Any]) -> Workload | None:
        key = self.state.by_job_uid.get(str(job["metadata"].get("uid", "")))
        return self.scheduler.workload(key) if key else None

    def remember(self, obj: Mapping[str, Any]) -> None:
        uid = (obj["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
        if uid:
            self.state.by_job_uid[uid] = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"

    def added(self, info: KindInfo, job: dict[str, Any]) -> None:
        if any(ref.get("kind") in ("RayJob", "RayCluster") for ref in job["metadata"].get("ownerReferences") or []):
            return  # a RayJob's submitter Job: part of a job that is already queued
        if selected_cluster(info.kind, job) is not None:
            if not finished(info.kind, job):
                self._on_existing_cluster(job, start=True)
            return
        uid = str(job["metadata"].get("uid", ""))
        self._note_run_time(job, self.state.by_job_uid.get(uid))
        if finished(info.kind, job) or uid in self.state.by_job_uid or not self.plane.kueue.manages(info.kind):
            return  # done, known, or of a framework Kueue's Configuration does not manage (left alone, as Kueue does)
        now = self.clock.now()
        try:
            wl = self.plane.workload_for(info.kind, info.group, job, now)
        except JobError as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return
        obj = workload_object(wl, job, info.kind, info.api_version(), templates(info.kind, job),
                              self.plane.priority_class_of(info.kind, job))
        try:  # checked now, stored with its first status when the step writes (:meth:`ControllerState.born`)
            prepared = self.service.create(resolve("workload"), wl.namespace, obj, trusted=True, dry_run=True)
        except (ApiError, BadRequest, StoreError) as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return
        wl.uid = self.store.new_uid()
        wl.created = now
        self.state.unborn[wl.key] = (prepared, job)
        self.state.by_job_uid[uid] = wl.key
        self._note_run_time(job, wl.key)
        if info.kind == "RayCluster" and self.runtime is not None:
            clusters, namespace, name = self.runtime.clusters, wl.namespace, job["metadata"]["name"]
            self.state.after_write.append(lambda: clusters.queued(namespace, name))
        self.state.log(self.plane.feed(JobQueued(wl, now)))

    def _note_run_time(self, job: dict[str, Any], key: str | None) -> None:
        """A job may say how long it runs (``flexq.dev/expected-run-time: 2h``): a running job then migrates to
        a more preferred flavor only when that makes it finish sooner, and the forecast counts on it. A value that
        is not a duration is ignored, with a warning Event on the job. What bounds its run (``activeDeadlineSeconds``,
        Kueue's ``kueue.x-k8s.io/max-exec-time-seconds`` label) is the forecast's next best."""
        if key is None:
            return
        meta = job["metadata"]
        limit = (meta.get("labels") or {}).get(MAX_EXEC_LABEL) or (job.get("spec") or {}).get("activeDeadlineSeconds")
        with contextlib.suppress(TypeError, ValueError):
            if limit is not None and float(limit) > 0:
                self.plane.run_times.limits[key] = float(limit)
        raw = (meta.get("annotations") or {}).get(RUN_TIME_ANNOTATION)
        if raw is None:
            return
        try:
            self.plane.run_times.declared[key] = parse_duration(raw)
        except DurationError as exc:
            record_event(self.store, job, "InvalidAnnotation", f"{RUN_TIME_ANNOTATION}: {exc}", type="Warning",
                         component=_COMPONENT)

    def _on_existing_cluster(self, job: Mapping[str, Any], start: bool) -> None:
        """A RayJob on an existing RayCluster is not queued (Kueue skips it): it runs once it is created, on the
        cluster's quota, and stops when it is deleted."""
        if self.runtime is None:
            return
        runtime, namespace, name = self.runtime, job["metadata"].get("namespace", "default"), job["metadata"]["name"]
        act = runtime.start if start else runtime.stop
        self.state.after_write.append(lambda: act(namespace, name))

    def deleted(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        if self.runtime is not None and job.get("kind") == "Job" and "ray.io/originated-from-crd" not in (
                meta.get("labels") or {}):  # a RayJob's submitter Job is its runtime's
            batch, uid = self.runtime.batch, str(meta.get("uid", ""))
            self.state.after_write.append(lambda: batch.stop(meta.get("namespace", "default"), meta["name"], uid))
        if selected_cluster(str(job.get("kind", "")), job) is not None:
            self._on_existing_cluster(job, start=False)
            return
        wl = self._workload_for(job)
        if wl is None:
            return
        old = self.scheduler.workload(wl.replaces) if wl.replaces else None
        if old is not None:
            self.state.log(self.plane.feed(JobDeleted(old.key, self.clock.now())))
            self.capacity.release(old.key)
            with contextlib.suppress(NotFound):
                self.store.delete(self.state.wl_key(old))
        self.state.log(self.plane.feed(JobDeleted(wl.key, self.clock.now())))
        self.capacity.release(wl.key)
        self.plane.run_times.forget(wl.key)
        if self.runtime is not None and job.get("kind") in ("RayJob", "RayCluster"):
            runtime, meta = self.runtime, job["metadata"]
            stop = runtime.clusters.stop if job.get("kind") == "RayCluster" else runtime.stop
            self.state.after_write.append(lambda: stop(meta.get("namespace", "default"), meta["name"]))
        self.state.by_job_uid.pop(str(job["metadata"].get("uid", "")), None)
        if self.state.unborn.pop(wl.key, None) is None:
            with contextlib.suppress(NotFound):
                self.store.delete(self.state.wl_key(wl))

    def modified(self, info: KindInfo, job: dict[str, Any]) -> None:
        outcome = finished(info.kind, job)
        wl = self._workload_for(job)
        metrics = (job.get("status") or {}).get("trainingMetrics")
        if wl is not None and metrics and self.state.metrics.get(wl.key) != metrics:
            self.state.metrics[wl.key] = metrics
            self.state.touched.add(wl.key)
        if not outcome and wl is not None and wl.state is WorkloadState.ADMITTED and _running(info.kind, job):
            self.state.log(self.plane.feed(JobStarted(wl.key, self.clock.now())))  # the first report counts
        if wl is not None and wl.state is WorkloadState.ADMITTED:
            self._ready_or_not(info.kind, job, wl, bool(outcome))
        if outcome and wl is not None and wl.state is not WorkloadState.FINISHED:
            old = self.scheduler.workload(wl.replaces) if wl.replaces else None
            message = finish_message(info.kind, job, outcome)
            if old is not None and old.state is not WorkloadState.FINISHED:  # its growth never came
                self.state.log(self.plane.feed(JobFinished(old.key, self.clock.now(), message, outcome)))
            self.state.log(self.plane.feed(JobFinished(wl.key, self.clock.now(), message, outcome)))
        elif wl is not None and not outcome and info.kind in RAY_KINDS and is_elastic(job):
            self._job_resized(info, job, wl)

    def _ready_or_not(self, kind: str, job: Mapping[str, Any], wl: Workload, finished: bool) -> None:
        """An admitted workload's pods are all ready (the first time in its admission, or again), or, while it runs,
        not any more: its recovery timeout (waitForPodsReady's ``recoveryTimeout``) runs from now."""
        if wl.pods_ready_at is None and pods_ready(kind, job):
            self.plane.feed(PodsReady(wl.key, self.clock.now()))
        elif wl.pods_ready_at is not None and not finished and pods_unready(kind, job):
            self.plane.feed(PodsReady(wl.key, self.clock.now(), ready=False))
        else:
            return
        self.state.touched.add(wl.key)

    def _job_resized(self, info: KindInfo, job: dict[str, Any], wl: Workload) -> None:
        """An elastic job's pod counts changed (the autoscaler or a person patched its replicas). Growth of an
        admitted workload is a new workload slice that replaces it once admitted; anything else (shrinking, or
        a workload not admitted yet) changes the workload in place (Kueue's ElasticJobsViaWorkloadSlices)."""
        if wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
            return
        try:
            counts = {p.name: p.count for p in podsets(info.kind, job)}
        except (JobError, KeyError, ValueError):
            return
        current = {p.name: p.count for p in wl.podsets}
        if counts == current or set(counts) != set(current):
            return
        now = self.clock.now()
        stored = self.state.stored_workload(wl)
        if stored is None:
            return
        if wl.holds_quota and any(counts[n] > current[n] for n in counts):
            self._new_slice(info, job, wl, stored, counts, now)
            return
        self.state.log(self.plane.feed(JobResized(wl.key, tuple(dataclasses.replace(p, count=counts[p.name])
                                                      for p in wl.podsets), now)))
        fresh = copy.deepcopy(stored)
        for ps in fresh["spec"]["podSets"]:
            ps["count"] = counts.get(ps["name"], ps["count"])
        self.store.update(self.state.wl_key(wl), fresh)
        self.state.touched.add(wl.key)
        record_event(self.store, fresh, "Resized", "pod counts changed in place: " + ", ".join(
            f"{n} {current[n]} -> {c}" for n, c in sorted(counts.items()) if c != current[n]), component=_COMPONENT)
        if wl.state is WorkloadState.ADMITTED:
            driver = self.capacity.driver
            if driver is not None and wl.key in driver.running:
                driver.rebind(wl.key)
            elif driver is None:
                self.run_workload(wl.key, now)

    def _new_slice(self, info: KindInfo, job: dict[str, Any], wl: Workload, stored: dict[str, Any],
                   counts: dict[str, int], now: float) -> None:
        """A workload slice for the job's new size, replacing ``wl`` once admitted."""
        meta = job["metadata"]
        obj = copy.deepcopy(stored)
        name = workload_name(info.kind, meta["name"], f"{meta.get('uid', '')}/{meta.get('generation', 1)}",
                             info.group)
        obj["metadata"] = {"name": name, "namespace": wl.namespace, "labels": dict(stored["metadata"].get("labels")
                                                                                  or {}),
                           "annotations": {REPLACEMENT_FOR: wl.key, ELASTIC_ANNOTATION: "true"},
                           "ownerReferences": stored["metadata"].get("ownerReferences") or []}
        obj.pop("status", None)
        for ps in obj["spec"]["podSets"]:
            ps["count"] = counts.get(ps["name"], ps["count"])
        try:
            created = self.service.create(resolve("workload"), wl.namespace, obj, trusted=True)
        except (ApiError, BadRequest, StoreError) as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return
        grown = workload_from_object(created, self.state.local_queues)
        grown.podsets = self.plane.counted(grown.podsets)
        grown.created = now
        self.state.by_job_uid[str(meta.get("uid", ""))] = grown.key
        record_event(self.store, job, "CreatedWorkload", f"Created Workload slice: {grown.key} (replaces {wl.key})",
                     component=_COMPONENT)
        self.state.log(self.plane.feed(JobQueued(grown, now)))

