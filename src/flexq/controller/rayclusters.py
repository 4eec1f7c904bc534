"""Runs admitted RayClusters for real (one local Ray cluster each) and keeps their status in the store.

A RayCluster admitted onto a node pool of an existing Ray cluster (``--ray-address``) is that cluster: nothing is
started here, its status says ready at once, and the RayJobs that select it (``clusterSelector``) are submitted to
that cluster; evicted or deleted, it is simply let go (the cluster is not flexq's to stop).

Started when the cluster's workload is admitted (and its pods bound, where node pools are modelled); stopped,
its Service and Pods removed, when the workload is evicted (the RayCluster is then ``suspended``) or the
RayCluster deleted. ``kubectl port-forward`` to the head pod (or ``service/<name>-head-svc``) reaches the
local cluster's dashboard, GCS and client ports. A cluster left running by a server that stopped is found again
when the next one starts (:meth:`RayClusterRuntime.recover`); one lost meanwhile is started anew.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flexq.runtime import (
    LOST_REASON,
    Borrowed,
    RayClusterRun,
    RemoteRayCluster,
    Resume,
    attach,
    cluster_status,
    head_port_map,
    log_reference,
    ray_log_path,
    ray_pool_of,
    raycluster_objects,
    read_records,
    reap,
    record_path,
    same_object,
)
from flexq.store import BaseStore, Key, NotFound, record_event, rfc3339

__all__ = ["RayClusterRuntime"]

log = logging.getLogger("flexq.runtime")


class RayClusterRuntime:
    """Start, follow and stop RayCluster runs. ``start`` and ``stop`` are safe from any thread."""

    def __init__(self, store: BaseStore, home: Path) -> None:
        self.store = store
        self.home = home
        self.runs: dict[str, RayClusterRun] = {}
        self.nodes: dict[str, dict[str, list[str]]] = {}
        self.published: dict[str, set[Key]] = {}
        self.remote: dict[str, Borrowed] = {}
        """RayClusters admitted onto a node pool of an existing Ray cluster: that cluster, by "namespace/name"."""
        self._lock = threading.Lock()

    @staticmethod
    def key(namespace: str, name: str) -> Key:
        return Key("ray.io", "rayclusters", namespace, name)

    def workdir(self, namespace: str, name: str) -> Path:
        return self.home / "runtime" / "rayclusters" / namespace / name

    def head_ports(self, namespace: str, pod: Mapping[str, Any]) -> dict[int, int] | None:
        """The head pod's ports -> the local cluster's, for a pod of a RayCluster run here; None for any other
        pod. Raises LookupError with the reason when the pod is one of ours but has nothing to forward to."""
        owner = next((r for r in pod["metadata"].get("ownerReferences") or [] if r.get("kind") == "RayCluster"),
                     None)
        remote = self.remote.get(f"{namespace}/{owner.get('name')}") if owner is not None else None
        if remote is not None:
            raise LookupError(f"{remote.what}: nothing of it runs on this machine; reach its dashboard at "
                              f"{remote.cluster.dashboard_url}")
        run = self.runs.get(f"{namespace}/{owner.get('name')}") if owner is not None else None
        if run is None or owner is None or str(run.obj["metadata"].get("uid", "")) != str(owner.get("uid", "")):
            return None
        name = owner["name"]
        if (pod["metadata"].get("labels") or {}).get("ray.io/node-type") != "head":
            raise LookupError(f"pod {pod['metadata']['name']} is a worker of RayCluster {name}, whose Ray cluster "
                              f"runs as one local node: forward the head pod's ports, or service/{name}-head-svc")
        local = run.cluster.ports if run.cluster is not None else {}
        if not local:
            raise LookupError(f"the Ray cluster of RayCluster {name} is not running")
        return head_port_map(pod, local)

    def running(self, namespace: str, name: str) -> Borrowed | None:
        """RayCluster ``name``'s Ray cluster, with the RayCluster's spec, once it is up (None while it is not, or
        there is none)."""
        remote = self.remote.get(f"{namespace}/{name}")
        if remote is not None:
            return remote if remote.cluster.alive() else None
        run = self.runs.get(f"{namespace}/{name}")
        if run is None or run.done.is_set() or not run.ready.is_set() or run.cluster is None:
            return None
        return Borrowed(run.cluster, run.obj.get("spec") or {}) if run.cluster.alive() else None

    def start(self, namespace: str, name: str, nodes: dict[str, list[str]] | None = None,
              counts: dict[str, int] | None = None) -> None:
        """Start the cluster on its admitted pods; a cluster already running is resized to ``counts`` (an
        elastic one whose workload grew or shrank)."""
        cluster_key = f"{namespace}/{name}"
        self.nodes[cluster_key] = dict(nodes or {})
        with self._lock:
            if cluster_key in self.runs and not self.runs[cluster_key].done.is_set():
                if counts:
                    self.runs[cluster_key].resize(counts)
                return
            try:
                obj = self.store.get(self.key(namespace, name))
            except NotFound:
                return
            borrowed = self._on_existing(obj)
            if borrowed is not None:
                self.remote[cluster_key] = borrowed
            else:
                run = self._register(obj)
        if borrowed is not None:
            record_event(self.store, obj, "RayClusterStarting", f"the RayCluster is {borrowed.what} (its dashboard "
                         f"{borrowed.cluster.dashboard_url}): nothing is started here", component="flexq-runtime")
            self._write(namespace, name, "ready", "")
            return
        self._status(namespace, name, {"state": ""})
        record_event(self.store, obj, "RayClusterStarting", "starting a local Ray cluster", component="flexq-runtime")
        run.start()

    def _on_existing(self, obj: Mapping[str, Any]) -> Borrowed | None:
        """The existing Ray cluster a RayCluster was admitted onto (through a node pool made with --ray-address),
        or None."""
        remote = ray_pool_of(self.store, obj.get("spec") or {})
        if remote is None:
            return None
        pool, url = remote
        return Borrowed(RemoteRayCluster(url, pool), obj.get("spec") or {},
                        f"RayCluster {obj['metadata']['name']}, the Ray cluster of node pool {pool}")

    def _register(self, obj: dict[str, Any], resume: Resume | None = None) -> RayClusterRun:
        namespace, name = obj["metadata"].get("namespace", "default"), obj["metadata"]["name"]
        cluster_key = f"{namespace}/{name}"
        made: list[RayClusterRun] = []

        def report(fields: dict[str, Any]) -> None:
            if made and self.runs.get(cluster_key) is made[0]:  # not a run stopped meanwhile
                self._status(namespace, name, fields)

        run = RayClusterRun(obj, self.workdir(namespace, name), report,
                            lambda group, pods: self._scale(namespace, name, group, pods),
                            record=record_path(self.home, "rayclusters", namespace, name), resume=resume,
                            log_path=ray_log_path(self.home, "rayclusters", namespace, name))
        made.append(run)
        self.runs[cluster_key] = run
        return run

    def recover(self) -> None:
        """Server start-up, before the controllers run: each admitted RayCluster goes on with its Ray cluster found
        again, or, where it was lost or never started, with a new one; every other record is reaped.
        :meth:`resume` starts the runs."""
        found = read_records(self.home, "rayclusters")
        for obj in self.store.list_objects("ray.io", "rayclusters")[0]:
            meta = obj["metadata"]
            entry = found.pop((meta.get("namespace", "default"), meta["name"]), None)
            if entry is not None and not same_object(entry[1], obj):
                reap(*entry)
                entry = None
            if (obj.get("spec") or {}).get("suspend") is not False or \
                    (obj.get("status") or {}).get("state") in ("suspended", "failed"):
                if entry is not None:
                    reap(*entry)
                continue
            borrowed = self._on_existing(obj)
            if borrowed is not None:  # nothing of it ran here: the existing cluster is taken again as it is
                if entry is not None:
                    reap(*entry)
                self.remote[f"{meta.get('namespace', 'default')}/{meta['name']}"] = borrowed
                continue
            cluster = attach(*entry) if entry is not None else None
            if cluster is not None:
                record_event(self.store, obj, "RayClusterFound", "the server restarted: the Ray cluster ran on and is "
                             "followed again", component="flexq-runtime")
            elif entry is not None:
                record_event(self.store, obj, LOST_REASON, "the Ray cluster was lost while the server was down: a "
                             "new one is started", type="Warning", component="flexq-runtime")
            lost = "the Ray cluster was lost while the server was down" if entry is not None and cluster is None else ""
            with self._lock:
                self._register(obj, Resume(cluster, entry[1] if entry else {}, lost))
        for path, record in found.values():
            log.warning("the Ray cluster of %s is nobody's any more: its processes are killed", path)
            reap(path, record)

    def resume(self) -> None:
        """Start the runs :meth:`recover` set up."""
        with self._lock:
            waiting = [run for run in self.runs.values() if not run.started and not run.done.is_set()]
        for run in waiting:
            if run.cluster is None:  # a new cluster starts: until it is ready, the old one's status is not shown
                meta = run.obj["metadata"]
                self._status(meta.get("namespace", "default"), meta["name"], {"state": ""})
            run.start()

    def queued(self, namespace: str, name: str) -> None:
        """A new RayCluster waits for admission, suspended: shown so, as KubeRay shows a suspended cluster."""
        if f"{namespace}/{name}" not in self.runs:
            self._write(namespace, name, "suspended", "")

    def stop(self, namespace: str, name: str, suspended: bool = False) -> None:
        """Stop the cluster (the RayCluster was deleted, or its workload evicted: ``suspended``)."""
        with self._lock:
            run = self.runs.pop(f"{namespace}/{name}", None)
            self.remote.pop(f"{namespace}/{name}", None)
        if run is not None:
            run.stop()
        for key in sorted(self.published.pop(f"{namespace}/{name}", set()), key=str):
            with contextlib.suppress(NotFound):
                self.store.delete(key)
        if suspended:
            self._write(namespace, name, "suspended", "")
        else:  # deleted: its working directory and its head's log go with it
            shutil.rmtree(self.workdir(namespace, name), ignore_errors=True)
            ray_log_path(self.home, "rayclusters", namespace, name).unlink(missing_ok=True)

    def stop_all(self) -> None:
        with self._lock:
            runs, self.runs = list(self.runs.items()), {}
            self.remote.clear()
        side_by_side([functools.partial(run.stop, wait=2.0) for _key, run in runs])
        for cluster_key, _run in runs:
            for key in self.published.pop(cluster_key, set()):
                with contextlib.suppress(NotFound):
                    self.store.delete(key)

    def _scale(self, namespace: str, name: str, group: str, pods: int) -> None:
        """The autoscaler asks for ``pods`` workers in ``group``: the RayCluster's replicas are patched, as KubeRay's
        autoscaler patches them, and the queue decides."""
        key = self.key(namespace, name)
        try:
            with self.store.transaction():
                obj = self.store.get(key)
                for spec in (obj.get("spec") or {}).get("workerGroupSpecs") or []:
                    if spec.get("groupName") == group:
                        before = int(spec.get("replicas", 1))
                        spec["replicas"] = max(1, pods // int(spec.get("numOfHosts", 1))) if pods else 0
                        if spec["replicas"] != before:
                            obj = self.store.update(key, obj)
                            record_event(self.store, obj, "AutoscalerScaling", f"worker group {group}: replicas "
                                         f"{before} -> {spec['replicas']}", component="flexq-autoscaler")
                        return
        except NotFound:
            return

    def _status(self, namespace: str, name: str, fields: dict[str, Any]) -> None:
        self._write(namespace, name, str(fields.get("state", "")), str(fields.get("reason", "")),
                    str(fields.get("readyTime", "")))

    def _write(self, namespace: str, name: str, state: str, reason: str, ready_time: str = "") -> None:
        key = self.key(namespace, name)
        cluster_key = f"{namespace}/{name}"
        stamp = rfc3339(datetime.now(UTC))
        try:
            with self.store.transaction():
                obj = self.store.get(key)
                old = obj.get("status") or {}
                ready_time = ready_time or str((old.get("stateTransitionTimes") or {}).get("ready", ""))
                status = cluster_status(obj, state, reason, ready_time, stamp)
                self.store.update(key, {**obj, "status": status}, subresource="status")
                if state == "suspended":
                    return
                phase = {"ready": "Running", "failed": "Failed"}.get(state, "Pending")
                keys = self.published.setdefault(cluster_key, set())
                for object_key, published in raycluster_objects(obj, phase, self.nodes.get(cluster_key, {}),
                                                                log_reference("rayclusters", name),
                                                                ready_time or stamp):
                    keys.add(object_key)
                    try:
                        current = self.store.get(object_key)
                    except NotFound:
                        self.store.create(object_key, published)
                        continue
                    if current.get("status") != published.get("status"):
                        self.store.update(object_key, {**current, "status": published["status"]},
                                          subresource="status")
            if state in ("ready", "failed"):
                record_event(self.store, obj, "RayClusterReady" if state == "ready" else "RayClusterFailed",
                             "the Ray cluster is ready" if state == "ready" else reason,
                             type="Normal" if state == "ready" else "Warning", component="flexq-runtime")
        except NotFound:
            log.info("RayCluster %s/%s is gone; its status is dropped", namespace, name)


def side_by_side(stops: Sequence[Callable[[], None]]) -> None:
    """Run ``stops`` (runs stopping, each waiting on its processes) in threads side by side and wait for them all:
    a server going with several clusters up takes as long as the slowest, not their sum."""
    threads = [threading.Thread(target=stop, name="stop-run", daemon=True) for stop in stops]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
