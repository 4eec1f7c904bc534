"""An assignment that found no way in, given again while its queue's path to the root is as it was.

Where every preemption question the flavor assigner asked was answered from the incoming workload's queue alone
(:func:`nobody_locally`: nobody of its own to preempt, and the cohort's workloads out of reach), the assignment read
nothing of its cohort tree beyond the usage of its queue and of the queue's ancestors: a cycle gives it again while
those are unchanged, however much the rest of the cohort changed. These tests check that premise for random trees,
and that schedulers with and without the memo decide the same."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexq.scheduler import preemption
from flexq.scheduler.cycle import CycleRunner
from flexq.scheduler.model import (
    Admission,
    ClusterQueueSpec,
    CohortSpec,
    FlavorResource,
    FlavorSpec,
    Granular,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
    WorkloadState,
)
from flexq.scheduler.preemption import find_targets, nobody_locally
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.scheduler.state import Stuck
from tests.support import cluster_queue, scheduler, workload
from tests.support.scheduler_walks import QueueSpec, WorkloadSpec, random_config, walk

FR: FlavorResource = ("f", "cpu")
QUEUES = ("a", "b", "c", "d")
WITHIN = (PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)


def _spec(rng: random.Random, name: str, cohort: str) -> ClusterQueueSpec:
    quota = Quota(rng.randrange(0, 6), rng.choice([None, 0, 2, 5]), rng.choice([None, None, 0, 2]))
    return ClusterQueueSpec(name, cohort, (ResourceGroup(("cpu",), ("f",), {FR: quota}),),
                            within_cluster_queue=rng.choice(WITHIN),
                            reclaim_within_cohort=rng.choice(tuple(PreemptionPolicy)),
                            borrow_within_cohort=rng.choice([PreemptionPolicy.NEVER, PreemptionPolicy.NEVER,
                                                             PreemptionPolicy.LOWER_PRIORITY]))


def _holder(rng: random.Random, n: int, cq: str) -> Workload:
    cpu = rng.randrange(1, 4)
    return Workload("ns", f"w{n}", "lq", cq, (PodSet("main", 1, {"cpu": cpu}),), priority=rng.randrange(0, 4),
                    created=float(n), uid=f"w{n}", state=WorkloadState.ADMITTED,
                    admission=Admission.of(cq, (PodSetAssignment("main", {"cpu": "f"}, {FR: cpu}, 1),)),
                    reserved_at=float(n))


def _hold(tree: QuotaTree, holders: dict[str, dict[str, Workload]], wl: Workload) -> None:
    assert wl.admission is not None
    holders.setdefault(wl.cluster_queue, {})[wl.key] = wl
    tree.add(wl.cluster_queue, wl.admission.usage())


def _setup(rng: random.Random) -> tuple[dict[str, ClusterQueueSpec], QuotaTree, dict[str, dict[str, Workload]]]:
    """Four queues in one cohort, or (nested) two of them in a cohort below it, with random workloads holding
    quota."""
    nested = rng.random() < 0.3
    specs = {name: _spec(rng, name, "inner" if nested and name in "ab" else "top") for name in QUEUES}
    tree = QuotaTree(specs.values(), [CohortSpec("inner", "top"), CohortSpec("top")] if nested else [])
    holders: dict[str, dict[str, Workload]] = {}
    for n in range(rng.randrange(0, 12)):
        _hold(tree, holders, _holder(rng, n, rng.choice(QUEUES)))
    return specs, tree, holders


def test_nobody_found_locally_is_nobody_found_whatever_the_rest_of_the_cohort_does() -> None:
    """Where :func:`nobody_locally` says so, :func:`find_targets` finds nobody, and still does (and it still says
    so) after any change to the workloads of the queue's cohort that leaves the queue's own alone."""
    seen = {True: 0, False: 0}
    for seed in range(400):
        rng = random.Random(seed)
        specs, tree, holders = _setup(rng)
        cq = specs[rng.choice(QUEUES)]
        incoming = Workload("ns", "in", "lq", cq.name, (PodSet("main", 1, {"cpu": 1}),), priority=rng.randrange(0, 5),
                            created=float(rng.randrange(0, 12)), uid="in")
        requests = {FR: rng.randrange(1, 9)}
        local = nobody_locally(incoming, cq, tree, holders, {FR}, requests)
        found = find_targets(incoming, cq, tree, holders, {FR}, requests)
        seen[local] += 1
        if not local:
            continue
        assert found == [], seed
        for n in range(100, 100 + rng.randrange(1, 6)):
            others = [name for name in QUEUES if name != cq.name]
            victim = rng.choice(others)
            held = list(holders.get(victim, {}).values())
            if held and rng.random() < 0.5:
                gone = rng.choice(held)
                assert gone.admission is not None
                del holders[victim][gone.key]
                tree.remove(victim, gone.admission.usage())
            else:
                _hold(tree, holders, _holder(rng, n, victim))
            assert nobody_locally(incoming, cq, tree, holders, {FR}, requests), seed
            assert find_targets(incoming, cq, tree, holders, {FR}, requests) == [], seed
    assert min(seen.values()) > 60, seen  # both answers, many times


FLAVORS = ("x", "y")
limits = st.none() | st.integers(0, 6)
quotas = st.builds(Quota, st.integers(0, 8), limits, st.none() | st.integers(0, 3))
queue_specs = st.tuples(st.sampled_from(("c1", "c1", "c2", None)), st.lists(quotas, min_size=2, max_size=2),
                        st.sampled_from(WITHIN), st.sampled_from(tuple(PreemptionPolicy)),
                        st.sampled_from((PreemptionPolicy.NEVER, PreemptionPolicy.NEVER,
                                         PreemptionPolicy.LOWER_PRIORITY)))
workloads = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 3), st.integers(1, 2)),
                     min_size=4, max_size=24)
steps = st.lists(st.sampled_from(("cycle", "cycle", "complete", "finish", "finish", "arrive", "arrive")), min_size=1,
                 max_size=20)


def _run(queues: list[QueueSpec], nested: bool, wls: list[WorkloadSpec], plan: list[str]) -> list[str]:
    """The events of a scheduler taking ``wls`` and going through ``plan``."""
    sched = Scheduler(random_config(queues, nested, FLAVORS))
    return [repr(e) for events in walk(sched, len(queues), wls, plan, Scheduler.schedule) for e in events]


HITS = {"given again": 0}


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(queue_specs, min_size=2, max_size=5), st.booleans(), workloads, steps)
def _alike(queues: list[QueueSpec], nested: bool, wls: list[tuple[int, int, int, int]], plan: list[str]) -> None:
    still_stuck = CycleRunner._still_stuck

    def counted(self: CycleRunner, wl: Workload, cq: ClusterQueueSpec, stuck: Stuck | None) -> bool:
        answer = still_stuck(self, wl, cq, stuck)
        HITS["given again"] += answer
        return answer

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CycleRunner, "_still_stuck", counted)
        memo = _run(queues, nested, wls, plan)
        patch.setattr(CycleRunner, "_still_stuck", lambda *_: False)
        patch.setattr(preemption, "nobody_locally", lambda *_: False)  # every question searched for
        plain = _run(queues, nested, wls, plan)
    assert memo == plain


def test_schedulers_with_and_without_the_memo_decide_alike() -> None:
    """The same events, step by step, whether failed assignments are given again by their path's usage or each
    computed again once the tree's version moved on (and every preemption question searched for)."""
    HITS["given again"] = 0
    _alike()
    assert HITS["given again"] > 50, HITS  # the memo was used, not only kept


