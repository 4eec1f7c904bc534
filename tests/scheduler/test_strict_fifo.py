"""StrictFIFO: the head blocks the queue until something changes, and a workload that comes before it (a higher
priority) is the new head at once, as in Kueue, whose StrictFIFO heap keeps the blocked head and takes whichever is
first each cycle."""

from __future__ import annotations

import pytest

from flexq.scheduler.model import Strategy, Workload, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload


def _scheduler() -> Scheduler:
    return scheduler(cluster_queue("a").flavor("f", cpu=4).with_(strategy=Strategy.STRICT_FIFO))


def _wl(name: str, cpu: float, priority: int) -> Workload:
    return workload(name, cpu=cpu, priority=priority, on="a").namespace("d").uid(name).build()


@pytest.mark.parametrize(("priority", "admitted"), [(5, True), (0, False), (-3, False)])
def test_a_workload_before_the_blocked_head_is_admitted_one_behind_it_waits(priority: int, admitted: bool) -> None:
    scheduler = _scheduler()
    head = _wl("head", 5, 0)  # asks more than the queue has: it blocks the queue
    scheduler.add(head, 0.0)
    scheduler.schedule(0.0)
    assert head.state is WorkloadState.PENDING
    new = _wl("new", 1, priority)
    scheduler.add(new, 1.0)
    scheduler.schedule(1.0)
    assert (new.state is WorkloadState.ADMITTED, head.state) == (admitted, WorkloadState.PENDING)
