"""Kueue's partial admission: a workload whose pod sets have a ``minCount`` and that fits neither whole nor by
preemption is admitted with the most pods that fit (by quota or by preempting someone), down to its minimums;
the reduction is shared out in proportion to what each pod set may give up (Kueue's ``PodSetReducer``)."""

from __future__ import annotations

import pytest

from flexq.scheduler.events import EventKind
from flexq.scheduler.model import PodSet, PreemptionPolicy, Workload, WorkloadState
from flexq.scheduler.partial import counts_at, largest_fit, reducible
from flexq.scheduler.scheduler import Scheduler
from tests.support import cluster_queue, scheduler, workload

CPU = 1000


def _podsets(*shapes: tuple[int, int | None]) -> tuple[PodSet, ...]:
    return tuple(PodSet(f"ps{i}", count, {"cpu": CPU}, min_count=least) for i, (count, least) in enumerate(shapes, 1))


# Restated from Kueue's podset_reducer_test.go: pod sets (count, minCount), the most pods in all that fit, and the
# total found (None: no reduction fits).
REDUCER_CASES: dict[str, tuple[tuple[tuple[int, int | None], ...], int, int | None]] = {
    "empty": ((), 10, None),
    "partial not available": (((1, None), (2, 2)), 2, None),
    "partial available": (((5, 3), (5, 4), (5, 1), (5, 2)), 15, 15),
    "one partial available": (((5, 3), (5, None), (5, None), (5, None)), 19, 19),
    "to min": (((5, 3), (5, 4), (5, 1), (5, 2)), 10, 10),
    "to max": (((5, 3), (5, 4), (5, 1), (5, 2)), 20, 20),
    "as submitted: no reduction": (((4, 2),), 4, 4),
    "no overflow": (tuple((150_000, 1) for _ in range(8)), 150_000, 150_000),
    "one large pod set": (((150_000, 1), *((1, None) for _ in range(7))), 150_000, 150_000),
    "a pod set of none": (((0, 0),), 0, None),
    "below the minimums": (((10, 6), (10, 6)), 11, None),
    "a single pod of margin: never asked below its minimum": (((2, 1),), 0, None),
}


@pytest.mark.parametrize("case", sorted(REDUCER_CASES))
def test_the_reduction_finds_the_most_pods_that_fit(case: str) -> None:
    shapes, limit, want = REDUCER_CASES[case]
    podsets = _podsets(*shapes)
    tried: list[list[int]] = []

    def fits(counts: list[int]) -> int | None:
        tried.append(counts)
        assert all((ps.min_count or ps.count) <= c <= ps.count for ps, c in zip(podsets, counts, strict=True))
        return sum(counts) if sum(counts) <= limit else None

    assert largest_fit(podsets, fits) == want
    assert len(tried) <= max(1, sum(ps.count - (ps.min_count or ps.count) for ps in podsets)).bit_length() + 1


def test_every_pod_set_gives_up_its_share() -> None:
    podsets = _podsets((20, 5), (10, 10), (4, 2))  # margins 15, 0, 2 of 17
    assert counts_at(podsets, 0) == [20, 10, 4]
    assert counts_at(podsets, 17) == [5, 10, 2]
    assert counts_at(podsets, 8) == [20 - 15 * 8 // 17, 10, 4 - 2 * 8 // 17]
    assert reducible(podsets) and not reducible(_podsets((3, None), (2, 2)))


def _scheduler(cpu: int, within: PreemptionPolicy = PreemptionPolicy.NEVER) -> Scheduler:
    return scheduler(cluster_queue().flavor("default", cpu=cpu).preempt(within=within), instant_eviction=True)


def _job(name: str, pods: int, least: int | None, priority: int = 0) -> Workload:
    return workload(name, priority=priority).pods(pods, at_least=least).namespace("default").queue("q").build()


def _admitted_pods(s: Scheduler, key: str) -> int | None:
    wl = s.workload(key)
    assert wl is not None
    return wl.admission.podsets[0].count if wl.admission is not None else None


def test_kueues_sample_job_is_admitted_with_the_pods_that_fit() -> None:
    """``sample-job-partial-admission.yaml``: parallelism 20, at least 5, in a queue of 9 cpus: 9 pods."""
    s = _scheduler(9)
    s.add(_job("sample", 20, 5), 0)
    events = s.schedule(0)
    assert [e.kind for e in events if e.workload == "default/sample"] == [EventKind.QUOTA_RESERVED, EventKind.ADMITTED]
    assert _admitted_pods(s, "default/sample") == 9
    assert s.usage("cq", ("default", "cpu")) == 9 * CPU
    assert [p.count for p in s.last_assignment["default/sample"].podsets] == [9], "the assignment its status tells"


@pytest.mark.parametrize(("least", "pods"), [(None, None), (10, None), (4, 4)])
def test_no_fewer_than_its_minimum(least: int | None, pods: int | None) -> None:
    s = _scheduler(4)
    s.add(_job("sample", 20, least), 0)
    s.schedule(0)
    assert _admitted_pods(s, "default/sample") == pods
    wl = s.workload("default/sample")
    assert wl is not None and wl.state is (WorkloadState.ADMITTED if pods else WorkloadState.PENDING)


def test_a_job_that_fits_whole_is_admitted_whole() -> None:
    s = _scheduler(30)
    s.add(_job("sample", 20, 5), 0)
    s.schedule(0)
    assert _admitted_pods(s, "default/sample") == 20


def test_it_preempts_for_more_pods_rather_than_take_the_few_that_are_free() -> None:
    """As Kueue's search: a reduction that fits by preemption counts as fitting, so the most pods win."""
    s = _scheduler(10, PreemptionPolicy.LOWER_PRIORITY)
    s.add(_job("low", 8, None), 0)
    s.schedule(0)
    s.add(_job("high", 20, 5, priority=100), 1)
    events = s.schedule(1)
    assert [(e.kind, e.workload) for e in events if e.kind in (EventKind.PREEMPTED, EventKind.ADMITTED)] == [
        (EventKind.PREEMPTED, "default/low"), (EventKind.ADMITTED, "default/high")]
    assert _admitted_pods(s, "default/high") == 10
