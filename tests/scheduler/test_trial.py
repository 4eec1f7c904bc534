"""A cycle's trial changes to the quota tree (victims taken out, capacity kept for preemptors, what-if
questions of preemption) leave no trace: after any cycle the tree holds exactly the usage of the workloads
that hold quota."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexq.scheduler.events import EventKind
from flexq.scheduler.model import (
    ClusterQueueSpec,
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
from tests.support.scheduler_walks import QueueSpec, WorkloadSpec, random_config, walk

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
    queues: list[QueueSpec], nested: bool, wls: list[WorkloadSpec], plan: list[str],
) -> None:
    sched = Scheduler(random_config(queues, nested, FLAVORS))
    for _events in walk(sched, len(queues), wls, plan, lambda s, now: s.cycle(now)[0]):
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
