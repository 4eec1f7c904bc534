"""ProvisioningRequests in the capacity driver: requested, provisioned, booked, revoked, retried.

A workload whose ``kueue.x-k8s.io/provisioning-request`` check is pending gets a ProvisioningRequest
``<workload>-<check>-<attempt>`` (:class:`Provisioner`) of the class its ProvisioningRequestConfig names:

- ``queued-provisioning.gke.io`` (DWS, and any other class): the emulated cloud fulfils it after its
  queued-provisioning delay (nodes created, booked for the workload) or never;
- ``check-capacity.autoscaling.x-k8s.io``: nothing is provisioned; the cluster autoscaler answers whether the pods fit
  on the nodes there now. If they do, those nodes are booked for the workload (Provisioned, ``CapacityIsFound``); if
  not, the request stays Accepted (``CapacityIsNotFound``: "CA will try to find it later") and is looked at again
  every scan interval, or fails at once where the config's ``parameters`` say ``noRetry: "true"``.

Either way a request not provisioned within 7 days fails (Expired), a booking unused for 10 minutes expires, and
failures are retried with Kueue's backoff (``base * 2^(n-1)`` capped at ``max``) up to ``backoffLimitCount``, then
Rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from flexq.capacity.cluster import Cluster
from flexq.capacity.notes import ProvisioningState, RequestNote, Teller
from flexq.capacity.placement import pod_groups
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.record import CAPACITY_PRIORITY, Records, Request, Timeline, Timers
from flexq.capacity.settings import CapacityConfig
from flexq.capacity.variants import Expected, WaitingRoom
from flexq.durations import format_seconds
from flexq.objects import PROVISIONING_CONTROLLER
from flexq.scheduler import CheckState, EventKind, PodSetUpdate, Scheduler, Workload

__all__ = [
    "BOOKING",
    "CAPACITY_IS_FOUND",
    "CAPACITY_IS_NOT_FOUND",
    "CAPACITY_PRIORITY",
    "CHECK_CAPACITY",
    "PROVISIONING_EXPIRY",
    "SCAN_INTERVAL",
    "Provisioner",
    "ProvisioningSettings",
    "ProvisioningState",
    "Timers",
    "answer_timer",
    "provisioning_settings",
]

PROVISIONING_EXPIRY: Final = 7 * 24 * 3600.0
BOOKING: Final = 600.0
"""Provisioned capacity stays booked for the workload this long before its pods must use it."""
CHECK_CAPACITY: Final = "check-capacity.autoscaling.x-k8s.io"
"""The class that provisions nothing: it answers whether the capacity is in the cluster now."""
SCAN_INTERVAL: Final = 10.0
"""How often the cluster autoscaler looks again at a check-capacity request whose capacity was not found."""
CAPACITY_IS_NOT_FOUND: Final = "CapacityIsNotFound"
"""The cluster autoscaler's reason (check-capacity) for capacity not in the cluster: on ``Provisioned`` (False) while
it will look again, on ``Failed`` with ``noRetry``."""
CAPACITY_IS_FOUND: Final = "CapacityIsFound"
_NOT_FOUND_LATER: Final = "Capacity is not found, CA will try to find it later."
_NOT_FOUND_NO_RETRY: Final = "CA could not find requested capacity"
_FOUND: Final = "Capacity is found in the cluster"


@dataclass(frozen=True, slots=True)
class ProvisioningSettings:
    """What an AdmissionCheck's ProvisioningRequestConfig says."""

    provisioning_class: str
    managed: frozenset[str]
    backoff_limit: int = 3
    backoff_base: float = 60.0
    backoff_max: float = 1800.0
    no_retry: bool = False
    """``parameters.noRetry: "true"`` (check-capacity): capacity not found fails the request instead of waiting."""
    node_selector: tuple[tuple[str, str], ...] = ()
    """``podSetUpdates.nodeSelector``: each (key, detail) puts the node selector ``key`` on the pods, its value the
    provisioned request's ``status.provisioningClassDetails[detail]`` (left out where the request has no such
    detail, as Kueue skips it)."""

    @property
    def check_only(self) -> bool:
        """Whether requests of this class only check for capacity (provision nothing)."""
        return self.provisioning_class == CHECK_CAPACITY

    def backoff(self, failures: int) -> float:
        return float(min(self.backoff_base * 2 ** (failures - 1), self.backoff_max))


