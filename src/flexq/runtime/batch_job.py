"""An admitted batch/v1 Job run as Kubernetes' Job controller runs it: its pods made from its template and run here
(:class:`~flexq.runtime.local_pods.LocalPod`), its status written as that controller writes it.

Up to ``parallelism`` pods are active at once until ``completions`` have succeeded (``NonIndexed``: any pods;
``Indexed``: one per index ``0 .. completions-1``, each pod given its index in the label and annotation
``batch.kubernetes.io/job-completion-index`` and in ``JOB_COMPLETION_INDEX``); without ``completions``, the Job is
done when a pod has succeeded and none is active. A failed pod is replaced after the controller's back-off (10 s,
doubled at each failure, at most 6 minutes) until more than ``backoffLimit`` have failed: the Job then fails with
``BackoffLimitExceeded``. Past ``activeDeadlineSeconds`` from its start its active pods are killed and it fails with
``DeadlineExceeded``. The status is Kubernetes 1.32's: ``active``, ``ready``, ``terminating``, ``succeeded``,
``failed``, ``startTime``, ``completionTime``, ``completedIndexes``, the interim condition (``SuccessCriteriaMet``,
``FailureTarget``) and then the terminal one (``Complete``, ``Failed``), with the controller's reasons, messages and
Events. Pods are the store's Pod objects (``kubectl get pods``, ``kubectl logs``), owned by the Job, labelled
``batch.kubernetes.io/job-name`` and ``controller-uid``. Not emulated: ``restartPolicy: OnFailure`` restarts in the
same pod (a failed pod is replaced, as under ``Never``), ``podFailurePolicy``, ``successPolicy``,
``backoffLimitPerIndex``, ``ttlSecondsAfterFinished``.
"""

from __future__ import annotations

import contextlib
import copy
import random
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from flexq.api import job_labels
from flexq.runtime.local_pods import LocalPod, pod_run_dir, pod_workdir
from flexq.store import BaseStore, Key, NotFound, StoreError, record_event, rfc3339

__all__ = ["COMPLETION_INDEX", "BatchJobRun", "index_ranges"]

COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
_COMPONENT: Final = "job-controller"
_SUFFIX: Final = "bcdfghjklmnpqrstvwxz2456789"  # the letters Kubernetes' generated names use
BACKOFF: Final = 10.0
BACKOFF_MAX: Final = 360.0
_POLL: Final = 0.5

BACKOFF_MESSAGE: Final = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE: Final = "Job was active longer than specified deadline"
COMPLETE_MESSAGE: Final = "Reached expected number of succeeded pods"


