"""Failed node replacement in virtual time (Kueue's TASFailedNodeReplacement; the live half:
tests/cli/test_kubectl_tas.py): examples/tas's eight hosts in two sub-blocks, a job whose pods must share a
sub-block, and the first of its hosts failing at 10m. With a free host left in its sub-block its pods there move to
it and the job runs on; with none it is evicted at once (TASFailedNodeReplacementFailFast) and requeued; with the gate
off it is evicted as any workload on a lost node. With TASFailedNodeReplacementFailFast off it keeps its quota and
waits for a replacement, tried again after Kueue's second-pass backoff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.support.tas import TPU_SLICE

EXAMPLES = Path(__file__).parents[2] / "examples" / "tas"
GATE_OFF = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"TASFailedNodeReplacement": False}}


def _run(tmp_path: Path, pods: int, gate_off: bool = False) -> list[dict[str, Any]]:
    """Job a (``pods`` pods, 30m) on the first sub-block, job b (four, 1h) on the second; host 1 fails at 10m."""
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-hot-swap"},
           "spec": {"include": [str(EXAMPLES / "tas-queue.yaml")], "until": "3h",
                    **({"kueueConfig": GATE_OFF} if gate_off else {}),
                    "capacity": {"pools": [{"name": "tas-pool", "machineType": "n2-standard-16", "numNodes": 8,
                                            "autoscaling": False}],
                                 "cloud": {"tas-pool": {"hostFailures": ["10m"]}}},
                    "submit": [{"at": f"{at}s", "file": str(EXAMPLES / "job-subblock.yaml"), "runFor": run_for,
                                "env": {"JOB_NAME": name, "PODS": str(n)}}
                               for at, name, n, run_for in ((0, "a", pods, "30m"), (1, "b", 4, "1h"))]}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    return [e for e in run_scenario(load_scenario(path)).events if e["workload"].startswith("default/job-a")]


def _story(events: list[dict[str, Any]]) -> list[tuple[float, str, str]]:
    return [(e["t"], e["event"], e.get("cause") or e["reason"]) for e in events
            if e["event"] in ("NodeReplaced", "Evicted", "QuotaReserved", "Finished")]


def test_the_lost_hosts_pod_moves_to_the_free_host_of_its_sub_block_and_the_job_runs_on(tmp_path: Path) -> None:
    events = _run(tmp_path, pods=3)
    started = next(e for e in events if e["event"] == "Started")
    assert started["nodes"] == ["gke-tas-pool-1-0", "gke-tas-pool-2-0", "gke-tas-pool-3-0"]
    (replaced,) = [e for e in events if e["event"] == "NodeReplaced"]
    assert (replaced["t"], replaced["node"], replaced["nodes"]) == (600, "gke-tas-pool-1-0", ["gke-tas-pool-4-0"])
    assert replaced["reason"] == ("node gke-tas-pool-1-0 failed: its pods were placed on gke-tas-pool-4-0 in the "
                                  "same topology domain")
    assert _story(events) == [(0, "QuotaReserved", "Quota reserved in ClusterQueue tas-cluster-queue"),
                              (600, "NodeReplaced", replaced["reason"]), (1800, "Finished", "JobFinished")]


@pytest.mark.parametrize("gate_off", [False, True], ids=["fail fast", "gate off"])
def test_with_no_free_host_in_its_sub_block_the_job_is_evicted_and_requeued(tmp_path: Path, gate_off: bool) -> None:
    """Kueue's "workload with unhealthyNode annotation; second pass; required rack; no fit; FailFast": evicted with
    NodeFailures; with the gate off, as a workload whose node is gone (NodeLost). Either way it waits for b's
    sub-block (1h1s) and runs there."""
    events = _run(tmp_path, pods=4, gate_off=gate_off)
    assert not [e for e in events if e["event"] == "NodeReplaced"]
    (evicted,) = [e for e in events if e["event"] == "Evicted"]
    assert evicted["t"] == 600
    if gate_off:
        assert (evicted["cause"], evicted["reason"]) == (
            "NodeLost", "host gke-tas-pool-1-0 of pool tas-pool failed: the workload's pods on it are gone")
    else:
        assert (evicted["cause"], evicted["reason"]) == (
            "NodeFailures", "Workload was evicted as there was no replacement for unhealthy node(s): gke-tas-pool-1-0")
    assert [(t, kind) for t, kind, _ in _story(events)] == [(0, "QuotaReserved"), (600, "Evicted"),
                                                           (3601, "QuotaReserved"), (5401, "Finished")]


def test_a_lost_host_of_a_tpu_slice_loses_its_other_hosts_too_and_the_job_is_evicted(tmp_path: Path) -> None:
    """A multi-host slice goes whole: more than one of the job's nodes at once, Kueue's "multiple TAS assigned node
    failures" eviction, not a replacement."""
    *objects, job = list(yaml.safe_load_all(TPU_SLICE))
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-slice-lost"},
           "spec": {"objects": objects, "until": "3h",
                    "capacity": {"pools": [{"name": "tpu-pool", "machineType": "ct6e-standard-4t",
                                            "tpuTopology": "4x4", "numNodes": 4, "autoscaling": False}],
                                 "cloud": {"tpu-pool": {"hostFailures": ["10m"], "bootTime": "5m"}}},
                    "submit": [{"at": "0s", "runFor": "1h", "object": job}]}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    events = run_scenario(load_scenario(path)).events
    hosts = next(e for e in events if e["event"] == "Started")["nodes"]
    assert len(hosts) == 4
    (evicted,) = [e for e in events if e["event"] == "Evicted"]
    assert (evicted["t"], evicted["cause"]) == (600, "NodeFailures")
    assert evicted["reason"] == ("Workload eviction triggered due to multiple TAS assigned node failures, including: "
                                 + ", ".join(sorted(hosts)))
    assert not [e for e in events if e["event"] == "NodeReplaced"]


