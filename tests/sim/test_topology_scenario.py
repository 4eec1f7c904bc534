"""Topology-aware scheduling in virtual time (examples/tas/scenario-tas.yaml): eight hosts in two sub-blocks, jobs
of four pods that must share a sub-block. Each takes a sub-block; the third waits for one to free (its quota fits);
one of five pods never fits any (TopologyPlacementFailed's message); the pods run on the hosts assigned."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

SCENARIO = Path(__file__).parents[2] / "examples" / "tas" / "scenario-tas.yaml"
FAIR_SHARING = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}


def _short(workload: str) -> str:
    return workload.split("/")[1].removeprefix("job-").rsplit("-", 1)[0]


def test_jobs_take_a_sub_block_each_and_wait_for_one_to_free() -> None:
    events = run_scenario(load_scenario(SCENARIO)).events
    hosts = {_short(e["workload"]) + f"@{e['t']}": [d["values"][0] for d in
                                                    e["topologyAssignments"]["main"]["domains"]]
             for e in events if e["event"] == "QuotaReserved"}
    started = {_short(e["workload"]) + f"@{e['t']}": e["nodes"] for e in events if e["event"] == "Started"}
    first, second = [f"gke-tas-pool-{n}-0" for n in (1, 2, 3, 4)], [f"gke-tas-pool-{n}-0" for n in (5, 6, 7, 8)]
    assert hosts == {"a@0": first, "b@1": second, "c@1800": first}
    assert started == hosts, "the pods are bound to the hosts of their topology assignment"
    pending = [(_short(e["workload"]), e["t"], e["reason"]) for e in events if e["event"] == "Pending"]
    assert pending[-1] == ("d", 3601, 'couldn\'t assign flavors to pod set main: topology "gke-default" allows '
                                      'to fit only 4 out of 5 pod(s)')
    assert ("c", 2, 'couldn\'t assign flavors to pod set main: topology "gke-default" doesn\'t allow to fit any of '
                    '4 pod(s). Total nodes: 8; excluded: resource "cpu": 8 (quota frees next at t=30m)') in pending
    assert not any(e["event"] == "QuotaReserved" and _short(e["workload"]) == "d" for e in events)


def _subblock_job(name: str, **labels: str) -> dict[str, object]:
    """examples/tas's job of four pods that must share a sub-block, named ``name``, with ``labels`` added."""
    obj = yaml.safe_load((SCENARIO.parent / "job-subblock.yaml").read_text().replace("${JOB_NAME}", name)
                         .replace("${PODS}", "4"))
    obj["metadata"]["labels"].update(labels)
    return dict(obj)


def _write_scenario(tmp_path: Path, name: str, objects: list[dict[str, object]], submit: list[dict[str, object]],
                    **spec: object) -> Path:
    """A scenario of ``objects`` and ``submit`` on examples/tas's eight hosts (no autoscaling), for two hours."""
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": name},
           "spec": {"objects": objects, "submit": submit, "until": "2h", **spec,
                    "capacity": {"pools": [{"name": "tas-pool", "machineType": "n2-standard-16", "numNodes": 8,
                                            "autoscaling": False}]}}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _preempting_scenario(tmp_path: Path, fair: bool = False) -> Path:
    """examples/tas's queue with preemption in it and two priorities: ``low-a`` and ``low-b`` take a sub-block
    each; ``urgent`` then needs one. ``fair``: under Kueue's fair sharing."""
    objects = list(yaml.safe_load_all((SCENARIO.parent / "tas-queue.yaml").read_text()))
    for obj in objects:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    objects += [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass",
                 "metadata": {"name": name}, "value": value} for name, value in (("low", 1), ("high", 100))]
    priority = "kueue.x-k8s.io/priority-class"
    submit: list[dict[str, object]] = [
        {"at": "0s", "runFor": "1h", "object": _subblock_job("low-a", **{priority: "low"})},
        {"at": "1s", "runFor": "1h", "object": _subblock_job("low-b", **{priority: "low"})},
        {"at": "60s", "runFor": "10m", "object": _subblock_job("urgent", **{priority: "high"})}]
    fairness: dict[str, object] = {"kueueConfig": FAIR_SHARING} if fair else {}
    return _write_scenario(tmp_path, "tas-preemption", objects, submit, **fairness)


