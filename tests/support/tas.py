"""What the topology-aware scheduling tests share: nodes as the scheduler reads them (:class:`Node`, :func:`node`), a
scheduler over a given set of them (:func:`tas_scheduler`, :func:`tas_queue`), a job of one topology-aware pod set
(:func:`tas_job`), where a workload's pods went (:func:`hosts_of`), and the objects of a 4x4 TPU slice scheduled by
sub-block (:data:`TPU_SLICE`), for the live server and the simulator alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    Quota,
    ResourceGroup,
    Taint,
    TopologyRequest,
    Workload,
)
from flexq.scheduler.scheduler import Config, Scheduler

CPU = 1000
"""One cpu, in the millicores the scheduler counts."""
BLOCK, RACK = "cloud.com/topology-block", "cloud.com/topology-rack"
"""The node labels of the block and rack levels of Kueue's TAS tests."""


@dataclass
class Node:
    """A node as the scheduler reads it: labels, allocatable, the pods on it; ``is_ready`` and ``booked_for`` as a
    capacity driver's node says them."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int] = field(default_factory=lambda: {"cpu": CPU, "pods": 10_000})
    taints: tuple[Taint, ...] = ()
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    is_ready: bool = True
    booked_for: str | None = None

    def ready(self, now: float) -> bool:
        return self.is_ready


def node(name: str, labels: Mapping[str, str], cpus: float = 1, *, pods: int = 10_000,
         extra: Mapping[str, int] | None = None, used: Mapping[str, int] | None = None, ready: bool = True,
         booked_for: str | None = None) -> Node:
    """A node of ``cpus`` cpus and ``extra`` other resources; ``used``: what a pod outside TAS holds of them."""
    allocatable = {"cpu": int(cpus * CPU), "pods": pods, **(extra or {})}
    return Node(name, dict(labels), allocatable, pods={"filler": used} if used else {}, is_ready=ready,
                booked_for=booked_for)


def tas_queue(name: str, flavors: Iterable[str], cpus: int, **spec: Any) -> ClusterQueueSpec:
    """A ClusterQueue of ``cpus`` cpus of each flavor (one resource group over cpu); ``spec``: its other fields."""
    names = tuple(flavors)
    group = ResourceGroup(("cpu",), names, {(f, "cpu"): Quota(cpus * CPU) for f in names})
    return ClusterQueueSpec(name, groups=(group,), **spec)


def tas_scheduler(nodes: Sequence[Node], flavors: Iterable[FlavorSpec], queues: Iterable[ClusterQueueSpec], *,
                  instant_eviction: bool = True, **config: Any) -> Scheduler:
    """A scheduler of these flavors and queues over ``nodes`` (the list itself: a test may change it between
    passes); ``config``: the other fields of its :class:`Config`."""
    s = Scheduler(Config({f.name: f for f in flavors}, {q.name: q for q in queues}, {}, **config),
                  instant_eviction=instant_eviction)
    s.nodes = lambda: nodes
    return s


def tas_job(name: str, pods: int, cpus: float, level: str, *, priority: int = 0, cq: str = "cq",
            podset: str = "main") -> Workload:
    """A job of one pod set of ``pods`` pods of ``cpus`` cpus, all required in one domain of ``level``."""
    ps = PodSet(podset, pods, {"cpu": int(cpus * CPU)}, topology=TopologyRequest(level, required=True))
    return Workload("default", name, "lq", cq, (ps,), priority=priority, uid=name)


def hosts_of(wl: Workload) -> dict[str, tuple[str, ...]]:
    """Per topology-aware pod set of an admitted workload: the hosts (lowest-level domains) it was placed on."""
    assert wl.admission is not None
    return {ps.name: tuple(values[-1] for values, _ in ps.topology.domains)
            for ps in wl.admission.podsets if ps.topology is not None}


TPU_SLICE = """apiVersion: kueue.x-k8s.io/v1beta1
kind: Topology
metadata: {name: gke-default}
spec:
  levels:
    - nodeLabel: cloud.google.com/gce-topology-block
    - nodeLabel: cloud.google.com/gce-topology-subblock
    - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: tpu-tas}
spec: {nodeLabels: {cloud.google.com/gke-nodepool: tpu-pool}, topologyName: gke-default}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: tpu-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [google.com/tpu]
      flavors: [{name: tpu-tas, resources: [{name: google.com/tpu, nominalQuota: 64}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: tpu-queue, namespace: default}
spec: {clusterQueue: tpu-cq}
---
apiVersion: batch/v1
kind: Job
metadata: {name: slice, namespace: default, labels: {kueue.x-k8s.io/queue-name: tpu-queue}}
spec:
  parallelism: 4
  completions: 4
  suspend: true
  template:
    metadata:
      annotations: {kueue.x-k8s.io/podset-required-topology: cloud.google.com/gce-topology-subblock}
    spec:
      restartPolicy: Never
      tolerations: [{key: google.com/tpu, operator: Exists, effect: NoSchedule}]
      containers:
        - {name: worker, image: busybox, resources: {requests: {google.com/tpu: 4}}}
"""
"""A 4x4 TPU slice's queue (topology ``gke-default``, flavor ``tpu-tas`` on pool ``tpu-pool``, 64 TPUs) and Job
``slice``: four pods of 4 TPUs, all required in one sub-block."""

__all__ = ["BLOCK", "CPU", "RACK", "TPU_SLICE", "Node", "hosts_of", "node", "tas_job", "tas_queue", "tas_scheduler"]