@pytest.mark.parametrize("gate_off", [False, True], ids=["gate on", "gate off"])
def test_a_job_evicted_with_its_slice_runs_again_once_the_repaired_slice_is_ready(tmp_path: Path,
                                                                               gate_off: bool) -> None:
    """The slice is recreated at 10m and boots for 5m; the evicted job, pending for want of a sub-block
    (TopologyPlacementFailed), is tried again when the nodes are ready, as Kueue requeues a ClusterQueue's
    inadmissible workloads on node events, with TASFailedNodeReplacement on or off."""
    *objects, job = list(yaml.safe_load_all(TPU_SLICE))
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-slice-repaired"},
           "spec": {"objects": objects, "until": "3h", **({"kueueConfig": GATE_OFF} if gate_off else {}),
                    "capacity": {"pools": [{"name": "tpu-pool", "machineType": "ct6e-standard-4t",
                                            "tpuTopology": "4x4", "numNodes": 4, "autoscaling": False}],
                                 "cloud": {"tpu-pool": {"hostFailures": ["10m"], "bootTime": "5m"}}},
                    "submit": [{"at": "0s", "runFor": "1h", "object": job}]}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    events = [e for e in run_scenario(load_scenario(path)).events if e["event"] in
              ("Evicted", "Pending", "QuotaReserved", "Started", "Finished")]
    assert [(e["t"], e["event"]) for e in events] == [(0, "QuotaReserved"), (0, "Started"), (600, "Evicted"),
                                                     (600, "Pending"), (900, "QuotaReserved"), (900, "Started"),
                                                     (4500, "Finished")]
    assert events[3]["reason"] == ("couldn't assign flavors to pod set main: no topology domains at level: "
                                   "cloud.google.com/gce-topology-subblock")
    assert len(events[5]["nodes"]) == 4


NO_FAIL_FAST = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "featureGates": {"TASFailedNodeReplacementFailFast": False}}
RETRIES = [600, 601, 603, 607, 615, 631, *range(661, 1202, 30)]
"""A failed node at 10m: tried at once, then after 1 s doubling to 30 s (Kueue's second-pass queue)."""


def _waiting(tmp_path: Path, cloud: dict[str, Any], b_runs: str, recovery: str = "") -> list[dict[str, Any]]:
    """Job a (three pods, 1h) on hosts 1-3 of the first sub-block and job b (one pod, ``b_runs``) on its host 4,
    TASFailedNodeReplacementFailFast off; host 1 fails as ``cloud`` says. ``recovery``: waitForPodsReady's
    ``recoveryTimeout`` (a's pods on the lost host are not ready while it waits for a replacement)."""
    config = {**NO_FAIL_FAST, **({"waitForPodsReady": {"timeout": "10m", "recoveryTimeout": recovery}}
                                 if recovery else {})}
    doc = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "tas-no-fail-fast"},
           "spec": {"include": [str(EXAMPLES / "tas-queue.yaml")], "until": "3h", "kueueConfig": config,
                    "capacity": {"pools": [{"name": "tas-pool", "machineType": "n2-standard-16", "numNodes": 8,
                                            "autoscaling": False}], "cloud": {"tas-pool": cloud}},
                    "submit": [{"at": f"{at}s", "file": str(EXAMPLES / "job-subblock.yaml"), "runFor": run_for,
                                "env": {"JOB_NAME": name, "PODS": str(n)}}
                               for at, name, n, run_for in ((0, "a", 3, "1h"), (1, "b", 1, b_runs))]}}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc))
    events = [e for e in run_scenario(load_scenario(path)).events if e["workload"].startswith("default/job-a")]
    started = next(e for e in events if e["event"] == "Started")
    assert started["nodes"] == ["gke-tas-pool-1-0", "gke-tas-pool-2-0", "gke-tas-pool-3-0"]
    return events


