"""Pending workloads per ClusterQueue, in Kueue's order: higher priority first, then earlier queue time.

Each ClusterQueue has a heap of active entries and a set of *inadmissible* workloads (BestEffortFIFO:
a head that did not fit steps aside until something changes in its cohort tree). StrictFIFO queues keep
their head in place: it blocks the queue until something changes.

With Kueue's admission fair sharing (:attr:`QueueManager.fair`), a ClusterQueue whose ``admissionScope`` asks for it
tries first the workloads of the LocalQueue that used least (:mod:`flexq.scheduler.fair_usage`), then the same order.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping

from flexq.scheduler.events import Event
from flexq.scheduler.fair_usage import LocalQueueRef, UsageLedger, admitted_usage
from flexq.scheduler.model import Workload, WorkloadState

__all__ = ["QueueManager"]


class QueueManager:
    def __init__(self) -> None:
        self._heaps: dict[str, list[tuple[int, float, int, str]]] = {}
        self._entry: dict[str, tuple[int, float, int, str]] = {}
        self._inadmissible: dict[str, set[str]] = {}
        self._blocked: set[str] = set()
        self._seq = itertools.count()
        self.fair: UsageLedger | None = None
        """Kueue's admission fair sharing (None: off, every queue in Kueue's plain order)."""
        self.fair_queues: frozenset[str] = frozenset()
        """The ClusterQueues whose ``admissionScope`` asks for it (ordered by usage where :attr:`fair` is on)."""
        self.weights: Mapping[LocalQueueRef, float] = {}
        """LocalQueues' ``fairSharing.weight`` (default 1)."""

    def fair_step(self, events: Iterable[Event], now: float, workloads: Mapping[str, Workload],
                  holding: Mapping[str, Mapping[str, Workload]]) -> None:
        """Bring the LocalQueues' usage to ``now`` and charge or fold what ``events`` reserved or admitted."""
        fair = self.fair
        if fair is not None:
            fair.advance(now, admitted_usage(holding))
            fair.hear(events, workloads, self.fair_queues, now)

    def victim_usage(self) -> Callable[[Workload], float | None] | None:
        """Admission fair sharing's LocalQueue usage of workloads holding quota in a fair ClusterQueue (preemption
        takes from the LocalQueue that used more first); None where it is off."""
        if self.fair is None or not self.fair_queues:
            return None
        return lambda wl: self._usage(wl) if wl.cluster_queue in self.fair_queues else None

    def _usage(self, wl: Workload) -> float:
        """The usage that orders ``wl`` in a fair ClusterQueue (0 where its queue is not one)."""
        fair = self.fair
        if fair is None or wl.cluster_queue not in self.fair_queues:
            return 0.0
        lq = (wl.namespace, wl.queue)
        return fair.usage(lq, self.weights.get(lq, 1.0))

    def push(self, wl: Workload) -> None:
        """Put a pending workload (back) into its ClusterQueue's heap."""
        entry = (-wl.priority, wl.queue_time, next(self._seq), wl.key)
        self._entry[wl.key] = entry
        self._inadmissible.get(wl.cluster_queue, set()).discard(wl.key)
        heapq.heappush(self._heaps.setdefault(wl.cluster_queue, []), entry)

    def queued(self, wl: Workload) -> bool:
        return wl.key in self._entry or wl.key in self._inadmissible.get(wl.cluster_queue, set())

    def aside(self, wl: Workload) -> bool:
        """Was the workload set aside as inadmissible (until something changes in its cohort tree)?"""
        return wl.key in self._inadmissible.get(wl.cluster_queue, set())

    def discard(self, wl: Workload) -> None:
        self._entry.pop(wl.key, None)
        self._inadmissible.get(wl.cluster_queue, set()).discard(wl.key)

    def head(self, cq: str, workloads: dict[str, Workload]) -> Workload | None:
        """The first active entry of ``cq`` (stale entries dropped on the way)."""
        heap = self._heaps.get(cq)
        while heap:
            entry = heap[0]
            wl = workloads.get(entry[3])
            if wl is None or self._entry.get(entry[3]) is not entry or wl.state is not WorkloadState.PENDING:
                heapq.heappop(heap)
                continue
            if self.fair is not None and cq in self.fair_queues:
                return self._least_used(heap, workloads)
            return wl
        if heap is not None:
            del self._heaps[cq]  # an empty queue leaves the cycle's round until a workload is pushed again
        return None

    def _least_used(self, heap: list[tuple[int, float, int, str]], workloads: dict[str, Workload]) -> Workload:
        """The live entry of a fair ClusterQueue's ``heap`` whose LocalQueue used least, then in Kueue's order."""
        best: tuple[float, tuple[int, float, int, str]] | None = None
        for entry in heap:
            wl = workloads.get(entry[3])
            if wl is None or self._entry.get(entry[3]) is not entry or wl.state is not WorkloadState.PENDING:
                continue
            rank = (self._usage(wl), entry)
            if best is None or rank < best:
                best = rank
        assert best is not None  # the heap's top is live
        return workloads[best[1][3]]

    def set_aside(self, wl: Workload) -> None:
        """The head did not fit: BestEffortFIFO moves it aside (StrictFIFO blocks, see :meth:`block`)."""
        heap = self._heaps.get(wl.cluster_queue)
        entry = self._entry.pop(wl.key, None)
        if heap and entry is not None and heap[0] is entry:
            heapq.heappop(heap)  # elsewhere in the heap (a fair queue's head), it is passed over as stale
        self._inadmissible.setdefault(wl.cluster_queue, set()).add(wl.key)

    def block(self, cq: str) -> None:
        self._blocked.add(cq)

    def blocked(self, cq: str) -> bool:
        return cq in self._blocked

    def wake(self, queues: Iterable[str], workloads: dict[str, Workload]) -> None:
        """Something changed for these queues: their set-aside workloads return, their heads unblock."""
        if not self._inadmissible and not self._blocked:
            return
        for cq in queues:
            if cq not in self._inadmissible and cq not in self._blocked:
                continue
            self._blocked.discard(cq)
            aside = self._inadmissible.pop(cq, None)
            if not aside:
                continue
            for key in sorted(aside):
                wl = workloads.get(key)
                if wl is not None and wl.state is WorkloadState.PENDING and wl.requeue_at is None:
                    self.push(wl)

    def in_line(self, cq: str, workloads: dict[str, Workload]) -> list[Workload]:
        """The pending workloads of ``cq`` in the order its heads would be tried: (in a fair ClusterQueue, the least
        used LocalQueue's first, then) higher priority first, then earlier queue time; among equals, the active entries
        in the order they were pushed, then the set-aside ones by key (the order :meth:`wake` pushes them back in).
        Read only: stale entries are passed over, not dropped."""
        ranked: list[tuple[float, int, float, int, int, str]] = []
        for entry in self._heaps.get(cq, []):
            wl = workloads.get(entry[3])
            if wl is not None and self._entry.get(entry[3]) is entry and wl.state is WorkloadState.PENDING:
                ranked.append((self._usage(wl), entry[0], entry[1], 0, entry[2], entry[3]))
        for key in self._inadmissible.get(cq, ()):
            wl = workloads.get(key)
            if wl is not None and wl.state is WorkloadState.PENDING:
                ranked.append((self._usage(wl), -wl.priority, wl.queue_time, 1, 0, key))
        return [workloads[r[5]] for r in sorted(ranked)]

    def pending_count(self, cq: str) -> int:
        return sum(1 for entry in self._heaps.get(cq, []) if self._entry.get(entry[3]) is entry) + len(
            self._inadmissible.get(cq, set()))

    def queues(self) -> list[str]:
        """The ClusterQueues that may have an active entry, in name order (an emptied one leaves at its next
        :meth:`head`): a cycle visits these, not every queue of the config."""
        return sorted(self._heaps)
