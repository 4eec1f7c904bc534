"""Runs admitted RayJobs for real (one local Ray cluster each) and keeps their status in the store; RayClusters
through :class:`~flexq.controller.rayclusters.RayClusterRuntime` (``clusters``).

The clusters outlive the server: on start-up :meth:`RayRuntime.recover` finds again those the last server left
running (:mod:`flexq.runtime.reattach`) before the controllers run, and :meth:`RayRuntime.resume` has their runs
follow them once the controllers run."""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from flexq.controller.batch_runs import BatchJobRuntime
from flexq.controller.rayclusters import RayClusterRuntime, side_by_side
from flexq.jobs import selected_cluster
from flexq.runtime import (
    LOST_REASON,
    Borrowed,
    RayJobRun,
    RemoteRayCluster,
    Resume,
    attach,
    head_port_map,
    job_of_pod,
    kuberay_objects,
    log_reference,
    ray_log_path,
    ray_pool_of,
    read_records,
    reap,
    record_path,
    same_object,
)
from flexq.store import BaseStore, Key, NotFound, StoreUnavailable, record_event

__all__ = ["RayRuntime"]

log = logging.getLogger("flexq.runtime")

LOST_MESSAGE = "the job's Ray cluster was lost while the server was down: its head no longer ran"

STATUS_RETRY: Final = 2.0
"""Seconds before a status the store refused is written again."""


