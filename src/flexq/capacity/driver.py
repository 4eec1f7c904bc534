"""Capacity for admitted workloads: nodes, DWS ProvisioningRequests, and fallback, on any clock.

The driver reacts to the scheduler's events:

- QuotaReserved with a ``kueue.x-k8s.io/provisioning-request`` check pending: a ProvisioningRequest
  ``<workload>-<check>-<attempt>`` for the pod sets that use a managed resource. The emulated cloud
  fulfils it after its queued-provisioning delay (nodes created, booked for the workload: Provisioned,
  the check turns Ready) or never; after 7 days it fails (Expired) and the check says Retry, with
  backoff ``base * 2^(n-1)`` capped at ``max``, up to ``backoffLimitCount`` retries, then Rejected
  (:mod:`flexq.capacity.provisioning`).
- Admitted: pods are placed on ready nodes of their flavor's pool; missing nodes are asked of the
  autoscaler (within max-nodes, whole TPU slices, if the cloud has them); once every pod is bound the
  job runs. A pool that cannot deliver (stock-out at once, or nothing within the provisioning timeout)
  makes flexq evict the workload and skip that flavor for a cool-down, so the workload moves on to the
  next flavor; with ``fallback: false`` it waits, as in Kueue (:mod:`flexq.capacity.placement`).
- Finished or evicted: pods leave their nodes; nodes idle for ``scaleDownAfter`` go, by slice.
- Flex-start nodes go after their maximum run duration; their workloads are evicted and requeued.
- A node deleted or a host failed (:mod:`flexq.capacity.nodeloss`): its workloads are evicted and requeued; a
  multi-host TPU slice is recreated whole after the boot time (DWS capacity: released whole).
- Racing workloads' variants (:mod:`flexq.capacity.variants`): the first that can start wins, the others' claims
  are withdrawn; under flexq's policy a pool at its maximum is waited for.

The driver is the composition of those parts: each owns what it acts on and is given its collaborators. Every
workload has one :class:`~flexq.capacity.record.WorkloadCapacity` record (its state, nodes, request and bill); what
the driver tells leaves it through one :class:`~flexq.capacity.notes.Teller`, with typed payloads; a reason that
names a moment is a :class:`~flexq.scheduler.phrases.Phrase`, which the clock telling it words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set

from flexq.capacity.cluster import Cluster, PodGroup
from flexq.capacity.nodehealth import NodeHealth
from flexq.capacity.nodeloss import NodeLoss
from flexq.capacity.notes import Teller
from flexq.capacity.placement import Placer, ScaleDown
from flexq.capacity.pools import Node, NodePoolSpec
from flexq.capacity.provisioning import (
    BOOKING,
    PROVISIONING_EXPIRY,
    Provisioner,
    ProvisioningSettings,
    provisioning_settings,
)
from flexq.capacity.record import Records, Request, Timeline, Timers
from flexq.capacity.settings import CapacityConfig
from flexq.capacity.variants import Expected, Racing
from flexq.scheduler import CheckState, Event, EventKind, Scheduler, Taint, Workload, WorkloadState

__all__ = ["BOOKING", "PROVISIONING_EXPIRY", "CapacityDriver", "ProvisioningSettings", "Timers",
           "provisioning_settings"]


class CapacityDriver:
    """The capacity behind a scheduler's admitted workloads, on ``kernel``'s clock.

    ``log`` hears what the driver did (its events, and the scheduler's events it caused); ``start`` starts a workload's
    job once its pods are bound; ``provisioning``: the provisioning checks' settings, by check.
    ``run_time`` says how long a workload runs once started, when known; ``finish_eta`` when a running one finishes
    (the simulator knows; by default, from its run time)."""

    def __init__(self, config: CapacityConfig, scheduler: Scheduler, kernel: Timers,
                 log: Callable[[list[Event]], None], start: Callable[[str, float], None],
                 provisioning: dict[str, ProvisioningSettings], *,
                 run_time: Callable[[str], float | None] | None = None,
                 finish_eta: Callable[[str], float | None] | None = None,
                 pods_ready: Callable[[str, float, bool], None] | None = None) -> None:
        self.cluster = Cluster(config.pools, config.cloud)
        self.kernel = kernel
        self.log = log
        self.records = Records()
        self.timeline = Timeline(kernel, self.records, self._timer)
        self.teller = Teller(log, kernel.now, self.records, scheduler)
        self.expected = Expected(self.records, run_time or (lambda _key: None), finish_eta)
        self.scaling = ScaleDown(self.cluster, self.timeline, self.teller, config)
        self.racing = Racing(self.cluster, self.records, self.teller, scheduler, self.expected)
        self.node_loss = NodeLoss(self.cluster, self.timeline, self.teller, scheduler,
                                  make_room=self._make_room, plan_scale_down=self.scaling.plan,
                                  pods_ready=pods_ready)
        self.node_health = NodeHealth(self.cluster, self.timeline, self.teller, scheduler, self.node_loss,
                                      changed=self._nodes_back)
        self.provisioner = Provisioner(self.cluster, self.records, self.timeline, self.teller, scheduler, config,
                                       provisioning, expected=self.expected, plan_expiry=self.node_loss.plan_expiry)
        self.placer = Placer(self.cluster, self.records, self.timeline, self.teller, scheduler, config,
                             racing=self.racing, room=self.provisioner.room, scale_down=self.scaling,
                             plan_expiry=self.node_loss.plan_expiry, start=start)
        self._scheduler = scheduler
        self._config = config
        self.attach(scheduler)
        self.cluster.on_created = self._nodes_created
        self.cluster.on_bound = self.node_health.bound
        self.cluster.start_with_initial_nodes(kernel.now())
        self.node_loss.plan_expiry()
        self.node_loss.plan_host_failures(list(config.pools))
        self.node_health.plan(list(config.pools))

    def nodes(self) -> Iterable[Node]:
        """The cluster's nodes, which the scheduler places topology-aware pod sets on. (A bound method, not a closure:
        a forecast's deep copy of the scheduler and the driver together then reads the copy's nodes.)"""
        return self.cluster.nodes.values()

    def _timer(self, action: Callable[[], None]) -> None:
        """Every timer the driver sets runs through here: a copy of the driver (a forecast) tells its timers by it."""
        action()

    def _nodes_created(self, nodes: list[Node]) -> None:
        """Nodes were added: workloads set aside for want of topology placement look again now, and again when the
        nodes are ready (Kueue's TAS node reconciler requeues a ClusterQueue's inadmissible workloads on node events).
        No timer is set where no flavor is topology-aware."""
        if not any(f.topology for f in self._scheduler.config.flavors.values()):
            return
        self._scheduler.nodes_changed()
        now = self.timeline.now()
        for ready in sorted({n.ready_at for n in nodes if n.ready_at > now}):
            self.timeline.at(ready, self._nodes_ready)

    def _nodes_ready(self) -> None:
        self._scheduler.nodes_changed()

    def _nodes_back(self) -> None:
        """A node may take pods again (Ready again, a taint removed), or pods left one."""
        self._scheduler.nodes_changed()
        self._make_room()

    def _make_room(self) -> None:
        self.provisioner.room.make_room()

    # --- what the driver is given ----------------------------------------------------------------------------

    @property
    def scheduler(self) -> Scheduler:
        return self._scheduler

    @property
    def config(self) -> CapacityConfig:
        return self._config

    @config.setter
    def config(self, config: CapacityConfig) -> None:
        self._config = self.scaling.config = self.provisioner.config = self.placer.config = config

    @property
    def provisioning(self) -> dict[str, ProvisioningSettings]:
        """The provisioning checks' settings, by check (replaced when the checks are configured anew)."""
        return self.provisioner.settings

    @provisioning.setter
    def provisioning(self, settings: dict[str, ProvisioningSettings]) -> None:
        self.provisioner.settings = settings

    @property
    def run_time(self) -> Callable[[str], float | None]:
        return self.expected.run_time

    @run_time.setter
    def run_time(self, run_time: Callable[[str], float | None]) -> None:
        self.expected.run_time = run_time

    @property
    def finish_eta(self) -> Callable[[str], float | None]:
        return self.expected.finish_at

    @finish_eta.setter
    def finish_eta(self, finish_eta: Callable[[str], float | None]) -> None:
        self.expected.finish_eta = finish_eta

    def attach(self, scheduler: Scheduler) -> None:
        """Drive a scheduler (the live controller's is rebuilt on a resync): under flexq's policy variants win by
        starting, and a running job migrates only when that makes it finish sooner."""
        if scheduler is not self._scheduler:
            self.timeline.epoch += 1  # the timers set for the workloads of the scheduler before are stale
        self._scheduler = scheduler
        self.teller.scheduler = self.racing.scheduler = self.node_loss.scheduler = self.placer.scheduler = scheduler
        self.provisioner.attach(scheduler)
        scheduler.nodes = self.nodes  # topology-aware flavors place pod sets on these
        scheduler.start_decides = self._config.fallback  # Kueue-compatible: the first variant admitted wins
        scheduler.migration_check = self.racing.migration_check if self._config.fallback else None

    def set_pools(self, pools: list[NodePoolSpec]) -> None:
        """The node pools changed (created, updated, deleted): keep the nodes of pools that remain; a new pool
        starts with its ``--num-nodes`` nodes."""
        added = {p.name for p in pools} - set(self.cluster.pools)
        self.cluster.pools = {p.name: p for p in pools}
        self.cluster.remove([n.name for n in self.cluster.nodes.values() if n.pool not in self.cluster.pools])
        if added and self.cluster.start_with_initial_nodes(self.kernel.now(), added):
            self.node_loss.plan_expiry()
            self.scaling.plan()
        self.node_loss.plan_host_failures([p for p in pools if p.name in added])
        self.node_health.plan([p for p in pools if p.name in added])
        self._scheduler.nodes_changed()

    # --- the scheduler's events --------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        key = event.workload
        if event.kind is EventKind.QUOTA_RESERVED:
            wl = self._scheduler.workload(key)
            if wl is None or wl.admission is None:
                return  # a variant withdrawn since (an earlier event of the same step started its sibling)
            for check, state in sorted(wl.checks.items()):
                if check in self.provisioner.settings and state is CheckState.PENDING:
                    self.provisioner.request(key, check)
        elif event.kind is EventKind.ADMITTED:
            self.records.of(key).admitted(self.kernel.now())
            self.placer.try_start(key)
        elif event.kind is EventKind.FINISHED and event.extra.get("finishedReason") == "VariantWithdrawn":
            self.racing.withdraw(key, str(event.extra.get("parent", "")))
            self.placer.release(key)
        elif event.kind in (EventKind.EVICTED, EventKind.FINISHED, EventKind.DEACTIVATED):
            replacement = str(event.extra.get("replacedBy", ""))
            if event.kind is EventKind.FINISHED and replacement and key in self.records.running:
                self.records.of(replacement).replaces = key  # a growing job's running pods stay where they are
                return
            self.placer.release(key)
            record = self.records.of(key)
            old, record.replaces = record.replaces, None
            if old is not None:
                self.placer.release(old)

    def adopt(self) -> None:
        """Workloads that reserved quota while their provisioning check had no one to answer it (no capacity was
        modelled yet, or the check was not known): each that has made no ProvisioningRequest makes one now, as Kueue's
        provisioning controller does for every workload it finds with the check pending."""
        for wl in self._scheduler.workloads():
            record = self.records.get(wl.key)
            if wl.admission is None or wl.state is not WorkloadState.QUOTA_RESERVED or (
                    record is not None and record.request is not None):
                continue
            for check, state in sorted(wl.checks.items()):
                if check in self.provisioner.settings and state is CheckState.PENDING:
                    self.provisioner.request(wl.key, check)

    def rebind(self, key: str) -> None:
        """A running workload's pod counts changed in place (an elastic job shrank): its pods are placed anew."""
        if key in self.records.running:
            self.placer.release(key)
            self.placer.try_start(key)

    def release(self, key: str) -> None:
        """The workload is gone (deleted) or stopped: its pods leave their nodes."""
        self.placer.release(key)

    def try_start(self, key: str) -> None:
        """Place ``key``'s pods (asking for nodes where they are missing) and start it once all are bound."""
        self.placer.try_start(key)

    def retry_waiting(self) -> None:
        """Nodes came (from outside the driver): every admitted workload waiting for nodes tries again."""
        self.placer.retry_waiting()

    def groups(self, wl: Workload, only: frozenset[str] | None = None) -> list[PodGroup]:
        """The pod groups of an admitted workload: node selector and tolerations as the job will run."""
        return self.placer.groups(wl, only)

    def scale_down(self) -> None:
        self.scaling.scale_down()

    # --- nodes lost -------------------------------------------------------------------------------------------

    def plan_expiry(self) -> None:
        self.node_loss.plan_expiry()

    def expire(self) -> None:
        self.node_loss.expire()

    def host_failure(self, pool: str) -> None:
        self.node_loss.host_failure(pool)

    def node_deleted(self, name: str, why: str = "") -> None:
        """A node was deleted from outside or its host failed (:meth:`NodeLoss.node_deleted`)."""
        self.node_loss.node_deleted(name, why)

    def node_not_ready(self, name: str, why: str = "", unreachable: bool = False) -> None:
        """Node ``name`` went NotReady (:meth:`NodeHealth.not_ready`)."""
        self.node_health.not_ready(name, why, unreachable)

    def node_still_down(self, name: str, unreachable: bool) -> None:
        """A down node's Ready condition is now Unknown (``unreachable``) or False (:meth:`NodeHealth.still_down`)."""
        self.node_health.still_down(name, unreachable)

    def node_ready(self, name: str, why: str = "") -> None:
        self.node_health.ready_again(name, why)

    def node_tainted(self, name: str, taints: tuple[Taint, ...], why: str = "") -> None:
        """Node ``name``'s taints are now ``taints`` (:meth:`NodeHealth.tainted`)."""
        self.node_health.tainted(name, taints, why)

    # --- what the driver knows, read-only --------------------------------------------------------------------

    def unhealthy_node(self, key: str) -> str:
        """The node whose pods workload ``key`` waits to have placed again (Kueue's ``status.unhealthyNodes``;
        ``TASFailedNodeReplacementFailFast`` off); "": none."""
        return self.node_loss.waiting_on(key)

    def waiting_for(self, node: str) -> set[str]:
        """The workloads waiting for a replacement of ``node`` (:meth:`unhealthy_node`)."""
        return self.node_loss.waiting_for(node)

    @property
    def running(self) -> Set[str]:
        """The workloads whose pods are bound."""
        return self.records.running

    @property
    def placements(self) -> Mapping[str, dict[str, list[str]]]:
        """Where each running workload's pods are: pod set -> node names."""
        return self.records.placements

    @property
    def started_at(self) -> Mapping[str, float]:
        """When each running workload's pods were bound."""
        return self.records.started_at

    @property
    def requests(self) -> Mapping[str, Request]:
        """The ProvisioningRequest each workload made last: (check, request name, node pool or "")."""
        return self.records.requests

    @property
    def costs(self) -> Mapping[str, float]:
        """USD each workload's past runs cost (a run going on is in :meth:`cost`)."""
        return self.records.costs

    @property
    def waste(self) -> Mapping[str, float]:
        """USD of capacity provisioned for a racing workload's variant that lost the race (billed to the workload)."""
        return self.records.waste

    def cost(self, key: str) -> float:
        """What ``key`` has cost so far, including a run still going (node-hours x price; a CPU node's cost shared
        by the CPU its pods requested, an accelerator node's charged whole)."""
        record = self.records.get(key)
        return record.cost(self.kernel.now()) if record is not None else 0.0

    def spent(self) -> dict[str, float]:
        """What each workload that used nodes has cost so far (:meth:`cost`), runs still going included."""
        now = self.kernel.now()
        return {r.key: r.cost(now) for r in self.records.values() if r.spent is not None or r.billing is not None}

    def hourly(self, key: str) -> float:
        """USD an hour that ``key``'s run costs while it runs where it runs now (0 when it is not running)."""
        record = self.records.get(key)
        return record.billing.hourly if record is not None and record.billing is not None else 0.0
