"""A scheduler walked at random through arrivals, cycles, evictions that complete and finishes: the queues and the
walk that property tests draw (their own strategies choose the ranges), built and walked one way for all of them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from flexq.scheduler.events import Event
from flexq.scheduler.model import (
    ClusterQueueSpec,
    CohortSpec,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
)
from flexq.scheduler.scheduler import Config, Scheduler

__all__ = ["QueueSpec", "WorkloadSpec", "random_config", "walk"]

QueueSpec = tuple[str | None, list[Quota], PreemptionPolicy, PreemptionPolicy, PreemptionPolicy]
"""A ClusterQueue drawn: its cohort (``c1``, ``c2`` or none), its quota on each flavor, and its preemption policies
within the queue, for reclaiming within the cohort and for borrowing within it."""
WorkloadSpec = tuple[int, int, int, int]
"""A workload drawn: its queue's index (modulo the queues), its cpu, its priority and its pods."""


def random_config(queues: Sequence[QueueSpec], nested: bool, flavors: Sequence[str]) -> Config:
    """ClusterQueues ``q0``, ``q1``, ... of one resource group over ``flavors``; cohort ``c2`` under ``c1`` where
    ``nested``."""
    cqs = {}
    for i, (cohort, qs, within, reclaim, borrow) in enumerate(queues):
        group = ResourceGroup(("cpu",), tuple(flavors), {(f, "cpu"): q for f, q in zip(flavors, qs, strict=True)})
        cqs[f"q{i}"] = ClusterQueueSpec(f"q{i}", cohort, (group,), within_cluster_queue=within,
                                        reclaim_within_cohort=reclaim, borrow_within_cohort=borrow)
    return Config({f: FlavorSpec(f) for f in flavors}, cqs, {"c2": CohortSpec("c2", "c1" if nested else None)})


def walk(sched: Scheduler, queues: int, wls: Sequence[WorkloadSpec], plan: Sequence[str],
         cycle: Callable[[Scheduler, float], list[Event]]) -> Iterator[list[Event]]:
    """Add ``wls`` (the second half two priorities higher) and schedule them, then take each step of ``plan``:
    ``arrive`` (a larger workload of higher priority, to preempt for), ``cycle`` (``cycle`` of the scheduler),
    ``complete`` (every eviction issued completes) or ``finish`` (the first holder finishes). Yields the events of
    the set-up, then of each step, after it."""
    events: list[Event] = []
    half = len(wls) // 2
    for n, (queue, cpu, priority, count) in enumerate(wls):
        wl = Workload("default", f"w{n}", "lq", f"q{queue % queues}", (PodSet("main", count, {"cpu": cpu}),),
                      priority=priority if n < half else priority + 2, created=float(n), uid=f"w{n}")
        events += sched.add(wl, float(n))
    yield events + sched.schedule(50.0)
    now = 100.0
    for step in plan:
        now += 1
        events = []
        if step == "arrive":
            queue, cpu, priority, count = wls[int(now) % len(wls)]
            name = f"x{int(now)}"
            events += sched.add(Workload("default", name, "lq", f"q{queue % queues}",
                                         (PodSet("main", count + 1, {"cpu": cpu + 1}),), priority=priority + 4,
                                         created=now, uid=name), now)
        elif step == "cycle":
            events += cycle(sched, now)
        elif step == "complete":
            for key in [w.key for w in sched.workloads() if w.evicting]:
                events += sched.complete_eviction(key, now)
        else:
            holders = sorted(w.key for w in sched.workloads() if w.admission is not None and not w.evicting)
            if holders:
                events += sched.finish(holders[0], now)
        yield events
