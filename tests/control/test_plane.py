"""The control plane: every event told, then acted on, in order; a step settles; both clocks see the same story."""

from __future__ import annotations

import dataclasses

import pytest

from flexq.api import KueueConfig, PodsReadyConfig
from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import CapacitySpec, EmulatedCloud
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.settings import CapacityConfig
from flexq.clock import VirtualClock
from flexq.control import (
    CapacityChanged,
    CheckSet,
    ControlPlane,
    Input,
    JobDeleted,
    JobFinished,
    JobHooks,
    JobQueued,
    JobResized,
    JobStarted,
    PodsReady,
    QueuesReconfigured,
)
from flexq.durations import format_seconds
from flexq.scheduler import COUNTDOWNS, NAMED_MOMENTS, Moment, MomentForm, Phrase, worded
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.model import CheckState, FlavorSpec, PodSet, PodSetUpdate, Toleration, Workload, WorkloadState
from flexq.scheduler.scheduler import Scheduler
from flexq.timers import Kernel, TimerHeap
from tests.support import cluster_queue, job, scheduler, workload

START = 1_764_000_000.0
POOL = NodePoolSpec("od-pool", machine_type("n2-standard-16"), min_nodes=0, max_nodes=2)

# An urgent Job of 8 cpu in namespace ``ml`` on LocalQueue ``team``.
_TRAIN = job("train", queue="team", cpu=8, pods=1).namespace("ml").uid("train").priority_class("urgent")


def _scheduler(*checks: str) -> Scheduler:
    """ClusterQueue ``cq`` of 20 cpu in flavor ``od`` (the nodes of ``od-pool``), with these admission checks."""
    flavor = FlavorSpec("od", {"cloud.google.com/gke-nodepool": "od-pool"})
    return scheduler(cluster_queue().flavor("od", cpu=20).checks(*checks), flavors=[flavor], instant_eviction=True)


def _workload(name: str, cpu: float = 8) -> Workload:
    return workload(name, cpu=cpu).namespace("default").queue("q").build()


def _plane(timers: TimerHeap, boot: float = 8.0) -> tuple[ControlPlane, list[Event]]:
    told: list[Event] = []
    plane = ControlPlane(timers, told.append, scheduler=_scheduler())
    plane.use_capacity(CapacityConfig((POOL,), EmulatedCloud({"od-pool": CapacitySpec(boot=boot)})))
    return plane, told


def _story(told: list[Event]) -> list[tuple[float, str, str]]:
    return [(e.t - START, e.kind.value, e.workload) for e in told]


def test_without_a_driver_an_admitted_workload_starts_on_its_event_and_a_step_settles() -> None:
    told: list[Event] = []
    started: list[tuple[str, float]] = []
    plane = ControlPlane(TimerHeap(VirtualClock(START)), told.append, JobHooks(lambda key, t: started.append((key, t))),
                         scheduler=_scheduler())
    for name in ("a", "b", "c"):
        plane.emit(plane.feed(JobQueued(_workload(name), START)))
    plane.settle(START)
    admitted = [e.workload for e in told if e.kind is EventKind.ADMITTED]
    assert admitted == ["default/a", "default/b"], "20 cpu of quota: two of three"
    assert started == [("default/a", START), ("default/b", START)]
    assert plane.scheduler.schedule(START) == [], "settled: another pass decides nothing"


def test_capacity_events_are_told_and_not_acted_on_again() -> None:
    timers = TimerHeap(VirtualClock(START))
    plane, told = _plane(timers)
    plane.emit(plane.feed(JobQueued(_workload("a"), START)))
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


def _feed(plane: ControlPlane, at: float, name: str, cpu: float) -> None:
    plane.emit(plane.feed(JobQueued(_workload(name, cpu), at)))


def _run(live: bool) -> list[tuple[float, str, str]]:
    timers: TimerHeap = TimerHeap(VirtualClock(START)) if live else Kernel(VirtualClock(START))
    plane, told = _plane(timers)
    for at, name, cpu in ((0.0, "a", 8), (1.0, "b", 12), (2.0, "c", 8)):
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


