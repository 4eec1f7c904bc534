"""A real cluster's queues and recent Workloads as a scenario: its traffic replayed under a capacity file.

The scenario (:mod:`flexq.sim.scenario`) holds, inline:

- ``spec.objects``: the cluster's queues, cleaned as for export (:func:`flexq.export.cleaning.clean`);
- ``spec.submit``: one job per Workload created in the window (``--since``), arriving when it was created
  (seconds after the first), made back from the Workload's pod sets: a RayJob when its owner was one or a
  pod set is called ``head`` (the head, then a worker group per other pod set, ``replicas`` its count),
  else a batch/v1 Job of ``count`` pods. The pod templates keep what placement reads (containers' images
  and resources, nodeSelector, tolerations, affinity, priorityClassName); the queue and a
  WorkloadPriorityClass go in the job's labels, as Kueue read them; a pod set's ``topologyRequest`` goes back
  to the ``kueue.x-k8s.io/podset-*-topology`` annotations that make it. ``runFor``: the time from admission
  to finish when the Workload finished, else ``--run-for``.
  Variants of a concurrently admitted workload (owned by a Workload) are left out: their parent stands
  for them.
- ``spec.capacity``: the capacity file, as given (pools and the emulated cloud).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from flexq.export import clean
from flexq.importer.cluster_read import ClusterState
from flexq.jobs import request_annotations, request_from_object

__all__ = ["Imported", "build_scenario", "workload_job"]

POD_FIELDS: Final = ("nodeSelector", "tolerations", "affinity", "priorityClassName")
CONTAINER_FIELDS: Final = ("name", "image", "resources")
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"


@dataclass
class Imported:
    """The scenario's text and what went into it."""

    text: str
    objects: int = 0
    jobs: int = 0
    finished: int = 0
    skipped: list[str] = field(default_factory=list)


def _time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


def _condition(workload: Mapping[str, Any], kind: str) -> datetime.datetime | None:
    for cond in (workload.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return _time(cond.get("lastTransitionTime"))
    return None


def _template(podset: Mapping[str, Any], restart: str | None) -> dict[str, Any]:
    spec = (podset.get("template") or {}).get("spec") or {}
    pod: dict[str, Any] = {k: spec[k] for k in POD_FIELDS if spec.get(k)}
    for key in ("initContainers", "containers"):
        if spec.get(key):
            pod[key] = [{k: c[k] for k in CONTAINER_FIELDS if k in c} for c in spec[key]]
    if restart:
        pod["restartPolicy"] = restart
    request = request_from_object(podset.get("topologyRequest"))
    if request is None:
        return {"spec": pod}
    return {"metadata": {"annotations": request_annotations(request)}, "spec": pod}


def _priority_label(spec: Mapping[str, Any]) -> str | None:
    ref = spec.get("priorityClassRef") or {}
    if ref.get("group") == "kueue.x-k8s.io" and ref.get("name"):
        return str(ref["name"])
    if spec.get("priorityClassSource") == "kueue.x-k8s.io/workloadpriorityclass" and spec.get("priorityClassName"):
        return str(spec["priorityClassName"])
    return None


def workload_job(workload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The job that would make ``workload`` again (None when its pod sets fit no job kind flexq knows)."""
    meta = workload.get("metadata") or {}
    spec = workload.get("spec") or {}
    podsets = [p for p in spec.get("podSets") or [] if isinstance(p, dict)]
    owner: dict[str, Any] = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") in ("RayJob", "Job")),
                                 {})
    labels = {QUEUE_LABEL: str(spec.get("queueName") or "default")}
    priority = _priority_label(spec)
    if priority:
        labels[PRIORITY_LABEL] = priority
    job_meta = {"name": str(owner.get("name") or meta.get("name")), "namespace": meta.get("namespace") or "default",
                "labels": labels}
    names = [str(p.get("name", "main")) for p in podsets]
    if owner.get("kind") == "RayJob" or "head" in names or len(podsets) > 1:
        head = next((p for p in podsets if p.get("name") == "head"), podsets[0] if podsets else None)
        if head is None or int(head.get("count", 1)) != 1:
            return None
        workers = [{"groupName": str(p.get("name")), "replicas": int(p.get("count", 1)), "numOfHosts": 1,
                    "rayStartParams": {}, "template": _template(p, None)}
                   for p in podsets if p is not head]
        cluster: dict[str, Any] = {"headGroupSpec": {"rayStartParams": {},
                                                     "template": _template(head, None)}}
        if workers:
            cluster["workerGroupSpecs"] = workers
        return {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": job_meta,
                "spec": {"entrypoint": "python main.py", "rayClusterSpec": cluster}}
    if not podsets:
        return None
    count = int(podsets[0].get("count", 1))
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
            "spec": {"parallelism": count, "completions": count,
                     "template": _template(podsets[0], "Never")}}


def build_scenario(state: ClusterState, capacity: Mapping[str, Any], *, name: str, context: str,
                   now: datetime.datetime, since: float | None, run_for: float) -> Imported:
    """The scenario text of ``state`` under ``capacity`` (a capacity file's mapping, checked by the caller)."""
    objects = [clean(o) for o in state.objects]
    imported = Imported("", objects=len(objects))
    start = now - datetime.timedelta(seconds=since) if since is not None else None
    recent = []
    for workload in state.workloads:
        meta = workload.get("metadata") or {}
        if any(o.get("kind") == "Workload" for o in meta.get("ownerReferences") or []):
            continue
        created = _time(meta.get("creationTimestamp"))
        if created is None or (start is not None and created < start):
            continue
        recent.append((created, str(meta.get("namespace", "")), str(meta.get("name", "")), workload))
    recent.sort(key=lambda r: r[:3])
    submit = []
    for created, namespace, wl_name, workload in recent:
        job = workload_job(workload)
        if job is None:
            imported.skipped.append(f"{namespace}/{wl_name}: its pod sets fit neither a RayJob nor a Job")
            continue
        admitted, finished = _condition(workload, "Admitted"), _condition(workload, "Finished")
        seconds = run_for
        if admitted is not None and finished is not None and finished >= admitted:
            seconds = (finished - admitted).total_seconds()
            imported.finished += 1
        submit.append({"at": round((created - recent[0][0]).total_seconds(), 3), "object": job,
                       "runFor": round(seconds, 3)})
    imported.jobs = len(submit)
    scenario = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": name},
                "spec": {"objects": objects, "submit": submit, "capacity": dict(capacity)}}
    window = f"created since {start.isoformat(timespec='seconds')}" if start is not None else "all"
    head = (f"# The queues and Workloads of {state.server} (context {context}, Kueue {state.kueue_version}),\n"
            f"# read {now.isoformat(timespec='seconds')} by `flexq import`: {len(objects)} objects, "
            f"{imported.jobs} jobs ({window}).\n# Replay: flexq simulate FILE\n")
    imported.text = head + yaml.safe_dump(scenario, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return imported
