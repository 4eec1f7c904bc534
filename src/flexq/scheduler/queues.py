"""Pending workloads per ClusterQueue, in Kueue's order: higher priority first, then earlier queue time.

Each ClusterQueue has a heap of active entries and a set of *inadmissible* workloads (BestEffortFIFO:
a head that did not fit steps aside until something changes in its cohort tree). StrictFIFO queues keep
their head in place: it blocks the queue until something changes.

With Kueue's admission fair sharing (:attr:`QueueManager.fair`), a ClusterQueue whose ``admissionScope`` asks for it
tries first the workloads of the LocalQueue that used least (:mod:`flexq.scheduler.fair_usage`), then the same order.
"""

from __future__ import annotations

import copy
import heapq
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Final

from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.fair_usage import LocalQueueRef, UsageLedger, admitted_usage
from flexq.scheduler.model import Workload, WorkloadState

__all__ = ["QueueManager"]


Entry = tuple[int, float, int, str]
"""A workload's place in line: (-priority, queue time, push order, key)."""

_OWN: Final = frozenset({"_heaps", "_entry", "_inadmissible", "_blocked", "_by_queue", "_moved"})
"""What a copy of a :class:`QueueManager` makes its own of, without copying the entries in it."""


class QueueManager:
    def __init__(self) -> None:
        self._heaps: dict[str, list[Entry]] = {}
        self._entry: dict[str, Entry] = {}
        self._inadmissible: dict[str, set[str]] = {}
        self._blocked: set[str] = set()
        self._seq = itertools.count()
        self.fair: UsageLedger | None = None
        """Kueue's admission fair sharing (None: off, every queue in Kueue's plain order)."""
        self.fair_queues: frozenset[str] = frozenset()
        """The ClusterQueues whose ``admissionScope`` asks for it (ordered by usage where :attr:`fair` is on)."""
        self.weights: Mapping[LocalQueueRef, float] = {}
        """LocalQueues' ``fairSharing.weight`` (default 1)."""
        self._by_queue: dict[str, dict[LocalQueueRef, list[Entry]]] = {}
        """Where :attr:`fair` is on: each ClusterQueue's entries again, a heap per LocalQueue (whose top is the
        LocalQueue's first in Kueue's order)."""
        self.recount = True
        """The LocalQueues' admitted usage is to be counted anew, all of it (the configuration changed)."""
        self._moved: dict[LocalQueueRef, str] = {}
        """LocalQueues whose workloads took or gave back quota since their admitted usage was last counted -> the
        ClusterQueue they did it in."""

    def __deepcopy__(self, memo: dict[int, object]) -> QueueManager:
        """A copy whose heaps and sets are its own. Entries are tuples of a number, a time, a number and a key: values,
        shared by the copy (each heap's list is copied, not its entries; an entry's identity, which tells a live entry
        from a stale one, is kept). Everything else is copied deeply. A forecast copies a plane with every waiting
        workload's entry in it (:mod:`flexq.forecast.snapshot`), so this is on its path."""
        other = object.__new__(QueueManager)  # nothing in it refers back to it; copy.deepcopy remembers it after
        for name, value in vars(self).items():
            if name not in _OWN:
                setattr(other, name, copy.deepcopy(value, memo))
        other._heaps = {cq: list(heap) for cq, heap in self._heaps.items()}
        other._entry = dict(self._entry)
        other._inadmissible = {cq: set(keys) for cq, keys in self._inadmissible.items()}
        other._blocked = set(self._blocked)
        other._by_queue = {cq: {lq: list(heap) for lq, heap in heaps.items()} for cq, heaps in self._by_queue.items()}
        other._moved = dict(self._moved)
        return other

    def use(self, fair: UsageLedger | None, workloads: Mapping[str, Workload]) -> None:
        """Order fair ClusterQueues by the LocalQueue usage in ``fair`` from now on (None: Kueue's plain order)."""
        self.fair, self._by_queue, self.recount = fair, {}, True
        if fair is not None:
            for entry in self._entry.values():
                wl = workloads.get(entry[3])
                if wl is not None:
                    self._file(wl, entry)

    def _file(self, wl: Workload, entry: Entry) -> None:
        heapq.heappush(self._by_queue.setdefault(wl.cluster_queue, {}).setdefault((wl.namespace, wl.queue), []),
                       entry)

    def fair_step(self, events: Iterable[Event], now: float, workloads: Mapping[str, Workload],
                  holding: Mapping[str, Mapping[str, Workload]]) -> None:
        """Bring the LocalQueues' usage to ``now`` and charge or fold what ``events`` reserved or admitted."""
        fair = self.fair
        if fair is None:
            return
        events = list(events)
        for event in events:
            wl = workloads.get(event.workload)
            if event.kind is EventKind.ADMITTED and wl is not None:
                self.moved(wl)
        if self.recount:
            self.recount, self._moved = False, {}
            fair.advance(now, admitted_usage(holding))
        else:
            moved, self._moved = self._moved, {}
            fair.advance(now, admitted_usage(holding, moved) if moved else None)
        fair.hear(events, workloads, self.fair_queues, now)

    def moved(self, wl: Workload) -> None:
        """``wl`` took or gave back quota, or was admitted: its LocalQueue's admitted usage is counted again."""
        if self.fair is not None:
            self._moved[(wl.namespace, wl.queue)] = wl.cluster_queue

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
        """Put a pending workload (back) into its ClusterQueue's heap. In a blocked StrictFIFO queue, one that comes
        before the head it is blocked on (a higher priority, or queued earlier) is the new head, and is tried: Kueue
        keeps a StrictFIFO head in its heap, so the next cycle takes whichever is first."""
        entry = (-wl.priority, wl.queue_time, next(self._seq), wl.key)
        self._entry[wl.key] = entry
        self._inadmissible.get(wl.cluster_queue, set()).discard(wl.key)
        heap = self._heaps.setdefault(wl.cluster_queue, [])
        if wl.cluster_queue in self._blocked and (
                not heap or entry < heap[0] or self._entry.get(heap[0][3]) is not heap[0]
                or (self.fair is not None and wl.cluster_queue in self.fair_queues)):
            self._blocked.discard(wl.cluster_queue)
        heapq.heappush(heap, entry)
        if self.fair is not None:
            self._file(wl, entry)

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
                return self._least_used(cq, workloads)
            return wl
        if heap is not None:
            del self._heaps[cq]  # an empty queue leaves the cycle's round until a workload is pushed again
        return None

    def _least_used(self, cq: str, workloads: dict[str, Workload]) -> Workload:
        """The first live entry of a fair ClusterQueue's LocalQueue that used least (then Kueue's order): each
        LocalQueue's heap's top, stale entries dropped on the way."""
        assert self.fair is not None
        best: tuple[float, Entry] | None = None
        by_queue = self._by_queue.get(cq, {})
        for lq, heap in list(by_queue.items()):
            while heap:
                wl = workloads.get(heap[0][3])
                if wl is not None and self._entry.get(heap[0][3]) is heap[0] and wl.state is WorkloadState.PENDING:
                    break
                heapq.heappop(heap)
            if not heap:
                del by_queue[lq]
                continue
            rank = (self.fair.usage(lq, self.weights.get(lq, 1.0)), heap[0])
            if best is None or rank < best:
                best = rank
        assert best is not None  # the ClusterQueue's heap has a live entry: so has one of its LocalQueues
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

    def any_blocked(self) -> bool:
        return bool(self._blocked)

    def unblock(self, queues: Iterable[str]) -> None:
        """These StrictFIFO queues try their heads again (their set-aside workloads, if any, stay aside)."""
        self._blocked.difference_update(queues)

    def wake(self, queues: Collection[str], workloads: dict[str, Workload]) -> None:
        """Something changed for these queues: their set-aside workloads return, their heads unblock."""
        inadmissible, blocked = self._inadmissible, self._blocked
        if not inadmissible and not blocked:
            return
        if len(queues) > len(inadmissible) + len(blocked):
            # Fewer queues hold workloads back than were named (a cohort tree's): those are looked up instead. The
            # order queues are woken in does not matter: each queue's heap orders only its own entries.
            named = queues if isinstance(queues, (set, frozenset)) else set(queues)
            queues = [cq for cq in (*inadmissible, *blocked) if cq in named]
        for cq in queues:
            if cq not in inadmissible and cq not in blocked:
                continue
            blocked.discard(cq)
            aside = inadmissible.pop(cq, None)
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
