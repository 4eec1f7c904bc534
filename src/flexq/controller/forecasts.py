"""The live server's forecasts: its control plane forked and run ahead on a thread of their own.

After a step that changed something (and every few seconds while anything waits), the forecaster asks the queue
controller for a fork of its plane, made under the controller's lock between two steps (a copy: the controller goes
on at once), runs it ahead off the controller's thread, and hands the forecasts back. The controller writes a
workload's forecast into its status when it moved enough to matter (:func:`material`), so that a thousand waiting
workloads do not mean a thousand writes every few seconds.

The run ahead is pure Python on the fork, seconds of it for a server holding thousands of workloads: where the
machine can fork, it runs in a child process forked for it (:func:`run_apart`), on a core of its own, so that it does
not hold the interpreter's lock the API and the controller need (on Kueue's baseline through the API, forecasts on
the server's own interpreter took two thirds of its CPU). The child only computes, sends the forecasts back through
a pipe and exits; it dies with the server.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import pickle
import resource
import signal
import threading
import time
from collections.abc import Callable
from typing import Final

from flexq.forecast import Forecast, Lookahead, ensemble

__all__ = ["FORECAST_EVERY", "FORECAST_GAP", "SHARE", "LiveForecasts", "material", "pause", "run_apart"]

log = logging.getLogger("flexq.controller")

FORECAST_EVERY: Final = 5.0
"""Seconds between two forecasts while anything waits and nothing changes (time passing moves them too)."""
FORECAST_GAP: Final = 1.0
"""Seconds between the end of a forecast and the start of the next, at the least: a busy server forecasts at this
pace, not at every step."""
SHARE: Final = 0.05
"""The share of the time forecasts may take, at the most: after a forecast that took ``s`` seconds, the next waits
``s / SHARE - s`` (:func:`pause`; a server holding tens of thousands of workloads forecasts less often, not slower). A
forecast run on the server's interpreter (where it cannot fork) holds the lock the API and the controller wait for: at a
fifth, Kueue's baseline through the API (``bench/live_baseline.py --scale 0.3``) took 48-55 s instead of 28 s. Run
apart, the same run took 30.8-32.2 s against 41.9 s on the server's interpreter (a quiet 2-core machine; server CPU
4.8-5.1 ms a Job against 6.9), but a forecast over thousands of waiting workloads still takes a core for seconds: the
child runs at a lower priority (:data:`_NICENESS`)."""


def pause(took: float, cpu: float, *, apart: bool) -> float:
    """Seconds from the end of a forecast that took ``took`` seconds (``cpu`` of them on a processor) to the start of
    the next, so that forecasts take :data:`SHARE` of the time at the most (:data:`FORECAST_GAP` at the least). Run
    ``apart``, what counts is the CPU it took: the child, at a lower priority, waits for a core the server does not
    need, and that wait takes nothing from the server (on a busy machine a new job's first forecast is not held back
    for it). On the server's interpreter all of its time counts: it holds the lock the API and the controller wait
    for, whether it runs or waits for a core."""
    spent = cpu if apart else took
    return max(FORECAST_GAP, spent / SHARE - took)


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


_PR_SET_PDEATHSIG: Final = 1
_NICENESS: Final = 10
"""How much lower the forecasting process's priority is than the server's: a forecast is advice, and the CPU it takes
on a machine of few cores is the API's and the controller's first."""


def _die_with_parent(parent: int) -> None:
    """Linux: this process gets SIGKILL when ``parent``, the one that forked it, ends (a server killed leaves no
    forecast behind); it ends at once if ``parent`` ended before it could ask."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _let_go(keep: int) -> None:
    """Close every descriptor the child inherited but the standard streams and ``keep`` (its answer): it holds none
    of the server's sockets, files or database. A server killed while it forecasts can listen on its port again at
    once, though its child, at a lower priority on a busy machine, may not have run yet to die of it."""
    os.closerange(3, keep)
    os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def run_apart(ahead: Lookahead,
              started: Callable[[int], None] = lambda _pid: None) -> tuple[dict[str, Forecast], float]:
    """``ensemble(ahead)`` in a child process forked for it, and the CPU seconds the child took. ``started`` is told
    the child's pid (to stop it early). Raises ``RuntimeError`` when the child does not answer."""
    read, write = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: compute, answer, exit (no cleanup of the server's state: it is the parent's)
        code = 1
        try:
            _die_with_parent(parent)
            _let_go(write)
            os.nice(_NICENESS)
            # The child lives for one forecast: its garbage goes with it. The cyclic collector would only walk the
            # server's objects it inherited (touching their pages, which the fork shared) and the forecast's own.
            gc.disable()
            data = pickle.dumps(ensemble(ahead), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    started(pid)
    with os.fdopen(read, "rb") as answer:
        data = answer.read()
    _, status, usage = os.wait4(pid, 0)
    if status != 0 or not data:
        raise RuntimeError(f"the forecasting process ended with status {status}")
    forecasts: dict[str, Forecast] = pickle.loads(data)
    return forecasts, usage.ru_utime + usage.ru_stime


class LiveForecasts:
    """The forecasting thread: ``prepare`` forks the plane (None: nothing waits), ``publish`` takes the result."""

    def __init__(self, prepare: Callable[[], Lookahead | None],
                 publish: Callable[[dict[str, Forecast]], None], *, apart: bool = hasattr(os, "fork")) -> None:
        self._prepare = prepare
        self._publish = publish
        self.apart = apart
        """Whether the thread runs each forecast in a process of its own (:func:`run_apart`)."""
        self._child = 0
        self._due = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.made = 0
        """Forecasts made since the server started."""
        self.cpu = 0.0
        """CPU seconds the last forecast took (its fork and its run)."""
        self.cpu_total = 0.0

    @property
    def child(self) -> int:
        """The pid of the process running a forecast now (0: none)."""
        return self._child

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="flexq-forecast", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stop.set()
        self._due.set()
        child = self._child
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
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
            self.once(apart=self.apart)
            self._stop.wait(pause(time.monotonic() - began, self.cpu, apart=self.apart))

    def once(self, apart: bool = False) -> None:
        """Fork the plane, run ahead (on the calling thread, or ``apart`` in a process of its own), publish."""
        began = time.thread_time()
        child_cpu = 0.0
        try:
            ahead = self._prepare()
            if ahead is None:
                result: dict[str, Forecast] = {}
            elif apart:
                result, child_cpu = run_apart(ahead, self._started)
            else:
                result = ensemble(ahead)
        except Exception:
            if not self._stop.is_set():
                log.exception("a forecast failed: the last one stands")
            return
        finally:
            self._child = 0
        self.cpu = time.thread_time() - began + child_cpu
        self.cpu_total += self.cpu
        self.made += 1
        self._publish(result)

    def _started(self, pid: int) -> None:
        self._child = pid
        if self._stop.is_set():  # stopped while forking: the child is not waited for
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