def provisioning_settings(objects: Mapping[str, list[dict[str, Any]]]) -> dict[str, ProvisioningSettings]:
    configs = {o["metadata"]["name"]: o["spec"] for o in objects.get("ProvisioningRequestConfig", [])}
    out = {}
    for check in objects.get("AdmissionCheck", []):
        spec = check.get("spec") or {}
        if spec.get("controllerName") != PROVISIONING_CONTROLLER:
            continue
        config = configs.get((spec.get("parameters") or {}).get("name", ""), {})
        retry = config.get("retryStrategy") or {}
        selector = ((config.get("podSetUpdates") or {}).get("nodeSelector")) or []
        out[check["metadata"]["name"]] = ProvisioningSettings(
            str(config.get("provisioningClassName", "")), frozenset(config.get("managedResources") or []),
            int(retry.get("backoffLimitCount", 3)), float(retry.get("backoffBaseSeconds", 60)),
            float(retry.get("backoffMaxSeconds", 1800)),
            str((config.get("parameters") or {}).get("noRetry", "")).lower() == "true",
            tuple((str(row["key"]), str(row["valueFromProvisioningClassDetail"])) for row in selector))
    return out


def class_details(pool: NodePoolSpec) -> dict[str, str]:
    """What GKE's queued provisioning writes in a provisioned request's ``status.provisioningClassDetails``, as far
    as the emulated cloud knows it: the node pool, its accelerator, its zone, and how the nodes were made (a resize
    request of a node pool flexq did not auto-provision)."""
    details = {"NodePoolName": pool.name, "NodePoolAutoProvisioned": "false", "ProvisioningMode": "resize_request"}
    accelerator = pool.machine.tpu_accelerator if pool.machine.tpu_chips else (
        pool.machine.gpu_accelerator if pool.machine.gpus else "")
    if accelerator:
        details["AcceleratorType"] = accelerator
    if pool.location:
        details["SelectedZone"] = pool.location
    return details


