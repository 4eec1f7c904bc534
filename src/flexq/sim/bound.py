"""The clairvoyant lower bound: for each job, the earliest moment any pool could have held it.

Each job is looked at alone, as if no other job existed, by someone who knows the future of the
cloud (stock-outs, traces, every queued-provisioning answer). A pod set can start on a flavor of its
ClusterQueue when:

- the ClusterQueue could ever hold it there (its nominal quota plus what it may borrow);
- a node pool matches the flavor and can grow to the nodes the pod set needs (whole slices);
- for an on-demand pool, the cloud can deliver that many machines at that moment or could at some
  earlier moment (a stock-out stops new machines, not those a pool already has: someone who knows the
  future gets them before it and keeps them);
- for a queued-provisioning pool, a ProvisioningRequest made at or after the submission is answered
  then (each of the workload's possible attempts, with the answer the emulated cloud would give it),
  and the machines are obtainable at that moment.

Boot time is not counted (nodes another job left behind may be up already), so no policy can start
a job earlier than this bound: it is what a perfect scheduler with unlimited foresight could reach
when jobs do not compete. A job's bound is the latest of its pod sets' earliest moments.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from flexq.capacity import PROVISIONING_EXPIRY, CapacityConfig, Cluster, EmulatedCloud, NodePoolSpec, PodGroup
from flexq.scheduler import Config, PodSet, QuotaTree, Workload, node_matches

__all__ = ["Earliest", "candidate_flavors", "lower_bound", "nodes_needed", "obtainable_from"]

MAX_ATTEMPTS = 16
"""Queued-provisioning attempts considered per workload (Kueue retries 3 times by default; requeues add more)."""


@dataclass(frozen=True, slots=True)
class Earliest:
    """The earliest start of one job and the flavor of each pod set that gives it (None: no flavor can)."""

    start: float | None
    flavors: Mapping[str, str]


def lower_bound(config: Config, capacity: CapacityConfig | None, workloads: Iterable[Workload],
                submitted: Mapping[str, float], horizon: float) -> dict[str, Earliest]:
    """The earliest start of each workload, alone, knowing the future, up to ``horizon``."""
    tree = QuotaTree(config.cluster_queues.values(), config.cohorts.values())
    cluster = Cluster(capacity.pools, capacity.cloud) if capacity is not None else None
    out: dict[str, Earliest] = {}
    for wl in workloads:
        since = submitted.get(wl.key, wl.created)
        start: float | None = since
        chosen: dict[str, str] = {}
        for podset in wl.podsets:
            best: tuple[float, str] | None = None
            for flavor in candidate_flavors(config, tree, wl.cluster_queue, podset):
                at = _earliest_on(config, cluster, wl, podset, flavor, since, horizon)
                if at is not None and (best is None or at < best[0]):
                    best = (at, flavor)
            if best is None:
                start = None
                break
            chosen[podset.name] = best[1]
            start = max(start, best[0]) if start is not None else None
        out[wl.key] = Earliest(start, chosen if start is not None else {})
    return out


def candidate_flavors(config: Config, tree: QuotaTree, cq_name: str, podset: PodSet) -> list[str]:
    """The flavors of ``cq_name`` that could ever hold ``podset`` by quota: in each resource group covering some
    of its requests, the flavors whose potential quota holds them (none at all if a group has none, or a request
    is in no group). With several groups each picks its own flavor; the bound takes the best of all of them,
    which is looser than pairing them but never above what a pairing could reach."""
    cq = config.cluster_queues.get(cq_name)
    if cq is None or cq_name not in tree.queues:
        return []
    requested = [r for r, v in podset.requests.items() if v]
    if any(cq.group_of(r) is None for r in requested):
        return []
    names: list[str] = []
    for group in cq.groups:
        mine = [r for r in requested if r in group.covered]
        if not mine:
            continue
        fitting = [f for f in group.flavors if _selectable(config, f, podset)
                   and all(tree.potential(cq_name, (f, r)) >= podset.total(r) for r in mine)]
        if not fitting:
            return []
        names.extend(fitting)
    return names


def _selectable(config: Config, flavor: str, podset: PodSet) -> bool:
    """The flavor's labels agree with the pod set's selector and affinity, and its taints are tolerated."""
    spec = config.flavors.get(flavor)
    if spec is None:
        return False
    if not node_matches(podset, spec):
        return False
    return all(any(t.tolerates(taint) for t in podset.tolerations) for taint in spec.node_taints)


def _earliest_on(config: Config, cluster: Cluster | None, wl: Workload, podset: PodSet, flavor: str,
                 since: float, horizon: float) -> float | None:
    if cluster is None:
        return since
    spec = config.flavors[flavor]
    selector = {**podset.node_selector, **spec.node_labels}
    group = PodGroup(podset.name, podset.count, dict(podset.requests), selector,
                     podset.tolerations + spec.tolerations)
    pool = cluster.pool_for(group)
    if pool is None:
        if cluster.pools and "cloud.google.com/gke-nodepool" in selector:
            return None  # a pool is named that does not exist: it never runs
        return since  # not capacity-modelled
    need = nodes_needed(pool, podset)
    if need is None:
        return None
    limit = pool.max_nodes if pool.autoscaling else pool.initial_nodes
    if need > limit:
        return None
    cloud = cluster.cloud
    if pool.queued_provisioning:
        checks = [name for name, _only in config.cluster_queues[wl.cluster_queue].checks]
        names = [f"{wl.name}-{check}-{n}" for check in checks or ["dws-prov"] for n in range(1, MAX_ATTEMPTS + 1)]
        return _queued(cloud, pool, need, names, since, horizon)
    # Machines obtained before a stock-out stay (a stock-out stops new machines, not running ones): a pool
    # that could ever have had them by ``since`` could hold the job from ``since`` on.
    first = obtainable_from(cloud, pool, need, 0.0, horizon)
    return None if first is None else max(since, first)


def nodes_needed(pool: NodePoolSpec, podset: PodSet) -> int | None:
    """Nodes of ``pool`` that ``podset`` needs at least: pods packed by the scarcest resource, whole slices."""
    allocatable = pool.machine.allocatable()
    per_node = math.inf
    for resource, amount in podset.requests.items():
        if amount <= 0:
            continue
        have = allocatable.get(resource, 0)
        if have < amount:
            return None
        per_node = min(per_node, have // amount)
    nodes = podset.count if per_node == math.inf else -(-podset.count // int(per_node))
    hosts = pool.hosts_per_slice
    if hosts > 1:
        if nodes > hosts:
            return None  # a TPU pod set runs within one slice
        nodes = hosts
    return nodes


def obtainable_from(cloud: EmulatedCloud, pool: NodePoolSpec, need: int, t: float, horizon: float) -> float | None:
    """The first moment at or after ``t`` (up to ``horizon``) the cloud can deliver ``need`` machines."""
    machine = pool.machine.name
    while t <= horizon:
        if cloud.obtainable(pool.name, machine, t) >= need:
            return t
        nxt = cloud.next_change(pool.name, machine, t)
        if nxt is None:
            return None
        t = nxt
    return None


def _queued(cloud: EmulatedCloud, pool: NodePoolSpec, need: int, names: list[str], since: float,
            horizon: float) -> float | None:
    """The earliest answer of a ProvisioningRequest made at or after ``since`` under any of ``names``."""
    machine = pool.machine.name
    spec = cloud.spec(pool.name, machine)
    moments = [since, *sorted(when for when, _d in spec.queued_trace if since < when <= horizon)]
    best: float | None = None
    for asked in moments:
        for name in names:
            delay = cloud.queued_delay(pool.name, machine, name, asked)
            if delay is None or delay >= PROVISIONING_EXPIRY:
                continue
            at = obtainable_from(cloud, pool, need, asked + delay, horizon)
            if at is not None and (best is None or at < best):
                best = at
    return best


def bound_rows(rows: Iterable[Mapping[str, Any]], earliest: Mapping[str, Earliest],
               run_for: Mapping[str, float | None]) -> list[dict[str, Any]]:
    """Rows in the shape of :meth:`SimResult.summary`'s for the bound: started at the earliest moment."""
    out = []
    for row in rows:
        key = str(row["workload"])
        e = earliest.get(key)
        start = e.start if e is not None else None
        duration = run_for.get(key)
        finished = start + duration if start is not None and duration is not None else None
        podsets = {ps: {"*": f} for ps, f in (e.flavors.items() if e is not None else ())}
        out.append({
            "workload": key, "job": row.get("job"), "clusterQueue": row.get("clusterQueue"),
            "submitted": row.get("submitted"), "quotaReserved": start, "admitted": start, "started": start,
            "finished": finished,
            "wait": None if start is None else round(start - float(row["submitted"]), 3),
            "flavors": podsets or None, "class": row.get("class"), "state": "Finished" if finished is not None else
            ("Admitted" if start is not None else "Pending"), "pendingReason": None,
        })
    return out
