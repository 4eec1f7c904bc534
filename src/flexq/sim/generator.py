"""Kueue's scheduler-performance generator format, so that the same config runs in Kueue and in flexq.

Kueue's runner (``test/performance/scheduler/runner/generator`` in kubernetes-sigs/kueue) reads configs
such as ``configs/baseline/generator.yaml``::

    cohorts:
      - className: cohort          # cohorts cohort-0 .. cohort-4
        count: 5
        queuesSets:
          - className: cq          # per cohort: ClusterQueues cq-<set>-<i>-<cohort>, i < count
            count: 6
            nominalQuota: 20       # cpu on the one ResourceFlavor, rf
            borrowingLimit: 100    # optional
            reclaimWithinCohort: Any           # preemption policies (default Never)
            withinClusterQueue: LowerPriority
            workloadsSets:
              - count: 350                     # rounds, in every ClusterQueue of the set
                creationIntervalMs: 100        # one workload every interval
                workloads:
                  - {className: small, runtimeMs: 200, priority: 50, request: 1}

and makes what Kueue's generator makes: the ResourceFlavor ``rf`` (or ``resourceFlavor.name``); per
ClusterQueue (cpu quota, cohort, preemption, every namespace) a Namespace and a LocalQueue of its name;
per workloads set, ``count`` rounds of its workloads, ``<className>-<set>-<round>-<i>`` in the queue's
namespace, each created one interval after the one before (the first after one interval), every set of
every queue at once from the start; each runs ``runtimeMs`` from its admission (Kueue's runner then marks
it finished; a preempted one starts over). Workloads are ``batch/v1`` Jobs of one pod requesting
``request`` cpu; their priority is a WorkloadPriorityClass ``priority-<value>`` (Kueue's runner writes the
value into the Workload). Topology-aware configs (``topology``, ``podCount``, ``tas*``) are refused.

Objects are built as plain documents, with no per-workload parsing or validation: Kueue's large-scale
config (50,000 workloads) loads in about a second.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from flexq.api import Document, InvalidObject, load_documents, parse_quantity, schema_errors
from flexq.api.models import Quantity, check_dns_label
from flexq.sim.arrivals import ScenarioError, Submission, read_text

__all__ = ["CLASS_LABEL", "is_generator", "load_generator", "load_generator_file"]

CLASS_LABEL: Final = "kueue.x-k8s.io/performance-scheduler-class"
"""The workload's or ClusterQueue's class, as Kueue's runner labels them."""

_KUEUE: Final = "kueue.x-k8s.io/v1beta2"
_NO_LINES: Final[dict[str, int]] = {}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_Count = Annotated[StrictInt, Field(ge=0)]


class _Workload(_Model):
    className: StrictStr
    runtimeMs: _Count = 0
    priority: StrictInt = 0
    request: Quantity


class _WorkloadsSet(_Model):
    count: _Count = 0
    creationIntervalMs: _Count = 0
    workloads: list[_Workload] = []


class _QueuesSet(_Model):
    className: StrictStr
    count: _Count = 0
    nominalQuota: Quantity
    borrowingLimit: Quantity | None = None
    reclaimWithinCohort: Literal["Never", "LowerPriority", "Any", ""] = "Never"
    withinClusterQueue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority", ""] = "Never"
    workloadsSets: list[_WorkloadsSet] = []


class _CohortSet(_Model):
    className: StrictStr
    count: _Count = 0
    queuesSets: list[_QueuesSet] = []


class _Flavor(_Model):
    name: StrictStr


class _Config(_Model):
    cohorts: Annotated[list[_CohortSet], Field(min_length=1)]
    resourceFlavor: _Flavor | None = None


def is_generator(obj: Any) -> bool:
    """Whether a parsed YAML document is a Kueue generator config (``cohorts``, no ``apiVersion``/``kind``)."""
    return isinstance(obj, dict) and "cohorts" in obj and "apiVersion" not in obj and "kind" not in obj


def load_generator_file(path: Path, source: str, offset: float = 0.0) -> tuple[list[Document], list[Submission]]:
    """Read a generator config; ``source`` names where it was referred to, for a file that cannot be read."""
    docs = load_documents(read_text(path, source), str(path))
    if len(docs) != 1 or not is_generator(docs[0].obj):
        raise ScenarioError(str(path), "expected one Kueue generator config (a mapping with cohorts:)")
    return load_generator(docs[0], offset)


