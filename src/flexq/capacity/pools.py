"""Node pools and their nodes: labels and taints as GKE sets them, slices, and the pods bound to them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from flexq.capacity.catalog import MachineType, slice_hosts
from flexq.scheduler import Taint, Toleration

__all__ = ["FLEX_START_MAX_RUN", "Node", "NodePoolSpec"]

FLEX_START_MAX_RUN: Final = 7 * 24 * 3600.0
"""Flex-start VMs run for at most 7 days (``maxRunDurationSeconds``)."""


@dataclass(frozen=True, slots=True)
class NodePoolSpec:
    name: str
    machine: MachineType
    topology: str | None = None
    min_nodes: int = 0
    max_nodes: int = 0
    initial_nodes: int = 0
    autoscaling: bool = True
    flex_start: bool = False
    queued_provisioning: bool = False
    cluster: str = ""
    location: str = ""
    max_run_seconds: float | None = None
    price: float | None = None
    """USD per node-hour, in place of the catalog's price (a negotiated rate, a committed-use discount)."""
    ray_address: str = ""
    """The Ray dashboard of the existing Ray cluster whose nodes are the pool's (:mod:`flexq.capacity.raypool`)."""

    @property
    def hosts_per_slice(self) -> int:
        return slice_hosts(self.machine, self.topology)

    @property
    def hourly(self) -> float:
        if self.price is not None:
            return self.price
        return self.machine.flex_start_hourly if self.flex_start else self.machine.on_demand_hourly

    @property
    def run_limit(self) -> float | None:
        if self.max_run_seconds is not None:
            return self.max_run_seconds
        return FLEX_START_MAX_RUN if self.flex_start else None

    def labels(self) -> dict[str, str]:
        out = {"cloud.google.com/gke-nodepool": self.name, "node.kubernetes.io/instance-type": self.machine.name}
        if self.machine.tpu_chips:
            out["cloud.google.com/gke-tpu-accelerator"] = self.machine.tpu_accelerator
            if self.topology:
                out["cloud.google.com/gke-tpu-topology"] = self.topology
        if self.machine.gpus:
            out["cloud.google.com/gke-accelerator"] = self.machine.gpu_accelerator
        if self.flex_start:
            out["cloud.google.com/gke-flex-start"] = "true"
        if self.queued_provisioning:
            out["cloud.google.com/gke-queued"] = "true"
        return out

    def taints(self) -> tuple[Taint, ...]:
        out: list[Taint] = []
        if self.machine.tpu_chips:
            out.append(Taint("google.com/tpu", "present", "NoSchedule"))
        if self.machine.gpus:
            out.append(Taint("nvidia.com/gpu", "present", "NoSchedule"))
        if self.queued_provisioning:
            out.append(Taint("cloud.google.com/gke-queued", "true", "NoSchedule"))
        return tuple(out)

    def check(self) -> list[str]:
        """What gcloud would refuse about this pool (empty when it is fine)."""
        problems = []
        if self.ray_address:
            for flag, value in (("--enable-autoscaling", self.autoscaling), ("--flex-start", self.flex_start),
                                ("--enable-queued-provisioning", self.queued_provisioning),
                                ("--tpu-topology", self.topology), ("--num-nodes", self.initial_nodes)):
                if value:
                    problems.append(f"--ray-address: a node pool of a Ray cluster takes its nodes from the cluster, "
                                    f"so {flag} does not apply")
            return problems
        if self.queued_provisioning and not self.autoscaling:
            problems.append("--enable-queued-provisioning requires --enable-autoscaling")
        if self.queued_provisioning and self.initial_nodes:
            problems.append("--enable-queued-provisioning requires --num-nodes=0")
        if self.autoscaling and self.min_nodes > self.max_nodes:
            problems.append(f"--min-nodes ({self.min_nodes}) must not exceed --max-nodes ({self.max_nodes})")
        hosts = self.hosts_per_slice
        for flag, value in (("--max-nodes", self.max_nodes), ("--min-nodes", self.min_nodes),
                            ("--num-nodes", self.initial_nodes)):
            if value % hosts:
                problems.append(f"{flag}={value} is not a multiple of the {hosts} hosts of a "
                                f"{self.topology} {self.machine.name} slice")
        return problems


@dataclass(slots=True)
class Node:
    name: str
    pool: str
    slice_id: str
    created: float
    ready_at: float
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, int]
    expires_at: float | None = None
    used: dict[str, int] = field(default_factory=dict)
    pods: dict[str, dict[str, int]] = field(default_factory=dict)
    """workload key -> what its pods on this node request together"""
    idle_since: float | None = None
    booked_for: str | None = None
    """A ProvisioningRequest's workload that these nodes were provisioned for."""
    slot: int = -1
    """Its place in its pool's topology (:mod:`flexq.capacity.node_topology`); -1: none (a Ray cluster's node)."""
    down_since: float | None = None
    """When it went NotReady after it was ready (:mod:`flexq.capacity.nodehealth`); None: not down."""
    unreachable: bool = False
    """Down with its Ready condition Unknown (its kubelet no longer heard from), not False."""

    def ready(self, now: float) -> bool:
        return self.ready_at <= now and self.down_since is None

    def fits(self, requests: Mapping[str, int]) -> bool:
        return all(self.used.get(r, 0) + v <= self.allocatable.get(r, 0) for r, v in requests.items() if v)

    def tolerated(self, tolerations: tuple[Toleration, ...]) -> bool:
        return all(any(t.tolerates(taint) for t in tolerations) for taint in self.taints
                   if taint.effect in ("NoSchedule", "NoExecute"))

    def selected(self, selector: Mapping[str, str]) -> bool:
        return all(self.labels.get(k) == v for k, v in selector.items())