def test_without_a_driver_the_live_server_starts_a_job_when_its_admission_is_written_not_on_the_event() -> None:
    started: list[str] = []
    plane = ControlPlane(TimerHeap(VirtualClock(START)), lambda _e: None, JobHooks(lambda key, _t: started.append(key)),
                         scheduler=_scheduler(), start_on_admission=False)
    plane.emit(plane.feed(JobQueued(_workload("a"), START)))
    plane.settle(START)
    assert plane.scheduler.workload("default/a").state.value == "Admitted"  # type: ignore[union-attr]
    assert started == []


_OBJECTS: dict[str, list[dict[str, object]]] = {
    "ResourceFlavor": [{"metadata": {"name": "od"},
                        "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": "od-pool"}}}],
    "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": ["cpu"],
         "flavors": [{"name": "od", "resources": [{"name": "cpu", "nominalQuota": "20"}]}]}]}}],
    "LocalQueue": [{"metadata": {"name": "team", "namespace": "ml"}, "spec": {"clusterQueue": "cq"}}],
    "WorkloadPriorityClass": [{"metadata": {"name": "urgent"}, "value": 1000}],
}





def test_configured_from_objects_a_job_gets_its_queue_and_priority_and_is_admitted() -> None:
    plane = ControlPlane(TimerHeap(VirtualClock(START)), lambda _e: None)
    plane.configure(_OBJECTS, None, START)
    wl = plane.workload_for("Job", "batch", _TRAIN.object(), START)
    assert (wl.namespace, wl.queue, wl.cluster_queue, wl.priority) == ("ml", "team", "cq", 1000)
    stray = job("other", queue="nowhere", cpu=8, pods=1).namespace("ml").uid("other")
    other = plane.workload_for("Job", "batch", stray.object(), START)
    assert (other.cluster_queue, other.priority) == ("", 0), "a LocalQueue not configured points nowhere yet"
    plane.emit(plane.feed(JobQueued(wl, START)))
    plane.settle(START)
    assert plane.scheduler.workload(wl.key).state.value == "Admitted"  # type: ignore[union-attr]
    assert plane.driver is None and not plane.scheduler.config.race, "no capacity modelled: no racing"


def test_the_driver_is_made_once_keeps_its_nodes_as_pools_change_follows_a_reset_and_goes_with_the_capacity() -> None:
    timers = TimerHeap(VirtualClock(START))
    plane = ControlPlane(timers, lambda _e: None)
    warm = dataclasses.replace(POOL, min_nodes=1, initial_nodes=1)
    capacity = CapacityConfig((warm,), EmulatedCloud())
    plane.configure(_OBJECTS, capacity, START)
    driver = plane.driver
    assert driver is not None and plane.scheduler.config.race, "capacity modelled: flexq's policy races"
    assert [n.pool for n in driver.cluster.nodes.values()] == ["od-pool"]
    spot = NodePoolSpec("spot-pool", machine_type("n2-standard-16"), min_nodes=0, max_nodes=2)
    plane.configure(_OBJECTS, dataclasses.replace(capacity, pools=(warm, spot)), START)
    assert plane.driver is driver and set(driver.cluster.pools) == {"od-pool", "spot-pool"}
    assert [n.pool for n in driver.cluster.nodes.values()] == ["od-pool"], "the node of the pool that stays is kept"
    before = plane.scheduler
    plane.reset()
    assert plane.scheduler is not before and driver.scheduler is before, "re-attached by the next configure"
    plane.configure(_OBJECTS, capacity, START)
    assert plane.driver is driver and driver.scheduler is plane.scheduler
    plane.configure(_OBJECTS, dataclasses.replace(capacity, fallback=False), START)
    assert not plane.scheduler.config.race, "Kueue-compatible: no racing"
    plane.configure(_OBJECTS, None, START)
    assert plane.driver is None