def load_generator(doc: Document, offset: float = 0.0) -> tuple[list[Document], list[Submission]]:
    """The queue objects and the arriving jobs of a generator config, the jobs ``offset`` seconds later."""
    _refuse_topology(doc)
    errors = schema_errors(_Config, doc)
    if errors:
        raise InvalidObject(doc.source, doc.index, "generator config", "", errors)
    config = _Config.model_validate(doc.obj)
    flavor = config.resourceFlavor.name if config.resourceFlavor is not None else "rf"
    objects = [_document({"apiVersion": _KUEUE, "kind": "ResourceFlavor", "metadata": {"name": flavor}}, doc,
                         "resourceFlavor")]
    priorities: dict[int, str] = {}
    queues: dict[str, str] = {}
    timed: list[tuple[float, int, Document, float]] = []
    for where, cohort, queues_set, queue in _queues(config):
        if queue in queues:
            raise ScenarioError(doc.source, f"{where}: ClusterQueue {queue!r} is made twice (also by "
                                f"{queues[queue]}); give the cohort or queue sets different class names",
                                doc.line_of(where))
        queues[queue] = where
        _check_name(doc, f"{where}.className", queue, "ClusterQueue")
        objects.extend(_queue_objects(doc, where, queue, cohort, flavor, queues_set))
        for set_index, workloads_set in enumerate(queues_set.workloadsSets):
            set_where = f"{where}.workloadsSets[{set_index}]"
            jobs = [_JobShape(doc, f"{set_where}.workloads[{i}]", t, queue, set_index, priorities)
                    for i, t in enumerate(workloads_set.workloads)]
            if jobs:
                longest = jobs[-1].name(max(workloads_set.count - 1, 0), len(jobs) - 1)
                _check_name(doc, f"{set_where}.workloads", longest, "job")
            step = workloads_set.creationIntervalMs
            n = 0
            for round_ in range(workloads_set.count):
                for i, shape in enumerate(jobs):
                    n += 1
                    document = shape.job(round_, i)
                    timed.append((round(offset + n * step / 1000.0, 3), len(timed), document, shape.runtime))
    for value, name in sorted(priorities.items()):
        objects.append(_document({"apiVersion": _KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                                  "value": value}, doc, "cohorts"))
    timed.sort(key=lambda item: (item[0], item[1]))
    return objects, [Submission(at, document, runtime) for at, _, document, runtime in timed]


def _refuse_topology(doc: Document) -> None:
    if "topology" in doc.obj:
        raise ScenarioError(doc.source, "topology: topology-aware scheduling configs are not supported",
                            doc.line_of("topology"))
    for path, line in doc.lines.items():
        last = path.rsplit(".", 1)[-1]
        if last in ("tasConstraint", "tasLevel", "sliceSize", "podCount") or (path.startswith("resourceFlavor.")
                                                                    and last in ("nodeLabel", "topologyName")):
            raise ScenarioError(doc.source, f"{path}: topology-aware scheduling configs are not supported", line)


def _queues(config: _Config) -> Iterator[tuple[str, str, _QueuesSet, str]]:
    """``(path, cohort, queues set, ClusterQueue name)`` for every ClusterQueue, in file order."""
    for c, cohort_set in enumerate(config.cohorts):
        for cohort_index in range(cohort_set.count):
            cohort = f"{cohort_set.className}-{cohort_index}"
            for q, queues_set in enumerate(cohort_set.queuesSets):
                for queue_index in range(queues_set.count):
                    yield (f"cohorts[{c}].queuesSets[{q}]", cohort, queues_set,
                           f"{queues_set.className}-{q}-{queue_index}-{cohort}")


def _check_name(doc: Document, where: str, name: str, what: str) -> None:
    try:
        check_dns_label(name)
    except ValueError as exc:
        raise ScenarioError(doc.source, f"{where}: the {what} name {exc}", doc.line_of(where)) from None


def _document(obj: dict[str, Any], doc: Document, where: str) -> Document:
    return Document(obj, doc.source, doc.index, doc.line_of(where) or doc.line, _NO_LINES)


def _queue_objects(doc: Document, where: str, queue: str, cohort: str, flavor: str,
                   spec: _QueuesSet) -> list[Document]:
    quota: dict[str, Any] = {"name": "cpu", "nominalQuota": _quantity(spec.nominalQuota)}
    if spec.borrowingLimit is not None and spec.borrowingLimit != "":
        quota["borrowingLimit"] = _quantity(spec.borrowingLimit)
    labels = {CLASS_LABEL: spec.className}
    cluster_queue = {
        "apiVersion": _KUEUE, "kind": "ClusterQueue", "metadata": {"name": queue, "labels": labels},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [quota]}]}],
            "preemption": {"reclaimWithinCohort": spec.reclaimWithinCohort or "Never",
                           "withinClusterQueue": spec.withinClusterQueue or "Never"},
        },
    }
    return [
        _document(cluster_queue, doc, where),
        _document({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": queue}}, doc, where),
        _document({"apiVersion": _KUEUE, "kind": "LocalQueue", "metadata": {"name": queue, "namespace": queue},
                   "spec": {"clusterQueue": queue}}, doc, where),
    ]


@functools.lru_cache(maxsize=256)
def _quantity(value: str | int | float) -> str | int:
    return parse_quantity(value).to_json()


@functools.lru_cache(maxsize=256)
def _job_spec(cpu: str | int) -> dict[str, Any]:
    """A one-pod Job spec requesting ``cpu``, shared by every job of that size (documents are only read)."""
    container = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}
    return {"parallelism": 1, "completions": 1,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}


class _JobShape:
    """The parts every job of one workload template shares; :meth:`job` adds the name."""

    def __init__(self, doc: Document, where: str, template: _Workload, queue: str, set_index: int,
                 priorities: dict[int, str]) -> None:
        self.doc = doc
        self.line = doc.line_of(where) or doc.line
        self.queue = queue
        self.prefix = f"{template.className}-{set_index}-"
        self.runtime = template.runtimeMs / 1000.0
        priority = priorities.setdefault(template.priority, _priority_name(template.priority))
        self.labels = {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": priority,
                       CLASS_LABEL: template.className}
        self.spec = _job_spec(_quantity(template.request))

    def name(self, round_: int, index: int) -> str:
        return f"{self.prefix}{round_}-{index}"

    def job(self, round_: int, index: int) -> Document:
        obj = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{self.prefix}{round_}-{index}", "namespace": self.queue, "labels": self.labels},
               "spec": self.spec}
        return Document(obj, self.doc.source, self.doc.index, self.line, _NO_LINES)


def _priority_name(value: int) -> str:
    return f"priority-{value}" if value >= 0 else f"priority-minus-{-value}"
