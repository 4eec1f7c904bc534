"""DWS ProvisioningRequests in the capacity driver: requested, provisioned, booked, revoked, retried.

:class:`ProvisioningCapacity` is mixed into :class:`~flexq.capacity.driver.CapacityDriver`: a workload whose
``kueue.x-k8s.io/provisioning-request`` check is pending gets a ProvisioningRequest ``<workload>-<check>-<attempt>``;
the emulated cloud fulfils it after its queued-provisioning delay (nodes booked for the workload) or never; after 7
days it fails (Expired), and failures are retried with Kueue's backoff up to ``backoffLimitCount``, then Rejected.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

from flexq.capacity.cluster import Cluster, PodGroup
from flexq.capacity.settings import CapacityConfig
from flexq.durations import format_seconds
from flexq.objects.queue_status import PROVISIONING_CONTROLLER
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import CheckState, Workload
from flexq.scheduler.scheduler import Scheduler

__all__ = ["BOOKING", "CAPACITY_PRIORITY", "PROVISIONING_EXPIRY", "ProvisioningCapacity", "ProvisioningSettings",
           "ProvisioningState",
           "Timers", "provisioning_settings"]


class ProvisioningState(StrEnum):
    """Where a ProvisioningRequest stands, as its events say it (``state``) and its conditions show it."""

    ACCEPTED = "Accepted"
    """The cloud took the request and looks for machines (queued provisioning: up to its expiry)."""
    PROVISIONED = "Provisioned"
    """The machines are there, booked for the workload's pods."""
    FAILED = "Failed"
    """No machines: the admission check is retried or rejected."""
    BOOKING_EXPIRED = "BookingExpired"
    """The pods did not start on the booked machines in time."""
    CAPACITY_REVOKED = "CapacityRevoked"
    """The cloud took provisioned machines back."""
    WITHDRAWN = "Withdrawn"
    """A racing variant's request, taken back when another flavor won (at no cost)."""


class Timers(Protocol):
    """Time and deferred actions: the simulator's event kernel, or the live controller's timer heap."""

    def now(self) -> float: ...

    def schedule(self, at: float, action: Callable[[], None], priority: int = 0) -> None: ...

PROVISIONING_EXPIRY: Final = 7 * 24 * 3600.0
BOOKING: Final = 600.0
"""Provisioned capacity stays booked for the workload this long before its pods must use it."""
CAPACITY_PRIORITY: Final = 1  # kernel priority: after finishes (0), before submissions



@dataclass(frozen=True, slots=True)
class ProvisioningSettings:
    """What an AdmissionCheck's ProvisioningRequestConfig says."""

    provisioning_class: str
    managed: frozenset[str]
    backoff_limit: int = 3
    backoff_base: float = 60.0
    backoff_max: float = 1800.0

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
        out[check["metadata"]["name"]] = ProvisioningSettings(
            str(config.get("provisioningClassName", "")), frozenset(config.get("managedResources") or []),
            int(retry.get("backoffLimitCount", 3)), float(retry.get("backoffBaseSeconds", 60)),
            float(retry.get("backoffMaxSeconds", 1800)))
    return out



