"""StrictFIFO: the head blocks the queue until something changes, and a workload that comes before it (a higher
priority) is the new head at once, as in Kueue, whose StrictFIFO heap keeps the blocked head and takes whichever is
first each cycle."""

from __future__ import annotations

import pytest

from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    Quota,
    ResourceGroup,
    Strategy,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Config, Scheduler


def _scheduler() -> Scheduler:
    group = ResourceGroup(("cpu",), ("f",), {("f", "cpu"): Quota(4000)})
    return Scheduler(Config({"f": FlavorSpec("f", {})},
                            {"a": ClusterQueueSpec("a", groups=(group,), strategy=Strategy.STRICT_FIFO)}, {}))


def _wl(name: str, cpu: int, priority: int) -> Workload:
    return Workload("d", name, "lq", "a", (PodSet("main", 1, {"cpu": cpu}),), priority=priority, uid=name)


@pytest.mark.parametrize(("priority", "admitted"), [(5, True), (0, False), (-3, False)])
def test_a_workload_before_the_blocked_head_is_admitted_one_behind_it_waits(priority: int, admitted: bool) -> None:
    scheduler = _scheduler()
    head = _wl("head", 5000, 0)  # asks more than the queue has: it blocks the queue
    scheduler.add(head, 0.0)
    scheduler.schedule(0.0)
    assert head.state is WorkloadState.PENDING
    new = _wl("new", 1000, priority)
    scheduler.add(new, 1.0)
    scheduler.schedule(1.0)
    assert (new.state is WorkloadState.ADMITTED, head.state) == (admitted, WorkloadState.PENDING)
