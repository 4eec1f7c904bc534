"""Kueue's job webhook: a queued job is created suspended; a job with no queue is refused.

A Pod labelled with a queue is gated instead (:func:`flexq.jobs.pods.pod_webhook`); a Pod without the label
is not Kueue's and is left alone. A RayJob, RayCluster or Job labelled ``kueue.x-k8s.io/queue-name`` is
created with ``spec.suspend: true`` and stays so until its workload is admitted. A job without the label goes
to its namespace's LocalQueue named ``default`` when there is one (the label is added), and is refused
otherwise. A RayJob on an existing RayCluster (``spec.clusterSelector``) is not Kueue's either, as Kueue skips
it: it runs at once on that cluster, whose own workload holds the quota. The queue label of a job that is not
suspended (admitted: the queue started it) cannot change, as in Kueue; while it waits, it can. A job whose pod
templates' topology annotations Kueue refuses (:mod:`flexq.jobs.topology_annotations`) is refused, the template's
field named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flexq.api import FieldError, InvalidObject, KindInfo, resolve
from flexq.jobs.pods import pod_webhook
from flexq.jobs.topology_annotations import TopologyRequestError
from flexq.jobs.workload import (
    DEFAULT_QUEUE,
    JOB_KINDS,
    MIN_PARALLELISM,
    QUEUE_LABEL,
    JobError,
    job_pods,
    podsets,
    ray_cluster_spec,
    selected_cluster,
)
from flexq.objects import ObjectService
from flexq.store import NotFound

__all__ = ["job_webhook", "job_webhook_for"]


def job_webhook_for(managed: Callable[[str], bool]) -> Callable[[ObjectService, KindInfo, dict[str, Any],
                                                                  dict[str, Any] | None], None]:
    """:func:`job_webhook` for the job kinds ``managed`` says Kueue's Configuration manages (its
    ``integrations.frameworks``): a job of another kind is left as written, as Kueue leaves it (not suspended, no
    queue needed)."""

    def hook(service: ObjectService, info: KindInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if managed(info.kind):
            job_webhook(service, info, obj, old)

    return hook


def job_webhook(service: ObjectService, info: KindInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    if info.kind == "Pod" and not info.group:
        pod_webhook(obj, old)
        return
    if info.kind not in JOB_KINDS or selected_cluster(info.kind, obj) is not None:
        return
    meta = obj["metadata"]
    labels = meta.setdefault("labels", {})
    if old is not None and not old.get("spec", {}).get("suspend", True):
        _queue_kept(info, obj, old)
    if info.kind == "Job":
        _partial_admission(info, obj, old)
    _topology(info, obj)
    if QUEUE_LABEL not in labels:
        namespace = meta.get("namespace") or "default"
        try:
            service.store.get(service.key(resolve("localqueue"), namespace, DEFAULT_QUEUE))
        except NotFound:
            raise InvalidObject("request", 0, info.kind, meta.get("name", ""), [FieldError(
                "metadata.labels",
                f"Required value: label {QUEUE_LABEL} names the LocalQueue to submit to (for example "
                f"{QUEUE_LABEL}: user-queue); namespace {namespace} has no LocalQueue named {DEFAULT_QUEUE!r} "
                "to use instead")]) from None
        labels[QUEUE_LABEL] = DEFAULT_QUEUE
    if old is None:
        obj["spec"]["suspend"] = True
    else:
        # The queue decides when the job runs: keep the suspension the controller set.
        obj["spec"]["suspend"] = old.get("spec", {}).get("suspend", True)


def _topology(info: KindInfo, obj: dict[str, Any]) -> None:
    """Kueue's webhooks refuse a job whose pod templates' topology annotations they refuse (Kueue's
    ``ValidateTASPodSetRequest`` and, for a Ray job, ``ValidatePodSetGroupingTopology``), naming the template's
    field."""
    try:
        podsets(info.kind, obj)
    except JobError as exc:
        cause = exc.__cause__
        if not isinstance(cause, TopologyRequestError):
            return  # not a topology problem: the controller tells it (FailedToCreateWorkload), as before
        path = _template_paths(info.kind, obj).get(cause.where, "")
        raise InvalidObject("request", 0, info.kind, obj["metadata"].get("name", ""), [FieldError(
            f"{path}.{cause.field}" if path else cause.field, cause.detail)]) from None
    except (KeyError, TypeError, ValueError):
        return  # a malformed spec: refused by its schema, or told by the controller


def _template_paths(kind: str, obj: dict[str, Any]) -> dict[str, str]:
    """Each pod set's template, by the ``pod set <name>`` its errors name, as a field path of the job."""
    if kind == "Job":
        return {"pod set main": "spec.template"}
    base = "spec" if kind == "RayCluster" else "spec.rayClusterSpec"
    groups = ray_cluster_spec(kind, obj).get("workerGroupSpecs") or []
    return {"pod set head": f"{base}.headGroupSpec.template",
            **{f"pod set {g.get('groupName')}": f"{base}.workerGroupSpecs[{i}].template" for i, g in enumerate(groups)}}


def _queue_kept(info: KindInfo, obj: dict[str, Any], old: dict[str, Any]) -> None:
    """Kueue's rule for a job that is not suspended (admitted, running): its queue is fixed."""
    queue = obj["metadata"]["labels"].get(QUEUE_LABEL, "")
    if queue != (old["metadata"].get("labels") or {}).get(QUEUE_LABEL, ""):
        raise InvalidObject("request", 0, info.kind, obj["metadata"].get("name", ""), [FieldError(
            f"metadata.labels[{QUEUE_LABEL}]", f'Invalid value: "{queue}": field is immutable')])


def _partial_admission(info: KindInfo, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """Kueue's rules for a Job's ``kueue.x-k8s.io/job-min-parallelism``: a whole number from 1 to one less than the
    pods the Job runs at once; and, while the Job runs (not suspended), its parallelism is fixed."""
    name = obj["metadata"].get("name", "")
    path = f"metadata.annotations[{MIN_PARALLELISM}]"
    value = (obj["metadata"].get("annotations") or {}).get(MIN_PARALLELISM)
    previous = ((old or {}).get("metadata", {}).get("annotations") or {}).get(MIN_PARALLELISM)
    if value is not None and (old is None or value != previous):
        try:
            least = int(str(value))
        except ValueError:
            raise InvalidObject("request", 0, info.kind, name, [FieldError(
                path, f'Invalid value: "{value}": strconv.Atoi: parsing "{value}": invalid syntax')]) from None
        pods = job_pods(obj)
        if least <= 0 or least >= pods:
            raise InvalidObject("request", 0, info.kind, name, [FieldError(
                path, f"Invalid value: {least}: should be between 0 and {pods - 1}")])
    if previous is not None and old is not None and not old.get("spec", {}).get("suspend", True):
        before, after = old.get("spec", {}).get("parallelism", 1), obj.get("spec", {}).get("parallelism", 1)
        if before != after:
            raise InvalidObject("request", 0, info.kind, name, [FieldError(
                "spec.parallelism", "Forbidden: cannot change when partial admission is enabled and the job is not "
                "suspended")])
