"""Kueue's waitForPodsReady, one timer for both clocks.

An admitted workload has ``timeout`` to get all its pods ready (Kueue's ``PodsReady`` condition): counted from its
admission, as Kueue counts from the ``Admitted`` condition's transition. Past it, the workload is evicted with reason
``PodsReadyTimeout`` ("Exceeded the PodsReady timeout NAMESPACE/NAME"), its ``requeueState.count`` goes up by one
and it is requeued after Kueue's backoff (``backoffBaseSeconds * 2^(count-1)``, at most ``backoffMaxSeconds``),
placed in its queue by its eviction time (``timestamp: Eviction``) or its creation (``Creation``). The time-out
that would requeue it more than ``backoffLimitCount`` times deactivates it instead
(``DeactivatedDueToRequeuingLimitExceeded``, "The workload is deactivated due to exceeding the maximum number of
re-queuing retries"), and its count is cleared.

A running workload whose pods stop being ready (a host lost) has ``recoveryTimeout`` to be ready again (Kueue's
``WaitForRecovery``), or is evicted the same way.

What "ready" means is the clock owner's to say (:class:`~flexq.control.vocabulary.PodsReady`): the simulator, when
the job starts unless its scenario says otherwise; the live server, when the job's runtime reports it up. A racing
workload's variants have no timer of their own, as in Kueue (the parent, which owns the job, has it).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

from flexq.api import PodsReadyConfig
from flexq.scheduler import Event, Scheduler, Workload, WorkloadState
from flexq.timers import TimerHeap

__all__ = ["LIMIT_CAUSE", "LIMIT_MESSAGE", "RECOVERED", "STARTED", "TIMEOUT_REASON", "WAIT_FOR_RECOVERY",
           "WAIT_FOR_START", "PodsReadyTimer"]

_LAST: Final = 100
"""The timers' priority: after whatever else is due at the same instant (a node that comes up then, and the pods
it lets start), so that pods ready at the deadline count as ready in time."""

TIMEOUT_REASON: Final = "PodsReadyTimeout"
LIMIT_CAUSE: Final = "DeactivatedDueToRequeuingLimitExceeded"
LIMIT_MESSAGE: Final = "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
STARTED: Final = "Started"
"""Kueue's ``PodsReady`` reason: all pods ready for the first time in this admission."""
RECOVERED: Final = "Recovered"
"""Kueue's ``PodsReady`` reason: all pods ready again after some stopped being ready."""
WAIT_FOR_RECOVERY: Final = "WaitForRecovery"
"""Kueue's ``PodsReady`` reason (status False): pods were ready and some stopped being."""
WAIT_FOR_START: Final = "WaitForStart"
"""Kueue's ``PodsReady`` reason (status False): not admitted, or its pods not all ready yet in this admission."""


