"""What happened, in order: one :class:`Event` per change of a workload's state (the scheduler's) or of the
capacity behind it (the capacity driver's: nodes, node pools, ProvisioningRequests)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Event", "EventKind"]


class EventKind(Enum):
    CREATED = "Created"
    QUOTA_RESERVED = "QuotaReserved"
    ADMITTED = "Admitted"
    PENDING = "Pending"
    EVICTED = "Evicted"
    PREEMPTED = "Preempted"
    REQUEUED = "Requeued"
    DEACTIVATED = "Deactivated"
    FINISHED = "Finished"
    CHECK = "AdmissionCheck"
    # The capacity driver's (flexq.capacity.driver): what the nodes and the autoscaler did.
    STARTED = "Started"
    UNSCHEDULABLE = "Unschedulable"
    SCALED_UP = "ScaledUp"
    SCALED_DOWN = "ScaledDown"
    NODES_UNAVAILABLE = "NodesUnavailable"
    NODES_EXPIRED = "NodesExpired"
    NODE_DELETED = "NodeDeleted"
    SLICE_RELEASED = "SliceReleased"
    SLICE_REPAIRED = "SliceRepaired"
    FALLBACK = "Fallback"
    PROVISIONING_REQUEST = "ProvisioningRequest"
    RACE_WON = "RaceWon"

    @property
    def capacity(self) -> bool:
        """Reported by the capacity driver, not by the scheduler (the scheduler and the driver do not act on it)."""
        return self in _CAPACITY

    @property
    def warning(self) -> bool:
        """Shown as a Warning on the workload (capacity that could not be had or was lost)."""
        return self in _WARNING


_CAPACITY = frozenset({
    EventKind.STARTED, EventKind.UNSCHEDULABLE, EventKind.SCALED_UP, EventKind.SCALED_DOWN,
    EventKind.NODES_UNAVAILABLE, EventKind.NODES_EXPIRED, EventKind.NODE_DELETED, EventKind.SLICE_RELEASED,
    EventKind.SLICE_REPAIRED, EventKind.FALLBACK, EventKind.PROVISIONING_REQUEST, EventKind.RACE_WON,
})
_WARNING = frozenset({EventKind.NODES_UNAVAILABLE, EventKind.FALLBACK, EventKind.UNSCHEDULABLE,
                      EventKind.NODES_EXPIRED, EventKind.NODE_DELETED})


@dataclass(frozen=True, slots=True)
class Event:
    t: float
    kind: EventKind
    workload: str
    cluster_queue: str
    reason: str = ""
    podsets: dict[str, dict[str, str]] | None = None
    """pod set -> resource -> flavor (on QuotaReserved and Admitted)"""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # ``_value_`` is the member's own attribute: ``value`` goes through Enum's (slow) descriptor.
        out: dict[str, Any] = {"t": self.t, "event": self.kind._value_, "workload": self.workload,
                               "clusterQueue": self.cluster_queue}
        if self.podsets is not None:
            out["podSets"] = self.podsets
        out["reason"] = self.reason
        out.update(self.extra)
        return out