class ProvisioningCapacity:
    """ProvisioningRequests in the capacity driver (a mixin: the driver provides what is declared here)."""

    config: CapacityConfig
    cluster: Cluster
    scheduler: Scheduler
    kernel: Timers
    log: Callable[[list[Event]], None]
    provisioning: dict[str, ProvisioningSettings]
    failures: dict[tuple[str, str], int]
    attempts: dict[tuple[str, str], int]
    requests: dict[str, tuple[str, str, str]]
    carried: dict[str, str]
    running: set[str]

    if TYPE_CHECKING:
        def _now(self) -> float: ...

        def _note(self, kind: EventKind, workload: str, reason: str, **extra: Any) -> None: ...

        def _later(self, at: float, key: str, action: Callable[[], None]) -> None: ...

        def groups(self, wl: Workload, only: frozenset[str] | None = None) -> list[PodGroup]: ...

        def plan_expiry(self) -> None: ...

        def _wait_for_room(self, key: str, check: str, name: str, pool: str, count: int, why: str) -> None: ...

    def _request(self, key: str, check: str) -> None:
        wl = self.scheduler.held(key)
        settings = self.provisioning[check]
        owner = self.scheduler.workload(wl.parent) if wl.parent else wl
        owner = owner if owner is not None else wl
        attempt = self.attempts.get((owner.key, check), 0) + 1
        self.attempts[(owner.key, check)] = attempt
        name = f"{owner.name}-{check}-{attempt}"  # a variant's request is named for the workload it races for
        groups = self.groups(wl, settings.managed or None)
        now = self._now()
        pools = {g.name: self.cluster.pool_for(g) for g in groups}
        pool = next((p for p in pools.values() if p is not None), None)
        self.requests[key] = (check, name, pool.name if pool is not None else "")
        unmatched = [g for g in groups if self.cluster.unmatched(g)]
        if unmatched:
            # No node group can ever hold these pods: the autoscaler does not provision the request, it fails (the
            # check goes to Retry, then Rejected, as Kueue's provisioning controller maps Failed).
            self._failed(key, check, name, "CapacityIsNotFound", "no node pool matches: " + "; ".join(
                self.cluster.why_unmatched(g) for g in unmatched))
            return
        if pool is None:
            # No pool modelled behind it: the request is provisioned at once.
            self._note(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} is Provisioned",
                       request=name, state=ProvisioningState.PROVISIONED)
            self.log(self.scheduler.set_check(key, check, CheckState.READY, now, f"{name} provisioned"))
            return
        count = sum(-(-g.count // pool.hosts_per_slice) * pool.hosts_per_slice for g in groups)
        old = self.carried.get(key)
        if old is not None:  # a growing job asks only for what it adds: its running pods keep their nodes
            count = max(0, count - sum(1 for n in self.cluster.nodes_of(old) if n.pool == pool.name))
        delay = self.cluster.cloud.queued_delay(pool.name, pool.machine.name, name, now)
        eta_at = now + delay if delay is not None and delay < PROVISIONING_EXPIRY else None
        eta = f"; expected in {format_seconds(eta_at - now)}" if eta_at is not None else ""
        self._note(EventKind.PROVISIONING_REQUEST, key,
                   f"ProvisioningRequest {name} is Accepted: waiting for {count} "
                   f"{pool.machine.name} node(s) in {pool.name}{eta}", request=name, state=ProvisioningState.ACCEPTED,
                   eta=eta_at)
        self.scheduler.explain(wl.key, f"waiting for ProvisioningRequest {name}{eta}")
        if delay is None or delay >= PROVISIONING_EXPIRY:
            self._later(now + PROVISIONING_EXPIRY, key,
                        partial(self._failed, key, check, name, "Expired", "capacity was not found within 7 days"))
        else:
            self._later(now + delay, key, partial(self._provision, key, check, name, pool.name, count))

    def _provision(self, key: str, check: str, name: str, pool: str, count: int) -> None:
        wl = self.scheduler.workload(key)
        if wl is None or wl.admission is None:
            return  # withdrawn (a variant whose race ended) or no longer holding quota: nothing to provision for
        now = self._now()
        created, why = self.cluster.scale_up(pool, count, now, booked_for=key, ready_at=now) if count else ([], "")
        spec = self.cluster.pools[pool]
        if count > spec.max_nodes:  # never, however long it waits: fails as the autoscaler fails it
            self._failed(key, check, name, "CapacityNotFound", f"{count} node(s) asked of node pool {pool}, more "
                         f"than it can hold (--max-nodes={spec.max_nodes})")
            return
        at_maximum = spec.autoscaling and self.cluster.pool_size(pool) + count > spec.max_nodes
        if count and not created and self.config.fallback and at_maximum:
            self._wait_for_room(key, check, name, pool, count, why)
            return
        if count and not created:
            self._failed(key, check, name, "CapacityNotFound", why)
            return
        self.plan_expiry()
        self._note(EventKind.PROVISIONING_REQUEST, key,
                   f"ProvisioningRequest {name} is Provisioned: {len(created)} node(s) "
                   f"in {pool}", request=name, state=ProvisioningState.PROVISIONED, pool=pool)
        slices = {n.slice_id for n in created}
        self._later(now + BOOKING, key, partial(self._booking_check, key, check, name, slices))
        revoke = self.cluster.cloud.revoke_after(pool, spec.machine.name)
        if revoke is not None:
            self.kernel.schedule(now + revoke, partial(self._revoke, key, name, slices), CAPACITY_PRIORITY)
        updates = {g.name: {"autoscaling.x-k8s.io/consume-provisioning-request": name,
                            "autoscaling.x-k8s.io/provisioning-class-name": self.provisioning[check].provisioning_class}
                   for g in self.groups(wl, self.provisioning[check].managed or None)}
        self.log(self.scheduler.set_check(key, check, CheckState.READY, now, f"{name} provisioned",
                                          pod_set_updates=updates))

    def _booking_check(self, key: str, check: str, name: str, slices: set[str]) -> None:
        """The booking lasts 10 minutes: capacity its pods have not started to use by then goes back."""
        unused = [n for n in self.cluster.nodes.values() if n.slice_id in slices and n.booked_for == key]
        if not unused or key in self.running:
            return
        self.cluster.remove(n.name for n in unused)
        self._note(EventKind.PROVISIONING_REQUEST, key,
                   f"ProvisioningRequest {name} BookingExpired: its pods did not use "
                   f"the {len(unused)} provisioned node(s) within {format_seconds(BOOKING)}", request=name,
                   state=ProvisioningState.BOOKING_EXPIRED)
        self._failed(key, check, name, "BookingExpired", "the booking expired before the pods started", noted=True)

    def _revoke(self, key: str, name: str, slices: set[str]) -> None:
        """The cloud takes the provisioned capacity back (CapacityRevoked): its workload is evicted and requeued."""
        gone = [n for n in self.cluster.nodes.values() if n.slice_id in slices]
        if not gone:
            return
        victims = sorted({w for n in gone for w in n.pods})
        self.cluster.remove(n.name for n in gone)
        self._note(EventKind.PROVISIONING_REQUEST, key,
                   f"ProvisioningRequest {name} CapacityRevoked: {len(gone)} node(s) "
                   "taken back by the cloud", request=name, state=ProvisioningState.CAPACITY_REVOKED)
        for victim in victims:
            self.log(self.scheduler.evict(victim, self._now(), f"ProvisioningRequest {name}: capacity revoked",
                                          "CapacityRevoked"))

    def _failed(self, key: str, check: str, name: str, reason: str, message: str, noted: bool = False) -> None:
        now = self._now()
        failures = self.failures.get((key, check), 0) + 1
        self.failures[(key, check)] = failures
        settings = self.provisioning[check]
        if not noted:
            self._note(EventKind.PROVISIONING_REQUEST, key, f"ProvisioningRequest {name} Failed ({reason}): {message}",
                       request=name, state=ProvisioningState.FAILED)
        if failures > settings.backoff_limit:
            self.log(self.scheduler.set_check(
                key, check, CheckState.REJECTED, now,
                f"{name} failed ({reason}) after {settings.backoff_limit} retries"))
            return
        delay = settings.backoff(failures)
        self.log(self.scheduler.set_check(key, check, CheckState.RETRY, now, f"{name} failed ({reason}); retry "
                                          f"{failures} of {settings.backoff_limit} in {format_seconds(delay)}",
                                          retry_after=delay))