def test_a_step_with_a_cycle_budget_decides_what_an_unbounded_one_decides_over_several_steps() -> None:
    def story(cycles: int | None) -> tuple[list[str], int]:
        told: list[Event] = []
        plane = ControlPlane(TimerHeap(VirtualClock(START)), told.append, scheduler=_scheduler())
        for i in range(30):
            plane.emit(plane.feed(JobQueued(_workload(f"w{i:02d}", cpu=1 + (i % 3) * 0.5), START)))
        steps = 1
        while plane.settle(START, cycles):
            admitted = sum(1 for e in told if e.kind is EventKind.ADMITTED)
            assert cycles is not None and admitted <= steps * cycles, "one head a cycle in one ClusterQueue"
            steps += 1
        return [f"{e.kind.value} {e.workload}" for e in told], steps

    unbounded, one = story(None)
    bounded, steps = story(2)
    assert one == 1 and steps > 5
    assert bounded == unbounded, "the same admissions and Pending events, in the same order"
    # 20 cpu: thirteen in order (19 cpu), then past the heads that no longer fit (BestEffortFIFO) a 1-cpu one.
    assert [line for line in bounded if line.startswith("Admitted")][-1] == "Admitted default/w15"
    assert sum(1 for line in bounded if line.startswith("Admitted")) == 14


def test_what_happened_to_jobs_is_told_in_one_vocabulary() -> None:
    """Each input in turn, and the story it makes: queued past the quota, shrunk to fit, finished, deleted (its
    quota freed: a job that needs all of it is admitted next)."""
    told: list[Event] = []
    plane = ControlPlane(TimerHeap(VirtualClock(START)), told.append, scheduler=_scheduler())
    inputs: list[tuple[Input, list[tuple[str, str]]]] = [
        (JobQueued(_workload("a", 12), START),
         [("Created", "default/a"), ("QuotaReserved", "default/a"), ("Admitted", "default/a")]),
        (JobQueued(_workload("b", 12), START + 1), [("Created", "default/b"), ("Pending", "default/b")]),
        (JobResized("default/b", (PodSet("main", 1, {"cpu": 8000}),), START + 2),
         [("QuotaReserved", "default/b"), ("Admitted", "default/b")]),
        (JobFinished("default/a", START + 3, "JobFinished", "Succeeded"), [("Finished", "default/a")]),
        (JobDeleted("default/b", START + 4), []),
        (JobQueued(_workload("c", 20), START + 5),
         [("Created", "default/c"), ("QuotaReserved", "default/c"), ("Admitted", "default/c")]),
    ]
    stories = []
    for what, _want in inputs:
        told.clear()
        plane.emit(plane.feed(what))
        plane.settle(what.at)
        stories.append([(e.kind.value, e.workload) for e in told])
    assert stories == [want for _what, want in inputs]


