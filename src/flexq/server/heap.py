"""The server's garbage collection: few young collections, no full one under load, and a full one on a timer.

CPython's defaults (a young collection every 700 allocations, a full one whenever the objects that survived since
the last grow by a quarter) suit a short script. A server whose heap grows with what it serves (every workload the
scheduler keeps, the store's change window) pays for them with full collections of a growing heap: on Kueue's
baseline through the API, 20 of them, 180 ms each with the interpreter held, 4 s of a 60 s run's CPU, and 5 s with
the young ones. Under this policy the objects made while starting are frozen out of collection, young collections
come every 50,000 allocations, full ones practically never on their own, and a full collection runs every
``every`` seconds instead, as etcd compacts on a timer: a cycle of garbage that outlived the young collections is
still freed, within ``every`` seconds.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType
from typing import Final

__all__ = ["FULL_EVERY", "HeapPolicy"]

FULL_EVERY: Final = 300.0
"""Seconds between two full collections."""
_THRESHOLDS: Final = (50_000, 50, 100)


class HeapPolicy:
    """While entered, the process collects as the module says; on exit, as it did before."""

    def __init__(self, every: float = FULL_EVERY, thresholds: tuple[int, int, int] = _THRESHOLDS) -> None:
        self.every = every
        self.thresholds = thresholds
        self.sweeps = 0
        """Full collections run by the timer so far."""
        self._before = gc.get_threshold()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flexq-heap", daemon=True)

    def __enter__(self) -> HeapPolicy:
        self._before = gc.get_threshold()
        gc.collect()  # what starting left as garbage goes before the rest is frozen
        gc.freeze()
        gc.set_threshold(*self.thresholds)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        gc.set_threshold(*self._before)
        gc.unfreeze()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            gc.collect()
            self.sweeps += 1
