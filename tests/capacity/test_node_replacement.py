"""Which workloads a lost node's replacement is for: a job's pod moves within its sub-block (its assignment, its
binding and its record's placement); a plain Pod's own workload does not (Kueue's
SkipReassignmentForPodOwnedWorkloads: the pod cannot move), so it goes as any workload on a lost node; with
TASFailedNodeReplacement off, every workload does. The scenarios: tests/sim/test_tas_node_replacement.py."""

from __future__ import annotations

from typing import Any

import pytest

from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.driver import CapacityDriver
from flexq.capacity.node_topology import BLOCK_LABEL, HOSTNAME_LABEL, SUBBLOCK_LABEL
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.settings import CapacityConfig
from flexq.clock import VirtualClock
from flexq.scheduler.model import ClusterQueueSpec, FlavorSpec, PodSet, Quota, ResourceGroup, TopologyRequest, Workload
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.timers import Kernel

POOL = NodePoolSpec("tas-pool", machine_type("n2-standard-16"), max_nodes=8, initial_nodes=8)


def _driver(replace: bool) -> tuple[CapacityDriver, Scheduler, list[dict[str, Any]]]:
    flavor = FlavorSpec("tas", {"cloud.google.com/gke-nodepool": "tas-pool"}, topology="gke",
                        levels=(BLOCK_LABEL, SUBBLOCK_LABEL, HOSTNAME_LABEL))
    cq = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("tas",), {("tas", "cpu"): Quota(256_000)}),))
    scheduler = Scheduler(Config({"tas": flavor}, {"cq": cq}, {}, replace_failed_nodes=replace))
    log: list[dict[str, Any]] = []
    driver = CapacityDriver(CapacityConfig((POOL,), EmulatedCloud({})), scheduler, Kernel(VirtualClock(0.0)),
                            lambda events: log.extend(e.to_json() for e in events), lambda _key, _t: None, {})
    return driver, scheduler, log


def _admit(driver: CapacityDriver, scheduler: Scheduler, owner: str) -> Workload:
    podset = PodSet("main", 1, {"cpu": 12_000}, topology=TopologyRequest(SUBBLOCK_LABEL, required=True))
    wl = Workload("default", "w", "lq", "cq", (podset,), uid="w", owner=owner)
    scheduler.add(wl, 0.0)
    for event in scheduler.schedule(0.0):
        driver.handle(event)
    assert driver.placements[wl.key] == {"main": ["gke-tas-pool-1-0"]}
    return wl


@pytest.mark.parametrize(("owner", "replace", "expected"), [
    ("Job default/j", True, ("NodeReplaced", None)),
    ("Pod default/p", True, ("Evicted", "NodeLost")),
    ("Job default/j", False, ("Evicted", "NodeLost")),
], ids=["a job's pod moves", "a plain Pod's does not", "the gate off"])
def test_who_gets_a_replacement(owner: str, replace: bool, expected: tuple[str, str | None]) -> None:
    driver, scheduler, log = _driver(replace)
    wl = _admit(driver, scheduler, owner)
    driver.node_deleted("gke-tas-pool-1-0")
    (told,) = [e for e in log if e["workload"] == wl.key and e["event"] in ("NodeReplaced", "Evicted")]
    assert (told["event"], told.get("cause")) == expected
    if expected[0] == "NodeReplaced":
        assert told["nodes"] == ["gke-tas-pool-2-0"] and driver.placements[wl.key] == {"main": ["gke-tas-pool-2-0"]}
        assert wl.admission is not None and wl.admission.podsets[0].topology is not None
        assert wl.admission.podsets[0].topology.domains == ((("gke-tas-pool-2-0",), 1),)
        assert [n.name for n in driver.cluster.nodes_of(wl.key)] == ["gke-tas-pool-2-0"], "its pod bound there"
