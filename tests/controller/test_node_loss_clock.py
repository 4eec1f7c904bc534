"""Host failures and slice repair on the live clock (Unix seconds): the capacity file's times count from the
server's start, and a repaired slice is ready after the pool's boot time."""

from __future__ import annotations

from typing import Any

from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import CapacitySpec, EmulatedCloud
from flexq.capacity.driver import CapacityDriver
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.settings import CapacityConfig
from flexq.clock import VirtualClock
from flexq.scheduler import COUNTDOWNS
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.timers import Kernel
from tests.controller.test_capacity_clock import START

TPU = machine_type("ct6e-standard-4t")


def test_a_scripted_host_failure_on_the_live_clock_gets_the_slice_repaired() -> None:
    pool = NodePoolSpec("tpu-pool", TPU, "4x4", max_nodes=8, initial_nodes=8)
    cloud = EmulatedCloud({"tpu-pool": CapacitySpec(boot=30.0, host_failures=(60.0,))}, origin=START)
    timers = Kernel(VirtualClock(START))
    log: list[dict[str, Any]] = []
    driver = CapacityDriver(CapacityConfig((pool,), cloud), Scheduler(Config({}, {}, {})), timers,
                            lambda events: log.extend(e.worded(COUNTDOWNS).to_json() for e in events),  # as live
                            lambda _key, _t: None, {})
    before = dict(driver.cluster.nodes)
    timers.advance(START + 59)
    assert not [e for e in log if e["event"] == "NodeDeleted"]
    timers.advance(START + 60)
    lost, repaired = (next(e for e in log if e["event"] == kind) for kind in ("NodeDeleted", "SliceRepaired"))
    assert lost["reason"] == "host gke-tpu-pool-1-0 of pool tpu-pool failed"
    assert repaired["reason"].endswith("its 4 node(s) are recreated, ready in 30s") and repaired["nodes"] == 8
    assert sorted(driver.cluster.nodes) == sorted(before), "the same names: the slice was recreated"
    fresh = [n for n in driver.cluster.nodes.values() if n.slice_id == before["gke-tpu-pool-1-0"].slice_id]
    assert len(fresh) == 4 and {n.ready_at for n in fresh} == {START + 90}
    assert all(n.ready(START) for n in driver.cluster.nodes.values() if n not in fresh), "the other slice is untouched"
    # A pool made later: failures whose time has passed are not replayed.
    timers.advance(START + 120)
    cloud.specs = {**cloud.specs, "late-pool": CapacitySpec(host_failures=(60.0, 150.0))}
    driver.set_pools([pool, NodePoolSpec("late-pool", TPU, "4x4", max_nodes=4, initial_nodes=4)])
    timers.advance(START + 200)
    assert [e["pool"] for e in log if e["event"] == "NodeDeleted"] == ["tpu-pool", "late-pool"], "at 150s only"