def _held(name: str, cq: str, cpu: int, priority: int) -> Workload:
    return Workload("ns", name, "lq", cq, (PodSet("main", 1, {"cpu": cpu}),), priority=priority, uid=name,
                    state=WorkloadState.ADMITTED, reserved_at=0.0,
                    admission=Admission.of(cq, (PodSetAssignment("main", {"cpu": "f"}, {FR: cpu}, 1),)))


def test_a_failed_assignment_is_not_given_again_once_its_queue_holds_someone_to_preempt() -> None:
    """The queue's usage is as it was, and so is its cohort's, but the workload holding it now has a lower priority
    than the head: the head may preempt it, where it found nobody before."""
    group = ResourceGroup(("cpu",), ("f",), {FR: Quota(2, 0)})
    cqs = {name: ClusterQueueSpec(name, "co", (group,), within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
           for name in ("a", "b")}
    sched = Scheduler(Config({"f": FlavorSpec("f")}, cqs, {}))
    sched.add(_held("high", "a", 2, 5), 0.0)
    head = Workload("ns", "head", "lq", "a", (PodSet("main", 1, {"cpu": 1}),), priority=3, uid="head")
    runner = sched._cycles
    first, _ = runner._assign(head)
    assert first.granular is Granular.NO_CANDIDATES
    sched.finish("ns/high", 1.0)
    sched.add(_held("low", "a", 2, 1), 1.0)
    again, _ = runner._assign(head)
    assert again.granular is Granular.PREEMPT
    sched._state.failed.clear()
    assert runner._assign(head)[0] == again


def test_a_failure_is_not_given_to_an_older_workload_under_lower_or_newer_equal_priority() -> None:
    # Under LowerOrNewerEqualPriority a workload may preempt one of its own priority that queued after it, so the
    # time it queued is part of its shape: late (queued at 10) finds nobody newer than it to preempt; early, the same
    # shape but queued at 1, arriving after late's failure with the tree unchanged, preempts running (queued at 5).
    sched = scheduler(cluster_queue().flavor("f", cpu=4).preempt(within=PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY),
                      instant_eviction=True)
    running, late, early = (workload(name, cpu=4).created(t).uid(name).build()
                            for name, t in (("running", 5.0), ("late", 10.0), ("early", 1.0)))
    sched.add(running, 5.0)
    sched.schedule(5.0)
    sched.add(late, 10.0)
    sched.schedule(10.0)
    assert (running.state, late.state) == (WorkloadState.ADMITTED, WorkloadState.PENDING)
    sched.add(early, 11.0)
    events = sched.schedule(11.0)
    assert [e.workload for e in events if e.kind.value == "Preempted"] == [running.key]
