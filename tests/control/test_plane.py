"""The control plane: every event told, then acted on, in order; a step settles; both clocks see the same story."""

from __future__ import annotations

from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import CapacitySpec, EmulatedCloud
from flexq.capacity.driver import CapacityDriver
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.settings import CapacityConfig
from flexq.clock import VirtualClock
from flexq.control import ControlPlane
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import ClusterQueueSpec, FlavorSpec, PodSet, Quota, ResourceGroup, Workload
from flexq.scheduler.scheduler import Config, Scheduler
from flexq.sim.kernel import Kernel
from flexq.timers import TimerHeap

START = 1_764_000_000.0
POOL = NodePoolSpec("od-pool", machine_type("n2-standard-16"), min_nodes=0, max_nodes=2)


def _scheduler(quota: int = 20_000) -> Scheduler:
    flavor = FlavorSpec("od", {"cloud.google.com/gke-nodepool": "od-pool"})
    cq = ClusterQueueSpec("cq", groups=(ResourceGroup(("cpu",), ("od",), {("od", "cpu"): Quota(quota)}),))
    return Scheduler(Config({"od": flavor}, {"cq": cq}, {}), instant_eviction=True)


def _workload(name: str, cpu: int = 8000) -> Workload:
    return Workload("default", name, "q", "cq", (PodSet("main", 1, {"cpu": cpu}),))


def _plane(timers: TimerHeap, boot: float = 8.0) -> tuple[ControlPlane, list[Event]]:
    told: list[Event] = []
    plane = ControlPlane(_scheduler(), timers, told.append)
    plane.driver = CapacityDriver(CapacityConfig((POOL,), EmulatedCloud({"od-pool": CapacitySpec(boot=boot)})),
                                  plane.scheduler, timers, plane.emit, lambda _key, _t: None, {})
    return plane, told


def _story(told: list[Event]) -> list[tuple[float, str, str]]:
    return [(e.t - START, e.kind.value, e.workload) for e in told]


def test_without_a_driver_an_admitted_workload_starts_on_its_event_and_one_pass_settles() -> None:
    told: list[Event] = []
    started: list[tuple[str, float]] = []
    plane = ControlPlane(_scheduler(), TimerHeap(VirtualClock(START)), told.append,
                         lambda key, t: started.append((key, t)))
    for name in ("a", "b", "c"):
        plane.emit(plane.scheduler.add(_workload(name), START))
    plane.settle(START)
    admitted = [e.workload for e in told if e.kind is EventKind.ADMITTED]
    assert admitted == ["default/a", "default/b"], "20 cpu of quota: two of three"
    assert started == [("default/a", START), ("default/b", START)]
    assert plane.scheduler.schedule(START) == [], "settled: another pass decides nothing"


def test_capacity_events_are_told_and_not_acted_on_again() -> None:
    timers = TimerHeap(VirtualClock(START))
    plane, told = _plane(timers)
    plane.emit(plane.scheduler.add(_workload("a"), START))
    plane.settle(START)
    assert plane.driver is not None and "default/a" not in plane.driver.running, "its node is booting"
    capacity = [e for e in told if e.kind.capacity]
    assert capacity, "the scale-up is told"
    assert plane.next_wake() == START + 8, "the node's boot is the next thing due"
    timers.clock.advance_to(START + 8)  # type: ignore[attr-defined]
    timers.run_due()
    assert "default/a" in plane.driver.running


def _live(plane: ControlPlane, timers: TimerHeap, until: float) -> None:
    """The live controller's loop: sleep until the next thing due, run the due timers, settle."""
    clock = timers.clock
    while (wake := plane.next_wake()) is not None and wake <= until:
        clock.advance_to(max(wake, clock.now()))  # type: ignore[attr-defined]
        timers.run_due()
        plane.settle(clock.now())


def _feed(plane: ControlPlane, at: float, name: str, cpu: int) -> None:
    plane.emit(plane.scheduler.add(_workload(name, cpu), at))


def _run(live: bool) -> list[tuple[float, str, str]]:
    timers: TimerHeap = TimerHeap(VirtualClock(START)) if live else Kernel(VirtualClock(START))
    plane, told = _plane(timers)
    for at, name, cpu in ((0.0, "a", 8000), (1.0, "b", 12_000), (2.0, "c", 8000)):
        timers.schedule(START + at, lambda n=name, c=cpu, t=START + at: _feed(plane, t, n, c))  # type: ignore[misc]
    timers.schedule(START + 20, lambda: plane.emit(plane.scheduler.finish("default/a", START + 20, "JobFinished")))
    if isinstance(timers, Kernel):
        timers.run_until(START + 60, plane.settle)
    else:
        _live(plane, timers, START + 60)
    return _story(told)


def test_the_real_time_loop_and_the_kernel_tell_the_same_story() -> None:
    """Three jobs, a pool that scales from zero with 8 s boots, quota for two, one job finishing at t=20: the live
    loop (waking when something is due) and the simulator's kernel (an instant at a time) tell the same events at
    the same times."""
    stories = [_run(live=True), _run(live=False)]
    assert stories[0] == stories[1]
    story = stories[0]
    assert (0.0, "Admitted", "default/a") in story and (1.0, "Admitted", "default/b") in story
    assert (2.0, "Pending", "default/c") in story and (20.0, "Admitted", "default/c") in story, "c waits for a's quota"
    assert [s for s in story if s[1] == "Started"] == [(8.0, "Started", "default/a"), (16.0, "Started", "default/b"),
                                                       (20.0, "Started", "default/c")], "a's node is c's at once"
