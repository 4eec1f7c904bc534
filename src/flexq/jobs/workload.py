"""A job (RayJob, RayCluster, batch/v1 Job, a Pod) to the Workload Kueue would make for it.

Pod sets as Kueue forms them: a RayJob or RayCluster has ``head`` (1 pod) and one pod set per worker group,
named after the group, with ``replicas x numOfHosts`` pods; a Job has ``main`` with ``parallelism`` pods; a
plain Pod has ``main`` with itself (a pod group's pod sets are formed in :mod:`flexq.jobs.pods`).
A pod's requests are the sum of its containers' (a limit stands in for a missing request), or an init
container's if larger. The queue comes from the ``kueue.x-k8s.io/queue-name`` label, else the namespace's
LocalQueue named ``default``; the priority from ``kueue.x-k8s.io/priority-class``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from flexq.api import CLUSTER_SELECTOR_KEY
from flexq.errors import FlexqError
from flexq.jobs.topology_annotations import TopologyRequestError, check_groups, topology_request
from flexq.scheduler import PodSet, Workload, milli, node_affinity, toleration

__all__ = [
    "COMPLETIONS_EQUAL_PARALLELISM",
    "MAX_EXEC_LABEL",
    "MIN_PARALLELISM",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "RAY_KINDS",
    "JobError",
    "JobRef",
    "Priorities",
    "job_pods",
    "local_queues_of",
    "make_workload",
    "max_exec_seconds",
    "min_parallelism",
    "pod_requests",
    "podsets",
    "priority_class_ref",
    "ray_cluster_spec",
    "selected_cluster",
    "workload_name",
]

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
MAX_EXEC_LABEL: Final = "kueue.x-k8s.io/max-exec-time-seconds"
"""A job's bound on how long its workload may stay admitted, in all (Kueue's ``MaxExecTimeSecondsLabel``)."""
MIN_PARALLELISM: Final = "kueue.x-k8s.io/job-min-parallelism"
"""A Job's annotation: the fewest pods it may run with (Kueue's partial admission), below its parallelism."""
COMPLETIONS_EQUAL_PARALLELISM: Final = "kueue.x-k8s.io/job-completions-equal-parallelism"
"""A Job's annotation: ``"true"``: partially admitted, its completions are cut with its parallelism."""
DEFAULT_QUEUE: Final = "default"
JOB_KINDS: Final = frozenset({"RayJob", "RayCluster", "Job"})
RAY_KINDS: Final = frozenset({"RayJob", "RayCluster"})


def selected_cluster(kind: str, obj: Mapping[str, Any]) -> str | None:
    """The existing RayCluster a RayJob runs on (``spec.clusterSelector``), None for any other job. Such a RayJob
    is not Kueue's (Kueue skips it): it holds no quota of its own, and runs on the cluster's, which is queued."""
    if kind != "RayJob":
        return None
    selector = (obj.get("spec") or {}).get("clusterSelector") or {}
    return str(selector.get(CLUSTER_SELECTOR_KEY) or "") or None


class JobError(FlexqError, ValueError):
    """A job that cannot become a workload; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class JobRef:
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def workload_name(kind: str, name: str, uid: str, group: str) -> str:
    """Kueue's naming: ``<kind>-<job name>-<5 hex of a hash>``, within 253 characters."""
    digest = hashlib.sha1(f"{name}{uid}{group}{kind}".encode()).hexdigest()[:5]
    prefix = f"{kind.lower()}-{name}"[: 253 - 6]
    return f"{prefix}-{digest}"


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """Requests of one pod, in thousandths."""
    total: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        for resource, amount in _container_requests(container).items():
            total[resource] = total.get(resource, 0) + amount
    for container in pod_spec.get("initContainers") or []:
        for resource, amount in _container_requests(container).items():
            total[resource] = max(total.get(resource, 0), amount)
    return total


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: milli(value) for name, value in merged.items()}


def _podset(name: str, count: int, template: Mapping[str, Any]) -> PodSet:
    spec = template.get("spec") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    try:
        topology = topology_request(annotations, f"pod set {name}") if annotations else None
    except TopologyRequestError as exc:
        raise JobError(str(exc)) from exc
    return PodSet(
        name=name,
        count=count,
        requests=pod_requests(spec),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=tuple(toleration(t) for t in spec.get("tolerations") or []),
        affinity=node_affinity(spec),
        topology=topology,
    )


