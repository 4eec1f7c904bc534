"""Jobs under the queue: their pod templates by pod set, started on admission, stopped on eviction.

On admission Kueue un-suspends the job and adds, to each pod set's template, the nodeSelector of the
flavors it was given (their ``nodeLabels``) and their tolerations, then what its Ready admission checks'
``podSetUpdates`` ask (labels, annotations, nodeSelector, tolerations; a key they set that the template holds with
another value is a conflict, and the job is not started). On eviction it suspends the job again and puts the
templates back as they were (the Workload keeps the originals).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from flexq.api import copy_json
from flexq.jobs import COMPLETIONS_EQUAL_PARALLELISM, MIN_PARALLELISM
from flexq.scheduler import Admission, FlavorSpec, PodSetUpdate, toleration, toleration_object, with_updates

__all__ = ["finish_message", "finished", "inject", "place", "restore", "templates", "update_pods"]


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
           updates: Mapping[str, list[tuple[str, PodSetUpdate]]] | None = None) -> str | None:
    """Start the job on its flavors: un-suspend, add the flavors' node labels and tolerations, and what the
    admission checks' ``updates`` (by pod set) ask of its pods (a ProvisioningRequest's consume-provisioning-request
    annotation, the node selector of the nodes it brought). Or say why it cannot start (an update conflicting with
    its template): ``job`` is then half changed, not to be written."""
    by_podset = {ps.name: ps for ps in admission.podsets}
    # A job that runs already (an elastic job's new slice) carries what its last admission gave it: the new one's
    # updates replace that, where a suspended job's template is its own and an update may not change it.
    own = job.get("spec", {}).get("suspend") is not False
    for name, holder, key in _slots(kind, job):
        assignment = by_podset.get(name)
        if assignment is None:
            continue
        template = holder.setdefault(key, {})
        place(template.setdefault("spec", {}), assignment.flavors.values(), flavors)
        conflict = update_pods(template.setdefault("metadata", {}), template["spec"], (updates or {}).get(name, []),
                               own=own)
        if conflict is not None:
            return conflict
        if kind == "Job":
            _run_with(job, assignment.count)
    job["spec"]["suspend"] = False
    return None


def update_pods(meta: dict[str, Any], spec: dict[str, Any], updates: list[tuple[str, PodSetUpdate]], *,
                own: bool = True) -> str | None:
    """Give a pod (or a pod template) what ``updates`` ask (Kueue's ``podset.Merge``): their labels, annotations and
    node selector added to its own, their tolerations appended (each once). Or, changing nothing, Kueue's message
    where one sets a key another update set with another value, or (``own``: what it holds is its own, not what an
    earlier admission gave it) a key it holds."""
    if not updates:
        return None

    def strings(field: str, where: Mapping[str, Any]) -> dict[str, str]:
        return {str(k): str(v) for k, v in (where.get(field) or {}).items()}

    held = tuple(toleration(t) for t in spec.get("tolerations") or [] if isinstance(t, Mapping))
    base = PodSetUpdate(strings("annotations", meta), strings("labels", meta), strings("nodeSelector", spec),
                        held) if own else PodSetUpdate(tolerations=held)
    info = with_updates(base, updates)
    if isinstance(info, tuple):
        return f'in admission check "{info[0]}": {info[1]}'
    for field, value, where in (("annotations", info.annotations, meta), ("labels", info.labels, meta),
                                ("nodeSelector", info.node_selector, spec)):
        merged = {**strings(field, where), **value}
        if merged:
            where[field] = merged
    added = [toleration_object(t) for t in info.tolerations[len(held):]]
    if added:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *added]
    return None


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
        for entry in map(toleration_object, flavor.tolerations):
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