@pytest.mark.parametrize("fair", [False, True], ids=["classical", "fair sharing"])
def test_a_higher_priority_job_preempts_to_free_a_sub_block_and_takes_it(tmp_path: Path, fair: bool) -> None:
    """The same with fair sharing on: its search asks the placement of each victim set as the classical one does
    (the live half: tests/cli/test_kubectl_tas.py)."""
    result = run_scenario(load_scenario(_preempting_scenario(tmp_path, fair)))
    story = [(e["t"], e["event"], _short(e["workload"])) for e in result.events
             if e["event"] in ("QuotaReserved", "Preempted", "Evicted")]
    hosts = {(_short(e["workload"]), e["t"]): [d["values"][0] for d in e["topologyAssignments"]["main"]["domains"]]
             for e in result.events if e["event"] == "QuotaReserved"}
    # The quota (256 cpus) holds all three; the sub-blocks do not: the latest admitted of the lower priority goes.
    assert story[:4] == [(0, "QuotaReserved", "low-a"), (1, "QuotaReserved", "low-b"), (60, "Preempted", "low-b"),
                         (60, "Evicted", "low-b")]
    assert story[4][1:] == ("QuotaReserved", "urgent")
    assert hosts[("urgent", story[4][0])] == hosts[("low-b", 1)], "it takes the sub-block low-b freed"
    rows = {row["job"]: row.get("schedulingStats") for row in result.summary()["workloads"]}
    assert rows["Job default/low-b"] == {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}


GROUPED = SCENARIO.parent / "scenario-tas-groups.yaml"


