"""The live server's forecasts: its control plane forked and run ahead on a thread of their own.

After a step that changed something (and every few seconds while anything waits), the forecaster asks the queue
controller for a fork of its plane, made under the controller's lock between two steps (a copy: the controller goes
on at once), runs it ahead off the controller's thread, and hands the forecasts back. The controller writes a
workload's forecast into its status when it moved enough to matter (:func:`material`), so that a thousand waiting
workloads do not mean a thousand writes every few seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from flexq.forecast import Forecast, Lookahead, ensemble

__all__ = ["FORECAST_EVERY", "FORECAST_GAP", "SHARE", "LiveForecasts", "material"]

log = logging.getLogger("flexq.controller")

FORECAST_EVERY: Final = 5.0
"""Seconds between two forecasts while anything waits and nothing changes (time passing moves them too)."""
FORECAST_GAP: Final = 1.0
"""Seconds between the end of a forecast and the start of the next, at the least: a busy server forecasts at this
pace, not at every step."""
SHARE: Final = 0.05
"""The share of the time forecasts may take, at the most: after a forecast that took ``s`` seconds, the next waits
``s / SHARE - s`` (a server holding tens of thousands of workloads forecasts less often, not slower). A forecast runs
Python on the server's interpreter, whose lock the API and the controller wait for meanwhile: at a fifth, Kueue's
baseline through the API (``bench/live_baseline.py --scale 0.3``) took 48-55 s instead of 28 s."""
_SHIFT: Final = 30.0
_SHARE: Final = 0.05


def material(old: Forecast | None, new: Forecast) -> bool:
    """Whether ``new`` says something ``old`` did not: a start foreseen or lost, other flavors or another basis, or a
    start that moved by more than 30 s and 5% of the wait still to come."""
    if old is None or (old.start is None) != (new.start is None):
        return True
    if (old.flavors, old.basis, old.blocked_by, old.why) != (new.flavors, new.basis, new.blocked_by, new.why):
        return True
    if old.start is None or new.start is None:
        return False
    return abs(new.start - old.start) > max(_SHIFT, _SHARE * max(0.0, new.start - new.made))


class LiveForecasts:
    """The forecasting thread: ``prepare`` forks the plane (None: nothing waits), ``publish`` takes the result."""

    def __init__(self, prepare: Callable[[], Lookahead | None],
                 publish: Callable[[dict[str, Forecast]], None]) -> None:
        self._prepare = prepare
        self._publish = publish
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.made = 0
        """Forecasts made since the server started."""
        self.cpu = 0.0
        """CPU seconds the last forecast took (its fork and its run)."""
        self.cpu_total = 0.0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="flexq-forecast", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stop.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def request(self) -> None:
        """Something changed: forecast again (after the gap since the last)."""
        self._due.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._due.wait(FORECAST_EVERY)
            self._due.clear()
            if self._stop.is_set():
                return
            began = time.monotonic()
            self.once()
            took = time.monotonic() - began
            self._stop.wait(max(FORECAST_GAP, took / SHARE - took))

    def once(self) -> None:
        """Fork, run ahead, publish (on the calling thread)."""
        began = time.thread_time()
        try:
            ahead = self._prepare()
            result = ensemble(ahead) if ahead is not None else {}
        except Exception:
            log.exception("a forecast failed: the last one stands")
            return
        self.cpu = time.thread_time() - began
        self.cpu_total += self.cpu
        self.made += 1
        self._publish(result)
