"""What the capacity driver tells: typed payloads per event kind, and the outbox they leave the driver through.

Each capacity event carries one payload (:attr:`flexq.scheduler.events.Event.payload`): readers match on its class
and read its fields (a :class:`ProvisioningState`, not a string); the event log writes :meth:`fields`, in the order it
always has. A racing variant's events are told on the workload it races for, with the variant named (``variant``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from flexq.capacity.record import Records
from flexq.scheduler import Event, EventKind, Scheduler, Text

__all__ = ["FallbackNote", "PoolNote", "ProvisioningState", "ReplacedNote", "RequestNote", "StartedNote", "Teller",
           "WorkloadNote"]


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


def _with_variant(fields: dict[str, Any], variant: str) -> dict[str, Any]:
    if variant:
        fields["variant"] = variant
    return fields


@dataclass(frozen=True, slots=True)
class WorkloadNote:
    """Unschedulable, RaceWon: nothing beyond the reason (and the variant it is about)."""

    variant: str = ""

    def fields(self) -> dict[str, Any]:
        return _with_variant({}, self.variant)


@dataclass(frozen=True, slots=True)
class PoolNote:
    """What happened to a node pool's nodes (ScaledUp, ScaledDown, NodesUnavailable, NodesExpired, NodeDeleted,
    SliceRepaired, SliceReleased)."""

    pool: str
    nodes: int | None = None
    """ScaledUp: the nodes asked for; ScaledDown and the slice events: the pool's nodes after; otherwise None."""
    variant: str = ""

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pool": self.pool}
        if self.nodes is not None:
            out["nodes"] = self.nodes
        return _with_variant(out, self.variant)


@dataclass(frozen=True, slots=True)
class StartedNote:
    """The workload's pods were bound: to these nodes."""

    nodes: tuple[str, ...]
    variant: str = ""

    def fields(self) -> dict[str, Any]:
        return _with_variant({"nodes": list(self.nodes)}, self.variant)


@dataclass(frozen=True, slots=True)
class ReplacedNote:
    """The workload's pods on ``node`` (lost) were placed on ``nodes`` instead (Kueue's failed node replacement)."""

    node: str
    nodes: tuple[str, ...]
    variant: str = ""

    def fields(self) -> dict[str, Any]:
        return _with_variant({"node": self.node, "nodes": list(self.nodes)}, self.variant)


@dataclass(frozen=True, slots=True)
class FallbackNote:
    """The workload was evicted to try the flavor after ``flavor``, whose ``pool`` could not deliver nodes."""

    flavor: str
    pool: str
    variant: str = ""

    def fields(self) -> dict[str, Any]:
        return _with_variant({"flavor": self.flavor, "pool": self.pool}, self.variant)


@dataclass(frozen=True, slots=True)
class RequestNote:
    """A ProvisioningRequest changed: ``request`` (its name) is now ``state``."""

    request: str
    state: ProvisioningState
    eta: float | None = None
    """Accepted: when the cloud is expected to answer (None: not known)."""
    pool: str | None = None
    """Provisioned: the node pool its nodes are in (None: no pool modelled behind it)."""
    room: str = ""
    """Accepted again: the cloud has answered, but the node pool named has no room for the nodes yet, and the request
    waits there for room (the control plane's own business, not the cloud's: not in the event's fields)."""
    variant: str = ""
    reason: str = ""
    """The reason of the condition the autoscaler sets on the request (its ``Provisioned`` or ``Failed``), e.g.
    ``CapacityIsNotFound``; "" for none in particular. Not in the event's fields (the object's business)."""
    message: str = ""
    """That condition's message as the autoscaler words it ("": the event's own words)."""
    details: tuple[tuple[str, str], ...] = ()
    """Provisioned: the request's ``status.provisioningClassDetails``, (key, value) pairs (the object's business, as
    ``reason``)."""

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "state": self.state}
        if self.state is ProvisioningState.ACCEPTED:
            out["eta"] = self.eta
        if self.pool is not None:
            out["pool"] = self.pool
        return _with_variant(out, self.variant)


Note: TypeAlias = WorkloadNote | PoolNote | StartedNote | ReplacedNote | FallbackNote | RequestNote


class Teller:
    """Where the driver's events leave it, through ``log``. A reason that names a moment is a
    :class:`~flexq.scheduler.phrases.Phrase`, worded by the clock that tells the event, not here.

    A variant's capacity story is told on the workload it races for (recorded on its record, so that what happens
    after its race ended is told there too), with ``variant`` set on the payload."""

    def __init__(self, log: Callable[[list[Event]], None], now: Callable[[], float], records: Records,
                 scheduler: Scheduler) -> None:
        self.log = log
        self.now = now
        self.records = records
        self.scheduler = scheduler

    def on(self, kind: EventKind, workload: str, reason: Text, note: Note) -> None:
        """Tell what happened to ``workload`` (or to the workload a variant races for)."""
        wl = self.scheduler.workload(workload)
        if wl is not None and wl.parent:
            self.records.of(workload).raced_for = wl.parent
        record = self.records.get(workload)
        parent = record.raced_for if record is not None else None
        if parent is not None:
            note = dataclasses.replace(note, variant=workload)
            workload = parent
        owner = self.scheduler.workload(workload)
        self.log([Event.told(self.now(), kind, workload, owner.cluster_queue if owner else "", reason, payload=note)])

    def pool(self, kind: EventKind, reason: Text, note: PoolNote) -> None:
        """Tell what happened to a node pool, on no workload."""
        self.log([Event.told(self.now(), kind, "", "", reason, payload=note)])
