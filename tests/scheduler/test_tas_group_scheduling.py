"""A pod set group through the scheduler: the flavor assigner places the group's two pod sets together, a group that
no rack could ever hold is TopologyPlacementFailed for both, and one whose racks are held by lower-priority workloads
preempts as Kueue's TAS preemption does, its victims checked by placing the group as one."""

from __future__ import annotations

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.fair_preemption import STRATEGIES
from flexq.scheduler.model import (
    FlavorSpec,
    PendingReason,
    PodSet,
    PreemptionPolicy,
    TopologyRequest,
    Workload,
    WorkloadState,
)
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import CPU, RACK, hosts_of, node, tas_job, tas_queue, tas_scheduler

HOSTS = {"x1": "r1", "x2": "r1", "y1": "r2", "y2": "r2"}


def _scheduler(fair: bool = False) -> Scheduler:
    nodes = [node(host, {RACK: rack, HOSTNAME: host}, 5, pods=110_000) for host, rack in HOSTS.items()]
    flavor = FlavorSpec("tas", {}, topology="default", levels=(RACK, HOSTNAME))
    cq = tas_queue("cq", ["tas"], 50, within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    return tas_scheduler(nodes, [flavor], [cq], fair_sharing=STRATEGIES if fair else None)


def _rack_job(name: str, priority: int, pods: int, cpus: int) -> Workload:
    return tas_job(name, pods, cpus, RACK, priority=priority)


def _group(name: str, priority: int, leader_cpus: int, workers: int, worker_cpus: int,
           grouped: bool = True) -> Workload:
    request = TopologyRequest(RACK, required=True, group="lws" if grouped else "")
    podsets = (PodSet("leader", 1, {"cpu": leader_cpus * CPU}, topology=request),
               PodSet("workers", workers, {"cpu": worker_cpus * CPU}, topology=request))
    return Workload("default", name, "lq", "cq", podsets, priority=priority, uid=name)


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "alone"])
def test_the_leader_goes_to_its_workers_rack(grouped: bool) -> None:
    """``small`` holds 4 of x1's 5 cpus, so r1 has room for one 4-cpu worker only; the workers take r2. The 1-cpu
    leader alone fits tightest beside ``small`` on x1; grouped, it goes with its workers."""
    s = _scheduler()
    small = _rack_job("small", 1, 1, 4)
    s.add(small, 0.0)
    s.schedule(0.0)
    wl = _group("lws", 1, 1, 2, 4, grouped)
    s.add(wl, 1.0)
    s.schedule(1.0)
    assert hosts_of(small) == {"main": ("x1",)}
    assert hosts_of(wl) == {"leader": ("y1",) if grouped else ("x1",), "workers": ("y1", "y2")}


def _launched(launcher_first: bool) -> Workload:
    """The group of :func:`_group` (a 1-cpu leader, two 4-cpu workers) with a launcher, one 1-cpu pod on a rack of
    its own choosing, before the group or after it."""
    group = _group("lws", 1, 1, 2, 4).podsets
    launcher = PodSet("launcher", 1, {"cpu": CPU}, topology=TopologyRequest(RACK, required=True))
    return Workload("default", "lws", "lq", "cq", (launcher, *group) if launcher_first else (*group, launcher),
                    priority=1, uid="lws")


def test_a_pod_set_after_a_group_is_placed_beside_it() -> None:
    """After the group: the group takes r2 as above (y1 whole, 4 cpus of y2); the launcher, placed with the group
    held, takes the tightest rack, r2 (1 cpu free, on y2, against r1's 6)."""
    s = _scheduler()
    small = _rack_job("small", 1, 1, 4)
    s.add(small, 0.0)
    s.schedule(0.0)
    wl = _launched(launcher_first=False)
    s.add(wl, 1.0)
    s.schedule(1.0)
    assert hosts_of(wl) == {"leader": ("y1",), "workers": ("y1", "y2"), "launcher": ("y2",)}


def test_a_group_after_a_pod_set_is_placed_with_it_held() -> None:
    """Before the group, on empty racks: the launcher takes x1; the group (9 cpus) still fits r1 with it held, the
    workers on x1 and x2 and the leader beside the one on x2."""
    s = _scheduler()
    wl = _launched(launcher_first=True)
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert hosts_of(wl) == {"launcher": ("x1",), "leader": ("x2",), "workers": ("x1", "x2")}


def test_a_group_no_rack_can_hold_is_topology_placement_failed() -> None:
    """A 2-cpu leader beside two 4-cpu workers: each host holds one worker and no leader beside it, so no rack
    holds the group (the message counts the workers, as Kueue's does)."""
    s = _scheduler()
    wl = _group("lws", 1, 2, 2, 4)
    s.add(wl, 0.0)
    s.schedule(0.0)
    assert (wl.state, wl.pending_reason) == (
        WorkloadState.PENDING,
        'couldn\'t assign flavors to pod set leader: topology "default" allows to fit only 2 out of 2 pod(s); '
        'couldn\'t assign flavors to pod set workers: topology "default" allows to fit only 2 out of 2 pod(s)')
    assert wl.pending is PendingReason.TOPOLOGY_PLACEMENT_FAILED, "not a wait for quota: no rack could ever hold it"


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair sharing"])
def test_a_group_preempts_to_free_a_rack_and_takes_it(fair: bool) -> None:
    """``low-a`` and ``low-b`` hold 4 cpus of every host; the group's workers need a rack whole. The later
    admitted goes, and the group (leader and workers) is placed on the rack it freed."""
    s = _scheduler(fair)
    low = [_rack_job("low-a", 1, 2, 4), _rack_job("low-b", 1, 2, 4)]
    for t, wl in enumerate(low):
        s.add(wl, float(t))
        s.schedule(float(t))
    assert [hosts_of(wl)["main"] for wl in low] == [("x1", "x2"), ("y1", "y2")]
    wl = _group("lws", 5, 1, 2, 4)
    s.add(wl, 10.0)
    preempted = [e.workload for e in s.schedule(10.0) if e.kind.value == "Preempted"]
    s.schedule(11.0)
    assert preempted == ["default/low-b"]
    assert (wl.state, hosts_of(wl)) == (WorkloadState.ADMITTED, {"leader": ("y1",), "workers": ("y1", "y2")})