def _hosts_by_pod_set(tmp_path: Path, grouped: bool) -> dict[str, list[str]]:
    """scenario-tas-groups.yaml's RayJob's hosts by pod set; ``grouped`` False: its group annotation taken off."""
    path = GROUPED
    if not grouped:
        doc = yaml.safe_load(GROUPED.read_text())
        job = yaml.safe_load((SCENARIO.parent / "rayjob-grouped.yaml").read_text().replace("${JOB_NAME}", "ray"))
        cluster = job["spec"]["rayClusterSpec"]
        for template in (cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"]):
            del template["metadata"]["annotations"]["kueue.x-k8s.io/podset-group-name"]
        doc["spec"]["submit"][1] = {"at": "1s", "runFor": "30m", "object": job}
        doc["spec"]["submit"][0]["file"] = str(SCENARIO.parent / "job-subblock.yaml")
        doc["spec"]["include"] = [str(SCENARIO.parent / "tas-queue.yaml")]
        path = tmp_path / "ungrouped.yaml"
        path.write_text(yaml.safe_dump(doc))
    events = run_scenario(load_scenario(path)).events
    (reserved,) = [e for e in events if e["event"] == "QuotaReserved" and _short(e["workload"]) == "rayjob-ray"]
    return {name: [d["values"][0] for d in placed["domains"]]
            for name, placed in reserved["topologyAssignments"].items()}


def test_a_ray_head_grouped_with_its_workers_goes_to_their_sub_block(tmp_path: Path) -> None:
    """Kueue's pod set groups (the live half: tests/cli/test_kubectl_tas.py): job a holds three hosts of the first
    sub-block; the RayJob's workers fit only the second. Grouped, the head goes with them (beside one of them);
    ungrouped, it takes the tightest room, beside a's pods in the first sub-block."""
    second = ["gke-tas-pool-5-0", "gke-tas-pool-6-0"]
    assert _hosts_by_pod_set(tmp_path, grouped=True) == {"head": ["gke-tas-pool-5-0"], "workers": second}
    assert _hosts_by_pod_set(tmp_path, grouped=False) == {"head": ["gke-tas-pool-1-0"], "workers": second}


def test_dws_nodes_place_each_job_once_provisioned_and_a_job_they_cannot_hold_is_evicted() -> None:
    """examples/tas/scenario-tas-dws.yaml (the live half: tests/cli/test_kubectl_tas.py): each job reserves quota
    with its topology request Pending; a second after its ProvisioningRequest's nodes come it is placed in one
    sub-block of them (Ready) and admitted; c's five nodes hold no five pods in one sub-block: its second passes fail
    (1 s, then doubling up to 30 s) until the booking expires and the check's Retry evicts it."""
    events = run_scenario(load_scenario(SCENARIO.parent / "scenario-tas-dws.yaml")).events
    story = [(e["t"], e["event"], _short(e["workload"])) for e in events
             if e["event"] in ("QuotaReserved", "Admitted", "Started", "Evicted")]
    assert story == [(0, "QuotaReserved", "a"), (1, "QuotaReserved", "b"), (2, "QuotaReserved", "c"),
                     (601, "Admitted", "a"), (601, "Started", "a"), (602, "Admitted", "b"), (602, "Started", "b"),
                     (1202, "Evicted", "c")]
    assert all(e["delayedTopologyRequests"] == {"main": "Pending"} and "topologyAssignments" not in e
               for e in events if e["event"] == "QuotaReserved")
    for e in events:
        if e["event"] == "Admitted":
            hosts = [d["values"][0] for d in e["topologyAssignments"]["main"]["domains"]]
            (started,) = [s["nodes"] for s in events if s["event"] == "Started" and s["workload"] == e["workload"]]
            assert hosts == started and len(hosts) == 4, "its pods run on the hosts of its topology assignment"
    failed = [e for e in events if e["event"] == "SecondPassFailed"]
    assert [e["t"] for e in failed[:7]] == [603, 605, 609, 617, 633, 663, 693]
    assert {e["reason"] for e in failed} == {'couldn\'t assign flavors to pod set main: topology "gke-default" allows '
                                             'to fit only 4 out of 5 pod(s). Total nodes: 13; excluded: resource '
                                             '"cpu": 8'}
    assert failed[-1]["t"] < 1202


def _reserving_scenario(tmp_path: Path, recompute: bool) -> Path:
    """:func:`_preempting_scenario`'s queue, with ``low-b`` of three pods (host 8 of the second sub-block stays free),
    and a second ClusterQueue on the same flavor, in a cohort with the first, where ``small`` (one pod, low priority)
    comes with ``urgent``; ``recompute``: Kueue's ``TASRecomputeAssignmentWithinSchedulingCycle``."""
    path = _preempting_scenario(tmp_path)
    doc = yaml.safe_load(path.read_text())
    objects = doc["spec"]["objects"]
    queue = next(obj for obj in objects if obj["kind"] == "ClusterQueue")
    queue["spec"]["cohort"] = "tas"
    side = {**queue, "metadata": {"name": "side-queue"}, "spec": {**queue["spec"], "preemption": {}}}
    local = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
             "metadata": {"name": "side-user-queue", "namespace": "default"}, "spec": {"clusterQueue": "side-queue"}}
    objects += [side, local]
    submit = doc["spec"]["submit"]
    submit[1]["object"]["spec"].update(parallelism=3, completions=3)
    small = yaml.safe_load(yaml.safe_dump(submit[0]["object"]))
    small["metadata"].update(name="small", labels={"kueue.x-k8s.io/queue-name": "side-user-queue",
                                                   "kueue.x-k8s.io/priority-class": "low"})
    small["spec"].update(parallelism=1, completions=1)
    submit.append({"at": "60s", "runFor": "10m", "object": small})
    doc["spec"]["kueueConfig"] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                                  "featureGates": {"TASRecomputeAssignmentWithinSchedulingCycle": recompute}}
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("recompute", [True, False], ids=["recompute", "no recompute"])
def test_a_preempting_job_keeps_the_sub_block_it_frees_from_a_lower_priority_job(tmp_path: Path,
                                                                                   recompute: bool) -> None:
    """``urgent`` preempts ``low-b`` for the second sub-block, whose free host 8 ``small`` (another queue, lower
    priority, nominated in the same cycle) would take: the preemptor keeps the sub-block for the cycle, so ``small``
    waits and ``low-a`` is never preempted (without the reservation ``small`` took host 8 and ``urgent`` went on to
    preempt ``low-a`` too). With the gate on ``small`` is assigned again and finds no host (Kueue's message); off, it
    is skipped (tests/scheduler/test_tas_recompute.py has Kueue's cases). Once ``urgent`` ends, ``low-b`` is back on
    its three hosts and ``small`` on host 8."""
    result = run_scenario(load_scenario(_reserving_scenario(tmp_path, recompute)))
    story = [(e["t"], e["event"], _short(e["workload"])) for e in result.events
             if e["event"] in ("QuotaReserved", "Preempted")]
    hosts = {(_short(e["workload"]), e["t"]): [d["values"][0] for d in e["topologyAssignments"]["main"]["domains"]]
             for e in result.events if e["event"] == "QuotaReserved"}
    assert story[:3] == [(0, "QuotaReserved", "low-a"), (1, "QuotaReserved", "low-b"), (60, "Preempted", "low-b")]
    assert story[3][1:] == ("QuotaReserved", "urgent")
    assert hosts[("urgent", story[3][0])] == [f"gke-tas-pool-{n}-0" for n in (5, 6, 7, 8)]
    assert not any(event == "Preempted" and name == "low-a" for _, event, name in story)
    small = [e["reason"] for e in result.events if e["event"] == "Pending" and _short(e["workload"]) == "small"]
    assert small[0].startswith('couldn\'t assign flavors to pod set main: topology "gke-default" doesn\'t allow to fit '
                               'any of 1 pod(s). Total nodes: 8; excluded: resource "cpu": 8' if recompute
                               else "Workload no longer fits after processing another workload")
    assert hosts[("low-b", 660)] == [f"gke-tas-pool-{n}-0" for n in (5, 6, 7)]
    assert hosts[("small", 660)] == ["gke-tas-pool-8-0"]


