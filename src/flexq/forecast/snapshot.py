"""A control plane's state, copied into one that runs in virtual time from the same instant.

The copy is whole: the scheduler (queues, workloads with their admissions and queue times, retry delays, flavors
set aside), the capacity driver (nodes up and booting, ProvisioningRequests in flight with their ages, workloads
waiting for nodes, costs so far) and the driver's timers (a node's boot, a request's answer, a slice's expiry),
which are copied with it: each timer is a method of the driver (or a ``functools.partial`` of one), so a deep
copy of the timers and the driver together points each copied timer at the copied driver. Timers that are not
the driver's (the live server's reading of existing Ray clusters) stay behind.

Forking reads the plane and writes nothing to it: the live controller forks under its own lock, between steps,
and runs the copy forward on another thread.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from flexq.capacity import CapacityConfig, CapacityDriver, answer_timer
from flexq.clock import VirtualClock
from flexq.control import AnswerTimes, CapacityChanged, ControlPlane, JobHooks, RunTimes
from flexq.scheduler import Event
from flexq.timers import Kernel

__all__ = ["Fork", "fork"]


class Fork:
    """A virtual-time copy of a control plane, started at the instant it was forked."""

    def __init__(self, plane: ControlPlane, kernel: Kernel, run_times: RunTimes) -> None:
        self.plane = plane
        self.kernel = kernel
        self.run_times = run_times
        self.now = kernel.now()

    def reshape(self, capacity: CapacityConfig) -> None:
        """Run ahead under ``capacity`` instead (what if a pool had more nodes, the cloud more machines?): the nodes of
        pools that remain are kept (ValueError where no capacity is modelled)."""
        self.plane.feed(CapacityChanged(capacity, self.kernel.now()))


def _owner(action: Callable[[], None]) -> object:
    """The object whose method a timer's action is (through ``functools.partial``), or None."""
    while isinstance(action, functools.partial):
        action = action.func
    return getattr(action, "__self__", None)


def fork(plane: ControlPlane, now: float, tell: Callable[[Event], None], hooks: JobHooks) -> Fork:
    """Copy ``plane`` as it stands at ``now`` into a plane on a virtual clock started at ``now``; the copy tells
    ``tell`` what happens in it and runs jobs through ``hooks``. Admitted jobs start on their admission where no
    capacity is modelled (the live plane starts them when the admission is written)."""
    kernel = Kernel(VirtualClock(now))
    run_times = plane.run_times.copy()
    answers = plane.answer_times.copy()
    # Forecasts assume that the pods of a job that starts become ready: waitForPodsReady is not run forward.
    copied = ControlPlane(kernel, tell, hooks, start_on_admission=True, virtual=True, run_times=run_times,
                          answer_times=answers, kueue=dataclasses.replace(plane.kueue, pods_ready=None))
    copied.local_queues = dict(plane.local_queues)
    copied.priorities = plane.priorities
    driver = plane.driver
    memo: dict[int, Any] = {id(plane): copied, id(plane.timers): kernel, id(plane.run_times): run_times,
                            id(plane.hooks): hooks}
    timers = [(at, priority, action) for at, priority, action in plane.timers.pending()
              if driver is not None and _owner(action) is driver]
    scheduler, new_driver, actions = copy.deepcopy((plane.scheduler, driver, timers), memo)
    copied.scheduler = scheduler
    if new_driver is not None:
        assert isinstance(new_driver, CapacityDriver)
        new_driver.run_time = hooks.run_time
        if hooks.finish_eta is not None:
            new_driver.finish_eta = hooks.finish_eta
        copied.driver = new_driver
        actions = _foreseen_answers(new_driver, answers, actions, now)
    for at, priority, action in actions:
        kernel.schedule(at, action, priority)
    return Fork(copied, kernel, run_times)


Timer = tuple[float, int, Callable[[], None]]


def _foreseen_answers(driver: CapacityDriver, answers: AnswerTimes, timers: list[Timer], now: float) -> list[Timer]:
    """The copy's cloud as a forecast may know it: ProvisioningRequests answered when the answers seen so far expect
    (:mod:`flexq.control.answer_times`), else when the pool's model does (a random delay by its median), never at
    the moment the cloud drew for them. A request whose acceptance the plane did not see (it was made before the
    server started) keeps its moment."""
    pools = driver.cluster.pools
    learned = {(name, pool.machine.name): seconds for name, pool in pools.items()
               if (seconds := answers.typical(name)) is not None}
    cloud = driver.cluster.cloud.foreseeable(learned)
    driver.cluster.cloud = cloud
    moved: list[Timer] = []
    for at, priority, action in timers:
        answer = answer_timer(action)
        asked = answers.asked_at(answer[0]) if answer is not None else None
        if answer is not None and asked is not None and answer[1] in pools:
            request, pool = answer
            left = answers.remaining(pool, now - asked)
            if left is None:
                delay = cloud.queued_delay(pool, pools[pool].machine.name, request, asked)
                left = None if delay is None else max(0.0, asked + delay - now)
            if left is not None:
                at = now + left
        moved.append((at, priority, action))
    return moved
