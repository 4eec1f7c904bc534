"""The cluster's nodes: placement of admitted pod sets, scale-up and scale-down, flex-start expiry.

All decisions take ``now`` and return what changed; nothing here reads a clock. Multi-host TPU pools
grow and shrink by whole slices (a 4x4 v6e slice is 4 hosts), and a TPU pod set is placed within one
slice, as GKE schedules a multi-host TPU job.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.node_topology import free_slot, topology_labels
from flexq.capacity.pools import Node, NodePoolSpec
from flexq.scheduler import Toleration

__all__ = ["Cluster", "Placement", "PodGroup", "PoolNodes"]


@dataclass(frozen=True, slots=True)
class PodGroup:
    """The pods of one pod set, as the scheduler of nodes sees them."""

    name: str
    count: int
    requests: Mapping[str, int]
    selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    domains: tuple[tuple[Mapping[str, str], int], ...] = ()
    """Its topology assignment, where it has one: per domain, the labels its nodes carry and how many pods go there."""


@dataclass(slots=True)
class Placement:
    """Where a workload's pods go: node per pod, or which pools still need how many nodes."""

    bindings: dict[str, list[str]] = field(default_factory=dict)
    """pod set -> node names, one per pod"""
    missing: dict[str, int] = field(default_factory=dict)
    """pool -> nodes still needed"""
    unplaceable: list[str] = field(default_factory=list)
    """pod sets no node of any pool can take"""
    oversized: dict[str, str] = field(default_factory=dict)
    """pod set -> why its pool can never hold it (more nodes than the pool's maximum)"""

    @property
    def complete(self) -> bool:
        return not self.missing and not self.unplaceable and not self.oversized


@dataclass(frozen=True, slots=True)
class PoolNodes:
    """A pool's nodes by state: booting until ready, not ready while down after it was ready (NotReady), busy while a
    pod is bound to it, else idle."""

    booting: int = 0
    idle: int = 0
    busy: int = 0
    not_ready: int = 0

    @property
    def total(self) -> int:
        return self.booting + self.idle + self.busy + self.not_ready


