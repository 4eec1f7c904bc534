"""Placing an admitted workload's pods on nodes, the autoscaler behind them, and the bill for the nodes they use.

:class:`Placer` binds a workload's pods once every pod has a node of its flavor's pool; missing nodes are asked of the
autoscaler (within the pool's maximum, whole TPU slices, if the cloud has them); a pool that cannot deliver (a
stock-out at once, or nothing within the provisioning timeout) makes flexq evict the workload and skip that flavor
for a cool-down, so that it moves on to the next flavor; with ``fallback: false`` it waits, as in Kueue. A racing
variant whose pods can all start wins its race (:class:`~flexq.capacity.variants.Racing`). :class:`ScaleDown` removes
nodes idle for ``scaleDownAfter``, by slice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial

from flexq.capacity.cluster import Cluster, Placement, PodGroup
from flexq.capacity.notes import FallbackNote, PoolNote, StartedNote, Teller, WorkloadNote
from flexq.capacity.record import Billing, Records, Timeline
from flexq.capacity.settings import CapacityConfig
from flexq.capacity.variants import Racing, WaitingRoom
from flexq.durations import format_seconds
from flexq.scheduler import EventKind, FlavorSpec, Moment, MomentForm, Phrase, Scheduler, Workload, WorkloadState

__all__ = ["Placer", "ScaleDown", "billing_of", "pod_groups"]


def pod_groups(wl: Workload, flavors: Mapping[str, FlavorSpec], only: frozenset[str] | None = None) -> list[PodGroup]:
    """The pod groups of an admitted workload: node selector and tolerations as the job will run (``only``: the pod
    sets that ask for one of these resources)."""
    assert wl.admission is not None
    by_name = {ps.name: ps for ps in wl.admission.podsets}
    out = []
    for podset in wl.podsets:
        assigned = by_name.get(podset.name)
        if assigned is None:
            continue
        if only is not None and not only.intersection(r for r, v in podset.requests.items() if v):
            continue
        selector = dict(podset.node_selector)
        tolerations = list(podset.tolerations)
        for name in sorted(set(assigned.flavors.values())):
            spec = flavors.get(name)
            if spec is not None:
                selector.update(spec.node_labels)
                tolerations.extend(spec.tolerations)
        domains: tuple[tuple[Mapping[str, str], int], ...] = ()
        if assigned.topology is not None:
            levels = assigned.topology.levels
            domains = tuple((dict(zip(levels, values, strict=True)), count)
                            for values, count in assigned.topology.domains)
        out.append(PodGroup(podset.name, assigned.count, dict(podset.requests), selector, tuple(tolerations),
                            domains))
    return out


def billing_of(cluster: Cluster, key: str, now: float) -> Billing:
    """What ``key``'s pods cost by the hour where they are bound: an accelerator node charged whole, a CPU node's
    cost shared by the CPU its pods requested."""
    rates = []
    for node in cluster.nodes_of(key):
        pool = cluster.pools.get(node.pool)
        if pool is None:
            continue
        if pool.machine.tpu_chips or pool.machine.gpus:
            share = 1.0
        else:
            share = min(1.0, node.pods[key].get("cpu", 0) / max(1, node.allocatable.get("cpu", 1)))
        rates.append((share, pool.hourly))
    return Billing(now, tuple(rates))


class ScaleDown:
    """The autoscaler's scale-down: nodes idle for ``scale_down_after`` go, by slice."""

    def __init__(self, cluster: Cluster, timeline: Timeline, teller: Teller, config: CapacityConfig) -> None:
        self.cluster = cluster
        self.timeline = timeline
        self.teller = teller
        self.config = config

    def plan(self) -> None:
        deadline = self.cluster.next_idle_deadline(self.config.scale_down_after)
        if deadline is not None:
            self.timeline.at(deadline, self.scale_down)

    def scale_down(self) -> None:
        now = self.timeline.now()
        removed = self.cluster.scale_down(now, self.config.scale_down_after)
        for pool in sorted({n.pool for n in removed}):
            gone = [n for n in removed if n.pool == pool]
            self.teller.pool(EventKind.SCALED_DOWN, f"node pool {pool}: {len(gone)} idle node(s) removed",
                             PoolNote(pool, self.cluster.pool_size(pool)))
        self.plan()


