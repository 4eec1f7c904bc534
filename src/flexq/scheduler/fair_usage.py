"""Kueue's admission fair sharing: each LocalQueue's usage, decaying, and the order it gives a ClusterQueue's line.

Kueue samples a LocalQueue's admitted usage every ``usageSamplingInterval`` into ``consumedResources``, a decaying
sum: over ``elapsed`` seconds the old sum keeps ``0.5 ** (elapsed / usageHalfLifeTime)`` of itself and the usage
of the moment makes up the rest. A workload that reserves quota in a ClusterQueue with
``admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` charges its LocalQueue an *entry penalty* at once
(its requests times the share one sampling interval gives a new sample), so that the next head of the same
LocalQueue does not pass for idle until the next sample; once admitted, the penalty is folded into the sum (the sum
decayed to that moment with the usage admitted then). A workload that never gets admitted (finished, deleted,
deactivated) has its penalty dropped. A racing workload's variants are workloads of their own (Kueue's Concurrent
Admission): each that reserves is charged, and its penalty folded in if it is admitted (where the first to start
wins, every variant admitted meanwhile held quota) or dropped if it is withdrawn first; the workload taking the
winner's admission is not charged again.

The ClusterQueue then tries its pending workloads in the order of their LocalQueue's usage, the lowest first: the
resource-weighted sum of ``consumedResources`` and pending penalties (weight 1 for a resource not in
``resourceWeights``), divided by the LocalQueue's ``fairSharing.weight`` (default 1; 0 or less: last); among equal
usage, Kueue's order (higher priority, then earlier queue time).

One timing model for both clocks: the samples are taken as due, in order, whenever the ledger is told the time
(:meth:`UsageLedger.advance`), each with the usage admitted since the last change, so a simulator that reads it an
hour later sees what a server that sampled every five minutes saw. Amounts are in the resource's own units (a cpu
is 1.0, memory is bytes), as Kueue's quantities.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from flexq.api import AdmissionFairSharing
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import Workload, WorkloadState

__all__ = ["LocalQueueRef", "UsageLedger", "decayed", "format_usage"]

LocalQueueRef = tuple[str, str]
"""(namespace, LocalQueue name)."""

Amounts = dict[str, float]

_DROPS = frozenset({EventKind.FINISHED, EventKind.DEACTIVATED})


def decayed(old: Mapping[str, float], new: Mapping[str, float], elapsed: float, half_life: float) -> Amounts:
    """The decaying sum ``old`` after ``elapsed`` seconds of usage ``new``: ``old * (1 - a) + new * a`` with
    ``a = 1 - 0.5 ** (elapsed / half_life)`` (Kueue's; a half-life of 0 gives ``a = 0``)."""
    keep = 1.0 if half_life <= 0 else 0.5 ** (max(elapsed, 0.0) / half_life)
    out: Amounts = {}
    for name in sorted({*old, *new}):
        out[name] = old.get(name, 0.0) * keep + new.get(name, 0.0) * (1.0 - keep)
    return out


def format_usage(amount: float) -> str:
    """A decayed amount as Kueue writes it in ``consumedResources``: a quantity to the nano-unit, rounded down."""
    nanos = max(0, math.floor(amount * 1e9 + 1e-6))
    for unit, suffix in ((10**9, ""), (10**6, "m"), (10**3, "u")):
        if nanos % unit == 0:
            return f"{nanos // unit}{suffix}"
    return f"{nanos}n"


@dataclass(slots=True)
class _Entry:
    consumed: Amounts = field(default_factory=dict)
    last_update: float = 0.0
    admitted: Amounts = field(default_factory=dict)
    """The LocalQueue's admitted usage since it last changed (what the samples due take)."""
    penalties: dict[str, Amounts] = field(default_factory=dict)
    """Entry penalties not yet folded in, by workload key."""


class UsageLedger:
    """The LocalQueues' decaying usage under ``config`` (Kueue's ``AfsUsageLedger`` and its sampling)."""

    def __init__(self, config: AdmissionFairSharing) -> None:
        self.config = config
        self._entries: dict[LocalQueueRef, _Entry] = {}
        self.version = 0
        """Goes up whenever a LocalQueue's usage or its time of update changes (for status writers)."""
        self._due = math.inf
        """No sample is due before then (a lower bound: entries made or seeded lower it)."""

    def entries(self) -> list[LocalQueueRef]:
        return sorted(self._entries)

    def seed(self, lq: LocalQueueRef, consumed: Mapping[str, float], last_update: float) -> None:
        """A LocalQueue's ``consumedResources`` as last written (a server read back), before any sample."""
        if lq not in self._entries:
            self._entries[lq] = _Entry(dict(consumed), last_update)
            self._due = min(self._due, last_update + self.config.sampling)
            self.version += 1

    def know(self, lqs: Iterable[LocalQueueRef], now: float) -> None:
        """LocalQueues that exist from ``now`` on (Kueue's first reconcile of each: nothing consumed yet)."""
        for lq in lqs:
            if lq not in self._entries:
                self._entries[lq] = _Entry(last_update=now)
                self._due = min(self._due, now + self.config.sampling)
                self.version += 1

    def _entry(self, lq: LocalQueueRef, now: float) -> _Entry:
        entry = self._entries.get(lq)
        if entry is None:
            entry = self._entries[lq] = _Entry(last_update=now)
            self._due = min(self._due, now + self.config.sampling)
        return entry

    def consumed(self, lq: LocalQueueRef) -> tuple[Amounts, float] | None:
        """The LocalQueue's ``consumedResources`` and ``lastUpdate`` (None: never sampled)."""
        entry = self._entries.get(lq)
        return None if entry is None else (dict(entry.consumed), entry.last_update)

    def next_due(self, now: float) -> float:
        """When the next sample of some LocalQueue is due (after ``now``)."""
        sampling = self.config.sampling
        due = [entry.last_update + sampling for entry in self._entries.values()]
        return max(min(due, default=now + sampling), now + 1e-3)

    def usage(self, lq: LocalQueueRef, weight: float = 1.0) -> float:
        """Kueue's LocalQueue usage: weighted consumed and pending penalties, over the LocalQueue's weight."""
        entry = self._entries.get(lq)
        total: Amounts = dict(entry.consumed) if entry is not None else {}
        for penalty in entry.penalties.values() if entry is not None else ():
            for name, amount in penalty.items():
                total[name] = total.get(name, 0.0) + amount
        weights = self.config.weights
        value = sum(weights.get(name, 1.0) * total[name] for name in sorted(total))
        return math.inf if weight <= 0 else value / weight

    def advance(self, now: float, admitted: Mapping[LocalQueueRef, Amounts] | None = None) -> None:
        """Take every sample due by ``now`` (each with the usage admitted since the last change), then note the usage
        admitted from now on, ``admitted`` (LocalQueues not named: as it was)."""
        if not admitted and now < self._due:
            return
        sampling, half_life = self.config.sampling, self.config.half_life
        for lq in sorted({*self._entries, *(admitted or {})}):
            entry = self._entry(lq, now)
            due = math.floor((now - entry.last_update) / sampling + 1e-9)
            if due > 0:
                entry.last_update += due * sampling
                entry.consumed = {} if half_life <= 0 else decayed(entry.consumed, entry.admitted, due * sampling,
                                                                   half_life)
                self.version += 1
            if admitted is not None and lq in admitted:
                entry.admitted = dict(admitted[lq])
        self._due = min((entry.last_update + sampling for entry in self._entries.values()), default=math.inf)

    def hear(self, events: Iterable[Event], workloads: Mapping[str, Workload], fair_queues: frozenset[str],
             now: float) -> None:
        """Charge the entry penalties of workloads that reserved quota in ``fair_queues``, fold those admitted, drop
        those that will never be (call after :meth:`advance` at ``now``)."""
        alpha = 1.0 - (1.0 if self.config.half_life <= 0 else 0.5 ** (self.config.sampling / self.config.half_life))
        for event in events:
            wl = workloads.get(event.workload)
            if wl is None:
                continue
            lq = (wl.namespace, wl.queue)
            if event.kind is EventKind.QUOTA_RESERVED and event.cluster_queue in fair_queues and not wl.won:
                # (a racing workload taking its winning variant's admission: the variant was charged)
                requests = _by_resource(wl)
                self._entry(lq, now).penalties[wl.key] = {name: amount * alpha for name, amount in requests.items()}
                self.version += 1
            elif event.kind is EventKind.ADMITTED and event.cluster_queue in fair_queues:
                self._settle(lq, wl.key, now)
            elif event.kind in _DROPS or (event.kind is EventKind.EVICTED and wl.state is WorkloadState.INACTIVE):
                entry = self._entries.get(lq)
                if entry is not None and entry.penalties.pop(wl.key, None) is not None:
                    self.version += 1

    def drop(self, wl: Workload) -> None:
        """``wl`` is gone (deleted): a penalty it had pending will never be folded in."""
        entry = self._entries.get((wl.namespace, wl.queue))
        if entry is not None and entry.penalties.pop(wl.key, None) is not None:
            self.version += 1

    def _settle(self, lq: LocalQueueRef, key: str, now: float) -> None:
        """Kueue's settlement at admission: the sum decayed to ``now`` with the usage admitted now, plus the
        workload's penalty."""
        entry = self._entry(lq, now)
        consumed = decayed(entry.consumed, entry.admitted, now - entry.last_update, self.config.half_life)
        for name, amount in entry.penalties.pop(key, {}).items():
            consumed[name] = consumed.get(name, 0.0) + amount
        entry.consumed, entry.last_update = consumed, now
        self.version += 1


def admitted_usage(holding: Mapping[str, Mapping[str, Workload]], only: Mapping[LocalQueueRef, str] | None = None
                   ) -> dict[LocalQueueRef, Amounts]:
    """What the admitted workloads of each LocalQueue use, by resource (Kueue's LocalQueue admitted usage: every
    flavor together). Kueue samples every LocalQueue's, whatever its ClusterQueue's ``admissionScope``. ``only``:
    just these LocalQueues, by the ClusterQueue whose holders to count (None: all of them)."""
    out: dict[LocalQueueRef, Amounts] = {lq: {} for lq in only or {}}
    for cq in sorted(holding if only is None else set(only.values())):
        for wl in holding.get(cq, {}).values():
            if only is not None and (wl.namespace, wl.queue) not in only:
                continue
            if wl.state is WorkloadState.ADMITTED and wl.admission is not None:
                totals = out.setdefault((wl.namespace, wl.queue), {})
                for name, amount in _by_resource(wl).items():
                    totals[name] = totals.get(name, 0.0) + amount
    return out


def _by_resource(wl: Workload) -> Amounts:
    """The quota ``wl`` holds, by resource (every flavor together), in the resource's units."""
    totals: Amounts = {}
    if wl.admission is not None:
        for (_flavor, name), amount in wl.admission.usage().items():
            totals[name] = totals.get(name, 0.0) + amount / 1000
    return totals