def _queues_apart_scenario(tmp_path: Path) -> Path:
    """examples/tas's queue holds a sub-block with ``hold-a`` (30m) and the other with ``hold-b`` (1h); two more
    ClusterQueues on the same flavor, neither in a cohort, each get a job of a sub-block at 60s: ``strict`` (StrictFIFO)
    and ``best`` (BestEffortFIFO)."""
    objects = list(yaml.safe_load_all((SCENARIO.parent / "tas-queue.yaml").read_text()))
    (cq,) = [obj for obj in objects if obj["kind"] == "ClusterQueue"]
    for name, strategy in (("strict", "StrictFIFO"), ("best", "BestEffortFIFO")):
        objects.append({**cq, "metadata": {"name": f"{name}-cq"}, "spec": {**cq["spec"], "queueingStrategy": strategy}})
        objects.append({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                        "metadata": {"name": f"{name}-queue", "namespace": "default"},
                        "spec": {"clusterQueue": f"{name}-cq"}})
    queue = "kueue.x-k8s.io/queue-name"
    submit: list[dict[str, object]] = [
        {"at": "0s", "runFor": "30m", "object": _subblock_job("hold-a")},
        {"at": "1s", "runFor": "1h", "object": _subblock_job("hold-b")},
        {"at": "60s", "runFor": "10m", "object": _subblock_job("strict", **{queue: "strict-queue"})},
        {"at": "61s", "runFor": "10m", "object": _subblock_job("best", **{queue: "best-queue"})}]
    return _write_scenario(tmp_path, "tas-queues-apart", objects, submit)


def test_nodes_freed_in_another_cluster_queue_reach_a_strict_fifo_head_only(tmp_path: Path) -> None:
    """hold-a ends at 30m in examples/tas's queue: the StrictFIFO queue's head, tried every cycle as Kueue tries it,
    takes the sub-block; the BestEffortFIFO queue's job, set aside for its placement, is not looked at again when
    hold-b ends at 1h either: Kueue requeues inadmissible workloads of the finished workload's ClusterQueue and cohort
    tree only (tests/scheduler/test_tas_requeue.py)."""
    events = run_scenario(load_scenario(_queues_apart_scenario(tmp_path))).events
    reserved = [(e["t"], _short(e["workload"])) for e in events if e["event"] == "QuotaReserved"]
    assert reserved == [(0, "hold-a"), (1, "hold-b"), (1800, "strict")]
    pending = [(e["t"], _short(e["workload"])) for e in events if e["event"] == "Pending"]
    assert (61, "best") in pending


def test_an_autoscaling_pool_is_not_scaled_up_for_a_topology_request_without_a_provisioning_check(
        tmp_path: Path) -> None:
    """Kueue's TAS meets the cluster autoscaler only through a ProvisioningRequest check (its docs' "ClusterAutoscaler
    X: with none, a job whose sub-block has no nodes yet stays pending
    with TopologyPlacementFailed, its pods never made, and the pool at 0 nodes is never scaled up for it."""
    objects = list(yaml.safe_load_all((SCENARIO.parent / "tas-queue.yaml").read_text()))
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-autoscaling"},
           "spec": {"objects": objects, "until": "1h",
                    "submit": [{"at": "0s", "runFor": "10m", "object": _subblock_job("a")}],
                    "capacity": {"pools": [{"name": "tas-pool", "machineType": "n2-standard-16", "minNodes": 0,
                                            "maxNodes": 8}]}}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    events = run_scenario(load_scenario(path)).events
    assert {e["event"] for e in events} == {"Created", "Pending"}, "never admitted, nothing scaled up"
    (pending,) = [e for e in events if e["event"] == "Pending"]
    assert pending["reason"] == ("couldn't assign flavors to pod set main: no topology domains at level: "
                                 "cloud.google.com/gce-topology-subblock")
