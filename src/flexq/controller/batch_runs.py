"""Admitted batch/v1 Jobs run for real, as Kubernetes' Job controller runs them
(:class:`~flexq.runtime.batch_job.BatchJobRun`): started when their workload is admitted, suspended when it is
evicted (their active pods deleted, the ``Suspended`` condition set, as that controller does), their pods deleted
with them. Under ``--runtime none`` there is none of this: an admitted Job is un-suspended and nothing runs."""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from flexq.runtime import BatchJobRun
from flexq.store import BaseStore, Key, NotFound, StoreError, record_event

__all__ = ["BatchJobRuntime"]

log = logging.getLogger("flexq.runtime")


def _ended(job: dict[str, Any]) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


class BatchJobRuntime:
    """Start, suspend and stop Jobs' runs; safe from any thread."""

    def __init__(self, store: BaseStore, home: Path) -> None:
        self.store = store
        self.home = home
        self.runs: dict[str, BatchJobRun] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(namespace: str, name: str) -> Key:
        return Key("batch", "jobs", namespace, name)

    def start(self, namespace: str, name: str, nodes: list[str]) -> None:
        """Run the Job (un-suspended by its admission) on ``nodes``; one that runs or has ended is left alone."""
        with self._lock:
            run = self.runs.get(f"{namespace}/{name}")
            if run is not None and not run.done.is_set():
                return
            try:
                job = self.store.get(self.key(namespace, name))
            except NotFound:
                return
            if _ended(job) or (job.get("spec") or {}).get("suspend"):
                return
            run = BatchJobRun(self.store, job, self.home, nodes)
            self.runs[f"{namespace}/{name}"] = run
        run.start()

    def suspend(self, namespace: str, name: str) -> None:
        """Its workload was evicted: its active pods are killed and deleted, and its status says Suspended."""
        with self._lock:
            run = self.runs.pop(f"{namespace}/{name}", None)
        active = run.stop() if run is not None else []
        for pod in active:
            with contextlib.suppress(NotFound):
                self.store.delete(Key("", "pods", namespace, pod))
        key = self.key(namespace, name)
        try:
            with self.store.transaction():
                job = self.store.get(key)
                if _ended(job):
                    return
                status = dict(job.get("status") or {})
                conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Suspended"]
                stamp = self.store.timestamp()
                conditions.append({"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                   "message": "Job suspended", "lastProbeTime": stamp, "lastTransitionTime": stamp})
                status.update(active=0, ready=0, terminating=0, conditions=conditions)
                job = self.store.update(key, {**job, "status": status}, subresource="status")
                record_event(self.store, job, "Suspended", "Job suspended", component="job-controller")
        except NotFound:
            return
        except StoreError as exc:
            log.warning("Job %s/%s: its suspension could not be written: %s", namespace, name, exc)

    def stop(self, namespace: str, name: str, uid: str) -> None:
        """The Job was deleted: its run stops and its pods go with it (the garbage collector's part)."""
        with self._lock:
            run = self.runs.pop(f"{namespace}/{name}", None)
        if run is not None:
            run.stop()
        for pod in self.store.list_objects("", "pods", namespace)[0]:
            if any(ref.get("kind") == "Job" and ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences")
                   or []):
                with contextlib.suppress(NotFound):
                    self.store.delete(Key("", "pods", namespace, pod["metadata"]["name"]))

    def resume(self) -> None:
        """At start-up: the Jobs that ran when the last server stopped (started, admitted, not ended) run on, their
        pods that ran on followed again and those ended with the last server replaced
        (:class:`~flexq.runtime.batch_job.BatchJobRun`)."""
        admitted = {
            (w["metadata"].get("namespace", "default"), ref.get("name"))
            for w in self.store.list_objects("kueue.x-k8s.io", "workloads")[0]
            for ref in w["metadata"].get("ownerReferences") or [] if ref.get("kind") == "Job"
            and any(c.get("type") == "Admitted" and c.get("status") == "True"
                    and not any(f.get("type") == "Finished" and f.get("status") == "True"
                                for f in (w.get("status") or {}).get("conditions") or [])
                    for c in (w.get("status") or {}).get("conditions") or [])}
        for job in self.store.list_objects("batch", "jobs")[0]:
            meta = job["metadata"]
            where = (meta.get("namespace", "default"), meta["name"])
            if where in admitted and (job.get("status") or {}).get("startTime") and not _ended(job):
                self.start(*where, [])

    def stop_all(self) -> None:
        """The server is going: the runs' processes are killed; the Jobs' statuses are left as they are."""
        with self._lock:
            runs, self.runs = list(self.runs.values()), {}
        for run in runs:
            run.stop(wait=2.0, abandon=True)
