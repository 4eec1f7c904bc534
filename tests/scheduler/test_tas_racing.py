"""Topology-aware flavors and flexq's racing (concurrent admission, Kueue's or flexq's own policy): only the flavors
that can place the pod set's topology race; each variant is placed on its own flavor's nodes, net of what others
hold there; the winner's assignment becomes the workload's, and a loser's placement is released with its quota."""

from __future__ import annotations

import pytest

from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.model import ConcurrentPolicy, FlavorSpec, Workload, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from tests.support.tas import RACK, node, tas_job, tas_queue, tas_scheduler

LEVELS = (RACK, HOSTNAME)
NODES = [node(f"{pool}{i}", {"pool": pool, RACK: f"{pool}-r", HOSTNAME: f"{pool}{i}"})
         for pool in ("a", "b") for i in range(1, 5)]


def _scheduler(policy: ConcurrentPolicy | None, race: bool) -> Scheduler:
    flavors = [FlavorSpec("plain"), FlavorSpec("tas-a", {"pool": "a"}, topology="default", levels=LEVELS),
               FlavorSpec("tas-b", {"pool": "b"}, topology="default", levels=LEVELS)]
    cq = tas_queue("cq", [f.name for f in flavors], 8, concurrent=policy)
    return tas_scheduler(NODES, flavors, [cq], race=race)


def _job(name: str, pods: int) -> Workload:
    return tas_job(name, pods, 1, RACK)


def _placed(wl: Workload) -> tuple[str, tuple[str, ...]]:
    assert wl.admission is not None
    (ps,) = wl.admission.podsets
    assert ps.topology is not None
    return ps.flavors["cpu"], tuple(values[0] for values, _ in ps.topology.domains)


@pytest.mark.parametrize(("policy", "race", "racing"), [
    # Kueue's Concurrent Admission makes a variant for every flavor; the one without a topology never fits
    # ("does not support TopologyAwareScheduling") and, more preferred, races on under TryPreferredFlavors.
    (ConcurrentPolicy(), False, ["plain", "tas-a", "tas-b"]),
    # flexq's own policy races only the flavors that could hold every pod set: not the one without a topology.
    (None, True, ["tas-a", "tas-b"]),
], ids=["kueue-concurrent-admission", "flexq-racing"])
def test_variants_race_topology_aware_flavors_each_placed_on_its_own_nodes(
        policy: ConcurrentPolicy | None, race: bool, racing: list[str]) -> None:
    s = _scheduler(policy, race)
    first, second = _job("first", 3), _job("second", 3)
    s.add(first, 0.0)
    assert [s.held(k).flavor for k in s.variants[first.key]] == racing
    s.schedule(0.0)
    assert first.state is WorkloadState.ADMITTED and _placed(first) == ("tas-a", ("a1", "a2", "a3"))
    s.add(second, 1.0)
    s.schedule(1.0)
    # tas-a's rack has one host left: its variant waits; tas-b's places all three and wins
    assert second.state is WorkloadState.ADMITTED and _placed(second) == ("tas-b", ("b1", "b2", "b3"))
    held = [k for k in s.workload_keys() if s.held(k).holds_quota]
    assert sorted(held) == ["default/first", "default/second"], "no variant holds quota (or nodes) once one won"
    plain = [s.held(k) for k in s.workload_keys() if s.held(k).flavor == "plain"]
    assert len(plain) == racing.count("plain") * 2
    assert all('Flavor "plain" does not support TopologyAwareScheduling' in v.pending_reason for v in plain)