def test_a_job_reported_running_counts_its_run_from_then_and_queues_and_capacity_come_as_inputs() -> None:
    """The configuration and the capacity are inputs like the jobs' (one vocabulary for both clocks); a job that
    reports it began after its admission (a Ray cluster starting first) has its run counted from that report."""
    timers = TimerHeap(VirtualClock(START))
    plane = ControlPlane(timers, lambda _e: None)
    assert plane.feed(QueuesReconfigured(_OBJECTS, None, START)) == []
    wl = plane.workload_for("Job", "batch", _TRAIN.object(), START)
    assert wl.cluster_queue == "cq", "the LocalQueue configured by the input"
    plane.emit(plane.feed(JobQueued(wl, START)))
    plane.settle(START)
    assert plane.started_at(wl.key) == START, "without a report: its admission"
    assert plane.feed(JobStarted(wl.key, START + 30)) == []
    plane.feed(JobStarted(wl.key, START + 40))
    assert plane.started_at(wl.key) == START + 30, "the first report of this admission counts"
    plane.emit(plane.feed(JobFinished(wl.key, START + 130, "JobFinished", "Succeeded")))
    assert plane.run_times.of("other", "cq").seconds == 100, "learned from the report, not the admission"
    with pytest.raises(ValueError, match="no capacity is modelled"):
        plane.feed(CapacityChanged(CapacityConfig((POOL,), EmulatedCloud()), START))
    warm = dataclasses.replace(POOL, min_nodes=1, initial_nodes=1)
    plane.feed(QueuesReconfigured(_OBJECTS, CapacityConfig((warm,), EmulatedCloud()), START))
    driver = plane.driver
    assert driver is not None and [n.pool for n in driver.cluster.nodes.values()] == ["od-pool"]
    spot = NodePoolSpec("spot-pool", machine_type("n2-standard-16"), min_nodes=0, max_nodes=2)
    plane.feed(CapacityChanged(CapacityConfig((warm, spot), EmulatedCloud()), START + 200))
    assert plane.driver is driver and set(driver.cluster.pools) == {"od-pool", "spot-pool"}
    assert [n.pool for n in driver.cluster.nodes.values()] == ["od-pool"], "the node of the pool that stays is kept"


def _max_exec_run(live: bool) -> list[tuple[float, str, str, str, object]]:
    timers: TimerHeap = TimerHeap(VirtualClock(START)) if live else Kernel(VirtualClock(START))
    told: list[Event] = []
    plane = ControlPlane(timers, told.append, scheduler=_scheduler())
    limited = dataclasses.replace(_workload("limited"), max_exec_seconds=30)
    plane.emit(plane.feed(JobQueued(limited, START)))
    plane.emit(plane.feed(JobQueued(_workload("free"), START)))
    plane.settle(START)
    timers.schedule(START + 10.5, lambda: plane.emit(plane.scheduler.evict("default/limited", START + 10.5, "lost")))
    if isinstance(timers, Kernel):
        timers.run_until(START + 100, plane.settle)
    else:
        _live(plane, timers, START + 100)
    return [(e.t - START, e.kind.value, e.workload, e.reason, e.extra.get("cause")) for e in told
            if e.kind is not EventKind.QUOTA_RESERVED]


def test_a_workload_admitted_past_its_maximum_execution_time_is_deactivated_on_both_loops() -> None:
    """Kueue's maximumExecutionTimeSeconds: 30 s admitted in all. Evicted after 10.5 s (10 whole seconds count) and
    admitted again at once, it is deactivated 20 s later; the workload without a limit runs on."""
    stories = [_max_exec_run(live=True), _max_exec_run(live=False)]
    assert stories[0] == stories[1]
    assert [s for s in stories[0] if s[2] == "default/limited"] == [
        (0.0, "Created", "default/limited", "", None),
        (0.0, "Admitted", "default/limited", "The workload is admitted", None),
        (10.5, "Evicted", "default/limited", "lost", "Evicted"),
        (10.5, "Admitted", "default/limited", "The workload is admitted", None),
        (30.5, "Evicted", "default/limited", "The workload is deactivated due to exceeding the maximum execution time",
         "DeactivatedDueToMaximumExecutionTimeExceeded"),
        (30.5, "Deactivated", "default/limited", "The maximum execution time (30s) exceeded", None)]
    assert [s[1] for s in stories[0] if s[2] == "default/free"] == ["Created", "Admitted"]