def _retried(events: list[dict[str, Any]]) -> list[float]:
    failed = [e for e in events if e["event"] == "SecondPassFailed"]
    assert {e["reason"] for e in failed} <= {"cannot find replacement assignment for unhealthy node: gke-tas-pool-1-0"}
    return [e["t"] for e in failed]


def test_without_fail_fast_the_workload_keeps_its_quota_until_a_node_of_its_domain_is_free(tmp_path: Path) -> None:
    """Kueue's "should update workload TopologyAssignment after a node becomes available" (test/integration/
    singlecluster/tas/tas_test.go, TASFailedNodeReplacementFailFast off): no free host in a's sub-block when host 1
    fails, so a keeps its assignment and quota (no eviction); b finishes at 1211 and the next try (1231) moves a's
    pod to b's host."""
    events = _waiting(tmp_path, {"hostFailures": ["10m"]}, "1210s")
    assert _retried(events) == RETRIES
    assert not [e for e in events if e["event"] == "Evicted"]
    (replaced,) = [e for e in events if e["event"] == "NodeReplaced"]
    assert (replaced["t"], replaced["node"], replaced["nodes"]) == (1231, "gke-tas-pool-1-0", ["gke-tas-pool-4-0"])
    assert _story(events) == [(0, "QuotaReserved", "Quota reserved in ClusterQueue tas-cluster-queue"),
                              (1231, "NodeReplaced", replaced["reason"]), (3600, "Finished", "JobFinished")]


def test_without_fail_fast_a_node_ready_again_ends_the_wait(tmp_path: Path) -> None:
    """Kueue's "node reappears" (tas_test.go: the UnhealthyNodes cleared): host 1 NotReady at 10m fails for a when
    its pods there terminate (5m later); it waits, and the node Ready again at 20m is no longer unhealthy: the tries
    end, a keeps its assignment and runs on."""
    events = _waiting(tmp_path, {"hostNotReady": [{"at": "10m", "for": "10m"}]}, "2h")
    assert _retried(events) == [900, 901, 903, 907, 915, 931, *range(961, 1200, 30)]
    assert _story(events) == [(0, "QuotaReserved", "Quota reserved in ClusterQueue tas-cluster-queue"),
                              (3600, "Finished", "JobFinished")]


def test_without_fail_fast_a_second_lost_node_while_waiting_evicts(tmp_path: Path) -> None:
    """Kueue's node controller (pkg/controller/tas/node_controller.go, evictWorkloadIfNeeded): a workload with an
    unhealthy node that loses another is evicted for multiple node failures, the unhealthy one named first."""
    events = _waiting(tmp_path, {"hostFailures": ["10m", "15m"]}, "2h")
    assert _retried(events) == [t for t in RETRIES if t < 900]
    (evicted,) = [e for e in events if e["event"] == "Evicted"]
    assert (evicted["t"], evicted["cause"], evicted["reason"]) == (
        900, "NodeFailures", "Workload eviction triggered due to multiple TAS assigned node failures, including: "
        "gke-tas-pool-1-0, gke-tas-pool-2-0")
    assert not [e for e in events if e["event"] == "NodeReplaced"]


def test_without_fail_fast_pods_waiting_for_a_replacement_are_not_ready_and_recovery_times_out(
        tmp_path: Path) -> None:
    """Kueue's waitForPodsReady ``recoveryTimeout`` (the live half: tests/cli/test_kubectl_tas.py): a's pods on the
    failed host wait for a replacement that does not come; not ready from 10m, a is evicted 3m later
    (PodsReadyTimeout, its pods waiting for recovery) and requeued."""
    events = _waiting(tmp_path, {"hostFailures": ["10m"]}, "2h", recovery="3m")
    evicted = next(e for e in events if e["event"] == "Evicted")
    assert (evicted["t"], evicted["cause"]) == (780, "PodsReadyTimeout")
    assert evicted["reason"].startswith("Exceeded the PodsReady timeout default/job-a")
    assert _retried(events)[:3] == [600, 601, 603]


def test_without_fail_fast_pods_bound_again_to_their_node_are_ready_again(tmp_path: Path) -> None:
    """The host NotReady at 10m, its pods failed for a at 15m and back when it is Ready at 20m: within a 15m
    recoveryTimeout, a runs on to its end."""
    events = _waiting(tmp_path, {"hostNotReady": [{"at": "10m", "for": "10m"}]}, "2h", recovery="15m")
    assert not [e for e in events if e["event"] == "Evicted"]
    assert [(t, kind) for t, kind, _ in _story(events)] == [(0, "QuotaReserved"), (3600, "Finished")]
