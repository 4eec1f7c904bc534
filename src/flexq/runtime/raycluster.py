"""One RayCluster, run for real: a local Ray cluster that lives until the RayCluster is deleted or evicted.

A RayCluster has no entrypoint: it is an interactive cluster that users submit to (``ray job submit``
through ``kubectl port-forward service/<name>-head-svc 8265``). Its local cluster is sized as a RayJob's
(:func:`flexq.runtime.emulation.accelerators_for`: emulated TPU slices and GPUs, the head group's
``rayStartParams``), and an elastic one (``kueue.x-k8s.io/elastic-job: "true"``) grows and shrinks by worker
nodes as an elastic RayJob does (:class:`flexq.runtime.elastic.ElasticWorkers`).

Lifecycle, as KubeRay reports it in ``status.state``: (none) while the cluster starts -> ``ready`` once
its head answers -> ``failed`` if the head could not start or exits on its own; ``suspended`` is written
by the caller when the workload is evicted. The run never ends by itself.

A run resumed after a server restart (``resume``) follows the cluster found again, or, when it was lost, starts a
new one (as KubeRay recreates a head pod that is gone).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flexq.jobs import pod_requests
from flexq.runtime.elastic import ElasticWorkers, asks_tpu, is_elastic
from flexq.runtime.emulation import Accelerators, accelerators_for
from flexq.runtime.ray_cluster import LocalRayCluster, RayStartError, ended_note
from flexq.runtime.reattach import Resume

__all__ = ["RayClusterRun", "cluster_accelerators"]


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_accelerators(spec: Mapping[str, Any], elastic: ElasticWorkers | None) -> Accelerators:
    """What the head node offers: the worker groups' accelerators emulated on it (an elastic cluster's CPU and GPU
    groups are worker nodes of their own instead)."""
    groups = []
    for group in spec.get("workerGroupSpecs") or []:
        if elastic is not None and not asks_tpu(group):
            continue
        pod = (group.get("template") or {}).get("spec") or {}
        pods = int(group.get("replicas", 1)) * int(group.get("numOfHosts", 1))
        groups.append((dict(pod.get("nodeSelector") or {}), pod_requests(pod), pods))
    if elastic is not None and not groups:
        head = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
        cpus = max(1, -(-pod_requests(head).get("cpu", 1000) // 1000))
        return Accelerators(num_cpus=cpus, description=f"a head node ({cpus} CPU) and elastic worker groups")
    return accelerators_for(groups)


class RayClusterRun:
    """Start the cluster (in a thread of its own), keep it until :meth:`stop`. ``on_status`` receives the
    RayCluster status fields this run knows (state, reason, the local ports); ``on_scale`` the autoscaler's
    wish for a worker group (pods)."""

    def __init__(self, obj: Mapping[str, Any], workdir: Path, on_status: Callable[[dict[str, Any]], None],
                 on_scale: Callable[[str, int], None] = lambda _group, _pods: None, *,
                 record: Path | None = None, resume: Resume | None = None, log_path: Path | None = None) -> None:
        self.obj = obj
        self.record = record
        self.resume = resume
        self._ready_time = ""
        """When the cluster first became ready, for one found again after a restart."""
        self.workdir = workdir
        self.log_path = log_path if log_path is not None else workdir.with_name(workdir.name + ".log")
        """The head's log: the server's file, outside the working directory."""
        self.on_status = on_status
        self.cluster: LocalRayCluster | None = resume.cluster if resume is not None else None
        self._stop = threading.Event()
        self.done = threading.Event()
        self.ready = threading.Event()
        """Set once the cluster is up (RayJobs on it through ``clusterSelector`` are submitted from then on)."""
        self._notes: list[str] = []
        shim = {"metadata": obj["metadata"], "spec": {"rayClusterSpec": obj.get("spec") or {}}}
        self.elastic = ElasticWorkers.for_job(shim, self._notes.append, on_scale) if is_elastic(obj) else None
        self._thread = threading.Thread(target=self._run, name=f"raycluster-{obj['metadata']['name']}", daemon=True)

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 10.0) -> None:
        """Stop the cluster, its processes and only them (eviction, deletion, server shutdown). A cluster still
        starting is killed at once; the run's thread stops whatever it started after that on its way out."""
        self._stop.set()
        if self.cluster is not None:
            self.cluster.stop()
        if self.started:
            self._thread.join(timeout=wait)
        if self.cluster is not None:
            self.cluster.stop()

    def resize(self, counts: Mapping[str, int]) -> None:
        if self.elastic is not None:
            self.elastic.resize(counts)

    def _append(self, text: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(text)

    def _flush_notes(self) -> None:
        if self._notes:
            self._append("".join(self._notes))
            self._notes.clear()

    def _run(self) -> None:
        self.log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._serve()
        except Exception as exc:  # a failure of the run is the cluster's status, never the server's
            self._append(f"flexq: the Ray cluster failed: {exc}\n")
            self.on_status({"state": "failed", "reason": str(exc)[:500]})
        finally:
            if self.cluster is not None and self._stop.is_set():
                self.cluster.stop()
            self.done.set()

    def _launch(self) -> bool:
        """Start the cluster (or take the one found again after a restart); False when it did not come up."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        resumed, self.resume = self.resume, None
        head = resumed.cluster.process if resumed is not None and resumed.cluster is not None else None
        if resumed is not None and resumed.cluster is not None and head is not None:
            self.cluster = resumed.cluster
            if self.elastic is not None:
                self.elastic.adopt(resumed.cluster)
            self._ready_time = str(((self.obj.get("status") or {}).get("stateTransitionTimes") or {}).get("ready", ""))
            self._append(f"flexq: the server restarted; the Ray cluster ran on (head pid {head.pid}) and is followed "
                         "again\n")
            return True
        if resumed is not None and resumed.lost:
            self._append(f"flexq: {resumed.lost}; starting a new one\n")
        spec = self.obj.get("spec") or {}
        accelerators = cluster_accelerators(spec, self.elastic)
        self._append(f"flexq: starting a Ray cluster: {accelerators.description}\n")
        params = (spec.get("headGroupSpec") or {}).get("rayStartParams") or {}
        meta = self.obj["metadata"]
        self.cluster = LocalRayCluster(accelerators, start_params={str(k): str(v) for k, v in params.items()},
                                       record_path=self.record, record={
                                           "kind": "RayCluster", "namespace": meta.get("namespace", "default"),
                                           "name": meta["name"], "uid": str(meta.get("uid", ""))})
        try:
            self.cluster.start(cancel=self._stop)
        except RayStartError as exc:
            if self._stop.is_set():
                return False  # stopped while it started: no failure to tell
            self._append(f"{exc}\n")
            self.on_status({"state": "failed", "reason": str(exc)[:500]})
            return False
        return True

    def _serve(self) -> None:
        if not self._launch() or self._stop.is_set() or self.cluster is None:
            return
        if self.elastic is not None:
            self.elastic.reconcile(self.cluster)
            self._flush_notes()
        self._append(f"flexq: the Ray cluster is ready; its dashboard is {self.cluster.dashboard_url}\n")
        self.on_status({"state": "ready", "ports": dict(self.cluster.ports), "readyTime": self._ready_time or _stamp()})
        self.ready.set()
        process = self.cluster.process
        while not self._stop.wait(1.0):
            if process is None or process.poll() is not None:
                why = ended_note(self.cluster)
                self._append(f"flexq: the Ray head exited{why}\n")
                self.on_status({"state": "failed", "reason": f"the Ray head process exited{why}"})
                return
            if self.elastic is not None:
                self.elastic.reconcile(self.cluster)
                self.elastic.autoscale(self.cluster, time.monotonic())
                self._flush_notes()