class PodsReadyTimer:
    """Times admitted workloads' readiness on ``timers``; what it decides goes to ``emit``. ``scheduler`` gives the
    scheduler of the moment (the live server makes a new one when it reads its state back)."""

    def __init__(self, config: PodsReadyConfig | None, timers: TimerHeap, scheduler: Callable[[], Scheduler],
                 emit: Callable[[list[Event]], None]) -> None:
        self.config = config
        self._timers = timers
        self._scheduler = scheduler
        self._emit = emit
        self._lost: dict[str, float] = {}
        """Running workloads whose pods stopped being ready: key -> since when."""
        self._recovered: set[str] = set()
        """Admitted workloads whose pods are ready again after some stopped being (Kueue's ``Recovered``)."""
        self._listeners: list[Callable[[Workload, float, str], None]] = []

    def listen(self, listener: Callable[[Workload, float, str], None]) -> None:
        """Hear each change of an admitted workload's ``PodsReady`` condition where waitForPodsReady is on: the
        workload, when, and Kueue's reason (:data:`STARTED`, :data:`RECOVERED`, :data:`WAIT_FOR_RECOVERY`)."""
        self._listeners.append(listener)

    def _changed(self, wl: Workload, at: float, reason: str) -> None:
        if self.config is not None:
            for listener in self._listeners:
                listener(wl, at, reason)

    def admitted(self, wl: Workload) -> None:
        """``wl`` was admitted (or restored admitted and not ready): its pods have ``timeout`` to be ready."""
        config, admitted = self.config, wl.admitted_at
        self._recovered.discard(wl.key)
        if config is None or admitted is None or wl.parent or wl.pods_ready_at is not None:
            return
        self._lost.pop(wl.key, None)  # a new admission: what its pods did in the last one is past
        self._timers.schedule(admitted + config.timeout, functools.partial(self._due, wl.key, admitted, None), _LAST)

    def ready(self, key: str, at: float, ready: bool = True) -> None:
        """The clock's owner says whether all of ``key``'s pods are ready (a racing workload's: its parent's)."""
        scheduler = self._scheduler()
        wl = scheduler.workload(key)
        if wl is not None and wl.parent:  # a variant's pods are its parent's
            wl = scheduler.workload(wl.parent)
        if wl is None or wl.state is not WorkloadState.ADMITTED:
            return
        key = wl.key
        if ready:
            recovered = self._lost.pop(key, None) is not None
            if wl.pods_ready_at is None:
                wl.pods_ready_at = at
                if recovered:
                    self._recovered.add(key)
                self._changed(wl, at, RECOVERED if recovered else STARTED)
            return
        if wl.pods_ready_at is None or key in self._lost:
            return  # never ready yet (its start timer runs), or already waiting for recovery
        wl.pods_ready_at = None
        self._lost[key] = at
        self._recovered.discard(key)
        self._changed(wl, at, WAIT_FOR_RECOVERY)
        if self.config is not None and self.config.recovery_timeout is not None:
            self._timers.schedule(at + self.config.recovery_timeout,
                                  functools.partial(self._due, key, wl.admitted_at, at), _LAST)

    def blocks(self) -> bool:
        """Whether ``blockAdmission`` is on."""
        return self.config is not None and self.config.block_admission

    def blocking(self) -> bool:
        """``blockAdmission``: whether an admitted workload's pods are not all ready yet, which holds every admission
        back (Kueue's scheduler waits for it), until they are or it is evicted."""
        return self.blocks() and any(wl.state is WorkloadState.ADMITTED and not wl.parent and wl.pods_ready_at is None
                   for wl in self._scheduler().workloads())

    def recovering(self, key: str) -> bool:
        """Whether ``key``'s pods were ready and some stopped (Kueue's ``WaitForRecovery``)."""
        return key in self._lost

    def reason(self, wl: Workload) -> str:
        """Kueue's ``PodsReady`` reason for ``wl`` as its job reconciler words it: ``Started`` or ``Recovered`` (all
        pods ready, the first time in this admission or again), ``WaitForRecovery``, else ``WaitForStart``."""
        if wl.state is not WorkloadState.ADMITTED:
            return WAIT_FOR_START
        if wl.pods_ready_at is not None:
            return RECOVERED if wl.key in self._recovered else STARTED
        return WAIT_FOR_RECOVERY if wl.key in self._lost else WAIT_FOR_START

    def _due(self, key: str, admitted: float | None, lost: float | None) -> None:
        scheduler, config = self._scheduler(), self.config
        wl = scheduler.workload(key)
        if config is None or wl is None or wl.state is not WorkloadState.ADMITTED or wl.admitted_at != admitted \
                or wl.pods_ready_at is not None or self._lost.get(key) != lost:
            return  # ready, finished, evicted or admitted anew since (or ready once: the recovery timer is its own)
        self._lost.pop(key, None)
        now = self._timers.now()
        if config.limit is not None and wl.requeue_count + 1 > config.limit:
            wl.requeue_count = 0  # as Kueue clears requeueState on deactivation
            self._emit(scheduler.deactivate(key, now, LIMIT_MESSAGE, LIMIT_CAUSE))
            return
        wl.requeue_count += 1
        ordering = wl.created if config.timestamp == "Creation" else now
        self._emit(scheduler.evict_until(key, now, f"Exceeded the PodsReady timeout {key}", TIMEOUT_REASON,
                                         now + config.backoff(wl.requeue_count), ordering,
                                         WAIT_FOR_START if lost is None else WAIT_FOR_RECOVERY))