def job_pods(job: Mapping[str, Any]) -> int:
    """How many pods a batch/v1 Job runs at once, as Kueue counts them: its parallelism, at most its completions."""
    spec = job.get("spec") or {}
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def min_parallelism(job: Mapping[str, Any]) -> int | None:
    """A Job's ``kueue.x-k8s.io/job-min-parallelism`` (None: absent, or not a whole number; the webhook refuses
    such a job, so a stored one has a valid value)."""
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(MIN_PARALLELISM)
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def ray_cluster_spec(kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Ray cluster's spec of a RayJob (``spec.rayClusterSpec``) or a RayCluster (``spec``)."""
    spec = obj.get("spec") or {}
    return spec if kind == "RayCluster" else (spec.get("rayClusterSpec") or {})


def podsets(kind: str, obj: Mapping[str, Any]) -> tuple[PodSet, ...]:
    spec = obj.get("spec") or {}
    if kind in RAY_KINDS:
        cluster = ray_cluster_spec(kind, obj)
        out = [_podset("head", 1, cluster["headGroupSpec"]["template"])]
        for group in cluster.get("workerGroupSpecs") or []:
            count = int(group.get("replicas", 0)) * int(group.get("numOfHosts", 1))
            out.append(_podset(group["groupName"], count, group["template"]))
        try:
            check_groups([(ps.name, ps.count, ps.topology) for ps in out])
        except TopologyRequestError as exc:
            raise JobError(str(exc)) from exc
        return tuple(out)
    if kind == "Job":
        count = job_pods(obj)
        least = min_parallelism(obj)
        main = _podset("main", count, spec["template"])
        return (replace(main, min_count=least) if least is not None and 0 < least < count else main,)
    if kind == "Pod":
        return (_podset("main", 1, obj),)
    raise JobError(f"{kind} is not a job kind flexq queues (RayJob, RayCluster, Job, Pod)")


@dataclass(frozen=True, slots=True)
class Priorities:
    """What gives a workload its priority, in Kueue's order: the job's WorkloadPriorityClass label, else its pods'
    ``priorityClassName`` (a ``scheduling.k8s.io/v1`` PriorityClass), else the PriorityClass marked
    ``globalDefault``, else 0."""

    workload_classes: Mapping[str, int] = field(default_factory=dict)
    pod_classes: Mapping[str, int] = field(default_factory=dict)
    default: int = 0
    default_class: str = ""
    """The name of the PriorityClass whose value is :attr:`default` ("" where none is ``globalDefault``)."""

    @classmethod
    def of(cls, objects: Mapping[str, list[dict[str, Any]]]) -> Priorities:
        """From stored objects by kind (WorkloadPriorityClass, PriorityClass)."""
        pod_classes = {o["metadata"]["name"]: int(o.get("value", 0)) for o in objects.get("PriorityClass", [])}
        defaults = sorted((int(o.get("value", 0)), o["metadata"]["name"]) for o in objects.get("PriorityClass", [])
                          if o.get("globalDefault"))
        return cls({o["metadata"]["name"]: int(o.get("value", 0)) for o in objects.get("WorkloadPriorityClass", [])},
                   pod_classes, defaults[-1][0] if defaults else 0, defaults[-1][1] if defaults else "")


WORKLOAD_PRIORITY_CLASS: Final = ("kueue.x-k8s.io", "WorkloadPriorityClass")
POD_PRIORITY_CLASS: Final = ("scheduling.k8s.io", "PriorityClass")


def priority_class_ref(kind: str, obj: Mapping[str, Any], priorities: Priorities) -> dict[str, str] | None:
    """The class a job's workload takes its priority from, as Kueue's Workload ``spec.priorityClassRef`` names it
    (group, kind, name), in :class:`Priorities`' order; None where the priority is 0 for want of any."""
    label = ((obj.get("metadata") or {}).get("labels") or {}).get(PRIORITY_LABEL)
    pod_class = _pod_priority_class(kind, obj)
    if label is not None:
        (group, of), name = WORKLOAD_PRIORITY_CLASS, str(label)
    elif pod_class is not None or priorities.default_class:
        (group, of), name = POD_PRIORITY_CLASS, pod_class or priorities.default_class
    else:
        return None
    return {"group": group, "kind": of, "name": name}


def local_queues_of(objects: Mapping[str, list[dict[str, Any]]]) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue) -> its ClusterQueue, from stored objects by kind."""
    return {(o["metadata"].get("namespace") or "default", o["metadata"]["name"]): o["spec"]["clusterQueue"]
            for o in objects.get("LocalQueue", [])}


def _pod_priority_class(kind: str, obj: Mapping[str, Any]) -> str | None:
    """The ``priorityClassName`` of the job's pods (a Ray cluster: its head's, else its first worker group's)."""
    spec = obj.get("spec") or {}
    if kind in RAY_KINDS:
        cluster = ray_cluster_spec(kind, obj)
        templates = [(cluster.get("headGroupSpec") or {}).get("template") or {},
                     *((g.get("template") or {}) for g in cluster.get("workerGroupSpecs") or [])]
    elif kind == "Pod":
        templates = [obj]
    else:
        templates = [spec.get("template") or {}]
    return next((str(name) for t in templates if (name := (t.get("spec") or {}).get("priorityClassName"))), None)