def index_ranges(indexes: set[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``0-2,5``, as ``status.completedIndexes`` writes them."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and out[-1].rpartition("-")[2] == str(i - 1):
            out[-1] = f"{out[-1].partition('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _parse_ranges(text: str) -> set[int]:
    out: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        with contextlib.suppress(ValueError):
            out.update(range(int(low), int(high or low) + 1))
    return out


def _now() -> str:
    return rfc3339(datetime.now(UTC))


def _condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    stamp = _now()
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastProbeTime": stamp,
            "lastTransitionTime": stamp}


class _Pod:
    """One pod of the Job: its name, completion index, run and last phase."""

    def __init__(self, name: str, index: int | None, run: LocalPod) -> None:
        self.name, self.index, self.run = name, index, run
        self.phase = "Pending"
        self.counted = False
        """Its end is in the Job's counts."""


class BatchJobRun:
    """Run one Job until it succeeds, fails or is stopped (suspended, deleted, the server stopping)."""

    def __init__(self, store: BaseStore, job: Mapping[str, Any], home: Path, nodes: list[str]) -> None:
        self.store = store
        meta = job["metadata"]
        self.namespace, self.name, self.uid = str(meta.get("namespace") or "default"), str(meta["name"]), \
            str(meta.get("uid", ""))
        self.job = copy.deepcopy(dict(job))
        self.home = home
        self.nodes = nodes
        self.pods: dict[str, _Pod] = {}
        self.done = threading.Event()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"job-{self.name}", daemon=True)
        self._created = 0

    @property
    def key(self) -> Key:
        return Key("batch", "jobs", self.namespace, self.name)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait: float = 10.0, abandon: bool = False) -> list[str]:
        """Kill the active pods' processes; return the names of the pods that were active (for the caller to
        delete, as the Job controller deletes a suspended Job's active pods). ``abandon``: the server is going (the
        next server replaces those pods' runs, see :attr:`LocalPod.abandoned`)."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            active = [p for p in self.pods.values() if p.phase not in ("Succeeded", "Failed")]
        for pod in active:
            pod.run.stop(wait=0, abandon=abandon)
        self._thread.join(timeout=wait)
        return [p.name for p in active]

    # --- the controller's loop ------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except (StoreError, OSError) as exc:  # the Job is gone, or the store refuses: its pods stop with it
            if not isinstance(exc, NotFound):
                with contextlib.suppress(StoreError):
                    record_event(self.store, self.job, "FailedRun", f"the job's run stopped: {exc}", type="Warning",
                                 component=_COMPONENT)
            for pod in list(self.pods.values()):
                pod.run.stop(wait=0)
        finally:
            self.done.set()

    def _loop(self) -> None:
        spec = self.job.get("spec") or {}
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        indexed = spec.get("completionMode") == "Indexed" and completions is not None
        backoff_limit = int(spec.get("backoffLimit", 6))
        deadline_s = spec.get("activeDeadlineSeconds")
        status = copy.deepcopy(self.job.get("status") or {})
        succeeded, failed = int(status.get("succeeded") or 0), int(status.get("failed") or 0)
        completed = _parse_ranges(str(status.get("completedIndexes") or ""))
        started = time.monotonic()
        fields: dict[str, Any] = {"startTime": _now()}
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "Suspended"]
        if any(c.get("type") == "Suspended" and c.get("status") == "True" for c in status.get("conditions") or []):
            conditions.append(_condition("Suspended", "False", "JobResumed", "Job resumed"))
            record_event(self.store, self.job, "Resumed", "Job resumed", component=_COMPONENT)
        fields["conditions"] = conditions
        self._write(fields)
        self._adopt_pods()
        failures_seen = failed
        next_start = 0.0
        while not self._stop.is_set():
            with self._lock:
                pods = list(self.pods.values())
            active = [p for p in pods if p.phase not in ("Succeeded", "Failed")]
            ended = [p for p in pods if p.phase in ("Succeeded", "Failed") and not p.counted]
            for pod in ended:
                pod.counted = True
                if pod.phase == "Succeeded":
                    if pod.index is None:
                        succeeded += 1
                    elif pod.index not in completed:
                        completed.add(pod.index)
                        succeeded += 1
                else:
                    failed += 1
            if failed > failures_seen:  # the controller's back-off before the next pod, doubled at each failure
                next_start = time.monotonic() + min(BACKOFF * 2 ** (failed - 1), BACKOFF_MAX)
                failures_seen = failed
            counts = {"active": len(active), "ready": sum(p.phase == "Running" for p in active), "terminating": 0,
                      "succeeded": succeeded, "failed": failed, "uncountedTerminatedPods": {}}
            if indexed:
                counts["completedIndexes"] = index_ranges(completed)
            ending = self._ending(completions, succeeded, failed, backoff_limit, bool(active), indexed, completed,
                                  deadline_s, started)
            if ending is not None:
                self._finish(ending, active, counts, conditions)
                return
            wanted = self._wanted(parallelism, completions, succeeded, len(active), indexed, completed,
                                  {p.index for p in active})
            if wanted and time.monotonic() >= next_start:
                for index in wanted:
                    self._create_pod(index)
                counts["active"] = len(active) + len(wanted)
            self._write(counts)
            wait = _POLL
            if deadline_s is not None:
                wait = max(0.05, min(wait, started + float(deadline_s) - time.monotonic()))
            self._wake.wait(wait)
            self._wake.clear()

    @staticmethod
    def _ending(completions: Any, succeeded: int, failed: int, backoff_limit: int, active: bool, indexed: bool,
                completed: set[int], deadline_s: Any, started: float) -> tuple[str, str, str] | None:
        """(interim condition, terminal condition, reason) once the Job has ended, else None."""
        if indexed:
            done = len(completed) >= int(completions)
        elif completions is not None:
            done = succeeded >= int(completions)
        else:
            done = succeeded > 0 and not active
        if done:
            return "SuccessCriteriaMet", "Complete", "CompletionsReached"
        if failed > backoff_limit:
            return "FailureTarget", "Failed", "BackoffLimitExceeded"
        if deadline_s is not None and time.monotonic() >= started + float(deadline_s):
            return "FailureTarget", "Failed", "DeadlineExceeded"
        return None

    @staticmethod
    def _wanted(parallelism: int, completions: Any, succeeded: int, active: int, indexed: bool,
                completed: set[int], running_indexes: set[int | None]) -> list[int | None]:
        """The pods to start now: their completion indexes (None for a NonIndexed Job's)."""
        if indexed:
            free = [i for i in range(int(completions)) if i not in completed and i not in running_indexes]
            return list(free[:max(0, parallelism - active)])
        if completions is None:
            room = parallelism - active if succeeded == 0 else 0
        else:
            room = min(parallelism, int(completions) - succeeded) - active
        return [None] * max(0, room)

    def _finish(self, ending: tuple[str, str, str], active: list[_Pod], counts: dict[str, Any],
                conditions: list[dict[str, Any]]) -> None:
        interim, terminal, reason = ending
        message = {"CompletionsReached": COMPLETE_MESSAGE, "BackoffLimitExceeded": BACKOFF_MESSAGE,
                   "DeadlineExceeded": DEADLINE_MESSAGE}[reason]
        for pod in active:  # the Job has failed: its pods that still run are killed and deleted
            pod.run.stop(wait=2.0)
            self._delete_pod(pod.name)
        counts = {**counts, "active": 0, "ready": 0, "terminating": 0}
        if terminal == "Failed":  # the pods it killed count as failed
            counts["failed"] += len(active)
        conditions = [*conditions, _condition(interim, "True", reason, message)]
        self._write({**counts, "conditions": conditions})
        final = {**counts, "conditions": [*conditions, _condition(terminal, "True", reason, message)]}
        if terminal == "Complete":
            final["completionTime"] = _now()
            record_event(self.store, self.job, "Completed", "Job completed", component=_COMPONENT)
        else:
            record_event(self.store, self.job, reason, message, type="Warning", component=_COMPONENT)
        self._write(final)

    # --- pods -----------------------------------------------------------------------------------------

    def _create_pod(self, index: int | None) -> None:
        template = copy.deepcopy((self.job.get("spec") or {}).get("template") or {})
        prefix = f"{self.name}-{index}-" if index is not None else f"{self.name}-"
        name = prefix + "".join(random.choices(_SUFFIX, k=5))
        meta = template.get("metadata") or {}
        labels = {**(meta.get("labels") or {}), **job_labels(self.name, self.uid)}
        annotations = dict(meta.get("annotations") or {})
        spec = template.get("spec") or {}
        if index is not None:
            labels[COMPLETION_INDEX] = annotations[COMPLETION_INDEX] = str(index)
            for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
                env = [e for e in container.get("env") or [] if e.get("name") != "JOB_COMPLETION_INDEX"]
                container["env"] = [*env, {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}]
        if self.nodes:
            spec["nodeName"] = self.nodes[self._created % len(self.nodes)]
        self._created += 1
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "generateName": prefix, "namespace": self.namespace, "labels": labels,
                            "annotations": annotations,
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": self.name,
                                                 "uid": self.uid, "controller": True, "blockOwnerDeletion": True}]},
               "spec": spec, "status": {"phase": "Pending"}}
        stored = self.store.create(Key("", "pods", self.namespace, name), pod)
        record_event(self.store, self.job, "SuccessfulCreate", f"Created pod: {name}", component=_COMPONENT)
        uid = str(stored["metadata"].get("uid", ""))
        run = LocalPod(stored, pod_workdir(self.home, self.namespace, name, uid), self._reporter(name),
                       pod_run_dir(self.home, self.namespace, name, uid))
        with self._lock:
            self.pods[name] = _Pod(name, index, run)
        run.start()

    def _reporter(self, name: str) -> Callable[[dict[str, Any]], None]:
        def report(status: dict[str, Any]) -> None:
            key = Key("", "pods", self.namespace, name)
            with contextlib.suppress(NotFound), self.store.transaction():
                pod = self.store.get(key)
                self.store.update(key, {**pod, "status": status}, subresource="status")
            with self._lock:
                if name in self.pods:
                    self.pods[name].phase = str(status.get("phase", "Pending"))
            self._wake.set()
        return report

    def _adopt_pods(self) -> None:
        """Pods of this Job that an earlier run left unfinished: those whose processes ran on (the server was
        killed) are followed again from their records (:meth:`LocalPod.resume`), never started twice, and count
        once when they end, even where they ended while no server ran; those with nothing to follow (the last
        server stopped and ended them, or the machine restarted) are deleted, and this run makes their
        replacements."""
        for pod in self.store.list_objects("", "pods", self.namespace)[0]:
            owned = any(ref.get("uid") == self.uid for ref in pod["metadata"].get("ownerReferences") or [])
            if not owned or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            name, uid = str(pod["metadata"]["name"]), str(pod["metadata"].get("uid", ""))
            run = LocalPod.resume(pod, pod_workdir(self.home, self.namespace, name, uid), self._reporter(name),
                                  pod_run_dir(self.home, self.namespace, name, uid))
            if run is None:
                self._delete_pod(name)
                continue
            index = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
            with self._lock:
                self.pods[name] = _Pod(name, int(index) if index is not None and str(index).isdigit() else None, run)
                self.pods[name].phase = str((pod.get("status") or {}).get("phase", "Pending"))
            run.start_following()

    def _delete_pod(self, name: str) -> None:
        with contextlib.suppress(NotFound):
            pod = self.store.delete(Key("", "pods", self.namespace, name))
            record_event(self.store, self.job, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}",
                         component=_COMPONENT)

    def _write(self, fields: Mapping[str, Any]) -> None:
        """Merge ``fields`` into the Job's status (of this Job: not a new one of the same name)."""
        with self.store.transaction():
            job = self.store.get(self.key)
            if str(job["metadata"].get("uid", "")) != self.uid:
                raise NotFound(self.key)
            status = {**(job.get("status") or {}), **fields}
            if status != job.get("status"):
                self.job = self.store.update(self.key, {**job, "status": status}, subresource="status")
