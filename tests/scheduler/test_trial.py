"""A cycle's trial changes to the quota tree (victims taken out, capacity kept for preemptors, what-if
questions of preemption) leave no trace: after any cycle the tree holds exactly the usage of the workloads
that hold quota."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexq.scheduler.events import EventKind
from flexq.scheduler.model import (
    ClusterQueueSpec,
    CohortSpec,
    FlavorSpec,
    PendingReason,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
)
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.scheduler import Config, Scheduler

FLAVORS = ("a", "b")
POLICIES = tuple(PreemptionPolicy)
WITHIN = (PreemptionPolicy.NEVER, PreemptionPolicy.LOWER_PRIORITY, PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY)

limits = st.none() | st.integers(0, 6)
quotas = st.builds(Quota, st.integers(1, 8), limits, limits)
queue_specs = st.tuples(st.sampled_from(("c1", "c2", None)), st.lists(quotas, min_size=2, max_size=2),
                        st.sampled_from(WITHIN[::-1]), st.sampled_from(POLICIES[::-1]), st.sampled_from(POLICIES[::-1]))
workloads = st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4), st.integers(0, 3), st.integers(1, 2)),
                     min_size=4, max_size=20)
steps = st.lists(st.sampled_from(("cycle", "cycle", "complete", "finish", "arrive")), min_size=1, max_size=12)


def _config(queues: list[tuple[str | None, list[Quota], PreemptionPolicy, PreemptionPolicy, PreemptionPolicy]],
            nested: bool) -> Config:
    cqs = {}
    for i, (cohort, qs, within, reclaim, borrow) in enumerate(queues):
        group = ResourceGroup(("cpu",), FLAVORS, {(f, "cpu"): q for f, q in zip(FLAVORS, qs, strict=True)})
        cqs[f"q{i}"] = ClusterQueueSpec(f"q{i}", cohort, (group,), within_cluster_queue=within,
                                        reclaim_within_cohort=reclaim, borrow_within_cohort=borrow)
    cohorts = {"c2": CohortSpec("c2", "c1" if nested else None)}
    return Config({f: FlavorSpec(f) for f in FLAVORS}, cqs, cohorts)


def _expected(sched: Scheduler) -> QuotaTree:
    tree = QuotaTree(sched.config.cluster_queues.values(), sched.config.cohorts.values())
    for wl in sched.workloads():
        if wl.admission is not None:
            tree.add(wl.cluster_queue, wl.admission.usage())
    return tree


def _usages(tree: QuotaTree) -> dict[str, dict[tuple[str, str], int]]:
    nodes = {**tree.queues, **tree.cohorts}
    return {name: {fr: v for fr, v in node.usage.items() if v} for name, node in nodes.items()}


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(queue_specs, min_size=1, max_size=3), st.booleans(), workloads, steps)
def test_the_quota_tree_is_unchanged_by_a_cycles_trials(
    queues: list[tuple[str | None, list[Quota], PreemptionPolicy, PreemptionPolicy, PreemptionPolicy]],
    nested: bool, wls: list[tuple[int, int, int, int]], plan: list[str],
) -> None:
    sched = Scheduler(_config(queues, nested))
    half = len(wls) // 2
    for n, (queue, cpu, priority, count) in enumerate(wls):
        wl = Workload("default", f"w{n}", "lq", f"q{queue % len(queues)}", (PodSet("main", count, {"cpu": cpu}),),
                      priority=priority if n < half else priority + 2, created=float(n), uid=f"w{n}")
        sched.add(wl, float(n))
    sched.schedule(50.0)
    now = 100.0
    for step in plan:
        now += 1
        if step == "arrive":  # a higher priority newcomer, to preempt for
            queue, cpu, priority, count = wls[int(now) % len(wls)]
            name = f"x{int(now)}"
            sched.add(Workload("default", name, "lq", f"q{queue % len(queues)}",
                               (PodSet("main", count + 1, {"cpu": cpu + 1}),), priority=priority + 4, created=now,
                               uid=name), now)
        elif step == "cycle":
            sched.cycle(now)
        elif step == "complete":
            for key in [w.key for w in sched.workloads() if w.evicting]:
                sched.complete_eviction(key, now)
        else:
            holders = sorted(w.key for w in sched.workloads() if w.admission is not None and not w.evicting)
            if holders:
                sched.finish(holders[0], now)
        assert sched.tree_usage() == _usages(_expected(sched))


def test_a_head_of_an_inactive_cluster_queue_is_told_why_it_waits() -> None:
    group = ResourceGroup(("cpu",), ("a",), {("a", "cpu"): Quota(4)})
    cq = ClusterQueueSpec("q", None, (group,), active=False)
    sched = Scheduler(Config({"a": FlavorSpec("a")}, {"q": cq}, {}))
    sched.add(Workload("default", "w", "lq", "q", (PodSet("main", 1, {"cpu": 1}),)), 0.0)
    events, progress = sched.cycle(1.0)
    assert [(e.t, e.kind, e.workload, e.cluster_queue, e.reason) for e in events] == [
        (1.0, EventKind.PENDING, "default/w", "q", "ClusterQueue q is inactive")]
    # It steps aside, so the next cycle tells the workload behind it too.
    assert (progress, sched.held("default/w").pending) == (True, PendingReason.SUSPENDED)
    assert sched.cycle(2.0) == ([], False)
