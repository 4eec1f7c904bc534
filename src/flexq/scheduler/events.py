"""What happened, in order: one :class:`Event` per change of a workload's state (the scheduler's) or of the
capacity behind it (the capacity driver's: nodes, node pools, ProvisioningRequests)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from flexq.scheduler.phrases import Phrase, Text, TimeWords

__all__ = ["Event", "EventKind", "Payload"]


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
    SECOND_PASS_FAILED = "SecondPassFailed"
    """A delayed topology request found no placement on the nodes its ProvisioningRequest brought: it keeps its
    quota and is tried again after a backoff (Kueue's Warning event of the same reason)."""
    # The capacity driver's (flexq.capacity.driver): what the nodes and the autoscaler did.
    STARTED = "Started"
    UNSCHEDULABLE = "Unschedulable"
    SCALED_UP = "ScaledUp"
    SCALED_DOWN = "ScaledDown"
    NODES_UNAVAILABLE = "NodesUnavailable"
    NODES_EXPIRED = "NodesExpired"
    NODE_DELETED = "NodeDeleted"
    NODE_REPLACED = "NodeReplaced"
    NODE_NOT_READY = "NodeNotReady"
    NODE_READY = "NodeReady"
    NODE_TAINTED = "NodeTainted"
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
    EventKind.NODES_UNAVAILABLE, EventKind.NODES_EXPIRED, EventKind.NODE_DELETED, EventKind.NODE_REPLACED,
    EventKind.SLICE_RELEASED, EventKind.SLICE_REPAIRED, EventKind.FALLBACK, EventKind.PROVISIONING_REQUEST,
    EventKind.RACE_WON, EventKind.NODE_NOT_READY, EventKind.NODE_READY, EventKind.NODE_TAINTED,
})
_WARNING = frozenset({EventKind.NODES_UNAVAILABLE, EventKind.FALLBACK, EventKind.UNSCHEDULABLE,
                      EventKind.NODES_EXPIRED, EventKind.NODE_DELETED,
                      EventKind.NODE_NOT_READY, EventKind.NODE_TAINTED})


class Payload(Protocol):
    """What an event of one kind says beyond its reason, typed (the capacity driver's are in
    :mod:`flexq.capacity.notes`): read it rather than ``extra``, which holds the same as the event log writes it."""

    def fields(self) -> dict[str, Any]:
        """The payload as the event log's fields, in the order the log writes them."""
        ...


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
    """The event's own fields as the event log writes them (for an event with a :attr:`payload`, its fields)."""
    payload: Payload | None = None
    """What the event says, typed (None: only ``extra``, as the scheduler's events say it)."""
    phrase: Phrase | None = None
    """A reason that names moments, until the clock telling the event words it (:meth:`worded`); ``reason`` is
    empty until then."""

    @classmethod
    def told(cls, t: float, kind: EventKind, workload: str, cluster_queue: str, reason: Text, *,
             extra: dict[str, Any] | None = None, payload: Payload | None = None) -> Event:
        """An event whose reason may name moments (a :class:`~flexq.scheduler.phrases.Phrase`: kept as it is, to be
        worded where the event leaves the core), with ``payload``'s fields or ``extra``."""
        fields = payload.fields() if payload is not None else (extra or {})
        if isinstance(reason, Phrase):
            return cls(t, kind, workload, cluster_queue, "", extra=fields, payload=payload, phrase=reason)
        return cls(t, kind, workload, cluster_queue, reason, extra=fields, payload=payload)

    def worded(self, words: TimeWords) -> Event:
        """The event with its reason in ``words`` (itself when its reason names no moment)."""
        if self.phrase is None:
            return self
        return dataclasses.replace(self, reason=self.phrase.words(words, self.t), phrase=None)

    def to_json(self) -> dict[str, Any]:
        # ``_value_`` is the member's own attribute: ``value`` goes through Enum's (slow) descriptor.
        out: dict[str, Any] = {"t": self.t, "event": self.kind._value_, "workload": self.workload,
                               "clusterQueue": self.cluster_queue}
        if self.podsets is not None:
            out["podSets"] = self.podsets
        out["reason"] = self.reason
        out.update(self.extra)
        return out
