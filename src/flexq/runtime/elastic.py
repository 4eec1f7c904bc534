"""Elastic worker groups: a RayJob's Ray cluster grows and shrinks by worker nodes while its job runs.

An elastic RayJob (``kueue.x-k8s.io/elastic-job: "true"``) runs as a head node plus one Ray worker node per
worker pod, each started with its pod's resources (:meth:`LocalRayCluster.add_worker`). A TPU worker group
is counted in slices instead: the slices the job starts with are emulated on the head node, as for any job
(the guide's job runs so), and each slice it grows by is one more Ray worker node emulating a whole slice of
its own (its own ``TPU_NAME``, the slice-head resource, the chips of all its hosts). The number of
workers follows the admitted workload: :meth:`ElasticWorkers.resize` sets it, :meth:`ElasticWorkers.reconcile`
(called from the run's thread) starts or stops nodes to match, idle ones first when shrinking.

With ``enableInTreeAutoscaling``, flexq stands in for KubeRay's autoscaler sidecar: it reads the cluster's
pending resource demand from the GCS (Ray's autoscaler state, which the GCS keeps even with no autoscaler
running) and asks for more replicas, up to ``maxReplicas``, when tasks, actors or placement groups wait for
resources a new worker would have; workers idle for ``autoscalerOptions.idleTimeoutSeconds`` (60 by
default) are given back, down to ``minReplicas``. Asking means patching the RayJob's worker group
``replicas``, as KubeRay's autoscaler patches the RayCluster; the queue then admits (or not) the growth.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from flexq.jobs import pod_requests
from flexq.runtime.emulation import accelerators_for
from flexq.runtime.ray_cluster import WORKER_LABEL, LocalRayCluster

__all__ = ["ELASTIC_ANNOTATION", "ElasticWorkers", "GroupShape", "asks_tpu", "is_elastic", "leftover",
           "workers_needed"]

ELASTIC_ANNOTATION: Final = "kueue.x-k8s.io/elastic-job"
DEFAULT_IDLE_TIMEOUT: Final = 60.0
SETTLE: Final = 10.0
"""Seconds after a group was resized before its demand counts again (Ray reports demand with some lag)."""


def is_elastic(job: Mapping[str, Any]) -> bool:
    return (job.get("metadata", {}).get("annotations") or {}).get(ELASTIC_ANNOTATION) == "true"


def asks_tpu(group: Mapping[str, Any]) -> bool:
    return bool(pod_requests(((group.get("template") or {}).get("spec")) or {}).get("google.com/tpu"))


@dataclass(frozen=True, slots=True)
class GroupShape:
    """One worker group: what each of its Ray worker nodes offers, and its replica bounds (in pods).

    A group of CPUs or GPUs runs one Ray worker node per pod. A TPU group runs one per slice (``hosts`` pods,
    ``per_node``), emulated as the head emulates the job's first slices, which stay there (``on_head`` pods):
    only slices beyond those become worker nodes."""

    name: str
    cpus: int
    gpus: int
    resources: Mapping[str, float]
    hosts: int = 1
    min_pods: int = 0
    max_pods: int = 0
    env: Mapping[str, str] = field(default_factory=dict)
    """What the node's processes are started with (a slice's TPU environment)."""
    implied: Mapping[str, float] = field(default_factory=dict)
    """Resources Ray adds by itself from ``env`` (a slice's head and accelerator type): offered, not declared."""
    per_node: int = 1
    on_head: int = 0

    @property
    def unit(self) -> str:
        return "TPU slice(s)" if self.per_node > 1 or self.env else "worker node(s)"

    def offers(self) -> dict[str, float]:
        return {"CPU": float(self.cpus), **({"GPU": float(self.gpus)} if self.gpus else {}), **self.resources,
                **self.implied}

    def nodes_for(self, pods: int) -> int:
        """The worker nodes ``pods`` pods of the group make (the head's slices aside)."""
        return max(0, pods - self.on_head) // self.per_node

    def node_env(self, name: str) -> dict[str, str]:
        """The environment of node ``name``: a slice of its own (its own TPU_NAME, worker 0 of it)."""
        env = dict(self.env)
        if "TPU_NAME" in env:
            env["TPU_NAME"] = f"{env['TPU_NAME']}-{name}"
        return env

    @classmethod
    def of(cls, group: Mapping[str, Any]) -> GroupShape | None:
        """The group's shape; None for a TPU group on a host with real TPU chips (slices are not added there:
        Ray finds the host's chips itself)."""
        pod = ((group.get("template") or {}).get("spec")) or {}
        requests = pod_requests(pod)
        hosts = int(group.get("numOfHosts", 1))
        replicas = int(group.get("replicas", 1))
        bounds = int(group.get("minReplicas", replicas)) * hosts, int(group.get("maxReplicas", replicas)) * hosts
        name = str(group.get("groupName"))
        if requests.get("google.com/tpu"):
            emulated = accelerators_for([(dict(pod.get("nodeSelector") or {}), requests, hosts)], head_cpus=0)
            slice_type = emulated.env.get("TPU_ACCELERATOR_TYPE")
            if not slice_type:
                return None
            generation = slice_type.split("-")[0].upper()
            return cls(name, emulated.num_cpus, 0, dict(emulated.resources), hosts, *bounds, env=dict(emulated.env),
                       implied={f"TPU-{slice_type}-head": 1.0, f"accelerator_type:TPU-{generation}": 1.0},
                       per_node=hosts, on_head=replicas * hosts)
        return cls(name, max(1, math.ceil(requests.get("cpu", 1000) / 1000)),
                   requests.get("nvidia.com/gpu", 0) // 1000, {}, hosts, *bounds)


def leftover(demands: Sequence[tuple[Mapping[str, float], int]],
             free: Sequence[Mapping[str, float]]) -> list[tuple[Mapping[str, float], int]]:
    """The bundles (resources, count) of ``demands`` that do not fit, first fit, in the room ``free``."""
    bins = [dict(f) for f in free]
    out: list[tuple[Mapping[str, float], int]] = []
    for bundle, count in demands:
        wanted = {r: v for r, v in bundle.items() if v > 0}
        left = 0
        for _ in range(count):
            spare = next((b for b in bins if all(b.get(r, 0.0) >= v for r, v in wanted.items())), None)
            if spare is None or not wanted:
                left += 1
                continue
            for r, v in wanted.items():
                spare[r] -= v
        if left:
            out.append((bundle, left))
    return out


def workers_needed(demands: Sequence[tuple[Mapping[str, float], int]], shape: GroupShape,
                   free: Sequence[Mapping[str, float]] = ()) -> int:
    """How many new workers of ``shape`` the pending bundles (resources, count) would fill, first fit, after
    what the group's existing workers have ``free`` (as Ray's autoscaler packs demand onto running nodes first).
    Bundles no worker of the group could ever take are left out."""
    offer = shape.offers()
    pending = leftover([(bundle, count) for bundle, count in demands
                        if any(v > 0 for v in bundle.values())
                        and all(offer.get(r, 0.0) >= v for r, v in bundle.items() if v > 0)], free)
    new = 0
    while pending:  # first fit, one new worker at a time: each takes at least one bundle
        new += 1
        pending = leftover(pending, [offer])
    return new


@dataclass
class ElasticWorkers:
    """The worker nodes of an elastic job's cluster; thread-safe :meth:`resize`, the rest from the run thread."""

    shapes: dict[str, GroupShape]
    desired: dict[str, int]
    """group -> worker pods the admitted workload has"""
    log: Callable[[str], None]
    ask: Callable[[str, int], None] | None = None
    """Asks for a group's new size in pods (patches the RayJob); None when the job does not autoscale."""
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _serial: int = 0
    _idle_since: dict[str, float] = field(default_factory=dict)
    _asked: dict[str, int] = field(default_factory=dict)
    _resized_at: dict[str, float] = field(default_factory=dict)
    """When each group last changed size or gained a registered worker: its demand is stale for SETTLE seconds."""
    _registered: dict[str, int] = field(default_factory=dict)
    _seen: dict[str, int] = field(default_factory=dict)
    """The growth each group's demand asked for at the last look: growth is asked only when two looks agree."""

    @classmethod
    def for_job(cls, job: Mapping[str, Any], log: Callable[[str], None],
                ask: Callable[[str, int], None]) -> ElasticWorkers:
        cluster = (job.get("spec") or {}).get("rayClusterSpec") or {}
        raw = cluster.get("workerGroupSpecs") or []
        shapes = {s.name: s for s in (GroupShape.of(g) for g in raw) if s is not None}
        desired = {str(g.get("groupName")): int(g.get("replicas", 1)) * int(g.get("numOfHosts", 1)) for g in raw
                   if str(g.get("groupName")) in shapes}
        options = cluster.get("autoscalerOptions") or {}
        return cls(shapes, desired, log, ask if cluster.get("enableInTreeAutoscaling") else None,
                   float(options.get("idleTimeoutSeconds", DEFAULT_IDLE_TIMEOUT)))

    def resize(self, counts: Mapping[str, int], now: float | None = None) -> None:
        """The admitted pods per worker group (from the workload): reconcile will match them. ``now``: the
        monotonic clock (read when not given)."""
        with self._lock:
            for group, count in counts.items():
                if group in self.shapes and self.desired.get(group) != count:
                    self.desired[group] = count
                    self._asked.pop(group, None)
                    self._resized_at[group] = time.monotonic() if now is None else now

    @property
    def head_holds_slices(self) -> bool:
        """Whether the head node emulates the job's first TPU slices (else it runs no worker group's pods)."""
        return any(s.on_head for s in self.shapes.values())

    def adopt(self, cluster: LocalRayCluster) -> None:
        """The cluster was found again after a restart with worker nodes of its own: new ones are named after them."""
        serials = [int(n.rsplit("-", 1)[1]) for n in cluster.workers if n.rsplit("-", 1)[-1].isdigit()]
        self._serial = max([self._serial, *serials])

    def reconcile(self, cluster: LocalRayCluster) -> None:
        with self._lock:
            desired = dict(self.desired)
        for group, shape in self.shapes.items():
            mine = [n for n in cluster.workers if n.rsplit("-", 1)[0] == group]
            want = shape.nodes_for(desired.get(group, 0))
            if len(mine) == want:
                continue
            base = shape.on_head // shape.per_node
            self.log(f"flexq: worker group {group}: {base + len(mine)} -> {base + want} {shape.unit}\n")
            while len(mine) < want:
                self._serial += 1
                name = f"{group}-{self._serial}"
                cluster.add_worker(name, shape.cpus, dict(shape.resources), shape.gpus, shape.node_env(name))
                mine.append(name)
            idle_first = sorted(mine, key=lambda n: (n not in self._idle_since, -int(n.rsplit("-", 1)[1])))
            for name in idle_first[: len(mine) - want]:
                cluster.remove_worker(name)
                self._idle_since.pop(name, None)

    def autoscale(self, cluster: LocalRayCluster, now: float) -> None:
        """One look at the cluster's demand and idle workers; asks for a new size when it should change."""
        if self.ask is None:
            return
        status = _cluster_status(f"127.0.0.1:{cluster.gcs_port}")
        if status is None:
            return
        demands: list[tuple[Mapping[str, float], int]] = []
        summary = status.resource_demands
        for demand in [*summary.ray_task_actor_demand, *summary.placement_group_demand]:
            demands += [(b.bundle, b.count) for b in demand.bundles_by_count]
        nodes = {str((n.labels or {}).get(WORKER_LABEL)): n for n in [*status.active_nodes, *status.idle_nodes]}
        if "None" in nodes:  # the head (no worker label): what it has free takes demand first, as in Ray
            demands = leftover(demands, [_free(nodes["None"])])
        idle = {str((n.labels or {}).get(WORKER_LABEL)) for n in status.idle_nodes}
        for name in list(self._idle_since):
            if name not in idle:
                del self._idle_since[name]
        for name in idle & set(cluster.workers):
            self._idle_since.setdefault(name, now)
        with self._lock:
            desired = dict(self.desired)
        for group, shape in self.shapes.items():
            current = desired.get(group, 0)
            mine = [n for n in cluster.workers if n.rsplit("-", 1)[0] == group]
            starting = sum(1 for n in mine if n not in nodes)
            joined = len(mine) - starting
            if joined > max(self._registered.get(group, 0), shape.nodes_for(shape.min_pods)):
                # A worker asked for by demand just joined: the tasks waiting for it start now, but the demand
                # Ray reports still counts them for a while. Reading it now would ask for workers nobody needs.
                self._resized_at[group] = now
            self._registered[group] = joined
            free = [_free(nodes[n]) if n in nodes else shape.offers() for n in mine]
            needed = workers_needed(demands, shape, free)
            # Ray's demand is summed from each raylet's last report, so a task that is being spilled from one
            # node to another can be counted twice for a moment: only what two looks in a row agree on counts.
            grow = min(needed, self._seen.get(group, 0))
            self._seen[group] = needed
            settling = now - self._resized_at.get(group, -SETTLE) < SETTLE
            target = current
            if grow > 0 and not settling:
                target = min(shape.max_pods, current + -(-grow * shape.per_node // shape.hosts) * shape.hosts)
            elif not demands:
                expired = [n for n, since in self._idle_since.items()
                           if n.rsplit("-", 1)[0] == group and now - since >= self.idle_timeout]
                target = max(shape.min_pods, current - len(expired) * shape.per_node // shape.hosts * shape.hosts)
            if target != current and self._asked.get(group) != target:
                self._asked[group] = target
                self.ask(group, target)
            demands = [] if needed > 0 else demands  # a demand is asked of the first group that can take it


def _free(node: Any) -> dict[str, float]:
    """What a registered Ray node has free now, from its usage report (nothing when it sent none)."""
    usage = getattr(node, "resource_usage", None)
    return {u.resource_name: u.total - u.used for u in usage.usage} if usage is not None else {}


def _cluster_status(gcs_address: str) -> Any:
    """Ray's autoscaler view of the cluster from its GCS (None if it cannot be read now)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        from ray.autoscaler.v2.sdk import get_cluster_status

        return get_cluster_status(gcs_address, timeout=5)
    except Exception:  # the cluster may be starting or stopping: the next look will tell
        return None
