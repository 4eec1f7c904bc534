"""The capacity driver on the live clock (Unix seconds): deadlines count from when nodes exist, not from 0."""

from __future__ import annotations

from typing import Any

from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.driver import CapacityDriver
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.settings import CapacityConfig
from flexq.clock import VirtualClock
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import ClusterQueueSpec, FlavorSpec, PodSet, Quota, ResourceGroup, Workload
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.timers import Kernel

START = 1_764_000_000.0  # a Unix time, as the server's clock gives


def _setup(pools: tuple[NodePoolSpec, ...]) -> tuple[Scheduler, CapacityDriver, Kernel, list[Any]]:
    flavor = FlavorSpec("flex", {"cloud.google.com/gke-nodepool": "flex-pool"})
    cq = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("flex",), {("flex", "cpu"): Quota(64_000)}),))
    scheduler = Scheduler(Config({"flex": flavor}, {"cq": cq}, {}), instant_eviction=True)
    timers = Kernel(VirtualClock(START))
    log: list[Any] = []

    def record(events: list[Event]) -> None:
        log.extend(events)

    driver = CapacityDriver(CapacityConfig(pools, EmulatedCloud()), scheduler, timers, record,
                            lambda _key, _t: None, {})
    return scheduler, driver, timers, log


def _admit(scheduler: Scheduler, driver: CapacityDriver, now: float) -> None:
    wl = Workload("default", "w", "q", "cq", (PodSet("main", 1, {"cpu": 1000}),))
    scheduler.add(wl, now)
    for event in scheduler.schedule(now):
        driver.handle(event)
    assert "default/w" in driver.running


def _expired(log: list[Any]) -> list[Event]:
    return [e for e in log if isinstance(e, Event) and e.kind is EventKind.EVICTED]


FLEX = NodePoolSpec("flex-pool", machine_type("n2-standard-16"), initial_nodes=1, min_nodes=1, max_nodes=1,
                    autoscaling=False, flex_start=True, max_run_seconds=45)


def test_initial_flex_start_nodes_expire_after_their_run_time_on_the_live_clock() -> None:
    scheduler, driver, timers, log = _setup((FLEX,))
    assert [n.expires_at for n in driver.cluster.nodes.values()] == [START + 45]
    _admit(scheduler, driver, START + 1)
    timers.advance(START + 44)
    assert not _expired(log), "still within maxRunDurationSeconds"
    timers.advance(START + 46)
    assert [e.reason for e in _expired(log)] == ["Flex-start nodes reached maxRunDurationSeconds"]


def test_a_pool_added_later_starts_with_its_nodes_and_their_deadline() -> None:
    other = NodePoolSpec("default-pool", machine_type("n2-standard-16"), initial_nodes=1, min_nodes=1, max_nodes=1,
                         autoscaling=False)
    scheduler, driver, timers, log = _setup((other,))
    timers.advance(START + 100)
    driver.set_pools([other, FLEX])
    flex = [n for n in driver.cluster.nodes.values() if n.pool == "flex-pool"]
    assert [(n.ready_at, n.expires_at) for n in flex] == [(START + 100, START + 145)]
    _admit(scheduler, driver, START + 101)
    timers.advance(START + 146)
    assert len(_expired(log)) == 1


def test_the_capacity_file_times_count_from_the_server_start() -> None:
    from flexq.capacity.cloud import CapacitySpec

    cloud = EmulatedCloud({"flex-pool": CapacitySpec(stockouts=((0.0, 60.0),), queued_trace=((30.0, 5.0),))},
                          origin=START)
    assert cloud.obtainable("flex-pool", "n2-standard-16", START + 10) == 0
    assert cloud.next_change("flex-pool", "n2-standard-16", START + 10) == START + 60
    assert cloud.obtainable("flex-pool", "n2-standard-16", START + 61) == float("inf")
    assert cloud.queued_delay("flex-pool", "n2-standard-16", "r", START + 10) == 0.0
    assert cloud.queued_delay("flex-pool", "n2-standard-16", "r", START + 31) == 5.0
