"""What keeps a workload out before any flavor is tried, as Kueue decides it: its ClusterQueue's namespaceSelector
(``workload namespace doesn't match ClusterQueue selector``) and its LocalQueue's stopPolicy (``Hold``,
``HoldAndDrain``). Neither blocks a StrictFIFO queue: the workloads behind go on. A ClusterQueue's stopPolicy stops the
whole queue (``ClusterQueue NAME is inactive``); under ``HoldAndDrain`` its admitted workloads are evicted
(``ClusterQueueStopped``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from flexq.scheduler.build import build_config
from flexq.scheduler.events import EventKind
from flexq.scheduler.model import PendingReason, Workload, WorkloadState
from flexq.scheduler.queue_config import NAME_LABEL
from flexq.scheduler.scheduler import Config, Scheduler
from tests.support import workload


def _objects(selector: dict[str, Any] | None, strategy: str = "BestEffortFIFO",
             stop: str = "None") -> dict[str, list[dict[str, Any]]]:
    spec: dict[str, Any] = {"queueingStrategy": strategy, "resourceGroups": [
        {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu",
                                                                                     "nominalQuota": "4"}]}]}]}
    if selector is not None:
        spec["namespaceSelector"] = selector
    return {
        "ResourceFlavor": [{"metadata": {"name": "default"}}],
        "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": spec}],
        "Namespace": [{"metadata": {"name": "team-a", "labels": {"team": "a"}}},
                      {"metadata": {"name": "team-b", "labels": {"team": "b"}}}],
        "LocalQueue": [{"metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "cq",
                                                                              "stopPolicy": stop}}
                       for ns in ("team-a", "team-b")],
    }


def _wl(namespace: str, name: str, created: float, cpu: float = 1) -> Workload:
    return workload(name, cpu=cpu).namespace(namespace).created(created).build()


def _scheduler(config: Config, *workloads: Workload) -> Scheduler:
    scheduler = Scheduler(config, instant_eviction=True)
    for wl in workloads:
        scheduler.add(wl, wl.created)
    return scheduler


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_a_namespace_the_selector_leaves_out_stays_pending_and_blocks_no_one(strategy: str) -> None:
    first, second = _wl("team-b", "first", 0.0), _wl("team-a", "second", 1.0)
    scheduler = _scheduler(build_config(_objects({"matchLabels": {"team": "a"}}, strategy)), first, second)
    events = scheduler.schedule(2.0)
    assert (first.state, first.pending, first.pending_reason) == (
        WorkloadState.PENDING, PendingReason.MISCONFIGURED, "workload namespace doesn't match ClusterQueue selector")
    assert second.state is WorkloadState.ADMITTED, "the head left out does not hold the queue behind it"
    assert [(e.kind, e.workload) for e in events if e.kind is EventKind.PENDING] == [(EventKind.PENDING, first.key)]
    assert scheduler.aside(first)


def test_the_selectors_nil_and_empty_and_the_name_label() -> None:
    wl = _wl("team-a", "wl", 0.0)
    nil = _scheduler(build_config(_objects(None)), dataclasses.replace(wl))
    nil.schedule(1.0)
    assert nil.held(wl.key).pending is PendingReason.MISCONFIGURED, "no namespaceSelector selects no namespace"
    every = _scheduler(build_config(_objects({})), dataclasses.replace(wl))
    every.schedule(1.0)
    assert every.held(wl.key).state is WorkloadState.ADMITTED, "namespaceSelector: {} selects every namespace"
    by_name = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-c"]}]}
    unlisted = _scheduler(build_config(_objects(by_name)), _wl("team-c", "wl", 0.0))
    unlisted.schedule(1.0)
    assert unlisted.held("team-c/wl").state is WorkloadState.ADMITTED, "a namespace has its name as a label"


def test_a_namespace_relabelled_to_match_is_admitted() -> None:
    objects = _objects({"matchLabels": {"team": "a"}})
    wl = _wl("team-b", "wl", 0.0)
    scheduler = _scheduler(build_config(objects), wl)
    scheduler.schedule(1.0)
    assert wl.state is WorkloadState.PENDING
    objects["Namespace"][1]["metadata"]["labels"] = {"team": "a"}
    scheduler.configure(build_config(objects), 0.0)
    scheduler.schedule(2.0)
    assert wl.state is WorkloadState.ADMITTED


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_a_held_local_queue_admits_nothing_new_until_its_stop_policy_goes(strategy: str) -> None:
    objects = _objects({}, strategy)
    objects["LocalQueue"][1]["spec"]["stopPolicy"] = "Hold"  # team-b's
    held, other = _wl("team-b", "held", 0.0), _wl("team-a", "other", 1.0)
    scheduler = _scheduler(build_config(objects), held, other)
    scheduler.schedule(2.0)
    assert (held.state, held.pending, held.pending_reason) == (WorkloadState.PENDING, PendingReason.SUSPENDED,
                                                               "LocalQueue lq is stopped")
    assert other.state is WorkloadState.ADMITTED, "the other LocalQueue of the ClusterQueue goes on"
    objects["LocalQueue"][1]["spec"]["stopPolicy"] = "None"
    scheduler.configure(build_config(objects), 0.0)
    scheduler.schedule(3.0)
    assert held.state is WorkloadState.ADMITTED


@pytest.mark.parametrize(("policy", "evicted"), [("Hold", False), ("HoldAndDrain", True)])
def test_stopping_a_local_queue_drains_its_admitted_workloads_only_under_hold_and_drain(policy: str,
                                                                                         evicted: bool) -> None:
    objects = _objects({})
    running = _wl("team-b", "running", 0.0)
    scheduler = _scheduler(build_config(objects), running)
    scheduler.schedule(1.0)
    assert running.state is WorkloadState.ADMITTED
    objects["LocalQueue"][1]["spec"]["stopPolicy"] = policy
    scheduler.configure(build_config(objects), 0.0)
    events = scheduler.schedule(2.0)
    evictions = [(e.t, e.reason, e.extra.get("cause")) for e in events if e.kind is EventKind.EVICTED]
    if evicted:
        assert evictions == [(2.0, "The LocalQueue is stopped", "LocalQueueStopped")]
        assert (running.state, running.pending_reason) == (WorkloadState.PENDING, "LocalQueue lq is stopped")
        assert scheduler.usage("cq", ("default", "cpu")) == 0
    else:
        assert evictions == [] and running.state is WorkloadState.ADMITTED, "Hold lets it run to completion"
    assert not scheduler.schedule(3.0), "once drained, nothing more happens"


def test_a_held_local_queue_gives_back_quota_reserved_while_checks_wait() -> None:
    objects = _objects({})
    objects["ClusterQueue"][0]["spec"]["admissionChecks"] = ["manual"]
    objects["AdmissionCheck"] = [{"metadata": {"name": "manual"}, "spec": {"controllerName": "example.com/manual"}}]
    reserving = _wl("team-b", "reserving", 0.0)
    scheduler = _scheduler(build_config(objects), reserving)
    scheduler.schedule(1.0)
    assert reserving.state is WorkloadState.QUOTA_RESERVED
    objects["LocalQueue"][1]["spec"]["stopPolicy"] = "Hold"
    scheduler.configure(build_config(objects), 0.0)
    scheduler.schedule(2.0)
    assert (reserving.state, reserving.admission) == (WorkloadState.PENDING, None)


def test_a_held_cluster_queue_admits_nothing_until_its_stop_policy_goes() -> None:
    objects = _objects({})
    objects["ClusterQueue"][0]["spec"]["stopPolicy"] = "Hold"
    held = _wl("team-a", "held", 0.0)
    scheduler = _scheduler(build_config(objects), held)
    scheduler.schedule(1.0)
    assert (held.state, held.pending, held.pending_reason) == (WorkloadState.PENDING, PendingReason.SUSPENDED,
                                                               "ClusterQueue cq is inactive")
    objects["ClusterQueue"][0]["spec"]["stopPolicy"] = "None"
    scheduler.configure(build_config(objects), 0.0)
    scheduler.schedule(2.0)
    assert held.state is WorkloadState.ADMITTED


@pytest.mark.parametrize(("policy", "evicted"), [("Hold", False), ("HoldAndDrain", True)])
def test_stopping_a_cluster_queue_drains_its_admitted_workloads_only_under_hold_and_drain(policy: str,
                                                                                           evicted: bool) -> None:
    objects = _objects({})
    running = [_wl("team-a", "a", 0.0), _wl("team-b", "b", 0.5)]
    scheduler = _scheduler(build_config(objects), *running)
    scheduler.schedule(1.0)
    assert all(wl.state is WorkloadState.ADMITTED for wl in running)
    objects["ClusterQueue"][0]["spec"]["stopPolicy"] = policy
    scheduler.configure(build_config(objects), 0.0)
    events = scheduler.schedule(2.0)
    evictions = [(e.workload, e.reason, e.extra.get("cause")) for e in events if e.kind is EventKind.EVICTED]
    if evicted:
        assert evictions == [(wl.key, "The ClusterQueue is stopped", "ClusterQueueStopped") for wl in running]
        assert all((wl.state, wl.pending, wl.pending_reason) == (
            WorkloadState.PENDING, PendingReason.SUSPENDED, "ClusterQueue cq is inactive") for wl in running)
        assert scheduler.usage("cq", ("default", "cpu")) == 0
    else:
        assert evictions == [] and all(wl.state is WorkloadState.ADMITTED for wl in running), \
            "Hold lets them run to completion"
    assert not scheduler.schedule(3.0), "once drained, nothing more happens"
    objects["ClusterQueue"][0]["spec"]["stopPolicy"] = "None"
    scheduler.configure(build_config(objects), 0.0)
    scheduler.schedule(4.0)
    assert all(wl.state is WorkloadState.ADMITTED for wl in running), "resumed, the queue admits again"


def test_a_held_cluster_queue_gives_back_quota_reserved_while_checks_wait() -> None:
    objects = _objects({})
    objects["ClusterQueue"][0]["spec"]["admissionChecks"] = ["manual"]
    objects["AdmissionCheck"] = [{"metadata": {"name": "manual"}, "spec": {"controllerName": "example.com/manual"}}]
    reserving = _wl("team-a", "reserving", 0.0)
    scheduler = _scheduler(build_config(objects), reserving)
    scheduler.schedule(1.0)
    assert reserving.state is WorkloadState.QUOTA_RESERVED
    objects["ClusterQueue"][0]["spec"]["stopPolicy"] = "Hold"
    scheduler.configure(build_config(objects), 0.0)
    events = scheduler.schedule(2.0)
    assert (reserving.state, reserving.admission) == (WorkloadState.PENDING, None)
    assert [(e.reason, e.extra.get("cause")) for e in events if e.kind is EventKind.EVICTED] == [
        ("The ClusterQueue is stopped", "ClusterQueueStopped")]


@pytest.mark.parametrize(("why", "reasons"), [
    ("namespace", ["workload namespace doesn't match ClusterQueue selector"] * 2),
    ("local queue stopped", ["LocalQueue lq is stopped", "LocalQueue lq2 is stopped"]),
    ("cluster queue stopped", ["ClusterQueue cq is inactive", "ClusterQueue cq2 is inactive"]),
])
def test_every_head_kept_out_in_one_cycle_says_why_at_that_moment(why: str, reasons: list[str]) -> None:
    # Two ClusterQueues, a head in each from team-b, both kept out in the same cycle: each says so, then.
    objects = _objects({"matchLabels": {"team": "a"}} if why == "namespace" else {})
    cq2 = {**objects["ClusterQueue"][0], "metadata": {"name": "cq2"}}
    objects["ClusterQueue"].append(cq2)
    objects["LocalQueue"].append({"metadata": {"name": "lq2", "namespace": "team-b"}, "spec": {"clusterQueue": "cq2"}})
    if why == "local queue stopped":
        for lq in objects["LocalQueue"][1:]:
            lq["spec"] = {**lq["spec"], "stopPolicy": "Hold"}
    if why == "cluster queue stopped":
        for cq in objects["ClusterQueue"]:
            cq["spec"] = {**cq["spec"], "stopPolicy": "Hold"}
    heads = [workload("w1").namespace("team-b").build(),
             workload("w2", on="cq2").namespace("team-b").queue("lq2").build()]
    scheduler = _scheduler(build_config(objects), *heads)
    events = scheduler.cycle(2.0)[0]
    assert [(e.t, e.kind, e.workload, e.reason) for e in events] == [
        (2.0, EventKind.PENDING, wl.key, reason) for wl, reason in zip(heads, reasons, strict=True)]


def _three_teams(checks: bool) -> dict[str, list[dict[str, Any]]]:
    objects = _objects({})
    objects["Namespace"].append({"metadata": {"name": "team-c", "labels": {"team": "c"}}})
    objects["LocalQueue"].append({"metadata": {"name": "lq", "namespace": "team-c"},
                                  "spec": {"clusterQueue": "cq", "stopPolicy": "None"}})
    if checks:
        objects["ClusterQueue"][0]["spec"]["admissionChecks"] = ["manual"]
        objects["AdmissionCheck"] = [{"metadata": {"name": "manual"},
                                      "spec": {"controllerName": "example.com/manual"}}]
    return objects


def test_stopping_queues_drains_each_workload_by_its_own_queue() -> None:
    """Every workload is looked at, whatever those before it were: one holding nothing, one in a queue not stopped,
    one running on under Hold; only the one under HoldAndDrain is evicted."""
    objects = _three_teams(checks=False)
    waiting = _wl("team-b", "waiting", 0.0, cpu=10)
    free, held, drained = _wl("team-c", "free", 0.1), _wl("team-a", "held", 0.2), _wl("team-b", "drained", 0.3)
    scheduler = _scheduler(build_config(objects), waiting, free, held, drained)
    for t in (1.0, 1.1, 1.2, 1.3):  # a head of the ClusterQueue a cycle
        scheduler.schedule(t)
    assert [wl.state for wl in (waiting, free, held, drained)] == [WorkloadState.PENDING] + [WorkloadState.ADMITTED] * 3
    objects["LocalQueue"][0]["spec"]["stopPolicy"] = "Hold"
    objects["LocalQueue"][1]["spec"]["stopPolicy"] = "HoldAndDrain"
    scheduler.configure(build_config(objects), 0.0)
    events = scheduler.schedule(2.0)
    assert [e.workload for e in events if e.kind is EventKind.EVICTED] == [drained.key]
    assert [wl.state for wl in (free, held)] == [WorkloadState.ADMITTED] * 2


def test_stopping_a_local_queue_leaves_quota_reserved_in_the_others() -> None:
    """A workload reserving quota while its checks wait gives it back only where its own queue is stopped: its
    ClusterQueue's stopPolicy ``None`` stops nothing."""
    objects = _three_teams(checks=True)
    free, stopped = _wl("team-c", "free", 0.1), _wl("team-b", "stopped", 0.2)
    scheduler = _scheduler(build_config(objects), free, stopped)
    for t in (1.0, 1.1):
        scheduler.schedule(t)
    assert [wl.state for wl in (free, stopped)] == [WorkloadState.QUOTA_RESERVED] * 2
    objects["LocalQueue"][1]["spec"]["stopPolicy"] = "Hold"
    scheduler.configure(build_config(objects), 0.0)
    events = scheduler.schedule(2.0)
    assert [e.workload for e in events if e.kind is EventKind.EVICTED] == [stopped.key]
    assert free.state is WorkloadState.QUOTA_RESERVED


@pytest.mark.parametrize(("labels", "want"), [
    ({"team": "a"}, {"team": "a", NAME_LABEL: "team-a"}),
    ({"team": "a", NAME_LABEL: "team-a"}, {"team": "a", NAME_LABEL: "team-a"}),
    ({NAME_LABEL: "other"}, {NAME_LABEL: "team-a"}),
    (None, {NAME_LABEL: "team-a"}),
])
def test_a_namespace_always_carries_its_name_label(labels: dict[str, str] | None, want: dict[str, str]) -> None:
    """As the API server sets it on every namespace, whatever the namespace was created with."""
    config = Config({}, {}, {}, namespaces={} if labels is None else {"team-a": labels})
    assert config.namespace_labels("team-a") == want