class Cluster:
    def __init__(self, pools: Iterable[NodePoolSpec], cloud: EmulatedCloud) -> None:
        self.pools = {p.name: p for p in pools}
        self.cloud = cloud
        self.nodes: dict[str, Node] = {}
        self._ids = itertools.count(1)
        self.on_created: Callable[[list[Node]], None] | None = None
        """Told of the nodes each scaling step creates (the driver wakes the workloads waiting for topology
        placement when they are ready)."""
        self.on_bound: Callable[[str, list[str]], None] | None = None
        """Told of a workload's pods bound and the nodes they went to (a taint they tolerate for a while only)."""

    def _created(self, nodes: list[Node]) -> list[Node]:
        if nodes and self.on_created is not None:
            self.on_created(nodes)
        return nodes

    # --- placement ---------------------------------------------------------------------------------

    def pool_for(self, group: PodGroup) -> NodePoolSpec | None:
        for pool in self.pools.values():
            labels = pool.labels()
            if all(labels.get(k) == v for k, v in group.selector.items()) and all(
                    any(t.tolerates(taint) for t in group.tolerations) for taint in pool.taints()):
                return pool
        return None

    def unmatched(self, group: PodGroup) -> bool:
        """No pool can ever hold ``group``, which asks for a node pool (by its name label): pools are modelled and
        none matches its labels and tolerations. (A group that names no pool is not capacity-modelled.)"""
        return bool(self.pools) and self.pool_for(group) is None and \
            any(k == "cloud.google.com/gke-nodepool" for k in group.selector)

    def why_unmatched(self, group: PodGroup) -> str:
        """Why no pool matches ``group``: a taint of the pool its labels select that it does not tolerate, or no
        pool with its labels."""
        for pool in self.pools.values():
            labels = pool.labels()
            if all(labels.get(k) == v for k, v in group.selector.items()):
                taints = [t for t in pool.taints() if not any(tol.tolerates(t) for tol in group.tolerations)]
                listed = ", ".join(f"{t.key}={t.value}:{t.effect}" for t in taints)
                return f"pod set {group.name} does not tolerate the taint {listed} of node pool {pool.name}"
        wanted = ",".join(f"{k}={v}" for k, v in sorted(group.selector.items()))
        return f"no node pool has the labels {wanted} of pod set {group.name}"

    def place(self, groups: Iterable[PodGroup], now: float, booked_for: str | None = None) -> Placement:
        """Find nodes for every pod of every group (no binding yet)."""
        placement = Placement()
        planned: dict[str, dict[str, int]] = {}
        for group in groups:
            pool = self.pool_for(group)
            if pool is None:
                if self.unmatched(group):
                    placement.unplaceable.append(group.name)
                continue  # no pool declared for it: not capacity-modelled
            chosen, found = self._fit(pool, group, now, planned, booked_for)
            hosts = pool.hosts_per_slice
            whole = -(-group.count // hosts) * hosts  # whole slices
            if chosen is None and pool.autoscaling and whole > pool.max_nodes:
                placement.oversized[group.name] = (
                    f"pod set {group.name} needs {whole} nodes of node pool {pool.name}, more than it can hold "
                    f"(--max-nodes={pool.max_nodes}): no scale-up can place it")
            elif chosen is None:  # the nodes found free are used, the pool adds the rest
                placement.missing[pool.name] = placement.missing.get(pool.name, 0) + whole - found
            else:
                placement.bindings[group.name] = chosen
                for node in chosen:
                    used = planned.setdefault(node, {})
                    for r, v in group.requests.items():
                        used[r] = used.get(r, 0) + v
        return placement

    def _fit(self, pool: NodePoolSpec, group: PodGroup, now: float, planned: dict[str, dict[str, int]],
             booked_for: str | None) -> tuple[list[str] | None, int]:
        """The nodes for the group's pods (None if they do not all fit), and how many free nodes it found (in a
        pool of multi-host slices, nodes of whole slices): the rest is what the pool must add."""
        def free(node: Node) -> bool:
            if not node.ready(now) or (node.booked_for and node.booked_for != booked_for):
                return False
            extra = planned.get(node.name, {})
            return node.tolerated(group.tolerations) and node.selected(group.selector) and all(
                node.used.get(r, 0) + extra.get(r, 0) + v <= node.allocatable.get(r, 0)
                for r, v in group.requests.items() if v)

        nodes = [n for n in self.nodes.values() if n.pool == pool.name]
        if group.domains:
            return self._fit_domains(nodes, group, free, planned)
        if pool.hosts_per_slice > 1:
            by_slice: dict[str, list[Node]] = {}
            for node in nodes:
                by_slice.setdefault(node.slice_id, []).append(node)
            # A slice's hosts are taken together: a group of several slices (replicas x numOfHosts) takes
            # whole slices, one replica each.
            picked: list[str] = []
            for slice_nodes in by_slice.values():
                take = min(pool.hosts_per_slice, group.count - len(picked))
                fitting = [n for n in slice_nodes if free(n)]
                if len(fitting) >= take:
                    picked += [n.name for n in fitting[:take]]
                    if len(picked) == group.count:
                        return picked, len(picked)
            return None, len(picked) // pool.hosts_per_slice * pool.hosts_per_slice
        chosen: list[str] = []
        for node in nodes:
            room = free(node)
            if room:
                chosen.append(node.name)
                if len(chosen) == group.count:
                    return chosen, len(chosen)
        return None, len(chosen)

    @staticmethod
    def _fit_domains(nodes: list[Node], group: PodGroup, free: Callable[[Node], bool],
                     planned: dict[str, dict[str, int]]) -> tuple[list[str] | None, int]:
        """A group placed by topology: so many pods on the nodes of each domain, as many on one node as it holds
        (Kueue's assignment may put several pods on one host). ``planned`` is left as it was."""
        picked: list[str] = []
        extra: dict[str, dict[str, int]] = {}
        try:
            for labels, count in group.domains:
                for _ in range(count):
                    node = next((n for n in nodes if n.selected(labels) and free(n)), None)
                    if node is None:
                        return None, 0
                    picked.append(node.name)
                    used = planned.setdefault(node.name, {})
                    mine = extra.setdefault(node.name, {})
                    for r, v in group.requests.items():
                        used[r] = used.get(r, 0) + v
                        mine[r] = mine.get(r, 0) + v
            return picked, len(picked)
        finally:
            for name, mine in extra.items():
                for r, v in mine.items():
                    planned[name][r] -= v

    def bind(self, workload: str, groups: Iterable[PodGroup], placement: Placement, now: float) -> None:
        by_name = {g.name: g for g in groups}
        for podset, node_names in placement.bindings.items():
            group = by_name[podset]
            for name in node_names:
                node = self.nodes[name]
                mine = node.pods.setdefault(workload, {})
                for r, v in group.requests.items():
                    node.used[r] = node.used.get(r, 0) + v
                    mine[r] = mine.get(r, 0) + v
                node.idle_since = None
                node.booked_for = None
        if self.on_bound is not None:
            self.on_bound(workload, sorted({n for names in placement.bindings.values() for n in names}))

    def unbind(self, workload: str, now: float) -> None:
        """The workload's pods are gone: free what they used; nodes left empty start their idle clock."""
        for node in self.nodes.values():
            mine = node.pods.pop(workload, None)
            if mine is not None:
                for r, v in mine.items():
                    node.used[r] = max(0, node.used.get(r, 0) - v)
                if not node.pods:
                    node.idle_since = now
            elif node.booked_for == workload:
                node.booked_for = None
                node.idle_since = now

    def unbind_from(self, workload: str, name: str, now: float) -> None:
        """The workload's pods on node ``name`` are gone (the rest stay where they are)."""
        node = self.nodes.get(name)
        mine = node.pods.pop(workload, None) if node is not None else None
        if node is None or mine is None:
            return
        for r, v in mine.items():
            node.used[r] = max(0, node.used.get(r, 0) - v)
        if not node.pods:
            node.idle_since = now

    def census(self, now: float) -> dict[str, PoolNodes]:
        """Every pool's nodes by state at ``now`` (pools without nodes too), by pool name: what the simulator's
        results, ``/metrics`` and the dashboard all count."""
        counts = {name: [0, 0, 0, 0] for name in self.pools}
        for node in self.nodes.values():
            state = 3 if node.down_since is not None else 0 if not node.ready(now) else (2 if node.pods else 1)
            counts.setdefault(node.pool, [0, 0, 0, 0])[state] += 1
        return {name: PoolNodes(*c) for name, c in sorted(counts.items())}

    def nodes_of(self, workload: str) -> list[Node]:
        return [n for n in self.nodes.values() if workload in n.pods]

    def add(self, node: Node) -> None:
        """A node that came from outside the autoscaler (an existing Ray cluster's)."""
        self.nodes[node.name] = node

    def remove(self, names: Iterable[str]) -> list[Node]:
        """Take nodes out of the cluster (deleted, reclaimed, their booking over); return those that were in it."""
        return [node for name in list(names) if (node := self.nodes.pop(name, None)) is not None]

    # --- scaling -----------------------------------------------------------------------------------

    def start_with_initial_nodes(self, now: float = 0.0, pools: Iterable[str] | None = None) -> list[Node]:
        """Create each pool's ``--num-nodes`` nodes (every pool's, or those of ``pools``), ready at ``now``.

        A flex-start node's maximum run time counts from ``now`` too: on the live clock ``now`` is a Unix time,
        so a deadline counted from 0 would have passed before the node existed."""
        created: list[Node] = []
        for pool in self.pools.values():
            if pools is not None and pool.name not in pools:
                continue
            hosts = pool.hosts_per_slice
            for start in range(0, pool.initial_nodes, hosts):
                slice_id = f"{pool.name}-slice-{next(self._ids)}"
                base = free_slot(self._slots(pool.name), hosts)
                for i in range(min(hosts, pool.initial_nodes - start)):
                    name = f"gke-{pool.name}-{slice_id.rsplit('-', 1)[1]}-{i}"
                    limit = pool.run_limit
                    node = Node(name, pool.name, slice_id, now, now, _labels(pool, name, base + i), pool.taints(),
                                pool.machine.allocatable(), expires_at=None if limit is None else now + limit,
                                idle_since=now, slot=base + i)
                    self.nodes[name] = node
                    created.append(node)
        return self._created(created)

    def _slots(self, pool: str) -> list[int]:
        """The topology slots the pool's nodes sit in (:mod:`flexq.capacity.node_topology`)."""
        return [n.slot for n in self.nodes.values() if n.pool == pool and n.slot >= 0]

    def pool_size(self, pool: str) -> int:
        return sum(1 for n in self.nodes.values() if n.pool == pool)

    def scale_up(self, pool_name: str, count: int, now: float, booked_for: str | None = None,
                 ready_at: float | None = None) -> tuple[list[Node], str]:
        """Create ``count`` nodes (whole slices) if the pool's limits and the cloud allow; else say why."""
        pool = self.pools[pool_name]
        size = self.pool_size(pool_name)
        if pool.ray_address:
            return [], (f"node pool {pool_name} is the Ray cluster at {pool.ray_address}, whose {size} node(s) have "
                        f"no room for it ({count} more needed)")
        if not pool.autoscaling:
            return [], f"node pool {pool_name} does not autoscale ({size} node(s); {count} more needed)"
        if size + count > pool.max_nodes:
            return [], (f"node pool {pool_name} is at its maximum ({size} of --max-nodes={pool.max_nodes}; "
                        f"{count} more needed)")
        obtainable = self.cloud.obtainable(pool_name, pool.machine.name, now)
        if size + count > obtainable:
            return [], (f"stock-out: no {pool.machine.name} capacity for node pool {pool_name} "
                        f"({int(obtainable) if obtainable != float('inf') else 'unlimited'} obtainable)")
        boot = self.cloud.boot_seconds(pool_name, pool.machine.name, pool.machine.boot_seconds)
        ready = now + boot if ready_at is None else ready_at
        created: list[Node] = []
        hosts = pool.hosts_per_slice
        for start in range(0, count, hosts):
            slice_id = f"{pool_name}-slice-{next(self._ids)}"
            base = free_slot(self._slots(pool_name), hosts)
            for i in range(min(hosts, count - start)):
                name = f"gke-{pool_name}-{slice_id.rsplit('-', 1)[1]}-{i}"
                limit = pool.run_limit
                node = Node(name, pool_name, slice_id, now, ready, _labels(pool, name, base + i), pool.taints(),
                            pool.machine.allocatable(), expires_at=None if limit is None else ready + limit,
                            booked_for=booked_for, idle_since=None, slot=base + i)
                self.nodes[name] = node
                created.append(node)
        return self._created(created), ""

    def recreate(self, hosts: list[Node], now: float) -> list[Node]:
        """Recreate ``hosts`` (a slice's, lost), as GKE's auto-repair does: each comes back under its name, empty,
        ready after its pool's boot time."""
        fresh = []
        for old in sorted(hosts, key=lambda n: n.name):
            pool = self.pools[old.pool]
            ready = now + self.cloud.boot_seconds(pool.name, pool.machine.name, pool.machine.boot_seconds)
            limit = pool.run_limit
            labels = _labels(pool, old.name, old.slot) if old.slot >= 0 else pool.labels()
            node = Node(old.name, pool.name, old.slice_id, now, ready, labels, pool.taints(),
                        pool.machine.allocatable(), expires_at=None if limit is None else ready + limit,
                        idle_since=ready, slot=old.slot)
            self.nodes[node.name] = node
            fresh.append(node)
        return self._created(fresh)

    def scale_down(self, now: float, idle_after: float, pools: Iterable[str] | None = None) -> list[Node]:
        """Remove whole slices whose nodes have all been idle for ``idle_after`` seconds (not below min), of every
        pool or of ``pools``."""
        removed: list[Node] = []
        slices: dict[str, list[Node]] = {}
        only = None if pools is None else set(pools)
        for node in self.nodes.values():
            if only is None or node.pool in only:
                slices.setdefault(node.slice_id, []).append(node)
        for slice_nodes in slices.values():
            pool = self.pools[slice_nodes[0].pool]
            idle = pool.autoscaling and all(
                n.idle_since is not None and n.idle_since + idle_after <= now and not n.pods and not n.booked_for
                for n in slice_nodes)
            if idle and self.pool_size(pool.name) - len(slice_nodes) >= pool.min_nodes:
                for node in slice_nodes:
                    del self.nodes[node.name]
                    removed.append(node)
        return removed

    def next_idle_deadline(self, idle_after: float) -> float | None:
        times = [n.idle_since + idle_after for n in self.nodes.values()
                 if n.idle_since is not None and not n.pods and self.pools[n.pool].autoscaling]
        return min(times) if times else None

    def expired(self, now: float) -> list[Node]:
        """Remove nodes whose maximum run time has passed; return them (their workloads must go)."""
        gone = [n for n in self.nodes.values() if n.expires_at is not None and n.expires_at <= now]
        slices = {n.slice_id for n in gone}
        gone = [n for n in self.nodes.values() if n.slice_id in slices]
        for node in gone:
            del self.nodes[node.name]
        return gone

    def next_expiry(self) -> float | None:
        times = [n.expires_at for n in self.nodes.values() if n.expires_at is not None]
        return min(times) if times else None


def _labels(pool: NodePoolSpec, name: str, slot: int) -> dict[str, str]:
    """A node's labels: its pool's, and its place in the pool's topology."""
    return {**pool.labels(), **topology_labels(pool, name, slot)}