def _recovery_run(live: bool) -> list[tuple[float, str, str, object]]:
    """Two workloads ready at 5 s; both lose a pod at 20 s (Kueue's WaitForRecovery); ``back`` is ready again at 50 s,
    ``gone`` is not, and is evicted when the 60 s recovery timeout ends."""
    timers: TimerHeap = TimerHeap(VirtualClock(START)) if live else Kernel(VirtualClock(START))
    told: list[Event] = []
    config = PodsReadyConfig(timeout=30.0, recovery_timeout=60.0)
    plane = ControlPlane(timers, told.append, scheduler=_scheduler(), kueue=KueueConfig(pods_ready=config))
    for name in ("back", "gone"):
        plane.emit(plane.feed(JobQueued(_workload(name), START)))
    plane.settle(START)
    for at, name, ready in ((5, "back", True), (5, "gone", True), (20, "back", False), (20, "gone", False),
                            (50, "back", True)):
        timers.schedule(START + at, lambda n=name, r=ready, t=START + at: plane.feed(  # type: ignore[misc]
            PodsReady(f"default/{n}", t, r)))
    if isinstance(timers, Kernel):
        timers.run_until(START + 100, plane.settle)
    else:
        _live(plane, timers, START + 100)
    return [(e.t - START, e.kind.value, e.workload, e.extra.get("cause")) for e in told
            if e.kind in (EventKind.ADMITTED, EventKind.EVICTED, EventKind.REQUEUED)]


def test_pods_that_stop_being_ready_have_the_recovery_timeout_on_both_loops() -> None:
    stories = [_recovery_run(live=True), _recovery_run(live=False)]
    assert stories[0] == stories[1]
    assert stories[0] == [
        (0.0, "Admitted", "default/back", None), (0.0, "Admitted", "default/gone", None),
        (80.0, "Evicted", "default/gone", "PodsReadyTimeout")]  # 60 s after its pods stopped being ready, not at 30 s


