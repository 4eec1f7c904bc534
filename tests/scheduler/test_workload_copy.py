"""A workload's deep copy (a forecast's fork copies every workload of the plane): its mutable mappings are its own,
its values shared."""

from __future__ import annotations

import copy
import dataclasses

from flexq.scheduler import Admission, CheckState, FlavorResource, PodSetAssignment, Workload, WorkloadState
from flexq.scheduler.model import PodSetUpdate
from tests.support import workload

FIELDS: dict[str, str] = {
    **{name: "value" for name in (
        "namespace", "name", "queue", "cluster_queue", "podsets", "priority", "created", "uid", "owner", "state",
        "admission", "ordering_time", "reserved_at", "admitted_at", "finished_at", "requeue_at", "pending_reason",
        "pending", "evictions", "evicting", "replaces", "parent", "flavor", "allowed", "won", "max_exec_seconds",
        "past_exec_seconds", "pods_ready_at", "requeue_count", "key")},
    **{name: "copied" for name in ("checks", "pod_set_updates", "eviction_counts")},
}
"""Every field of Workload: a value (immutable, shared by a copy) or a mapping the copy gets its own of. A new field
fails here until it is placed in one kind (and, if mutable, copied by Workload.__deepcopy__)."""


def test_every_field_of_a_workload_is_a_value_or_copied() -> None:
    assert sorted(f.name for f in dataclasses.fields(Workload)) == sorted(FIELDS)


def _workload() -> Workload:
    fr: FlavorResource = ("default", "cpu")
    wl = workload("job-1", pods=2, priority=5).namespace("default").queue("q").created(1.0).build()
    wl.state = WorkloadState.ADMITTED
    wl.admission = Admission.of("cq", (PodSetAssignment("main", {"cpu": "default"}, {fr: 2000}, 2),))
    wl.checks["prov"] = CheckState.READY
    wl.pod_set_updates["prov"] = {"main": PodSetUpdate(node_selector={"cloud.google.com/gke-nodepool": "dws-pool"})}
    wl.count_eviction("Preempted")
    return wl


def test_a_copy_owns_its_mappings_and_shares_its_values() -> None:
    wl = _workload()
    other = copy.deepcopy(wl)
    assert other == wl and other is not wl and other.key == wl.key
    for name, kind in FIELDS.items():
        mine, theirs = getattr(wl, name), getattr(other, name)
        if kind == "copied":
            assert mine == theirs and mine is not theirs, name
        elif not isinstance(mine, (int, float, str, bool)) and mine is not None:
            assert mine is theirs, name
    other.checks["prov"] = CheckState.RETRY
    other.pod_set_updates["prov"]["extra"] = PodSetUpdate()
    other.count_eviction("Preempted")
    other.state = WorkloadState.FINISHED
    assert wl.checks == {"prov": CheckState.READY} and "extra" not in wl.pod_set_updates["prov"]
    assert sum(wl.eviction_counts.values()) == 1 and wl.state is WorkloadState.ADMITTED


def test_a_workload_met_twice_in_one_copy_is_copied_once() -> None:
    wl = _workload()
    first, second = copy.deepcopy([wl, wl])
    assert first is second and first is not wl


def test_a_copied_scheduler_runs_its_cycles_on_its_own_state() -> None:
    """A forecast's fork: the copy's cycles act on the copy's workloads and quota, the original's stay as they were,
    and each goes on alone (the shapes it learns are its own)."""
    from tests.support import cluster_queue, scheduler

    sched = scheduler(cluster_queue().flavor("f", cpu=2))
    sched.add(workload("a", cpu=2).build(), 0.0)
    sched.schedule(0.0)
    sched.add(workload("b", cpu=2).build(), 1.0)
    sched.schedule(1.0)
    twin = copy.deepcopy(sched)
    twin.finish("ns/a", 2.0)
    admitted = [(e.kind.value, e.workload) for e in twin.schedule(2.0)]
    assert ("Admitted", "ns/b") in admitted
    assert twin.held("ns/b").state is WorkloadState.ADMITTED and twin.held("ns/a").state is WorkloadState.FINISHED
    assert sched.held("ns/b").state is WorkloadState.PENDING and sched.held("ns/a").state is WorkloadState.ADMITTED
    assert sched.usage("cq", ("f", "cpu")) == 2000 and twin.usage("cq", ("f", "cpu")) == 2000
    assert sched.held("ns/b") is not twin.held("ns/b")
    sched.finish("ns/a", 3.0)
    sched.add(workload("c", cpu=1).build(), 3.0)
    assert [e.workload for e in sched.schedule(3.0) if e.kind.value == "Admitted"] == ["ns/b"]
    assert twin.workload("ns/c") is None and twin.held("ns/b").admitted_at == 2.0
