"""The newest committed changes, kept in memory so that watches and controllers read them without the disk.

Every change committed since the store was opened is appended in resourceVersion order; the oldest are
dropped once more than ``size`` are kept (trimmed in halves, so that appending stays cheap). A reader
asking for the changes after ``since`` is served from here when the window holds every change after
``since``; otherwise the store reads its table. Bodies are kept as stored text and parsed by each reader
on its own (:class:`~flexq.store.base.Change` parses lazily), so no reader sees another's mutations.

The window has a lock of its own, held only while entries are appended or copied out: a watch reads it without
waiting for the store's lock, which a controller's step holds for tens of milliseconds at a time (and a watch
served in the event loop would hold every other request up meanwhile).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from flexq.store.refusals import Key

__all__ = ["ChangeWindow", "Entry", "Gate"]


class Entry(NamedTuple):
    rv: int
    type: str
    key: Key
    body: str


class ChangeWindow:
    def __init__(self, size: int) -> None:
        self.size = size
        self._rvs: list[int] = []
        self._entries: list[Entry] = []
        self._lock = threading.Lock()

    def extend(self, entries: Iterable[Entry]) -> None:
        added = list(entries)
        with self._lock:
            self._rvs.extend(entry.rv for entry in added)
            self._entries.extend(added)
            if len(self._entries) > 2 * self.size:
                drop = len(self._entries) - self.size
                del self._rvs[:drop], self._entries[:drop]

    def serve(self, since: int, limit: int,
              resources: frozenset[tuple[str, str]] | None = None) -> tuple[list[Entry], int] | None:
        """Changes after ``since``, oldest first, where the window holds every change after ``since`` (None where
        it does not): up to ``limit`` of them, or with ``resources`` up to ``limit`` of those (group, resource)
        pairs among the next ``50 * limit``; and the resourceVersion read up to, so that a reader filtering by
        resource moves on past changes it does not want."""
        with self._lock:
            if not self._rvs or since < self._rvs[0] - 1:
                return None
            return self._after(since, limit, resources)

    def _after(self, since: int, limit: int,
               resources: frozenset[tuple[str, str]] | None) -> tuple[list[Entry], int]:
        start = bisect.bisect_right(self._rvs, since)
        if resources is None:
            chosen = self._entries[start:start + limit]
            return chosen, chosen[-1].rv if chosen else since
        found: list[Entry] = []
        reached = since
        for entry in self._entries[start:start + 50 * limit]:
            reached = entry.rv
            if (entry.key.group, entry.key.resource) in resources:
                found.append(entry)
                if len(found) >= limit:
                    break
        return found, reached


class Gate:
    """The store's re-entrant lock, counting the threads that wait for it (so that a long batch knows when
    to let them in). The count is a hint read without the lock: it may be off by one for a moment."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.waiting = 0
        self.held = 0
        """How many times its owner holds it (meaningful to the owner alone)."""
        self._tickets: set[int] = set()
        """One for each wait in progress: a thread that comes to wait again draws a new one (see :meth:`hand_over`).
        Added to and copied without the lock: each is one operation of the interpreter's."""
        self._drawn = itertools.count()

    def __enter__(self) -> None:
        self.acquire()

    def __exit__(self, *_: object) -> None:
        self.release()

    def acquire(self) -> None:
        if not self._lock.acquire(blocking=False):
            ticket = next(self._drawn)
            self._tickets.add(ticket)
            self.waiting += 1
            try:
                self._lock.acquire()
            finally:
                self.waiting -= 1
                self._tickets.discard(ticket)
        self.held += 1

    def release(self) -> None:
        self.held -= 1
        self._lock.release()

    def hand_over(self, most: float = 0.005) -> None:
        """Let the threads waiting for the gate now have it, each once, and take it back (its owner holds it once):
        as soon as each of them got in, or after ``most`` seconds. Threads that come to wait meanwhile (or one that
        came in and waits again, with a ticket of its own) are let in at the next hand-over: a writer that keeps
        asking neither holds its owner up for the whole of ``most`` nor stands in for another that waits."""
        waiting = set(self._tickets)
        self.release()
        try:
            if waiting:
                deadline = time.monotonic() + most
                time.sleep(0)
                while not waiting.isdisjoint(self._tickets) and time.monotonic() < deadline:
                    time.sleep(0.0002)
        finally:
            self.acquire()

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Let the gate go for a wait (on another process's lock), when its owner holds it once: other threads are
        served meanwhile; it is the owner's again afterwards. Held more than once, it is kept."""
        if self.held != 1:
            yield
            return
        self.release()
        try:
            yield
        finally:
            self.acquire()