def make_workload(
    kind: str,
    group: str,
    obj: Mapping[str, Any],
    *,
    local_queues: Mapping[tuple[str, str], str],
    priorities: Priorities,
    created: float,
    pod_sets: tuple[PodSet, ...] | None = None,
) -> Workload:
    """The Workload for a job. ``local_queues`` maps (namespace, LocalQueue) to its ClusterQueue; ``pod_sets``,
    if given, are the job's pod sets already read (jobs of one shape share them)."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    cluster = selected_cluster(kind, obj)
    if cluster is not None:
        raise JobError(f"{kind} {namespace}/{meta['name']} runs on the existing RayCluster {cluster} "
                       "(spec.clusterSelector): it has no workload of its own; the RayCluster's holds the quota")
    labels = meta.get("labels") or {}
    queue = labels.get(QUEUE_LABEL)
    if queue is None:
        if (namespace, DEFAULT_QUEUE) not in local_queues:
            raise JobError(
                f"{kind} {namespace}/{meta['name']} has no {QUEUE_LABEL} label and namespace {namespace} has no "
                f"LocalQueue named {DEFAULT_QUEUE!r}: add the label (e.g. {QUEUE_LABEL}: user-queue)")
        queue = DEFAULT_QUEUE
    priority = priorities.default
    priority_class = labels.get(PRIORITY_LABEL)
    pod_class = _pod_priority_class(kind, obj)
    if priority_class is not None:
        if priority_class not in priorities.workload_classes:
            raise JobError(f"{kind} {namespace}/{meta['name']}: WorkloadPriorityClass {priority_class!r} not found")
        priority = priorities.workload_classes[priority_class]
    elif pod_class is not None:
        if pod_class not in priorities.pod_classes:
            raise JobError(f"{kind} {namespace}/{meta['name']}: PriorityClass {pod_class!r} not found")
        priority = priorities.pod_classes[pod_class]
    uid = str(meta.get("uid", ""))
    return Workload(
        namespace=namespace,
        name=workload_name(kind, meta["name"], uid, group),
        queue=queue,
        cluster_queue=local_queues.get((namespace, queue), ""),
        podsets=pod_sets if pod_sets is not None else podsets(kind, obj),
        priority=priority,
        created=created,
        uid=uid,
        owner=str(JobRef(kind, namespace, meta["name"])),
        max_exec_seconds=max_exec_seconds(labels),
    )


def max_exec_seconds(labels: Mapping[str, Any]) -> int | None:
    """The job's ``kueue.x-k8s.io/max-exec-time-seconds``, as Kueue reads it (``MaximumExecutionTimeSecondsForObject``):
    a positive 32-bit integer, else none."""
    raw = labels.get(MAX_EXEC_LABEL)
    try:
        value = int(str(raw), 10)
    except ValueError:
        return None
    return value if 0 < value < 2**31 else None
