"""The queue controller: Kueue's scheduler and job integration, run against the store in real time.

It keeps a :class:`~flexq.scheduler.scheduler.Scheduler` in step with the store by reading the change
log in order (after a full read at start-up, as an informer does), and writes every decision back:

- a queued RayJob, RayCluster or Job gets its Workload (``kind-name-hash``, owned by the job);
- Workload statuses say where each workload stands (conditions, admission, admission checks, and the
  flavors considered with the reason each was refused);
- an admitted job is un-suspended with its flavors' node labels and tolerations; an evicted one is
  suspended and restored;
- ClusterQueue and LocalQueue statuses count pending, reserving and admitted workloads and the quota
  each flavor has in use;
- Kubernetes Events record each step on the Workload.

Admission-check states written into a Workload's status by anyone else (``kubectl patch --subresource
status``, ``flexq admissioncheck``) are fed to the scheduler; so are finished jobs and deleted jobs.
The controller reads time only from its :class:`~flexq.clock.Clock`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from flexq.api.errors import ApiError
from flexq.api.kinds import KindInfo, by_resource, resolve
from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.config import CapacityConfig
from flexq.clock import Clock
from flexq.controller.capacity_sync import LiveCapacity
from flexq.controller.job_sync import finished, inject, restore, templates
from flexq.controller.metrics import Sample, Tally, sample
from flexq.controller.object_sync import (
    JOB_UID_LABEL,
    REPLACEMENT_FOR,
    render_status,
    workload_from_object,
    workload_object,
)
from flexq.controller.pod_sync import PodIntegration
from flexq.controller.queue_counts import QueueCounts, object_key
from flexq.controller.ray_runs import RayRuntime
from flexq.controller.settled import ConfigView
from flexq.durations import DurationError, parse_duration
from flexq.jobs.workload import (
    JOB_KINDS,
    PRIORITY_LABEL,
    RAY_KINDS,
    JobError,
    Priorities,
    make_workload,
    podsets,
    selected_cluster,
    workload_name,
)
from flexq.objects.conditions import find_condition
from flexq.objects.service import BadRequest, ObjectService
from flexq.runtime.elastic import ELASTIC_ANNOTATION, is_elastic
from flexq.scheduler.build import build_config
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import CheckState, Workload, WorkloadState
from flexq.scheduler.race import ALLOWED_FLAVORS, PARENT_LABEL
from flexq.scheduler.scheduler import Scheduler
from flexq.store import Change, ChangeType, Gone, Key, NotFound, StoreError, StoreUnavailable, record_event, rfc3339

__all__ = ["QueueController"]

log = logging.getLogger("flexq.controller")

_CONFIG_KINDS: Final = frozenset({"ResourceFlavor", "ClusterQueue", "Cohort", "AdmissionCheck",
                                  "ProvisioningRequestConfig", "LocalQueue", "WorkloadPriorityClass",
                                  "PriorityClass", "NodePool"})
_COMPONENT: Final = "flexq-queue-controller"
RUN_TIME_ANNOTATION: Final = "flexq.dev/expected-run-time"
COALESCE: Final = 0.01
"""Seconds a step waits after the store changes, so that the changes of a busy moment make one step."""
FORGET_RETRY: Final = 1.0
"""Seconds before the stored state is read afresh after a failed write (and between tries while it fails)."""
RECONFIGURE_EVERY: Final = 0.25
"""Seconds between two rebuilds of the scheduler's configuration, at the most: creating a thousand queues
rebuilds it a few times, not a thousand (workloads of a queue not known yet wait for the rebuild)."""


class QueueController:
    def __init__(self, service: ObjectService, clock: Clock, capacity: CapacityConfig | None = None,
                 runtime: RayRuntime | None = None) -> None:
        self.service = service
        self.runtime = runtime
        self.store = service.store
        self.clock = clock
        self.scheduler = Scheduler(instant_eviction=True)
        self.cursor = 0
        self.local_queues: dict[tuple[str, str], str] = {}
        self.priorities = Priorities()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending_events: list[Event] = []
        self._after_write: list[Callable[[], None]] = []
        """Slow work (starting or stopping Ray) done after the store writes of a sync, outside its lock."""
        self._unwritten = 0.0
        """When the store refused a step's writes: not before then (a second on) the state is read back."""
        self.capacity = LiveCapacity(self.store, lambda: self.scheduler,
                                     capacity or CapacityConfig((), EmulatedCloud()), clock, self._log,
                                     self._run_workload)
        self.by_job_uid: dict[str, str] = {}
        """Job uid -> the key of its workload."""
        self._touched: set[str] = set()
        """Workloads whose status needs writing though no scheduler event names them."""
        self.tally = Tally()
        """What happened since the server started, for /metrics."""
        self._stored_variants: dict[str, set[str]] = {}
        """Racing workloads: the names of their variants' Workload objects in the store."""
        self.pods = PodIntegration(self)
        """Kueue's Pod integration: queued Pods and pod groups."""
        self.metrics: dict[str, dict[str, Any]] = {}
        """What each workload's job last reported with train.report (shown in the Workload's status)."""
        self._config = ConfigView()
        self._queues: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
        """The ClusterQueues and LocalQueues as last read (their specs: the statuses are the controller's)."""
        self._counts = QueueCounts(self.store, clock.now)
        self._reconfigured = -RECONFIGURE_EVERY
        self._reconfigure_due = False
        self.store.subscribe(lambda _changes: self._wake.set())

    # --- running -----------------------------------------------------------------------------------

    def start(self) -> None:
        self.resync()
        self._thread = threading.Thread(target=self._run, name="flexq-queue-controller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop after the step under way (waiting up to ``timeout`` seconds for it; None: until it ends)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
        self.pods.stop_all()
        if self.runtime is not None:
            self.runtime.stop_all()

    def _run_workload(self, key: str, _now: float) -> None:
        """Its pods are bound to nodes: run its job (RayJobs and RayClusters run on Ray, Pods as local processes;
        other kinds are not executed)."""
        wl = self.scheduler.workloads.get(key)
        if self.runtime is None or wl is None:
            return
        kind, _, owner = wl.owner.partition(" ")
        namespace, _, name = owner.partition("/")
        runtime = self.runtime
        driver = self.capacity.driver
        nodes = dict(driver.placements.get(key, {})) if driver is not None else {}
        counts = {p.name: p.count for p in wl.podsets}
        start: Callable[[], None]
        if kind == "RayJob":
            start = lambda: runtime.start(namespace, name, nodes, counts)  # noqa: E731
        elif kind == "RayCluster":
            start = lambda: runtime.clusters.start(namespace, name, nodes, counts)  # noqa: E731
        elif kind == "Pod":
            start = lambda: self.pods.run(key, nodes)  # noqa: E731
        else:
            return
        stored = self._wl_key(wl)
        self._after_write.append(lambda: self._if_admitted(stored, start))

    def _if_admitted(self, key: Key, start: Callable[[], None]) -> None:
        """Start a job only on an admission the store holds (one whose write failed is forgotten, not run)."""
        try:
            obj = self.store.get(key)
        except NotFound:
            return
        if (find_condition(obj.get("status") or {}, "Admitted") or {}).get("status") == "True":
            start()
        else:
            log.warning("not starting %s/%s: its admission is not in the store", key.namespace, key.name)

    def _run(self) -> None:
        while not self._stop.is_set():
            times = [t for t in (self.scheduler.next_requeue(), self.capacity.timers.next_at()) if t is not None]
            timeout = 5.0 if not times else max(0.02, min(5.0, min(times) - self.clock.now()))
            timeout = min(timeout, max(0.02, self._counts.due_in()))
            if self._reconfigure_due:
                timeout = min(timeout, max(0.02, self._reconfigured + RECONFIGURE_EVERY - self.clock.now()))
            if self._unwritten:
                timeout = min(timeout, max(0.02, self._unwritten - self.clock.now()))
            # Changes that came in during the last step are handled at once; the first change after a quiet
            # spell waits a moment for those that follow it.
            if not self._wake.is_set() and self._wake.wait(timeout):
                self._stop.wait(COALESCE)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.sync()

    # --- reading the store ---------------------------------------------------------------------------

    def _objects(self, kind: str) -> list[dict[str, Any]]:
        info = resolve(kind)
        return self.store.list_objects(info.group, info.plural)[0]

    def _reconfigure(self) -> None:
        by_kind = {kind: self._objects(kind) for kind in _CONFIG_KINDS}
        self._config.reset((object_key(resolve(kind), o), o) for kind, objects in by_kind.items() for o in objects)
        self._queues = (by_kind["ClusterQueue"], by_kind["LocalQueue"])
        self._counts.recount()
        self._reconfigured, self._reconfigure_due = self.clock.now(), False
        self.local_queues = {(o["metadata"].get("namespace", "default"), o["metadata"]["name"]):
                             o["spec"]["clusterQueue"] for o in by_kind["LocalQueue"]}
        self.priorities = Priorities.of(by_kind)
        # flexq's policy races workloads across their flavors where capacity is modelled (node pools), as the
        # simulator does; Kueue-compatible (``fallback: false``) does not.
        self.capacity.configure(by_kind)
        race = self.capacity.config.fallback and self.capacity.driver is not None
        self.scheduler.configure(dataclasses.replace(build_config(by_kind), race=race))
        now = self.clock.now()
        for wl in list(self.scheduler.workloads.values()):
            if wl.admission is None:
                wl.cluster_queue = self.local_queues.get((wl.namespace, wl.queue), "")
                # One waiting out a retry delay queues again when the delay ends (Scheduler._requeue_due), not
                # whenever a configuration object (or its status, which this controller writes) changes.
                self.scheduler.enqueue(wl, now)

    def resync(self) -> None:
        """Read everything afresh (start-up): configuration, workloads, jobs that still need one."""
        with self._lock:
            self.cursor = self.store.current_rv()
            self.scheduler = Scheduler(instant_eviction=True)
            self._reconfigure()
            self.by_job_uid = {}
            self._stored_variants = {}
            for obj in self._objects("Workload"):
                parent = _parent_of(obj)
                if parent is not None:  # the scheduler makes its variants anew: these are reconciled below
                    self._stored_variants.setdefault(parent, set()).add(obj["metadata"]["name"])
                    continue
                wl = workload_from_object(obj, self.local_queues)
                if wl.state is not WorkloadState.FINISHED:
                    self._remember(obj)  # a job's slices: the one that replaces another wins (below)
                if wl.state in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
                    continue
                self.scheduler.add(wl, wl.created)
            for wl in self.scheduler.workloads.values():
                if wl.replaces:
                    for uid, key in list(self.by_job_uid.items()):
                        if key == wl.replaces:
                            self.by_job_uid[uid] = wl.key
            for kind in ("RayJob", "RayCluster", "Job"):
                for job in self._objects(kind):
                    self._job_added(resolve(kind), job)
                    if finished(kind, job):  # it may have ended while the server was down, or before it read it
                        self._job_modified(resolve(kind), job)
            self._log(self.pods.resync())
            driver = self.capacity.driver
            if driver is not None and self._unwritten:  # after a refused step, the driver's starts as stored
                for key in sorted(driver.running):
                    stored = self.scheduler.workloads.get(key)
                    if stored is None or stored.state is not WorkloadState.ADMITTED:
                        driver.release(key)  # its admission was never written: it starts when admitted again
                    else:
                        self._run_workload(key, self.clock.now())  # its job's start may have been dropped
            elif self._unwritten:  # no capacity modelled: admitted jobs start on admission, and a start may be lost
                for wl in list(self.scheduler.workloads.values()):
                    if wl.state is WorkloadState.ADMITTED:
                        self._run_workload(wl.key, self.clock.now())  # a running job is left as it is
            if driver is not None:
                for wl in list(self.scheduler.workloads.values()):
                    if wl.state is WorkloadState.ADMITTED:
                        driver.try_start(wl.key)  # nodes do not survive a restart: ask for them again
            self._touched |= set(self.scheduler.variants) | set(self._stored_variants)
            self._schedule_and_write()

    def sync(self) -> None:
        """Apply every change since the cursor, run the scheduler, write back what it decided (committed
        as one batch). A cursor that fell behind the change log's window starts over from a full read."""
        try:
            try:
                if self._unwritten and self.clock.now() < self._unwritten:
                    return
                with self.store.batch():
                    if self._unwritten:
                        self.resync()
                    else:
                        self._sync()
                self._unwritten = 0.0
            except Gone:
                log.warning("the queue controller fell behind the change log: reading everything afresh")
                with self.store.batch():
                    self.resync()
        except Exception as exc:
            # Kueue's assume / forget: nothing decided in a step whose writes failed acts outside (no job started or
            # stopped), and what the scheduler holds is read back from the store (resync) and decided again.
            if isinstance(exc, StoreUnavailable):
                log.warning("the queue controller's writes were refused, it reads its state back and tries again: "
                            "%s", exc)
            else:
                log.exception("queue controller sync failed: it reads its state back from the store")
            self._after_write.clear()
            self.capacity.unwritten()
            self._unwritten = self.clock.now() + FORGET_RETRY
        finally:
            actions, self._after_write = self._after_write, []
            for action in actions:
                action()

    def _sync(self) -> None:
        with self._lock:
            while True:
                changes = self.store.changes(self.cursor)
                if not changes:
                    break
                for change in changes:
                    self.cursor = change.rv
                    info = by_resource(change.key.group, change.key.resource)
                    if info is None:
                        continue
                    self.store.breathe()
                    if info.kind in _CONFIG_KINDS:
                        if info.kind in ("ClusterQueue", "LocalQueue"):
                            self._counts.forget(change.key)
                        self._reconfigure_due = self._config.changed(change) or self._reconfigure_due
                    else:
                        if self._reconfigure_due and (info.kind in JOB_KINDS or info.kind == "Workload"):
                            self._reconfigure()  # a job is read with the queues and priorities made before it
                        self._dispatch(info, change)
            if self._reconfigure_due and self.clock.now() >= self._reconfigured + RECONFIGURE_EVERY:
                self._reconfigure()
            self._schedule_and_write()

    def _dispatch(self, info: KindInfo, change: Change) -> None:
        if info.kind not in JOB_KINDS and info.kind not in ("Node", "Workload", "Pod"):
            return  # Events above all: the most frequent change, and none of the controller's business
        obj = change.obj
        if info.kind in JOB_KINDS:
            if change.type is ChangeType.ADDED:
                self._job_added(info, obj)
            elif change.type is ChangeType.DELETED:
                self._job_deleted(obj)
            else:
                self._job_modified(info, obj)
        elif info.kind == "Pod" and not info.group:
            self._log(self.pods.changed(change))
        elif info.kind == "Node" and change.type is ChangeType.DELETED:
            self.capacity.node_deleted(obj["metadata"]["name"])
        elif info.kind == "Workload":
            key = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"
            if _parent_of(obj) is not None:
                # A variant's object is the controller's own: only admission-check states set on it count.
                if change.type is not ChangeType.DELETED and key in self.scheduler.workloads:
                    self._workload_checks(key, obj)
                return
            if change.type is ChangeType.DELETED:
                self._log(self.scheduler.delete(key, self.clock.now()))
                self.capacity.release(key)
            elif key not in self.scheduler.workloads:
                self._remember(obj)
                wl = workload_from_object(obj, self.local_queues)
                if wl.state not in (WorkloadState.FINISHED, WorkloadState.INACTIVE):
                    self._log(self.scheduler.add(wl, self.clock.now()))
            else:
                self._workload_modified(key, obj)

    # --- jobs --------------------------------------------------------------------------------------

    def _workload_for(self, job: Mapping[str, Any]) -> Workload | None:
        key = self.by_job_uid.get(str(job["metadata"].get("uid", "")))
        return self.scheduler.workloads.get(key) if key else None

    def _remember(self, obj: Mapping[str, Any]) -> None:
        uid = (obj["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
        if uid:
            self.by_job_uid[uid] = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"

    def _stored_workload(self, wl: Workload) -> dict[str, Any] | None:
        try:
            return self.store.get(self._wl_key(wl))
        except NotFound:
            return None

    @staticmethod
    def _wl_key(wl: Workload) -> Key:
        return Key("kueue.x-k8s.io", "workloads", wl.namespace, wl.name)

    def _job_added(self, info: KindInfo, job: dict[str, Any]) -> None:
        if any(ref.get("kind") in ("RayJob", "RayCluster") for ref in job["metadata"].get("ownerReferences") or []):
            return  # a RayJob's submitter Job: part of a job that is already queued
        if selected_cluster(info.kind, job) is not None:
            if not finished(info.kind, job):
                self._on_existing_cluster(job, start=True)
            return
        uid = str(job["metadata"].get("uid", ""))
        self._note_run_time(job, self.by_job_uid.get(uid))
        if finished(info.kind, job) or uid in self.by_job_uid:
            return
        now = self.clock.now()
        try:
            wl = make_workload(info.kind, info.group, job, local_queues=self.local_queues, priorities=self.priorities,
                               created=now)
        except JobError as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return
        labels = job["metadata"].get("labels") or {}
        obj = workload_object(wl, job, info.kind, info.api_version(), templates(info.kind, job),
                              labels.get(PRIORITY_LABEL))
        try:
            created = self.service.create(resolve("workload"), wl.namespace, obj, trusted=True)
        except (ApiError, BadRequest, StoreError) as exc:
            record_event(self.store, job, "FailedToCreateWorkload", str(exc), type="Warning", component=_COMPONENT)
            return
        wl.uid = created["metadata"]["uid"]
        wl.created = now
        self.by_job_uid[uid] = wl.key
        self._note_run_time(job, wl.key)
        record_event(self.store, job, "CreatedWorkload", f"Created Workload: {wl.key}", component=_COMPONENT)
        if info.kind == "RayCluster" and self.runtime is not None:
            clusters, namespace, name = self.runtime.clusters, wl.namespace, job["metadata"]["name"]
            self._after_write.append(lambda: clusters.queued(namespace, name))
        self._log(self.scheduler.add(wl, now))

    def _note_run_time(self, job: dict[str, Any], key: str | None) -> None:
        """A job may say how long it runs (``flexq.dev/expected-run-time: 2h``): a running job then migrates to
        a more preferred flavor only when that makes it finish sooner. A value that is not a duration is
        ignored, with a warning Event on the job."""
        raw = (job["metadata"].get("annotations") or {}).get(RUN_TIME_ANNOTATION)
        if raw is None or key is None:
            return
        try:
            self.capacity.run_times[key] = parse_duration(raw)
        except DurationError as exc:
            record_event(self.store, job, "InvalidAnnotation", f"{RUN_TIME_ANNOTATION}: {exc}", type="Warning",
                         component=_COMPONENT)

    def _on_existing_cluster(self, job: Mapping[str, Any], start: bool) -> None:
        """A RayJob on an existing RayCluster is not queued (Kueue skips it): it runs once it is created, on the
        cluster's quota, and stops when it is deleted."""
        if self.runtime is None:
            return
        runtime, namespace, name = self.runtime, job["metadata"].get("namespace", "default"), job["metadata"]["name"]
        self._after_write.append(lambda: runtime.start(namespace, name) if start else runtime.stop(namespace, name))

    def _job_deleted(self, job: dict[str, Any]) -> None:
        if selected_cluster(str(job.get("kind", "")), job) is not None:
            self._on_existing_cluster(job, start=False)
            return
        wl = self._workload_for(job)
        if wl is None:
            return
        old = self.scheduler.workloads.get(wl.replaces) if wl.replaces else None
        if old is not None:
            self._log(self.scheduler.delete(old.key, self.clock.now()))
            self.capacity.release(old.key)
            with contextlib.suppress(NotFound):
                self.store.delete(self._wl_key(old))
        self._log(self.scheduler.delete(wl.key, self.clock.now()))
        self.capacity.release(wl.key)
        if self.runtime is not None:
            runtime, meta = self.runtime, job["metadata"]
            stop = runtime.clusters.stop if job.get("kind") == "RayCluster" else runtime.stop
            self._after_write.append(lambda: stop(meta.get("namespace", "default"), meta["name"]))
        self.by_job_uid.pop(str(job["metadata"].get("uid", "")), None)
        with contextlib.suppress(NotFound):
            self.store.delete(self._wl_key(wl))

    def _job_modified(self, info: KindInfo, job: dict[str, Any]) -> None:
        outcome = finished(info.kind, job)
        wl = self._workload_for(job)
        metrics = (job.get("status") or {}).get("trainingMetrics")
        if wl is not None and metrics and self.metrics.get(wl.key) != metrics:
            self.metrics[wl.key] = metrics
            self._touched.add(wl.key)
        if outcome and wl is not None and wl.state is not WorkloadState.FINISHED:
            old = self.scheduler.workloads.get(wl.replaces) if wl.replaces else None
            if old is not None and old.state is not WorkloadState.FINISHED:
                self._log(self.scheduler.finish(old.key, self.clock.now(), outcome))  # its growth never came
            self._log(self.scheduler.finish(wl.key, self.clock.now(), outcome))
        elif wl is not None and not outcome and info.kind in RAY_KINDS and is_elastic(job):
            self._job_resized(info, job, wl)

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
        stored = self._stored_workload(wl)
        if stored is None:
            return
        if wl.holds_quota and any(counts[n] > current[n] for n in counts):
            self._new_slice(info, job, wl, stored, counts, now)
            return
        self._log(self.scheduler.resize(wl.key, tuple(dataclasses.replace(p, count=counts[p.name])
                                                      for p in wl.podsets), now))
        fresh = copy.deepcopy(stored)
        for ps in fresh["spec"]["podSets"]:
            ps["count"] = counts.get(ps["name"], ps["count"])
        self.store.update(self._wl_key(wl), fresh)
        self._touched.add(wl.key)
        record_event(self.store, fresh, "Resized", "pod counts changed in place: " + ", ".join(
            f"{n} {current[n]} -> {c}" for n, c in sorted(counts.items()) if c != current[n]), component=_COMPONENT)
        if wl.state is WorkloadState.ADMITTED:
            driver = self.capacity.driver
            if driver is not None and wl.key in driver.running:
                driver.rebind(wl.key)
            elif driver is None:
                self._run_workload(wl.key, now)

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
        grown = workload_from_object(created, self.local_queues)
        grown.created = now
        self.by_job_uid[str(meta.get("uid", ""))] = grown.key
        record_event(self.store, job, "CreatedWorkload", f"Created Workload slice: {grown.key} (replaces {wl.key})",
                     component=_COMPONENT)
        self._log(self.scheduler.add(grown, now))

    # --- workloads changed by others -----------------------------------------------------------------

    def _workload_modified(self, key: str, obj: dict[str, Any]) -> None:
        wl = self.scheduler.workloads[key]
        now = self.clock.now()
        if (obj.get("spec") or {}).get("active") is False and wl.state is not WorkloadState.INACTIVE:
            self._log(self.scheduler.deactivate(key, now))
            return
        self._workload_checks(key, obj)

    def _workload_checks(self, key: str, obj: dict[str, Any]) -> None:
        """Admission-check states written into a Workload's status (for a racing workload: its variants')."""
        wl = self.scheduler.workloads[key]
        now = self.clock.now()
        if not wl.holds_quota and key not in self.scheduler.variants:
            return
        known = dict(wl.checks)
        for variant in self.scheduler.variants.get(key, ()):  # a racing workload's checks are its variants'
            known.update(getattr(self.scheduler.workloads.get(variant), "checks", {}))
        for check in (obj.get("status") or {}).get("admissionChecks") or []:
            name, state = check.get("name"), check.get("state")
            if name in known and state and state != known[name].value:
                try:
                    new = CheckState(state)
                except ValueError:
                    continue
                self._log(self.scheduler.set_check(key, name, new, now, str(check.get("message") or "")))
                if not wl.holds_quota and key not in self.scheduler.variants:
                    break

    # --- writing back --------------------------------------------------------------------------------

    def _log(self, events: list[Event]) -> None:
        self._pending_events.extend(events)

    def _schedule_and_write(self) -> None:
        self.capacity.timers.run_due()
        now = self.clock.now()
        events: list[Event] = []
        for _ in range(100):
            self._pending_events += self.scheduler.schedule(now)
            batch, self._pending_events = self._pending_events, []
            if not batch:
                break
            for event in batch:
                self.capacity.handle(event)  # may evict, set checks, or log more events
            events += batch
        # Variants racing now, and those whose race ended in this step (their last events name their workload).
        parents = {v: p for p, vs in self.scheduler.variants.items() for v in vs}
        parents.update((e.workload, str(e.extra["parent"])) for e in events if e.extra.get("parent"))
        self.tally.count(events, parents, self._queued_since,
                         lambda key: getattr(self.scheduler.workloads.get(key), "cluster_queue", ""))
        touched: dict[str, list[Event]] = {key: [] for key in self.capacity.touched() | self._touched}
        self._touched = set()
        for event in events:
            # A variant is the scheduler's own: its story is told on the workload it races for.
            key = parents.get(event.workload, event.workload)
            touched.setdefault(key, []).append(event)
        stamp = rfc3339(datetime.fromtimestamp(now, UTC))
        for key, evs in touched.items():
            self.store.breathe()
            wl = self.scheduler.workloads.get(key)
            if wl is not None:
                self._write_workload(wl, evs, stamp)
            if key in self.scheduler.variants or key in self._stored_variants:
                self._write_variants(key, stamp)
        self.capacity.write()
        self._counts.write(self.scheduler, *self._queues, {e.workload for e in events} | set(touched))

    def _write_workload(self, wl: Workload, events: list[Event], stamp: str) -> None:
        stored = self._stored_workload(wl)
        if stored is None:
            return
        evicted = preempted = finished = None
        for event in events:
            if event.kind is EventKind.FINISHED and event.extra.get("finishedReason"):
                finished = (str(event.extra["finishedReason"]), event.reason)
            if event.kind is EventKind.EVICTED:
                evicted = (str(event.extra.get("cause", "Evicted")), event.reason)
            if event.kind is EventKind.PREEMPTED:
                preempted = (str(event.extra.get("preemptionReason", "Preempted")), event.reason)
        if wl.key in self.scheduler.variants:
            wl.pending_reason = self.scheduler.race_reason(wl.key)
        status = render_status(wl, stored.get("status") or {}, self.scheduler.last_assignment.get(wl.key), stamp,
                               stored["metadata"].get("generation"), evicted, preempted, finished)
        variants = self._variant_rows(wl)
        if variants:
            status["variants"] = variants
        else:
            status.pop("variants", None)
        if variants and wl.admission is None:
            # A racing workload shows its variants' checks, so that a check controller or a person can set them
            # on the workload the job owns (they reach the variant that has the check).
            previous = {c["name"]: c for c in (stored.get("status") or {}).get("admissionChecks") or []}
            checks = {c["name"]: c["state"] for row in variants for c in row.get("admissionChecks", [])}
            if checks:
                status["admissionChecks"] = [
                    {"name": name, "state": state, "message": "",
                     "lastTransitionTime": previous[name]["lastTransitionTime"]
                     if previous.get(name, {}).get("state") == state else stamp}
                    for name, state in sorted(checks.items())]
        if wl.key in self.metrics:
            status["trainingMetrics"] = self.metrics[wl.key]
        driver = self.capacity.driver
        if driver is not None and driver.cost(wl.key) > 0:
            status["cost"] = {"usd": round(driver.cost(wl.key), 4),
                              "basis": "node-hours of the nodes its pods used, at the catalog's hourly prices"}
        with self.store.transaction():
            if status != stored.get("status"):
                self.store.update(self._wl_key(wl), {**stored, "status": status}, subresource="status", echo=False)
            if wl.state is WorkloadState.INACTIVE and stored.get("spec", {}).get("active") is not False:
                fresh = self.store.get(self._wl_key(wl))
                fresh["spec"]["active"] = False
                self.store.update(self._wl_key(wl), fresh)
            if (variants or wl.won) and (stored["metadata"].get("labels") or {}).get(PARENT_LABEL) != "true":
                fresh = self.store.get(self._wl_key(wl))  # as Kueue marks a workload that races its variants
                fresh["metadata"].setdefault("labels", {})[PARENT_LABEL] = "true"
                self.store.update(self._wl_key(wl), fresh)
            for event in events:
                self._record(stored, event)
            kinds = {e.kind for e in events}
            # Evicted and admitted again within one sync (its quota reserved anew at once): the job still stops
            # first, so that its run ends and a new one starts.
            if kinds & {EventKind.EVICTED, EventKind.DEACTIVATED}:
                self._stop_job(stored)
            if EventKind.ADMITTED in kinds and wl.state is WorkloadState.ADMITTED and wl.admission is not None:
                self._start_job(stored, wl)

    def _write_variants(self, parent_key: str, stamp: str) -> None:
        """Keep the variants' Workload objects as Kueue keeps them: one per racing variant, owned by the parent,
        named ``<parent>-variant-<flavor>-<hash>``, with its flavor in the allowed-flavors annotation and its own
        status; gone once it is withdrawn or has won."""
        namespace = parent_key.partition("/")[0]
        live = {v.name: v for k in self.scheduler.variants.get(parent_key, ())
                if (v := self.scheduler.workloads.get(k)) is not None}
        names = self._stored_variants.setdefault(parent_key, set())
        for name in sorted(names - set(live)):
            with contextlib.suppress(NotFound):
                self.store.delete(Key("kueue.x-k8s.io", "workloads", namespace, name))
            names.discard(name)
        parent = self.scheduler.workloads.get(parent_key)
        stored_parent = self._stored_workload(parent) if parent is not None else None
        for name, variant in sorted(live.items()):
            key = Key("kueue.x-k8s.io", "workloads", namespace, name)
            try:
                stored = self.store.get(key)
            except NotFound:
                if stored_parent is None:
                    continue
                try:
                    stored = self.service.create(resolve("workload"), namespace,
                                                 _variant_object(stored_parent, variant))
                except (ApiError, BadRequest, StoreError) as exc:
                    log.warning("variant %s could not be stored: %s", name, exc)
                    continue
            names.add(name)
            status = render_status(variant, stored.get("status") or {},
                                   self.scheduler.last_assignment.get(variant.key), stamp,
                                   stored["metadata"].get("generation"))
            if status != stored.get("status"):
                self.store.update(key, {**stored, "status": status}, subresource="status", echo=False)
        if not names:
            del self._stored_variants[parent_key]

    def _variant_rows(self, wl: Workload) -> list[dict[str, Any]]:
        """What the parent's status shows of its racing variants (Kueue keeps them as Workloads of their own)."""
        rows = []
        for key in self.scheduler.variants.get(wl.key, ()):
            variant = self.scheduler.workloads.get(key)
            if variant is None:
                continue
            row: dict[str, Any] = {"name": variant.name, "flavor": variant.flavor, "state": variant.state.value}
            if variant.pending_reason:
                row["message"] = variant.pending_reason
            if variant.checks:
                row["admissionChecks"] = [{"name": c, "state": s.value} for c, s in sorted(variant.checks.items())]
            rows.append(row)
        return rows

    def _record(self, workload: dict[str, Any], event: Event) -> None:
        if event.kind is EventKind.CREATED and not event.extra.get("parent"):
            return
        reason = event.kind.value if event.kind is not EventKind.CHECK else "AdmissionCheckUpdated"
        message = event.reason
        variant = event.workload.partition("/")[2]
        if variant != workload["metadata"]["name"]:
            reason = "Variant" + reason
            message = f"variant {variant}: {message}"
        if event.kind is EventKind.CHECK:
            message = f"Admission check {event.extra.get('check')} is {event.extra.get('state')}" + (
                f": {event.reason}" if event.reason not in ("", event.extra.get("state")) else "")
        warning = event.kind in (EventKind.PENDING, EventKind.EVICTED, EventKind.PREEMPTED, EventKind.DEACTIVATED)
        record_event(self.store, workload, reason, message or reason, type="Warning" if warning else "Normal",
                     component=_COMPONENT)

    def _owned_job(self, workload: dict[str, Any]) -> tuple[KindInfo, Key, dict[str, Any]] | None:
        """The job that owns ``workload``: its kind, key and current object (None if gone)."""
        ref = next(iter(workload["metadata"].get("ownerReferences") or []), None)
        if ref is None:
            return None
        group = ref["apiVersion"].rpartition("/")[0]
        info = next((resolve(k) for k in JOB_KINDS if resolve(k).group == group and k == ref["kind"]), None)
        if info is None:
            return None
        key = Key(info.group, info.plural, workload["metadata"].get("namespace", "default"), ref["name"])
        try:
            return info, key, self.store.get(key)
        except NotFound:
            return None

    def _start_job(self, workload: dict[str, Any], wl: Workload) -> None:
        if self.pods.owns(workload):
            self.pods.start(workload, wl)
            if self.capacity.driver is None:
                self._run_workload(wl.key, self.clock.now())
            return
        owned = self._owned_job(workload)
        if owned is None or wl.admission is None:
            return
        info, key, job = owned
        annotations: dict[str, dict[str, str]] = {}
        for updates in wl.pod_set_updates.values():
            for podset, values in updates.items():
                annotations.setdefault(podset, {}).update(values)
        inject(info.kind, job, wl.admission, self.scheduler.config.flavors, annotations)
        self.store.update(key, job, echo=False)
        record_event(self.store, job, "Started", f"Admitted by clusterQueue {wl.cluster_queue}", component=_COMPONENT)
        if self.capacity.driver is None:
            self._run_workload(wl.key, self.clock.now())

    def _stop_job(self, workload: dict[str, Any]) -> None:
        if self.pods.owns(workload):
            self.pods.stop(workload)
            return
        owned = self._owned_job(workload)
        if owned is None:
            return
        info, key, job = owned
        originals = {ps["name"]: ps.get("template") or {} for ps in workload.get("spec", {}).get("podSets") or []}
        if self.runtime is not None and info.kind in RAY_KINDS:
            runtime, namespace, name = self.runtime, key.namespace, key.name
            # Before any start queued in this sync: that start is for the admission that follows the eviction.
            if info.kind == "RayCluster":
                self._after_write.insert(0, lambda: runtime.clusters.stop(namespace, name, suspended=True))
            else:
                self._after_write.insert(0, lambda: runtime.suspend(namespace, name))
        restore(info.kind, job, originals)
        self.store.update(key, job, echo=False)
        record_event(self.store, job, "Stopped", "Evicted from its ClusterQueue: suspended until admitted again",
                     type="Warning", component=_COMPONENT)

    def _queued_since(self, key: str) -> float | None:
        wl = self.scheduler.workloads.get(key)
        return None if wl is None else wl.queue_time

    def observe(self) -> tuple[Tally, Sample]:
        """What /metrics shows: the counters, and where things stand now (read under the controller's lock)."""
        with self._lock:
            tally = copy.deepcopy(self.tally)
            return tally, sample(self, self.clock.now())


def _parent_of(obj: Mapping[str, Any]) -> str | None:
    """The key of the Workload that owns ``obj`` (a variant), if any."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Workload" and str(ref.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
            return f"{obj['metadata'].get('namespace', 'default')}/{ref.get('name')}"
    return None


def _variant_object(parent: Mapping[str, Any], variant: Workload) -> dict[str, Any]:
    """A variant's Workload, as Kueue makes it from its parent: the parent's spec and labels (not the parent
    label), its flavor annotated, owned by the parent."""
    meta = parent["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in (PARENT_LABEL, JOB_UID_LABEL)}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": variant.name, "namespace": variant.namespace, "labels": labels,
                     "annotations": {ALLOWED_FLAVORS: variant.flavor},
                     "ownerReferences": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                          "name": meta["name"], "uid": meta.get("uid", ""), "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": copy.deepcopy(parent.get("spec") or {}),
    }