class Provisioner:
    """The ProvisioningRequests of workloads whose provisioning check is pending, by the checks' ``settings``.

    A request for a pool at its maximum waits in :attr:`room` under flexq's policy (``config.fallback``);
    ``plan_expiry`` is told when nodes were provisioned (flex-start nodes expire)."""

    def __init__(self, cluster: Cluster, records: Records, timeline: Timeline, teller: Teller, scheduler: Scheduler,
                 config: CapacityConfig, settings: dict[str, ProvisioningSettings], *, expected: Expected,
                 plan_expiry: Callable[[], None]) -> None:
        self.cluster = cluster
        self.records = records
        self.timeline = timeline
        self.teller = teller
        self.scheduler = scheduler
        self.config = config
        self.settings = settings
        self.plan_expiry = plan_expiry
        self.room = WaitingRoom(cluster, timeline, teller, scheduler, expected, self.provision)

    def attach(self, scheduler: Scheduler) -> None:
        self.scheduler = self.room.scheduler = scheduler

    def request(self, key: str, check: str) -> None:
        """``key``'s ``check`` is pending: a ProvisioningRequest for its pod sets that use a managed resource."""
        wl = self.scheduler.held(key)
        settings = self.settings[check]
        owner = self.scheduler.workload(wl.parent) if wl.parent else wl
        owner = owner if owner is not None else wl
        attempts = self.records.of(owner.key).attempts
        attempt = attempts[check] = attempts.get(check, 0) + 1
        name = f"{owner.name}-{check}-{attempt}"  # a variant's request is named for the workload it races for
        groups = pod_groups(wl, self.scheduler.config.flavors, settings.managed or None)
        now = self.timeline.now()
        pools = {g.name: self.cluster.pool_for(g) for g in groups}
        pool = next((p for p in pools.values() if p is not None), None)
        record = self.records.of(key)
        record.request = Request(check, name, pool.name if pool is not None else "")
        if settings.check_only:
            self._check_capacity(key, check, name, now, told=False)
            return
        unmatched = [g for g in groups if self.cluster.unmatched(g)]
        if unmatched:
            # No node group can ever hold these pods: the autoscaler does not provision the request, it fails (the
            # check goes to Retry, then Rejected, as Kueue's provisioning controller maps Failed).
            self.failed(key, check, name, CAPACITY_IS_NOT_FOUND, "no node pool matches: " + "; ".join(
                self.cluster.why_unmatched(g) for g in unmatched))
            return
        if pool is None:
            # No pool modelled behind it: the request is provisioned at once.
            self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} is Provisioned",
                           RequestNote(name, ProvisioningState.PROVISIONED))
            self.teller.log(self.scheduler.set_check(key, check, CheckState.READY, now, f"{name} provisioned"))
            return
        count = sum(-(-g.count // pool.hosts_per_slice) * pool.hosts_per_slice for g in groups)
        if record.replaces is not None:  # a growing job asks only for what it adds: its running pods keep their nodes
            count = max(0, count - sum(1 for n in self.cluster.nodes_of(record.replaces) if n.pool == pool.name))
        delay = self.cluster.cloud.queued_delay(pool.name, pool.machine.name, name, now)
        eta_at = now + delay if delay is not None and delay < PROVISIONING_EXPIRY else None
        eta = f"; expected in {format_seconds(eta_at - now)}" if eta_at is not None else ""
        self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} is Accepted: waiting for "
                       f"{count} {pool.machine.name} node(s) in {pool.name}{eta}",
                       RequestNote(name, ProvisioningState.ACCEPTED, eta=eta_at))
        self.scheduler.explain(wl.key, f"waiting for ProvisioningRequest {name}{eta}")
        if eta_at is None:
            self.timeline.later(now + PROVISIONING_EXPIRY, key, partial(
                self.failed, key, check, name, "Expired", "capacity was not found within 7 days"))
        else:
            self.timeline.later(eta_at, key, partial(self.provision, key, check, name, pool.name, count))

    def provision(self, key: str, check: str, name: str, pool: str, count: int) -> None:
        """The cloud answers request ``name``: ``count`` nodes of ``pool``, booked for ``key``."""
        wl = self.scheduler.workload(key)
        if wl is None or wl.admission is None:
            return  # withdrawn (a variant whose race ended) or no longer holding quota: nothing to provision for
        now = self.timeline.now()
        created, why = self.cluster.scale_up(pool, count, now, booked_for=key, ready_at=now) if count else ([], "")
        spec = self.cluster.pools[pool]
        if count > spec.max_nodes:  # never, however long it waits: fails as the autoscaler fails it
            self.failed(key, check, name, "CapacityNotFound", f"{count} node(s) asked of node pool {pool}, more "
                        f"than it can hold (--max-nodes={spec.max_nodes})")
            return
        at_maximum = spec.autoscaling and self.cluster.pool_size(pool) + count > spec.max_nodes
        if count and not created and self.config.fallback and at_maximum:
            self.room.wait(key, check, name, pool, count, why)
            return
        if count and not created:
            self.failed(key, check, name, "CapacityNotFound", why)
            return
        self.plan_expiry()
        details = class_details(spec)
        self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} is Provisioned: "
                       f"{len(created)} node(s) in {pool}",
                       RequestNote(name, ProvisioningState.PROVISIONED, pool=pool,
                                   details=tuple(sorted(details.items()))))
        slices = {n.slice_id for n in created}
        self.timeline.later(now + BOOKING, key, partial(self._booking_check, key, check, name, slices))
        revoke = self.cluster.cloud.revoke_after(pool, spec.machine.name)
        if revoke is not None:
            self.timeline.at(now + revoke, partial(self._revoke, key, name, slices))
        self._ready(key, wl, check, name, details)

    def _check_capacity(self, key: str, check: str, name: str, since: float, told: bool) -> None:
        """check-capacity: whether ``key``'s pods fit on the nodes there now (ready, free, not booked for another).
        If they do, those nodes are booked for it and its check is Ready; if not, the request stays Accepted and is
        looked at again after the scan interval (``told``: its Accepted event was told already)."""
        wl = self.scheduler.workload(key)
        if wl is None or wl.admission is None:
            return  # withdrawn, or no longer holding quota: nothing to check for
        settings, now = self.settings[check], self.timeline.now()
        groups = pod_groups(wl, self.scheduler.config.flavors, settings.managed or None)
        placement = self.cluster.place(groups, now, booked_for=key)
        if placement.complete:
            nodes = sorted({n for names in placement.bindings.values() for n in names})
            for node in nodes:
                self.cluster.nodes[node].booked_for = key
            pools = sorted({self.cluster.nodes[n].pool for n in nodes})
            self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} is Provisioned: capacity "
                           f"is found in the cluster ({len(nodes)} node(s) booked)",
                           RequestNote(name, ProvisioningState.PROVISIONED, pool=pools[0] if pools else None,
                                       reason=CAPACITY_IS_FOUND, message=_FOUND))
            self.timeline.later(now + BOOKING, key, partial(self._check_booking, key, check, name, nodes))
            self._ready(key, wl, check, name, {})
            return
        why = "; ".join([*(f"no node pool matches pod set {g}" for g in placement.unplaceable),
                         *placement.oversized.values(),
                         *(f"{count} more node(s) of node pool {pool} needed" for pool, count in
                           sorted(placement.missing.items()))])
        if settings.no_retry:
            self.failed(key, check, name, CAPACITY_IS_NOT_FOUND, f"capacity is not found in the cluster: {why}",
                        condition=_NOT_FOUND_NO_RETRY)
            return
        if now >= since + PROVISIONING_EXPIRY:
            self.failed(key, check, name, "Expired", "capacity was not found within 7 days")
            return
        if not told:
            self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} is Accepted: capacity "
                           f"is not found in the cluster ({why}); the autoscaler will try to find it later",
                           RequestNote(name, ProvisioningState.ACCEPTED, reason=CAPACITY_IS_NOT_FOUND,
                                       message=_NOT_FOUND_LATER))
            self.scheduler.explain(wl.key, f"waiting for ProvisioningRequest {name}: capacity is not found in the "
                                   f"cluster ({why})")
        self.timeline.later(now + SCAN_INTERVAL, key, partial(self._check_capacity, key, check, name, since, True))

    def _check_booking(self, key: str, check: str, name: str, nodes: list[str]) -> None:
        """A check-capacity booking lasts 10 minutes too: nodes its pods have not started on by then are free again
        (they were never the request's to remove)."""
        unused = [self.cluster.nodes[n] for n in nodes if n in self.cluster.nodes and
                  self.cluster.nodes[n].booked_for == key]
        if not unused or key in self.records.running:
            return
        for node in unused:
            node.booked_for = None
        self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} BookingExpired: its pods did "
                       f"not use the {len(unused)} booked node(s) within {format_seconds(BOOKING)}",
                       RequestNote(name, ProvisioningState.BOOKING_EXPIRED))
        self.failed(key, check, name, "BookingExpired", "the booking expired before the pods started", noted=True)

    def _ready(self, key: str, wl: Workload, check: str, name: str, details: Mapping[str, str]) -> None:
        """Request ``name`` is provisioned: ``key``'s check is Ready, its pod sets told to consume the request, and
        given the node selector its config's ``podSetUpdates`` makes of the request's class ``details``."""
        settings = self.settings[check]
        selector = {label: details[detail] for label, detail in settings.node_selector if detail in details}
        updates = {g.name: PodSetUpdate({"autoscaling.x-k8s.io/consume-provisioning-request": name,
                                         "autoscaling.x-k8s.io/provisioning-class-name": settings.provisioning_class},
                                        node_selector=selector)
                   for g in pod_groups(wl, self.scheduler.config.flavors, settings.managed or None)}
        self.teller.log(self.scheduler.set_check(key, check, CheckState.READY, self.timeline.now(),
                                                 f"{name} provisioned", pod_set_updates=updates))

    def _booking_check(self, key: str, check: str, name: str, slices: set[str]) -> None:
        """The booking lasts 10 minutes: capacity its pods have not started to use by then goes back."""
        unused = [n for n in self.cluster.nodes.values() if n.slice_id in slices and n.booked_for == key]
        if not unused or key in self.records.running:
            return
        self.cluster.remove(n.name for n in unused)
        self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} BookingExpired: its pods did "
                       f"not use the {len(unused)} provisioned node(s) within {format_seconds(BOOKING)}",
                       RequestNote(name, ProvisioningState.BOOKING_EXPIRED))
        self.failed(key, check, name, "BookingExpired", "the booking expired before the pods started", noted=True)

    def _revoke(self, key: str, name: str, slices: set[str]) -> None:
        """The cloud takes the provisioned capacity back (CapacityRevoked): its workload is evicted and requeued."""
        gone = [n for n in self.cluster.nodes.values() if n.slice_id in slices]
        if not gone:
            return
        victims = sorted({w for n in gone for w in n.pods})
        self.cluster.remove(n.name for n in gone)
        self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} CapacityRevoked: "
                       f"{len(gone)} node(s) taken back by the cloud",
                       RequestNote(name, ProvisioningState.CAPACITY_REVOKED))
        for victim in victims:
            self.teller.log(self.scheduler.evict(victim, self.timeline.now(),
                                                 f"ProvisioningRequest {name}: capacity revoked", "CapacityRevoked"))

    def failed(self, key: str, check: str, name: str, reason: str, message: str, noted: bool = False,
               condition: str = "") -> None:
        """Request ``name`` failed for ``reason`` (its ``Failed`` condition's reason; ``condition``: that condition's
        message where the autoscaler words it): the check is retried after Kueue's backoff, or Rejected once the
        retries are spent (``noted``: its event was told already)."""
        now = self.timeline.now()
        failures = self.records.of(key).failures
        failed = failures[check] = failures.get(check, 0) + 1
        settings = self.settings[check]
        if not noted:
            self.teller.on(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} Failed ({reason}): "
                           f"{message}", RequestNote(name, ProvisioningState.FAILED, reason=reason,
                                                      message=condition))
        if failed > settings.backoff_limit:
            why = f"{name} failed ({reason}) after {settings.backoff_limit} retries"
            self.teller.log(self.scheduler.set_check(key, check, CheckState.REJECTED, now, why))
            return
        delay = settings.backoff(failed)
        self.teller.log(self.scheduler.set_check(key, check, CheckState.RETRY, now, f"{name} failed ({reason}); retry "
                                                 f"{failed} of {settings.backoff_limit} in {format_seconds(delay)}",
                                                 retry_after=delay))


def answer_timer(action: Callable[[], None]) -> tuple[str, str] | None:
    """(request, pool) where the driver's timer ``action`` is the cloud's answer to a ProvisioningRequest, else None:
    a forecast moves such a timer to when the answers seen so far expect it (the driver's timers wrap their action
    in ``functools.partial`` s, the action last)."""
    while isinstance(action, partial):
        if getattr(action.func, "__func__", None) is Provisioner.provision:
            return str(action.args[2]), str(action.args[3])
        inner = action.args[-1] if action.args else None
        if not callable(inner):
            return None
        action = inner
    return None
