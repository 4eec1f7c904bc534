"""Events expire, as the Kubernetes API server's ``--event-ttl`` makes them (one hour by default).

Every controller records Events (a workload admitted, a pool scaled, a job started); without an end they would
grow the store for as long as the server runs. An Event whose ``lastTimestamp`` (else its creation) is older than
the TTL is deleted; one counted again meanwhile (``count`` + 1, a newer ``lastTimestamp``) lives on.

The Events are read once, when the expiry starts (or at the first sweep, called directly); after that the expiry
follows the store's changes and keeps each Event's due time in a heap, so a sweep reads only the Events that are
due (a server holding a hundred thousand Events does not parse them all every minute, and those written since it
started are never listed: reading them at the first sweep instead cost a busy server a pause a minute in).
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

from flexq.objects import parse_time
from flexq.store import BaseStore, Change, ChangeType, Conflict, Key, NotFound, StoreError

__all__ = ["DEFAULT_EVENT_TTL", "EventExpiry"]

log = logging.getLogger("flexq.controller")

DEFAULT_EVENT_TTL = 3600.0
"""Seconds an Event is kept after it was last seen: the API server's default (``--event-ttl=1h``)."""


class EventExpiry:
    """Deletes the Events older than ``ttl`` seconds, every ``every`` seconds (a tenth of the TTL, at most a
    minute) in a thread of its own."""

    def __init__(self, store: BaseStore, ttl: float, *, now: Callable[[], float] = time.time) -> None:
        self.store = store
        self.ttl = ttl
        self.now = now
        self.every = max(1.0, min(60.0, ttl / 10))
        self.expired = 0
        """Events deleted so far."""
        self._due: list[tuple[float, int, Key]] = []
        """(when it is due, order of entry, Event): an Event written again is in it again, for its newer time."""
        self._entries = itertools.count()
        self._due_lock = threading.Lock()
        self._seeded = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if ttl > 0:
            store.subscribe(self._changed)

    def _changed(self, changes: list[Change]) -> None:
        """Each Event written (from the commit's text, without parsing the whole Event) is due a TTL after the
        time it says it was last seen."""
        due = []
        for change in changes:
            if change.key.resource == "events" and not change.key.group and change.type is not ChangeType.DELETED:
                seen = _last_seen(change._body)
                due.append((seen + self.ttl if seen is not None else self.now() + self.ttl, change.key))
        if due:
            with self._due_lock:
                for when, key in due:
                    heapq.heappush(self._due, (when, next(self._entries), key))

    def _seed(self) -> None:
        """The Events there were before the expiry followed the changes."""
        for event in self.store.list_objects("", "events")[0]:
            meta = event["metadata"]
            seen = parse_time(event.get("lastTimestamp") or meta.get("creationTimestamp"))
            when = seen.timestamp() + self.ttl if seen is not None else self.now() + self.ttl
            with self._due_lock:
                heapq.heappush(self._due, (when, next(self._entries),
                                           Key("", "events", meta.get("namespace", ""), meta["name"])))
        self._seeded = True

    def sweep(self) -> int:
        """Delete the Events past their time; return how many went."""
        if not self._seeded:
            self._seed()
        now = self.now()
        due: set[Key] = set()
        with self._due_lock:
            while self._due and self._due[0][0] < now:
                due.add(heapq.heappop(self._due)[2])
        gone = 0
        for key in sorted(due, key=str):
            with contextlib.suppress(NotFound, Conflict):
                event = self.store.get(key)
                meta = event["metadata"]
                seen = parse_time(event.get("lastTimestamp") or meta.get("creationTimestamp"))
                if seen is not None and seen.timestamp() + self.ttl >= now:
                    continue  # counted again since: it is in the heap again, for its newer time
                # Counted again since it was read: a newer resourceVersion, and it lives on.
                self.store.delete(key, resource_version=meta.get("resourceVersion"))
                gone += 1
        self.expired += gone
        return gone

    def start(self) -> None:
        if self.ttl <= 0:
            return  # kept forever
        self._thread = threading.Thread(target=self._run, name="flexq-event-expiry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        if not self._seeded:
            try:
                self._seed()  # what the store held at the start; since then, the changes are followed
            except StoreError as exc:
                log.warning("reading the Events to expire failed: %s", exc)
        while not self._stop.wait(self.every):
            try:
                self.sweep()
            except StoreError as exc:  # the store refused (full, locked): the next sweep tries again
                log.warning("expiring Events failed: %s", exc)


_STAMP = '"lastTimestamp":"'


def _last_seen(body: str) -> float | None:
    """The ``lastTimestamp`` of an Event's stored text, in seconds (None when it has none)."""
    at = body.find(_STAMP)
    if at < 0:
        return None
    start = at + len(_STAMP)
    return _seconds(body[start:body.find('"', start)])


@functools.lru_cache(maxsize=64)
def _seconds(stamp: str) -> float | None:
    """A stamp in seconds, worked out once: the Events of a busy second share their stamp."""
    seen = parse_time(stamp)
    return seen.timestamp() if seen is not None else None
