"""What the scheduler reports: one :class:`Event` per change of a workload's state, in order."""

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