class Placer:
    """Admitted workloads onto nodes: placed, scaled up for, fallen back from, bound and started, released.

    ``start`` starts a workload's job once its pods are bound; ``plan_expiry`` is told when nodes were added (flex-start
    nodes expire); ``room`` holds requests waiting for room in a pool, which a release may let in."""

    def __init__(self, cluster: Cluster, records: Records, timeline: Timeline, teller: Teller, scheduler: Scheduler,
                 config: CapacityConfig, *, racing: Racing, room: WaitingRoom, scale_down: ScaleDown,
                 plan_expiry: Callable[[], None], start: Callable[[str, float], None]) -> None:
        self.cluster = cluster
        self.records = records
        self.timeline = timeline
        self.teller = teller
        self.scheduler = scheduler
        self.config = config
        self.racing = racing
        self.room = room
        self.scale_down = scale_down
        self.plan_expiry = plan_expiry
        self.start = start

    def groups(self, wl: Workload, only: frozenset[str] | None = None) -> list[PodGroup]:
        return pod_groups(wl, self.scheduler.config.flavors, only)

    def retry_waiting(self) -> None:
        """Nodes came (from outside the driver): every admitted workload waiting for nodes tries again."""
        for key in self.records.waiting():
            self.try_start(key)

    def try_start(self, key: str) -> None:
        wl = self.scheduler.workload(key)
        if wl is None or wl.state is not WorkloadState.ADMITTED or key in self.records.running:
            return
        now = self.timeline.now()
        if wl.parent:
            refused = self.scheduler.refuse_migration(wl, now)
            if refused:  # before any node is booted for a move that would not pay
                self.teller.log(refused)
                return
        groups = self.groups(wl)
        record = self.records.get(key)
        old = self.records.of(record.replaces) if record is not None and record.replaces is not None else None
        if old is not None:
            self.cluster.unbind(old.key, now)  # the slice it replaces: its nodes are the replacement's to take
        placement = self.cluster.place(groups, now, booked_for=key)
        if old is not None and not placement.complete:
            # The old slice runs on: its pods go back where they were (it is finished, so its own groups are kept).
            self.cluster.bind(old.key, old.groups or [], Placement(old.placement or {}), now)
        if self._unschedulable(key, wl, placement):
            return
        if placement.complete and wl.parent:
            self.racing.win(key, wl)
            return
        if placement.complete:
            self._bind(key, wl, groups, placement, now)
            return
        self._ask_for_nodes(key, wl, placement, now)

    def _ask_for_nodes(self, key: str, wl: Workload, placement: Placement, now: float) -> None:
        booting: list[float] = []
        for pool_name, count in sorted(placement.missing.items()):
            pool = self.cluster.pools[pool_name]
            pending_boot = [n.ready_at for n in self.cluster.nodes.values()
                            if n.pool == pool_name and n.ready_at > now and not n.pods]
            if pending_boot:
                booting.append(max(pending_boot))
                continue
            if pool.queued_provisioning:
                continue  # its nodes come from the workload's ProvisioningRequest
            created, why = self.cluster.scale_up(pool_name, count, now)
            if created:
                self.plan_expiry()
                ready = max(n.ready_at for n in created)
                booting.append(ready)
                self.teller.on(EventKind.SCALED_UP, key, f"node pool {pool_name}: {len(created)} node(s) requested, "
                               f"ready in {format_seconds(ready - now)}", PoolNote(pool_name, len(created)))
                self.scheduler.explain(wl.key, Phrase((f"waiting for {len(created)} node(s) of {pool_name} to boot",
                                                       Moment(ready, MomentForm.ASIDE, "ready"))))
                continue
            self._unavailable(key, wl, pool_name, why)
            return
        for ready in booting:
            self.timeline.later(ready, key, partial(self.try_start, key))

    def _unschedulable(self, key: str, wl: Workload, placement: Placement) -> bool:
        """Whether no node can ever take a pod set (no pool matches it, or it is larger than its pool's maximum):
        then the pods wait with the reason, as GKE's autoscaler does not scale up for them, and nothing is retried."""
        if placement.unplaceable:
            self.teller.on(EventKind.UNSCHEDULABLE, key,
                           "no node pool matches pod set(s) " + ", ".join(placement.unplaceable), WorkloadNote())
            return True
        if placement.oversized:
            why = "; ".join(placement.oversized.values())
            self.teller.on(EventKind.UNSCHEDULABLE, key, why, WorkloadNote())
            self.scheduler.explain(wl.key, f"unschedulable: {why}")
            return True
        return False

    def _bind(self, key: str, wl: Workload, groups: list[PodGroup], placement: Placement, now: float) -> None:
        """Every pod has a node: bind them (a replacement slice takes over from the one it replaces) and start."""
        record = self.records.of(key)
        old, record.replaces = record.replaces, None
        if old is not None:
            self.release(old)
        self.cluster.bind(key, groups, placement, now)
        record.bound(now, groups, {k: list(v) for k, v in placement.bindings.items()},
                     billing_of(self.cluster, key, now))
        nodes = sorted({n for names in placement.bindings.values() for n in names})
        self.scheduler.explain(wl.key, "")
        pools = sorted({self.cluster.nodes[n].pool for n in nodes})
        self.teller.on(EventKind.STARTED, key, f"pods bound to {len(nodes)} node(s) in {', '.join(pools)}" if nodes
                       else "pods running", StartedNote(tuple(nodes)))
        self.start(key, now)

    def _unavailable(self, key: str, wl: Workload, pool_name: str, why: str) -> None:
        now = self.timeline.now()
        since = self.records.of(key).waits(now)
        stock_out = why.startswith("stock-out")
        deadline = since + self.config.provisioning_timeout
        flavor = None if wl.parent else self._flavor_of_pool(wl, pool_name)  # a variant waits: the others race on
        if self.config.fallback and flavor is not None and (stock_out or now >= deadline):
            self._fallback(key, flavor, pool_name, why)
            return
        retry = self.cluster.cloud.next_change(pool_name, self.cluster.pools[pool_name].machine.name, now)
        eta = f"; capacity may return in {format_seconds(retry - now)}" if retry is not None else ""
        then = (f"; falls back to the next flavor in {format_seconds(deadline - now)}"
                if self.config.fallback and flavor is not None else "")
        self.teller.on(EventKind.NODES_UNAVAILABLE, key, why + eta + then, PoolNote(pool_name))
        self.scheduler.explain(wl.key, f"nodes unavailable: {why}{eta}{then}")
        if retry is not None:
            self.timeline.later(retry, key, partial(self.try_start, key))
        if self.config.fallback and flavor is not None and now < deadline:
            self.timeline.later(deadline, key, partial(self.try_start, key))

    def _flavor_of_pool(self, wl: Workload, pool_name: str) -> str | None:
        assert wl.admission is not None
        for assigned in wl.admission.podsets:
            for flavor_name in assigned.flavors.values():
                spec = self.scheduler.config.flavors.get(flavor_name)
                if spec is not None and spec.node_labels.get("cloud.google.com/gke-nodepool") == pool_name:
                    return flavor_name
        return None

    def _fallback(self, key: str, flavor: str, pool: str, why: str) -> None:
        now = self.timeline.now()
        until = now + self.config.fallback_cooldown
        self.scheduler.mark_unavailable(flavor, until, f"{why} (until t={format_seconds(until)})")
        self.teller.on(EventKind.FALLBACK, key, f"flavor {flavor} cannot deliver nodes ({why}): evicted to try the "
                       f"next flavor; {flavor} is skipped for {format_seconds(self.config.fallback_cooldown)}",
                       FallbackNote(flavor, pool))
        self.teller.log(self.scheduler.evict(key, now, f"Nodes for flavor {flavor} could not be provisioned: {why}",
                                             "NodesUnavailable"))

    def release(self, key: str) -> None:
        """``key``'s pods leave their nodes (finished, evicted, withdrawn, deleted): its record is released, requests
        waiting for room may now fit, and idle nodes start to count down."""
        now = self.timeline.now()
        self.records.of(key).released(now)
        self.room.forget(key)
        self.cluster.unbind(key, now)
        self.room.make_room()
        self.scale_down.plan()