class RayRuntime:
    """Start, follow and stop RayJob executions. ``start`` and ``stop`` are safe from any thread."""

    def __init__(self, store: BaseStore, home: Path) -> None:
        self.store = store
        self.home = home
        self.runs: dict[str, RayJobRun] = {}
        self.nodes: dict[str, dict[str, list[str]]] = {}
        self.published: dict[str, set[Key]] = {}
        """The KubeRay-shaped objects (RayCluster, Service, Pods, submitter Job) shown for each job."""
        self.clusters = RayClusterRuntime(store, home)
        """The users' own RayClusters."""
        self.batch = BatchJobRuntime(store, home)
        """Admitted batch/v1 Jobs, their pods run as local processes."""
        self._lock = threading.Lock()
        self._unwritten: dict[Key, dict[str, Any]] = {}
        """Status fields the store refused (disk full, locked), written with the next status or a retry."""
        self._retrying: set[Key] = set()

    @staticmethod
    def key(namespace: str, name: str) -> Key:
        return Key("ray.io", "rayjobs", namespace, name)

    def log_path(self, namespace: str, name: str) -> Path:
        """The RayJob's driver log: a file of the server's, outside the job's working directory."""
        return ray_log_path(self.home, "rayjobs", namespace, name)

    def workdir(self, namespace: str, name: str) -> Path:
        return self.home / "runtime" / namespace / name

    def head_ports(self, namespace: str, pod: Mapping[str, Any]) -> dict[int, int]:
        """The ports of a RayJob's head pod -> its running Ray cluster's ports on 127.0.0.1, for port-forward.

        Raises LookupError with the reason when there is nothing to forward to."""
        name = pod["metadata"]["name"]
        standalone = self.clusters.head_ports(namespace, pod)
        if standalone is not None:
            return standalone
        owner = job_of_pod(pod)
        if owner is None:
            raise LookupError(f"pod {name} is not a pod of a Ray cluster: only the head pod of a RayJob or a "
                              "RayCluster has ports here")
        job, node_type = owner
        if node_type != "head":
            raise LookupError(f"pod {name} is a worker of RayJob {job}'s Ray cluster, which runs as one local "
                              f"node: forward the head pod's ports, or service/{job}-head-svc")
        run = self.runs.get(f"{namespace}/{job}")
        cluster = run.cluster if run is not None else None
        if isinstance(cluster, RemoteRayCluster):
            raise LookupError(f"RayJob {job} runs on the Ray cluster of node pool {cluster.pool}: reach its "
                              f"dashboard at {cluster.dashboard_url}")
        local = cluster.ports if cluster is not None else {}
        if not local:
            raise LookupError(f"the Ray cluster of RayJob {job} is not running")
        return head_port_map(pod, local)

    def dashboard_port(self, namespace: str, name: str) -> int | None:
        """The port of a RayJob's running Ray dashboard on 127.0.0.1 (None when its cluster is not running)."""
        run = self.runs.get(f"{namespace}/{name}")
        cluster = run.cluster if run is not None else None
        return (cluster.ports if cluster is not None else {}).get("dashboard")

    def start(self, namespace: str, name: str, nodes: dict[str, list[str]] | None = None,
              counts: dict[str, int] | None = None) -> None:
        """Run the job on its admitted pods (``counts``: pod set -> pods); a job already running is resized to
        them (an elastic job whose workload grew or shrank)."""
        job_key = f"{namespace}/{name}"
        self.nodes[job_key] = dict(nodes or {})
        with self._lock:
            if job_key in self.runs and not self.runs[job_key].done.is_set():
                if counts:
                    self.runs[job_key].resize(counts)
                return
            try:
                job = self.store.get(self.key(namespace, name))
            except NotFound:
                return
            status = job.get("status") or {}
            if status.get("jobDeploymentStatus") in ("Complete", "Failed"):
                return
            run = self._new_run(job)
            self.runs[job_key] = run
        record_event(self.store, job, "RayJobStarting", "starting a local Ray cluster for the job" if run.borrow is None
                     else "submitting the job to an existing Ray cluster", component="flexq-runtime")
        run.start()

    def _new_run(self, job: dict[str, Any], resume: Resume | None = None) -> RayJobRun:
        namespace, name = job["metadata"].get("namespace", "default"), job["metadata"]["name"]
        configmaps = {o["metadata"]["name"]: dict(o.get("data") or {})
                      for o in self.store.list_objects("", "configmaps", namespace)[0]}
        workdir, log_path = self.workdir(namespace, name), self.log_path(namespace, name)

        def status(fields: dict[str, Any]) -> None:
            self._status(namespace, name, fields)

        cluster = selected_cluster("RayJob", job)
        if cluster is not None:  # it runs on an existing RayCluster, which it neither records nor stops
            return RayJobRun(job, configmaps, workdir, status, borrow=lambda: self.clusters.running(namespace, cluster),
                             log_path=log_path)
        spec = (job.get("spec") or {}).get("rayClusterSpec") or {}
        remote = ray_pool_of(self.store, spec)
        if remote is not None:  # admitted onto a node pool of an existing Ray cluster: it runs there
            pool, url = remote
            borrowed = Borrowed(RemoteRayCluster(url, pool), spec,
                                f"the Ray cluster of node pool {pool}")
            return RayJobRun(job, configmaps, workdir, status, borrow=lambda: borrowed, log_path=log_path)
        return RayJobRun(job, configmaps, workdir, status,
                         lambda group, pods: self._scale(namespace, name, group, pods),
                         record=record_path(self.home, "rayjobs", namespace, name), resume=resume, log_path=log_path)

    def recover(self) -> None:
        """Server start-up, before the controllers run: each RayJob that was running goes on with its Ray cluster
        found again, or counts the cluster's loss (and is retried as its backoffLimit allows); a cluster kept
        after its job finished is kept; every other cluster record is reaped (its processes killed).
        :meth:`resume` starts the runs."""
        found = read_records(self.home, "rayjobs")
        for job in self.store.list_objects("ray.io", "rayjobs")[0]:
            meta = job["metadata"]
            namespace, name = meta.get("namespace", "default"), meta["name"]
            entry = found.pop((namespace, name), None)
            if entry is not None and not same_object(entry[1], job):
                reap(*entry)
                entry = None
            run = self._recovered(job, entry)
            if run is not None:
                self.runs[f"{namespace}/{name}"] = run
        for path, record in found.values():
            log.warning("the Ray cluster of %s is nobody's any more: its processes are killed", path)
            reap(path, record)
        self.clusters.recover()

    def _recovered(self, job: dict[str, Any], entry: tuple[Path, dict[str, Any]] | None) -> RayJobRun | None:
        spec, status = job.get("spec") or {}, job.get("status") or {}
        deployment = status.get("jobDeploymentStatus")
        if spec.get("suspend") is not False or deployment in ("Complete", "Failed", "Suspended"):
            if entry is None:
                return None
            if deployment in ("Complete", "Failed") and not spec.get("shutdownAfterJobFinishes"):
                cluster = attach(*entry)  # kept until the RayJob is deleted, as KubeRay keeps it
                if cluster is not None:
                    finished = self._new_run(job)
                    finished.cluster = cluster
                    finished.done.set()
                    return finished
                return None
            reap(*entry)
            return None
        if entry is None:
            return self._new_run(job)  # admitted, its cluster not started yet: it starts now
        cluster = attach(*entry)
        if cluster is not None and entry[1].get("submission"):
            record_event(self.store, job, "RayClusterFound", "the server restarted: the job's Ray cluster ran on and "
                         "is followed again", component="flexq-runtime")
            return self._new_run(job, Resume(cluster, entry[1]))
        if cluster is not None:
            cluster.stop()  # started, but the job was not submitted to it: nothing ran
            return self._new_run(job)
        record_event(self.store, job, LOST_REASON, LOST_MESSAGE, type="Warning", component="flexq-runtime")
        return self._new_run(job, Resume(record=entry[1], lost=LOST_MESSAGE))

    def resume(self) -> None:
        """Start the runs :meth:`recover` set up (once the controllers run, so that what they write is seen)."""
        with self._lock:
            waiting = [run for run in self.runs.values() if not run.started and not run.done.is_set()]
        for run in waiting:
            run.start()
        self.clusters.resume()

    def _scale(self, namespace: str, name: str, group: str, pods: int) -> None:
        """The autoscaler asks for ``pods`` workers in ``group``: the RayJob's replicas are patched (as KubeRay's
        autoscaler patches the RayCluster), and the queue decides."""
        key = self.key(namespace, name)
        try:
            with self.store.transaction():
                job = self.store.get(key)
                for spec in ((job.get("spec") or {}).get("rayClusterSpec") or {}).get("workerGroupSpecs") or []:
                    if spec.get("groupName") == group:
                        before = int(spec.get("replicas", 1))
                        spec["replicas"] = max(1, pods // int(spec.get("numOfHosts", 1))) if pods else 0
                        if spec["replicas"] == before:
                            return
                        job = self.store.update(key, job)
                        record_event(self.store, job, "AutoscalerScaling", f"worker group {group}: replicas {before} "
                                     f"-> {spec['replicas']}", component="flexq-autoscaler")
                        return
        except NotFound:
            return

    def stop(self, namespace: str, name: str) -> None:
        """The RayJob was deleted: its run stops, what it showed goes, and so do its working directory and its log
        (a RayJob made again under the name starts afresh)."""
        with self._lock:
            run = self.runs.pop(f"{namespace}/{name}", None)
        if run is not None:
            run.stop()
        self._unpublish(f"{namespace}/{name}", everything=True)
        shutil.rmtree(self.workdir(namespace, name), ignore_errors=True)
        self.log_path(namespace, name).unlink(missing_ok=True)

    def _unpublish(self, job_key: str, everything: bool) -> None:
        keys = self.published.get(job_key, set())
        for key in sorted(keys, key=str):
            if everything or not (key.resource == "jobs" or (key.resource == "pods" and "-raycluster-" not in
                                                             key.name)):
                with contextlib.suppress(NotFound):
                    self.store.delete(key)
                keys.discard(key)

    def _publish(self, job: dict[str, Any]) -> None:
        meta, status = job["metadata"], job.get("status") or {}
        job_key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        deployment = str(status.get("jobDeploymentStatus", "Initializing"))
        terminal = deployment in ("Complete", "Failed")
        keep_cluster = not (terminal and (job.get("spec") or {}).get("shutdownAfterJobFinishes"))
        if selected_cluster("RayJob", job) is not None:
            keep_cluster = False  # the cluster is the RayCluster's own, shown as it is
        objects = kuberay_objects(job, deployment, self.nodes.get(job_key, {}),
                                  log_reference("rayjobs", meta["name"]),
                                  str(status.get("startTime", "")), keep_cluster, str(status.get("endTime", "")))
        keys = self.published.setdefault(job_key, set())
        for key, obj in objects:
            keys.add(key)
            try:
                old = self.store.get(key)
            except NotFound:
                self.store.create(key, obj)
                continue
            if old.get("status") != obj.get("status"):
                self.store.update(key, {**old, "status": obj["status"]}, subresource="status")
        if not keep_cluster:
            self._unpublish(job_key, everything=False)

    def suspend(self, namespace: str, name: str) -> None:
        """The workload was evicted: stop the run and its cluster; the RayJob is Suspended until admitted again
        (KubeRay's behaviour for a suspended RayJob)."""
        with self._lock:
            run = self.runs.pop(f"{namespace}/{name}", None)
        if run is not None:
            run.suspended = True
            run.stop()
        self._unpublish(f"{namespace}/{name}", everything=True)
        self._status(namespace, name, {"jobDeploymentStatus": "Suspended", "jobStatus": ""}, publish=False)

    def stop_all(self) -> None:
        with self._lock:
            runs, self.runs = list(self.runs.values()), {}
        for run in runs:
            # The server is going: its clusters are killed without waiting on their runs, and no final status is
            # written (the job is not over: the next server runs it again).
            run.suspended = True
            run.detach = isinstance(run.cluster, RemoteRayCluster)  # an existing cluster's job runs on
        side_by_side([functools.partial(run.stop, wait=2.0) for run in runs])
        self.clusters.stop_all()
        self.batch.stop_all()

    def _status(self, namespace: str, name: str, fields: dict[str, Any], publish: bool = True) -> None:
        key = self.key(namespace, name)
        fields = {**self._unwritten.pop(key, {}), **fields}
        try:
            with self.store.transaction():
                job = self.store.get(key)
                status = {**(job.get("status") or {}), **fields}
                job = self.store.update(key, {**job, "status": status}, subresource="status")
                if publish:
                    self._publish(job)
                if fields.get("jobStatus") in ("SUCCEEDED", "FAILED", "STOPPED"):
                    verdict = fields["jobStatus"]
                    record_event(self.store, job, "Completed" if verdict == "SUCCEEDED" else "Failed",
                                 f"job {verdict}: {fields.get('message', '')}".strip(": "),
                                 type="Normal" if verdict == "SUCCEEDED" else "Warning", component="flexq-runtime")
        except NotFound:
            log.info("RayJob %s/%s is gone; its status is dropped", namespace, name)
        except StoreUnavailable as exc:  # the job runs on; its status is written once the store takes writes
            self._unwritten[key] = fields
            if key not in self._retrying:
                self._retrying.add(key)
                log.warning("RayJob %s/%s: its status is written again in %gs: %s", namespace, name, STATUS_RETRY,
                            exc)
                retry = threading.Timer(STATUS_RETRY, self._retry_status, (namespace, name, publish))
                retry.daemon = True
                retry.start()

    def _retry_status(self, namespace: str, name: str, publish: bool) -> None:
        self._retrying.discard(self.key(namespace, name))
        if self.key(namespace, name) in self._unwritten:
            self._status(namespace, name, {}, publish)
