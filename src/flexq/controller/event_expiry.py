"""Events expire, as the Kubernetes API server's ``--event-ttl`` makes them (one hour by default).

Every controller records Events (a workload admitted, a pool scaled, a job started); without an end they would
grow the store for as long as the server runs. An Event whose ``lastTimestamp`` (else its creation) is older than
the TTL is deleted; one counted again meanwhile (``count`` + 1, a newer ``lastTimestamp``) lives on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from flexq.objects.table import parse_time
from flexq.store.base import BaseStore
from flexq.store.errors import Conflict, Key, NotFound, StoreError

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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> int:
        """Delete the Events past their time; return how many went."""
        cutoff = self.now() - self.ttl
        gone = 0
        for event in self.store.list_objects("", "events")[0]:
            meta = event["metadata"]
            seen = parse_time(event.get("lastTimestamp") or meta.get("creationTimestamp"))
            if seen is None or seen.timestamp() >= cutoff:
                continue
            key = Key("", "events", meta.get("namespace", ""), meta["name"])
            # Counted again since it was listed: a newer resourceVersion, and it lives on.
            with contextlib.suppress(NotFound, Conflict):
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
        while not self._stop.wait(self.every):
            try:
                self.sweep()
            except StoreError as exc:  # the store refused (full, locked): the next sweep tries again
                log.warning("expiring Events failed: %s", exc)