def test_admission_fair_sharing_goes_on_from_the_usage_the_local_queues_kept() -> None:
    from datetime import UTC, datetime

    from flexq.api import AdmissionFairSharing

    def local_queue(name: str, kept: object = None) -> dict[str, object]:
        status = {"fairSharing": {"weightedShare": 0, "admissionFairSharingStatus": kept}} if kept else {}
        return {"metadata": {"name": name, "namespace": "team"}, "spec": {"clusterQueue": "cq"}, "status": status}

    stamp = datetime.fromtimestamp(START - 30, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    plane = ControlPlane(TimerHeap(VirtualClock(START)), [].append,
                         kueue=KueueConfig(admission_fair_sharing=AdmissionFairSharing(600.0, 60.0)))
    plane.feed(QueuesReconfigured({"LocalQueue": [
        local_queue("kept", {"consumedResources": {"cpu": "2500m", "memory": "1Gi"}, "lastUpdate": stamp}),
        local_queue("fresh"), local_queue("garbled", {"consumedResources": {"cpu": "lots"}, "lastUpdate": stamp})]},
        None, START))
    ledger = plane.fair_usage
    assert ledger is not None
    assert ledger.consumed(("team", "kept")) == ({"cpu": 2.5, "memory": float(2**30)}, START - 30)
    assert ledger.consumed(("team", "fresh")) == ({}, START)
    assert ledger.consumed(("team", "garbled")) == ({}, START)
    assert ControlPlane(TimerHeap(VirtualClock(START)), [].append).fair_usage is None


def test_a_checks_pod_set_updates_reach_the_workload() -> None:
    # Both clocks feed an admission check's state as CheckSet (a scenario's spec.checks, a Workload's status on the
    # live server): a Ready one's podSetUpdates are the workload's, for the second pass to place by.
    plane = ControlPlane(TimerHeap(VirtualClock(START)), lambda _e: None, scheduler=_scheduler("prov"))
    plane.emit(plane.feed(JobQueued(_workload("a"), START)))
    plane.settle(START)
    update = PodSetUpdate(node_selector={"pool": "dedicated"},
                          tolerations=(Toleration("cloud.google.com/gke-queued", "Exists", effect="NoSchedule"),))
    plane.emit(plane.feed(CheckSet("default/a", "prov", CheckState.READY, START + 1, "", {"main": update})))
    wl = plane.scheduler.held("default/a")
    assert wl.state is WorkloadState.ADMITTED and wl.pod_set_updates == {"prov": {"main": update}}


@pytest.mark.parametrize(("updates", "message"), [
    ({"prov": PodSetUpdate(node_selector={"rack": "r1"}), "other": PodSetUpdate(node_selector={"rack": "r2"})},
     'in admission check "prov": invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for '
     "key=rack, value1=r2, value2=r1"),  # the workload's checks in their order (by name, as Kueue lists them)
    ({"prov": PodSetUpdate(node_selector={"cloud.google.com/gke-nodepool": "dws-pool"})},
     'in admission check "prov": invalid admission check PodSetUpdate: conflict for nodeSelector: conflict for '
     "key=cloud.google.com/gke-nodepool, value1=od-pool, value2=dws-pool"),
    ({"prov": PodSetUpdate(node_selector={"rack": "r1"}), "other": PodSetUpdate(labels={"rack": "r2"})}, None),
])
def test_checks_whose_pod_set_updates_disagree_finish_the_workload_failed_to_start(
        updates: dict[str, PodSetUpdate], message: str | None) -> None:
    # Kueue's job reconciler merges the Ready checks' podSetUpdates, in order, into what the pods get from their
    # template and flavors; a key two of them set differently is a permanent error: the job never starts and its
    # workload finishes, FailedToStart. On both clocks: the plane decides it on the admission.
    told: list[Event] = []
    started: list[str] = []
    plane = ControlPlane(TimerHeap(VirtualClock(START)), told.append, JobHooks(lambda key, t: started.append(key)),
                         scheduler=_scheduler("prov", "other"))
    plane.emit(plane.feed(JobQueued(_workload("a"), START)))
    plane.settle(START)
    for check in ("prov", "other"):
        update = updates.get(check)
        plane.emit(plane.feed(CheckSet("default/a", check, CheckState.READY, START + 1, "",
                                       {"main": update} if update else None)))
        plane.settle(START + 1)
    ends = [(e.kind, e.reason, e.extra.get("finishedReason")) for e in told if e.kind is EventKind.FINISHED]
    if message is None:
        assert started == ["default/a"] and ends == []
    else:
        assert started == [] and ends == [(EventKind.FINISHED, message, "FailedToStart")]
        assert plane.scheduler.held("default/a").state is WorkloadState.FINISHED
        assert not any(plane.scheduler.queue_usage("cq").values()), "its quota is free"


@pytest.mark.parametrize("virtual", [True, False])
def test_a_reason_that_names_a_moment_is_kept_as_a_time_and_worded_as_it_leaves_the_plane(virtual: bool) -> None:
    # The driver asks for a node that boots in 8 s: the workload's pending reason keeps the moment it will be ready as
    # a time (worded by whoever shows it); an event whose reason names a moment leaves the plane worded by its clock.
    told: list[Event] = []
    timers = TimerHeap(VirtualClock(START))
    plane = ControlPlane(timers, told.append, scheduler=_scheduler(), virtual=virtual)
    plane.use_capacity(CapacityConfig((POOL,), EmulatedCloud({"od-pool": CapacitySpec(boot=8.0)})))
    plane.emit(plane.feed(JobQueued(_workload("a"), START)))
    plane.settle(START)
    reason = plane.scheduler.held("default/a").pending_reason
    assert isinstance(reason, Phrase) and reason.moments == (START + 8,)
    assert worded(reason, COUNTDOWNS, START) == "waiting for 1 node(s) of od-pool to boot"
    assert worded(reason, NAMED_MOMENTS, START) == (f"waiting for 1 node(s) of od-pool to boot (ready at "
                                                    f"t={format_seconds(START + 8)})")
    frees = Phrase(("a slice frees ", Moment(START + 90, MomentForm.AFTER_VERB)))
    plane.emit([Event.told(START, EventKind.PROVISIONING_REQUEST, "default/a", "cq", frees)])
    assert told[-1].phrase is None and told[-1].reason == (
        f"a slice frees at t={format_seconds(START + 90)}" if virtual else "a slice frees in 1m30s")
    assert all(e.phrase is None for e in told), "every event leaves the plane in words"
