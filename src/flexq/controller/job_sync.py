"""Jobs under the queue: their pod templates by pod set, started on admission, stopped on eviction.

On admission Kueue un-suspends the job and adds, to each pod set's template, the nodeSelector of the
flavors it was given (their ``nodeLabels``) and their tolerations. On eviction it suspends the job again
and puts the templates back as they were (the Workload keeps the originals).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from flexq.api import copy_json
from flexq.jobs import COMPLETIONS_EQUAL_PARALLELISM, MIN_PARALLELISM
from flexq.scheduler import Admission, FlavorSpec

__all__ = ["finish_message", "finished", "inject", "place", "restore", "templates"]


def _slots(kind: str, job: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(pod set name, the object holding its ``template``, key) for each pod set of the job."""
    spec = job.setdefault("spec", {})
    if kind in ("RayJob", "RayCluster"):
        cluster = spec if kind == "RayCluster" else (spec.get("rayClusterSpec") or {})
        if "headGroupSpec" in cluster:
            yield "head", cluster["headGroupSpec"], "template"
        for group in cluster.get("workerGroupSpecs") or []:
            yield str(group.get("groupName")), group, "template"
    elif kind == "Job":
        yield "main", spec, "template"


def templates(kind: str, job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: copy_json(holder.get(key) or {}) for name, holder, key in _slots(kind, job)}


def inject(kind: str, job: dict[str, Any], admission: Admission, flavors: Mapping[str, FlavorSpec],
           annotations: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """Start the job on its flavors: un-suspend, add the flavors' node labels and tolerations, and the
    annotations admission checks asked for (a ProvisioningRequest's consume-provisioning-request)."""
    by_podset = {ps.name: ps for ps in admission.podsets}
    for name, holder, key in _slots(kind, job):
        assignment = by_podset.get(name)
        if assignment is None:
            continue
        if annotations and annotations.get(name):
            meta = holder.setdefault(key, {}).setdefault("metadata", {})
            meta.setdefault("annotations", {}).update(annotations[name])
        place(holder.setdefault(key, {}).setdefault("spec", {}), assignment.flavors.values(), flavors)
        if kind == "Job":
            _run_with(job, assignment.count)
    job["spec"]["suspend"] = False


def _run_with(job: dict[str, Any], pods: int) -> None:
    """A Job that may be partially admitted runs with the pods it was admitted with (Kueue sets its parallelism,
    and its completions too where ``kueue.x-k8s.io/job-completions-equal-parallelism`` is ``"true"``)."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    if MIN_PARALLELISM not in annotations:
        return
    job["spec"]["parallelism"] = pods
    if str(annotations.get(COMPLETIONS_EQUAL_PARALLELISM, "")).lower() == "true":
        job["spec"]["completions"] = pods


def place(spec: dict[str, Any], given: Iterable[str], flavors: Mapping[str, FlavorSpec]) -> None:
    """Add to a pod spec the node labels and tolerations of the flavors ``given`` (as Kueue's admission does)."""
    selector = dict(spec.get("nodeSelector") or {})
    tolerations = list(spec.get("tolerations") or [])
    for flavor_name in sorted(set(given)):
        flavor = flavors.get(flavor_name)
        if flavor is None:
            continue
        selector.update(flavor.node_labels)
        for tol in flavor.tolerations:
            entry = {k: v for k, v in (("key", tol.key), ("operator", tol.operator), ("value", tol.value),
                                        ("effect", tol.effect)) if v}
            if entry not in tolerations:
                tolerations.append(entry)
    for field, value in (("nodeSelector", selector), ("tolerations", tolerations)):
        if value:
            spec[field] = value
        else:
            spec.pop(field, None)


def restore(kind: str, job: dict[str, Any], originals: Mapping[str, dict[str, Any]],
            counts: Mapping[str, int] | None = None) -> None:
    """Stop the job: suspend it and put the pod templates back as they were before admission (and a partially
    admitted Job's pods as its Workload asks for them: ``counts``, by pod set)."""
    for name, holder, key in _slots(kind, job):
        if name in originals:
            holder[key] = copy_json(originals[name])
    if kind == "Job" and counts and "main" in counts:
        _run_with(job, counts["main"])
    job["spec"]["suspend"] = True


def finished(kind: str, job: Mapping[str, Any]) -> str | None:
    """"Succeeded" or "Failed" once the job has ended, else None. A RayCluster never ends on its own: its
    workload stays admitted until the cluster is deleted (as in Kueue)."""
    status = job.get("status") or {}
    if kind == "RayCluster":
        return None
    if kind == "RayJob":
        deployment = status.get("jobDeploymentStatus")
        if deployment == "Complete" or status.get("jobStatus") == "SUCCEEDED":
            return "Succeeded" if status.get("jobStatus", "SUCCEEDED") == "SUCCEEDED" else "Failed"
        if deployment == "Failed" or status.get("jobStatus") in ("FAILED", "STOPPED"):
            return "Failed"
        return None
    for cond in status.get("conditions") or []:
        if cond.get("status") == "True" and cond.get("type") in ("Complete", "Failed"):
            return "Succeeded" if cond["type"] == "Complete" else "Failed"
    return None


def finish_message(kind: str, job: Mapping[str, Any], outcome: str) -> str:
    """What the job says about how it ended (its status message, or its Complete/Failed condition's), for its
    workload's ``Finished`` condition, as Kueue writes it."""
    status = job.get("status") or {}
    wanted = "Complete" if outcome == "Succeeded" else "Failed"
    message = str(status.get("message") or "") if kind == "RayJob" else next(
        (str(c.get("message") or "") for c in status.get("conditions") or []
         if c.get("status") == "True" and c.get("type") == wanted), "")
    return message or ("Job finished successfully" if outcome == "Succeeded" else "Job failed")
