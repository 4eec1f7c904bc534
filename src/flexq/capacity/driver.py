"""Capacity for admitted workloads: nodes, DWS ProvisioningRequests, and fallback, on any clock.

The driver reacts to the scheduler's events:

- QuotaReserved with a ``kueue.x-k8s.io/provisioning-request`` check pending: a ProvisioningRequest
  ``<workload>-<check>-<attempt>`` for the pod sets that use a managed resource. The emulated cloud
  fulfils it after its queued-provisioning delay (nodes created, booked for the workload: Provisioned,
  the check turns Ready) or never; after 7 days it fails (Expired) and the check says Retry, with
  backoff ``base * 2^(n-1)`` capped at ``max``, up to ``backoffLimitCount`` retries, then Rejected.
- Admitted: pods are placed on ready nodes of their flavor's pool; missing nodes are asked of the
  autoscaler (within max-nodes, whole TPU slices, if the cloud has them); once every pod is bound the
  job runs. A pool that cannot deliver (stock-out at once, or nothing within the provisioning timeout)
  makes flexq evict the workload and skip that flavor for a cool-down, so the workload moves on to the
  next flavor; with ``fallback: false`` it waits, as in Kueue.
- Finished or evicted: pods leave their nodes; nodes idle for ``scaleDownAfter`` go, by slice.
- Flex-start nodes go after their maximum run duration; their workloads are evicted and requeued.
- A node deleted or a host failed (:mod:`flexq.capacity.nodeloss`): its workloads are evicted and requeued; a
  multi-host TPU slice is recreated whole after the boot time (DWS capacity: released whole).
- Racing workloads' variants (:mod:`flexq.capacity.variants`): the first that can start wins, the others' claims
  are withdrawn; under flexq's policy a pool at its maximum is waited for.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from flexq.capacity.cluster import Cluster, Placement, PodGroup
from flexq.capacity.nodeloss import NodeLoss
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.provisioning import (
    BOOKING,
    CAPACITY_PRIORITY,
    PROVISIONING_EXPIRY,
    ProvisioningCapacity,
    ProvisioningSettings,
    Timers,
    provisioning_settings,
)
from flexq.capacity.settings import CapacityConfig
from flexq.capacity.variants import RacingCapacity
from flexq.durations import format_seconds
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import CheckState, Workload, WorkloadState
from flexq.scheduler.scheduler import Scheduler

__all__ = ["BOOKING", "PROVISIONING_EXPIRY", "CapacityDriver", "ProvisioningSettings", "Timers",
           "provisioning_settings"]

_CAPACITY = CAPACITY_PRIORITY




class CapacityDriver(NodeLoss, ProvisioningCapacity, RacingCapacity):
    def __init__(self, config: CapacityConfig, scheduler: Scheduler, kernel: Timers,
                 log: Callable[[list[Event]], None], start: Callable[[str, float], None],
                 provisioning: dict[str, ProvisioningSettings], *, virtual: bool = False,
                 run_time: Callable[[str], float | None] | None = None,
                 finish_eta: Callable[[str], float | None] | None = None) -> None:
        self.config = config
        self.cluster = Cluster(config.pools, config.cloud)
        self.scheduler = scheduler
        self.kernel = kernel
        self.log = log
        self.start = start
        self.provisioning = provisioning
        self.failures: dict[tuple[str, str], int] = {}
        self.attempts: dict[tuple[str, str], int] = {}
        """ProvisioningRequests made per (workload, check): each attempt gets a fresh name."""
        self._virtual = virtual
        """In virtual time, reasons name the moment (t=...); in real time they say how long."""
        self.tokens: dict[str, int] = {}
        """Bumped whenever a workload's capacity story restarts (evicted, finished): stale timers are ignored."""
        self.epoch = 0
        """Bumped when the driver is given a new scheduler (a resync): every timer set before is stale."""
        self.waiting_since: dict[str, float] = {}
        self.running: set[str] = set()
        self.placements: dict[str, dict[str, list[str]]] = {}
        """Where each running workload's pods are: pod set -> node names."""
        self.costs: dict[str, float] = {}
        """USD spent per workload on the nodes its pods used (node-hours x price; a CPU node's cost shared by
        the CPU its pods requested, an accelerator node's charged whole)."""
        self._billing: dict[str, tuple[float, list[tuple[float, float]]]] = {}
        self.carried: dict[str, str] = {}
        """Workload slices replaced while running: the replacement -> the old slice, whose pods keep their nodes
        until the replacement's pods are placed (on those nodes and the ones it adds)."""
        self.bound_groups: dict[str, list[PodGroup]] = {}
        """The pod groups of each running workload, as they were bound."""
        self.requests: dict[str, tuple[str, str, str]] = {}
        """The ProvisioningRequest each workload made last: key -> (check, request name, node pool or "")."""
        self.waiting_room: dict[str, list[tuple[str, str, str, int]]] = {}
        """Provisioned requests that wait for room in their pool (flexq's policy): pool -> (key, check, request,
        nodes), in arrival order."""
        self.parent_of: dict[str, str] = {}
        """Variants whose capacity story was told, and the workload each raced for."""
        self.waste: dict[str, float] = {}
        """USD of capacity provisioned for a racing workload's variant that lost the race (billed to the workload)."""
        self.finish_eta: Callable[[str], float | None] = finish_eta or self._expected_finish
        """When a running workload is expected to finish (the simulator knows; live, from its run time)."""
        self.run_time: Callable[[str], float | None] = run_time or (lambda _key: None)
        """How long a workload runs once started, when known (the simulator's ``runFor``; live, the job's
        ``flexq.dev/expected-run-time`` annotation)."""
        self.started_at: dict[str, float] = {}
        self.attach(scheduler)
        self.cluster.start_with_initial_nodes(kernel.now())
        self.plan_expiry()
        self.plan_host_failures(list(config.pools))

    def set_pools(self, pools: list[NodePoolSpec]) -> None:
        """The node pools changed (created, updated, deleted): keep the nodes of pools that remain; a new pool
        starts with its ``--num-nodes`` nodes."""
        added = {p.name for p in pools} - set(self.cluster.pools)
        self.cluster.pools = {p.name: p for p in pools}
        self.cluster.remove([n.name for n in self.cluster.nodes.values() if n.pool not in self.cluster.pools])
        if added and self.cluster.start_with_initial_nodes(self._now(), added):
            self.plan_expiry()
            self._plan_scale_down()
        self.plan_host_failures([p for p in pools if p.name in added])

    # --- helpers -----------------------------------------------------------------------------------

    def _now(self) -> float:
        return self.kernel.now()

    def _note(self, kind: EventKind, workload: str, reason: str, **extra: Any) -> None:
        """Log what happened to a workload (a variant's story is its parent's, with the variant named)."""
        wl = self.scheduler.workload(workload)
        if wl is not None and wl.parent:
            self.parent_of[workload] = wl.parent
        parent = self.parent_of.get(workload)
        if parent is not None:  # a variant, or one that won or lost since: its capacity story is its parent's
            extra = {**extra, "variant": workload}
            workload = parent
        self.log([Event(self._now(), kind, workload, self._cq(workload), reason, extra=extra)])

    def attach(self, scheduler: Scheduler) -> None:
        """Drive a scheduler (the live controller's is rebuilt on a resync): under flexq's policy variants win by
        starting, and a running job migrates only when that makes it finish sooner."""
        if scheduler is not self.scheduler:
            self.epoch += 1  # the timers set for the workloads of the scheduler before are stale
        self.scheduler = scheduler
        scheduler.start_decides = self.config.fallback  # Kueue-compatible: the first variant admitted wins
        scheduler.migration_check = self._migration_check if self.config.fallback else None

    def _cq(self, key: str) -> str:
        wl = self.scheduler.workload(key)
        return wl.cluster_queue if wl else ""

    def _token(self, key: str) -> tuple[int, int]:
        return self.epoch, self.tokens.get(key, 0)

    def _later(self, at: float, key: str, action: Callable[[], None]) -> None:
        self.kernel.schedule(at, partial(self._guarded, key, self._token(key), action), _CAPACITY)

    def _guarded(self, key: str, token: tuple[int, int], action: Callable[[], None]) -> None:
        """Run a timer's ``action`` unless the workload's capacity story restarted since it was set."""
        if self._token(key) == token:
            action()

    def groups(self, wl: Workload, only: frozenset[str] | None = None) -> list[PodGroup]:
        """The pod groups of an admitted workload: node selector and tolerations as the job will run."""
        assert wl.admission is not None
        flavors = self.scheduler.config.flavors
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
            out.append(PodGroup(podset.name, assigned.count, dict(podset.requests), selector, tuple(tolerations)))
        return out

    # --- scheduler events --------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        key = event.workload
        if event.kind is EventKind.QUOTA_RESERVED:
            wl = self.scheduler.workload(key)
            if wl is None or wl.admission is None:
                return  # a variant withdrawn since (an earlier event of the same step started its sibling)
            for check, state in sorted(wl.checks.items()):
                if check in self.provisioning and state is CheckState.PENDING:
                    self._request(key, check)
        elif event.kind is EventKind.ADMITTED:
            self.waiting_since[key] = self._now()
            self.try_start(key)
        elif event.kind is EventKind.FINISHED and event.extra.get("finishedReason") == "VariantWithdrawn":
            self._withdraw(key, str(event.extra.get("parent", "")))
        elif event.kind in (EventKind.EVICTED, EventKind.FINISHED, EventKind.DEACTIVATED):
            replacement = str(event.extra.get("replacedBy", ""))
            if event.kind is EventKind.FINISHED and replacement and key in self.running:
                self.carried[replacement] = key  # a growing job's running pods stay where they are
                return
            self._release(key)
            old = self.carried.pop(key, None)
            if old is not None:
                self._release(old)

    def rebind(self, key: str) -> None:
        """A running workload's pod counts changed in place (an elastic job shrank): its pods are placed anew."""
        if key in self.running:
            self._release(key)
            self.try_start(key)

    def release(self, key: str) -> None:
        """The workload is gone (deleted) or stopped: its pods leave their nodes."""
        self._release(key)

    def cost(self, key: str) -> float:
        """What ``key`` has cost so far, including a run still going."""
        total = self.costs.get(key, 0.0)
        if key in self._billing:
            since, rates = self._billing[key]
            total += sum(share * hourly for share, hourly in rates) * (self._now() - since) / 3600
        return total

    def spent(self) -> dict[str, float]:
        """What each workload that used nodes has cost so far (:meth:`cost`), runs still going included."""
        return {key: self.cost(key) for key in {*self.costs, *self._billing}}

    def hourly(self, key: str) -> float:
        """USD an hour that ``key``'s run costs while it runs where it runs now (0 when it is not running)."""
        billing = self._billing.get(key)
        return sum(share * hourly for share, hourly in billing[1]) if billing is not None else 0.0

    def _bill(self, key: str) -> None:
        nodes = self.cluster.nodes_of(key)
        rates = []
        for node in nodes:
            pool = self.cluster.pools.get(node.pool)
            if pool is None:
                continue
            if pool.machine.tpu_chips or pool.machine.gpus:
                share = 1.0
            else:
                share = min(1.0, node.pods[key].get("cpu", 0) / max(1, node.allocatable.get("cpu", 1)))
            rates.append((share, pool.hourly))
        self._billing[key] = (self._now(), rates)

    def _release(self, key: str) -> None:
        self.costs[key] = self.cost(key)
        self._billing.pop(key, None)
        self.placements.pop(key, None)
        self.bound_groups.pop(key, None)
        self.started_at.pop(key, None)
        self.tokens[key] = self.tokens.get(key, 0) + 1
        self.waiting_since.pop(key, None)
        self.requests.pop(key, None)
        self.running.discard(key)
        for waiting in self.waiting_room.values():
            waiting[:] = [w for w in waiting if w[0] != key]
        self.cluster.unbind(key, self._now())
        self._make_room()
        self._plan_scale_down()

    # --- placement and the autoscaler --------------------------------------------------------------

    def retry_waiting(self) -> None:
        """Nodes came (from outside the driver): every admitted workload waiting for nodes tries again."""
        for key in sorted(self.waiting_since):
            self.try_start(key)

    def try_start(self, key: str) -> None:
        wl = self.scheduler.workload(key)
        if wl is None or wl.state is not WorkloadState.ADMITTED or key in self.running:
            return
        now = self._now()
        if wl.parent:
            refused = self.scheduler.refuse_migration(wl, now)
            if refused:  # before any node is booted for a move that would not pay
                self.log(refused)
                return
        groups = self.groups(wl)
        old = self.carried.get(key)
        if old is not None:
            self.cluster.unbind(old, now)  # the slice it replaces: its nodes are the replacement's to take
        placement = self.cluster.place(groups, now, booked_for=key)
        if old is not None and not placement.complete:
            # The old slice runs on: its pods go back where they were (it is finished, so its own groups are kept).
            self.cluster.bind(old, self.bound_groups.get(old, []), Placement(self.placements.get(old, {})), now)
        if self._unschedulable(key, wl, placement):
            return
        if placement.complete and wl.parent:
            self._win(key, wl)
            return
        if placement.complete:
            self._bind(key, wl, groups, placement, now)
            return
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
                self._note(EventKind.SCALED_UP, key,
                           f"node pool {pool_name}: {len(created)} node(s) requested, ready in "
                           f"{format_seconds(ready - now)}", pool=pool_name, nodes=len(created))
                self.scheduler.explain(wl.key, (f"waiting for {len(created)} node(s) of {pool_name} to boot (ready at "
                                     f"t={format_seconds(ready)})" if self._virtual else
                                     f"waiting for {len(created)} node(s) of {pool_name} to boot"))
                continue
            self._unavailable(key, wl, pool_name, why)
            return
        for ready in booting:
            self._later(ready, key, partial(self.try_start, key))

    def _unschedulable(self, key: str, wl: Workload, placement: Placement) -> bool:
        """Whether no node can ever take a pod set (no pool matches it, or it is larger than its pool's maximum):
        then the pods wait with the reason, as GKE's autoscaler does not scale up for them, and nothing is retried."""
        if placement.unplaceable:
            self._note(EventKind.UNSCHEDULABLE, key,
                       "no node pool matches pod set(s) " + ", ".join(placement.unplaceable))
            return True
        if placement.oversized:
            why = "; ".join(placement.oversized.values())
            self._note(EventKind.UNSCHEDULABLE, key, why)
            self.scheduler.explain(wl.key, f"unschedulable: {why}")
            return True
        return False

    def _bind(self, key: str, wl: Workload, groups: list[PodGroup], placement: Placement, now: float) -> None:
        """Every pod has a node: bind them (a replacement slice takes over from the one it replaces) and start."""
        old = self.carried.pop(key, None)
        if old is not None:
            self._release(old)
        self.cluster.bind(key, groups, placement, now)
        self.bound_groups[key] = groups
        self.placements[key] = {k: list(v) for k, v in placement.bindings.items()}
        self.running.add(key)
        self.started_at[key] = now
        self._bill(key)
        self.waiting_since.pop(key, None)
        nodes = sorted({n for names in placement.bindings.values() for n in names})
        self.scheduler.explain(wl.key, "")
        pools = sorted({self.cluster.nodes[n].pool for n in nodes})
        self._note(EventKind.STARTED, key, f"pods bound to {len(nodes)} node(s) in {', '.join(pools)}" if nodes
                   else "pods running", nodes=nodes)
        self.start(key, now)

    def _unavailable(self, key: str, wl: Workload, pool_name: str, why: str) -> None:
        now = self._now()
        since = self.waiting_since.setdefault(key, now)
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
        self._note(EventKind.NODES_UNAVAILABLE, key, why + eta + then, pool=pool_name)
        self.scheduler.explain(wl.key, f"nodes unavailable: {why}{eta}{then}")
        if retry is not None:
            self._later(retry, key, partial(self.try_start, key))
        if self.config.fallback and flavor is not None and now < deadline:
            self._later(deadline, key, partial(self.try_start, key))

    def _flavor_of_pool(self, wl: Workload, pool_name: str) -> str | None:
        assert wl.admission is not None
        for assigned in wl.admission.podsets:
            for flavor_name in assigned.flavors.values():
                spec = self.scheduler.config.flavors.get(flavor_name)
                if spec is not None and spec.node_labels.get("cloud.google.com/gke-nodepool") == pool_name:
                    return flavor_name
        return None

    def _fallback(self, key: str, flavor: str, pool: str, why: str) -> None:
        now = self._now()
        until = now + self.config.fallback_cooldown
        self.scheduler.mark_unavailable(flavor, until, f"{why} (until t={format_seconds(until)})")
        self._note(EventKind.FALLBACK, key, f"flavor {flavor} cannot deliver nodes ({why}): evicted to try the next "
                   f"flavor; {flavor} is skipped for {format_seconds(self.config.fallback_cooldown)}",
                   flavor=flavor, pool=pool)
        self.log(self.scheduler.evict(key, now, f"Nodes for flavor {flavor} could not be provisioned: {why}",
                                      "NodesUnavailable"))

    def _plan_scale_down(self) -> None:
        deadline = self.cluster.next_idle_deadline(self.config.scale_down_after)
        if deadline is not None:
            self.kernel.schedule(deadline, self.scale_down, _CAPACITY)

    def scale_down(self) -> None:
        removed = self.cluster.scale_down(self._now(), self.config.scale_down_after)
        pools = sorted({n.pool for n in removed})
        for pool in pools:
            gone = [n for n in removed if n.pool == pool]
            self.log([Event(self._now(), EventKind.SCALED_DOWN, "", "",
                            f"node pool {pool}: {len(gone)} idle node(s) removed",
                            extra={"pool": pool, "nodes": self.cluster.pool_size(pool)})])
        self._plan_scale_down()
