"""Nodes lost in the capacity driver: flex-start expiry, a node deleted from outside, a TPU slice repaired.

The workloads whose pods were on a lost node are evicted and requeued (:class:`NodeLoss`). A multi-host TPU slice is
atomic (its hosts are recovered together, never one by one), so a lost host costs the whole slice:

- in a pool of on-demand, flex-start or reserved capacity, GKE's node auto-repair recreates the slice: its hosts
  come back under their names, empty, ready after the pool's boot time (``SliceRepaired``), and the requeued job
  starts there again; if the cloud has no capacity for it then (a stock-out), the slice is released instead;
- in a queued-provisioning (DWS) pool the capacity was the ProvisioningRequest's: the slice is released whole
  (``SliceReleased``) and the requeued job asks for a new one.

A topology-aware workload whose assignment names a lost node (by its hostname) is not evicted where Kueue's
``TASFailedNodeReplacement`` is on (its default): the pods of that node are placed on another node of their domain
and bound there, its assignment rewritten (``NodeReplaced``), and its job runs on. Where there is no replacement it
is evicted at once (``NodeFailures``: Kueue's ``TASFailedNodeReplacementFailFast``, on by default), as it is when
more than one of its nodes is lost (a multi-host slice, or a second node while it waits for a replacement). A plain
Pod's own workload is not reassigned: its pod cannot move.

With ``TASFailedNodeReplacementFailFast`` off, a workload with no replacement at once keeps its quota and its
assignment, the lost node its unhealthy node, and is tried again as Kueue's second-pass queue tries it: after 1 s, then
a backoff that doubles (at most 30 s), a ``SecondPassFailed`` Warning each time none is found. A replacement found
later is bound as one found at once (``NodeReplaced``). The node Ready again, it is no longer unhealthy: the
workload's pods go back to it and the retries end. Nothing else gives up on it here: its pods on the lost node are
not ready from the first failed try until they are bound again (``pods_ready``; the plane's user may say so itself,
a job whose runtime reports its pods), so waitForPodsReady's ``recoveryTimeout`` evicts it if that takes too long.

The cloud's ``hostFailures`` (times from its origin) make a host of a pool fail, in the simulator and the live server
alike: the first node (by name) of a slice in use, else of the pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial

from flexq.capacity.cluster import Cluster, Placement
from flexq.capacity.notes import PoolNote, ReplacedNote, Teller
from flexq.capacity.placement import pod_groups
from flexq.capacity.pools import Node, NodePoolSpec
from flexq.capacity.record import Timeline
from flexq.scheduler import (
    Admission,
    Event,
    EventKind,
    Moment,
    Phrase,
    PodSetAssignment,
    Scheduler,
    Workload,
    names_node,
    second_pass_backoff,
)

__all__ = ["NodeLoss", "single_pod"]


def single_pod(wl: Workload) -> bool:
    """A plain Pod's own workload: its pod cannot move, so Kueue does not reassign it
    (``SkipReassignmentForPodOwnedWorkloads``, on in v0.19); it goes as the workloads of other lost pods do."""
    return wl.owner.startswith("Pod ") and sum(ps.count for ps in wl.podsets) == 1


class NodeLoss:
    """Nodes lost: flex-start nodes at their maximum run duration, a node deleted, a host failed.

    ``make_room`` is told when nodes went (requests waiting for room may fit), ``plan_scale_down`` when a slice was
    recreated (its nodes start idle), ``pods_ready`` when a workload's pods on a lost node wait for its replacement
    (False: not ready) and when they are bound again (True)."""

    def __init__(self, cluster: Cluster, timeline: Timeline, teller: Teller, scheduler: Scheduler, *,
                 make_room: Callable[[], None], plan_scale_down: Callable[[], None],
                 pods_ready: Callable[[str, float, bool], None] | None = None) -> None:
        self.cluster = cluster
        self.timeline = timeline
        self.teller = teller
        self.scheduler = scheduler
        self.make_room = make_room
        self.plan_scale_down = plan_scale_down
        self.pods_ready = pods_ready
        self.unhealthy: dict[str, tuple[str, Admission]] = {}
        """Workloads waiting for a replacement (``TASFailedNodeReplacementFailFast`` off): key -> (its unhealthy
        node, the admission that names it)."""

    def plan_expiry(self) -> None:
        expiry = self.cluster.next_expiry()
        if expiry is not None:
            self.timeline.at(expiry, self.expire)

    def expire(self) -> None:
        now = self.timeline.now()
        gone: list[Node] = self.cluster.expired(now)
        victims = sorted({key for node in gone for key in node.pods})
        for pool in sorted({n.pool for n in gone}):
            self.teller.pool(EventKind.NODES_EXPIRED, f"node pool {pool}: flex-start nodes reached their maximum run "
                             "duration", PoolNote(pool))
        for key in victims:
            self.teller.log(self.scheduler.evict(key, now, "Flex-start nodes reached maxRunDurationSeconds",
                                                 "NodesExpired"))
        self.plan_expiry()

    def plan_host_failures(self, pools: list[NodePoolSpec]) -> None:
        """Schedule the cloud's ``hostFailures`` of ``pools`` (those still to come)."""
        cloud, now = self.cluster.cloud, self.timeline.now()
        for pool in pools:
            for at in cloud.spec(pool.name, pool.machine.name).host_failures:
                if cloud.origin + at >= now:
                    self.timeline.at(cloud.origin + at, partial(self.host_failure, pool.name))

    def host_failure(self, pool: str) -> None:
        """A host of ``pool`` fails: the first node (by name) of a slice in use, else of the pool, is lost."""
        name = self.host_of(pool)
        if name:
            self.node_deleted(name, f"host {name} of pool {pool} failed", "failed")

    def host_of(self, pool: str) -> str:
        """The host of ``pool`` a cloud's host event hits: the first node (by name) of a slice in use, else of the
        pool ("": the pool has none)."""
        nodes = sorted((n for n in self.cluster.nodes.values() if n.pool == pool), key=lambda n: (not n.pods, n.name))
        return nodes[0].name if nodes else ""

    def node_deleted(self, name: str, why: str = "", cause: str = "was deleted") -> None:
        """A node was deleted from outside (``kubectl delete node``, as when the cloud reclaims a VM) or its host
        failed: the pods on it are gone, so their workloads are evicted and requeued. A multi-host TPU slice is
        repaired or released whole (see the module's description). ``cause`` words what happened to it after its
        name in a replacement's message."""
        removed = self.cluster.remove([name])
        if not removed:
            return
        node = removed[0]
        now = self.timeline.now()
        self.teller.pool(EventKind.NODE_DELETED, why or f"node {name} of pool {node.pool} was deleted",
                         PoolNote(node.pool))
        rest = sorted((n for n in self.cluster.nodes.values() if n.slice_id == node.slice_id), key=lambda n: n.name)
        pool = self.cluster.pools.get(node.pool)
        multi_host = pool is not None and pool.hosts_per_slice > 1
        victims = sorted({k for n in [node, *rest] for k in n.pods} if multi_host else node.pods)
        if pool is not None and multi_host:
            self._lose_slice(node, rest, pool, now)
        reason = why or f"Node {name} was deleted"
        lost = {node.name, *(n.name for n in rest)} if multi_host else {node.name}
        for key in victims:
            if self.hot_swap(key, lost, now, {name: cause}):
                continue
            self.teller.log(self.scheduler.evict(key, now, f"{reason}: the workload's pods on it are gone", "NodeLost"))
        self.make_room()

    def hot_swap(self, key: str, lost: set[str], now: float, causes: Mapping[str, str] | None = None) -> bool:
        """Kueue's failed node replacement for ``key``, whose pods were on the ``lost`` nodes: False where it does not
        apply (the gate off, no topology assignment naming them); else the workload has a replacement, waits for one
        (``TASFailedNodeReplacementFailFast`` off) or is evicted. ``causes``: what happened to a node, worded after
        its name ("was deleted", "was NotReady for 300s"; else "was lost")."""
        wl = self.scheduler.workload(key)
        if not self.scheduler.config.replace_failed_nodes or wl is None or wl.admission is None or single_pod(wl):
            return False
        admission = wl.admission
        named = sorted(n for n in lost if names_node(admission, n))
        if not named:
            return False
        waiting = self.waiting_on(key)
        if waiting in named:
            return True  # already unhealthy for it: it waits on
        if waiting:
            named = [waiting, *named]  # Kueue's message: the unhealthy node first
        cause = (causes or {}).get(named[0], "was lost")
        if len(named) > 1:
            self.unhealthy.pop(key, None)
            self.teller.log(self.scheduler.evict(key, now, "Workload eviction triggered due to multiple TAS assigned "
                                                 f"node failures, including: {', '.join(named)}", "NodeFailures"))
        elif self._replaced(wl, named[0], now, cause):
            return True
        elif self.scheduler.config.replace_fail_fast:
            self.teller.log(self.scheduler.evict(key, now, "Workload was evicted as there was no replacement for "
                                                 f"unhealthy node(s): {named[0]}", "NodeFailures"))
        else:
            self._wait(wl, named[0], now, 1, cause)
        return True

    def waiting_for(self, node: str) -> set[str]:
        """The workloads waiting for a replacement of ``node``."""
        return {key for key, (waited, _) in self.unhealthy.items() if waited == node}

    def waiting_on(self, key: str) -> str:
        """The node ``key`` waits for a replacement of ("": none), its admission still the one that names it."""
        wl = self.scheduler.workload(key)
        entry = self.unhealthy.get(key)
        if entry is None or wl is None or wl.admission is not entry[1]:
            self.unhealthy.pop(key, None)
            return ""
        return entry[0]

    def _replaced(self, wl: Workload, node: str, now: float, cause: str) -> bool:
        """Place ``wl``'s pods on the lost ``node`` on others and bind them there; False: no replacement."""
        admission = wl.admission
        assert admission is not None
        if not self.scheduler.replace_node(wl.key, node, now):
            return False
        waited = self.unhealthy.pop(wl.key, None) is not None
        nodes = self._bind_replacement(wl, admission.podsets, node, now)
        self.teller.on(EventKind.NODE_REPLACED, wl.key, f"node {node} {cause}: its pods were placed on "
                       f"{', '.join(nodes)} in the same topology domain", ReplacedNote(node, tuple(nodes)))
        if waited and self.pods_ready is not None:
            self.pods_ready(wl.key, now, True)
        return True

    def _wait(self, wl: Workload, node: str, now: float, iteration: int, cause: str) -> None:
        """No replacement for ``wl``'s pods on ``node`` (that ``cause``) yet: it keeps its quota and is tried again
        after Kueue's second-pass backoff (``SecondPassFailed``)."""
        assert wl.admission is not None
        self.unhealthy[wl.key] = (node, wl.admission)
        self.teller.log([Event(now, EventKind.SECOND_PASS_FAILED, wl.key, wl.cluster_queue,
                               f"cannot find replacement assignment for unhealthy node: {node}")])
        if iteration == 1 and self.pods_ready is not None:  # its pods there are gone: not ready until bound again
            self.pods_ready(wl.key, now, False)
        retry = partial(self._retry, wl.key, node, iteration + 1, cause)
        self.timeline.at(now + second_pass_backoff(iteration), retry)

    def _retry(self, key: str, node: str, iteration: int, cause: str) -> None:
        """The ``iteration``-th try at a replacement for ``key``'s pods on ``node`` (while it still waits for one)."""
        wl = self.scheduler.workload(key)
        if wl is None or self.waiting_on(key) != node:
            return
        now = self.timeline.now()
        if not self._replaced(wl, node, now, cause):
            self._wait(wl, node, now, iteration, cause)

    def node_back(self, name: str) -> None:
        """Node ``name`` is healthy again: the workloads waiting for a replacement of it no longer do (Kueue takes
        it off their unhealthy nodes); their pods there are bound to it again."""
        now = self.timeline.now()
        for key in sorted(k for k, (node, _) in self.unhealthy.items() if node == name):
            wl = self.scheduler.workload(key)
            if wl is None or self.waiting_on(key) != name or wl.admission is None:
                continue
            del self.unhealthy[key]
            placement = Placement()
            for ps in wl.admission.podsets:
                for values, count in ps.topology.domains if ps.topology is not None else ():
                    if values[-1] == name:
                        placement.bindings.setdefault(ps.name, []).extend([name] * count)
            self.cluster.bind(key, pod_groups(wl, self.scheduler.config.flavors), placement, now)
            if self.pods_ready is not None:
                self.pods_ready(key, now, True)

    def _bind_replacement(self, wl: Workload, before: Sequence[PodSetAssignment], lost: str, now: float) -> list[str]:
        """Bind ``wl``'s pods its rewritten assignment has on nodes beyond its assignment ``before`` (those of the
        ``lost`` node), where its record says its pods are too; the nodes."""
        assert wl.admission is not None
        was = {ps.name: {v: c for v, c in ps.topology.domains if v[-1] != lost} for ps in before
               if ps.topology is not None}
        placement = Placement()
        for ps in wl.admission.podsets:
            if ps.topology is None:
                continue
            for values, count in ps.topology.domains:
                extra = count - was.get(ps.name, {}).get(values, 0)
                if extra > 0 and values[-1] in self.cluster.nodes:
                    placement.bindings.setdefault(ps.name, []).extend([values[-1]] * extra)
        self.cluster.bind(wl.key, pod_groups(wl, self.scheduler.config.flavors), placement, now)
        record = self.timeline.records.get(wl.key)
        if record is not None and record.placement is not None:
            for podset, names in record.placement.items():
                names[:] = [n for n in names if n != lost] + placement.bindings.get(podset, [])
        return sorted({n for names in placement.bindings.values() for n in names})

    def _lose_slice(self, lost: Node, rest: list[Node], pool: NodePoolSpec, now: float) -> None:
        """The other hosts of ``lost``'s slice go with it; the slice is recreated when the pool is not DWS's and
        the cloud has the machines."""
        self.cluster.remove(n.name for n in rest)
        hosts = len(rest) + 1
        obtainable = self.cluster.cloud.obtainable(pool.name, pool.machine.name, now)
        if not pool.queued_provisioning and self.cluster.pool_size(pool.name) + hosts <= obtainable:
            fresh = self.cluster.recreate([lost, *rest], now)
            ready = max(n.ready_at for n in fresh)
            self.teller.pool(EventKind.SLICE_REPAIRED, Phrase((f"node pool {pool.name}: the TPU slice of node "
                                                               f"{lost.name} lost a host; its {hosts} node(s) are "
                                                               "recreated, ready ", Moment(ready))),
                             PoolNote(pool.name, self.cluster.pool_size(pool.name)))
            self.plan_expiry()
            self.plan_scale_down()
        elif rest:
            self.teller.pool(EventKind.SLICE_RELEASED, f"node pool {pool.name}: the TPU slice of node {lost.name} lost "
                             f"a host; its other {len(rest)} node(s) are released with it",
                             PoolNote(pool.name, self.cluster.pool_size(pool.name)))
