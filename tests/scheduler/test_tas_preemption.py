"""Preemption for topology (Kueue's TAS preemption, restated from its ``scheduler_tas_test.go`` cases): a workload
whose quota fits but whose required topology does not, because lower-priority workloads hold the domains, preempts
the candidates Kueue's order tries first until its pod sets are placed (the quota and the placement both checked, as
Kueue's ``workloadFits`` does), then the fewest of them; once they are gone it is placed where they were."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Taint,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Config, Scheduler

CPU = 1000


@dataclass
class _Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int] = field(default_factory=lambda: {"cpu": 5 * CPU, "pods": 110_000})
    taints: tuple[Taint, ...] = ()
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def ready(self, now: float) -> bool:
        return True


def _scheduler(policy: PreemptionPolicy) -> Scheduler:
    flavors = {"tas": FlavorSpec("tas", {}, topology="default", levels=(HOSTNAME,))}
    group = ResourceGroup(("cpu",), ("tas",), {("tas", "cpu"): Quota(50 * CPU)})
    cq = ClusterQueueSpec("cq", groups=(group,), within_cluster_queue=policy)
    s = Scheduler(Config(flavors, {cq.name: cq}, {}), instant_eviction=True)
    nodes = [_Node(name, {HOSTNAME: name}) for name in ("x1", "y1")]
    s.nodes = lambda: nodes
    return s


def _job(name: str, priority: int, pods: int, cpus: int) -> Workload:
    podset = PodSet("one", pods, {"cpu": cpus * CPU}, topology=TopologyRequest(HOSTNAME, required=True))
    return Workload("default", name, "lq", "cq", (podset,), priority=priority, uid=name)


def _hosts(wl: Workload) -> tuple[str, ...]:
    assert wl.admission is not None
    (ps,) = wl.admission.podsets
    assert ps.topology is not None
    return tuple(values[-1] for values, _ in ps.topology.domains)


def _story(s: Scheduler, incoming: Workload) -> dict[str, object]:
    """Two admitted workloads, 4 of each host's 5 cpus (``mid`` on x1, ``low`` on y1); then ``incoming``."""
    mid, low = _job("mid", 2, 1, 4), _job("low", 1, 1, 4)
    for t, wl in enumerate((mid, low)):
        s.add(wl, float(t))
        s.schedule(float(t))
    assert (_hosts(mid), _hosts(low)) == (("x1",), ("y1",))
    s.add(incoming, 10.0)
    events = s.schedule(10.0)
    return {"preempted": sorted(e.workload.split("/")[1] for e in events if e.kind.value == "Preempted"),
            "evictions": {w.name: w.evictions for w in (mid, low)},
            "incoming": incoming.state, "hosts": _hosts(incoming) if incoming.admission is not None else (),
            "reason": incoming.pending_reason}


CASES = {
    # Kueue: "low priority workload is preempted even though there is enough capacity, but fragmented": 2 free cpus
    # in all, one per host, and both pods must share a host: the lowest-priority candidate goes, mid survives.
    "fragmented": (PreemptionPolicy.LOWER_PRIORITY, _job("foo", 3, 2, 1), {
        "preempted": ["low"], "evictions": {"mid": 0, "low": 1}, "incoming": WorkloadState.ADMITTED,
        "hosts": ("y1",), "reason": ""}),
    # All 5 cpus of one host: freeing low's host is enough; mid, of higher priority than the incoming, is no
    # candidate at all.
    "a whole host": (PreemptionPolicy.LOWER_PRIORITY, _job("big", 2, 1, 5), {
        "preempted": ["low"], "evictions": {"mid": 0, "low": 1}, "incoming": WorkloadState.ADMITTED,
        "hosts": ("y1",), "reason": ""}),
    # No holder is of lower priority: nobody is preempted, it waits for quota (Kueue's Preempt with no candidates).
    "no lower-priority holder": (PreemptionPolicy.LOWER_PRIORITY, _job("wide", 1, 1, 5), {
        "preempted": [], "evictions": {"mid": 0, "low": 0}, "incoming": WorkloadState.PENDING, "hosts": (),
        "reason": 'couldn\'t assign flavors to pod set one: topology "default" doesn\'t allow to fit any of 1 pod(s). '
                  'Total nodes: 2; excluded: resource "cpu": 2'}),
    # Without preemption in the ClusterQueue it waits, as before.
    "never": (PreemptionPolicy.NEVER, _job("foo", 3, 2, 1), {
        "preempted": [], "evictions": {"mid": 0, "low": 0}, "incoming": WorkloadState.PENDING, "hosts": (),
        "reason": 'couldn\'t assign flavors to pod set one: topology "default" allows to fit only 1 out of 2 '
                  "pod(s)"}),
}


@pytest.mark.parametrize("case", CASES)
def test_preemption_frees_a_domain_where_the_required_topology_fits(case: str) -> None:
    policy, incoming, expected = CASES[case]
    got = _story(_scheduler(policy), incoming)
    assert set(got) == set(expected)
    assert {k: got[k] for k in expected} == expected
