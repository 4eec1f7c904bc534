"""A job no node pool can ever hold (more hosts than the pool's maximum) waits with the reason, as GKE's autoscaler
does not scale up for it, instead of falling back and coming back forever; its DWS request fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.conftest import GUIDE
from tests.sim.guide_setup import guide_scenario


def _events(tmp_path: Path, on_demand_tpu: int, dws_tpu: str) -> list[dict[str, Any]]:
    queue = tmp_path / "queue.yaml"
    queue.write_text((GUIDE / "dws-tpu-queue.yaml").read_text()
                     .replace("nominalQuota: 16", f"nominalQuota: {on_demand_tpu}")
                     .replace('nominalQuota: 1000000000 # "Infinite" quota', f"nominalQuota: {dws_tpu}")
                     .replace("nominalQuota: 40\n", "nominalQuota: 400\n").replace("75Gi", "750Gi"))
    job = tmp_path / "job.yaml"  # two 4x4 slices: 8 hosts, in pools of at most 4 nodes
    job.write_text((GUIDE / "rayjob-tpu-v6e-dws.yaml").read_text().replace("- replicas: 1", "- replicas: 2"))
    submit = f"    - {{at: 0s, file: {job}, env: {{JOB_ID: \"1\"}}, runFor: 10m}}\n"
    path = guide_scenario(tmp_path, """    cloud:
      on-demand-pool: {bootTime: 3m}
      dws-pool: {queuedDelay: 10m}""", submit, "6h", queue=queue)
    return run_scenario(load_scenario(path)).events


def test_a_pod_set_larger_than_its_pool_is_unschedulable_once(tmp_path: Path) -> None:
    events = _events(tmp_path, 64, "0")
    kinds = [e["event"] for e in events]
    assert "Fallback" not in kinds and "NodesUnavailable" not in kinds
    # Told once an admission; its pods never ready, each admission ends 30 minutes on (Kueue's waitForPodsReady, on
    # by default since v0.19) and the next comes after the backoff (60 s doubling, up to an hour).
    assert kinds.count("Admitted") == kinds.count("Unschedulable") == kinds.count("Evicted") + 1 == 8
    assert [e["t"] for e in events if e["event"] == "Evicted"] == [1800, 3660, 5580, 7620, 9900, 12660, 16380]
    unschedulable = next(e for e in events if e["event"] == "Unschedulable")
    assert unschedulable["reason"] == ("pod set tpu-group needs 8 nodes of node pool on-demand-pool, more than it "
                                       "can hold (--max-nodes=4): no scale-up can place it")


def test_a_provisioning_request_larger_than_its_pool_fails_and_is_retried_then_rejected(tmp_path: Path) -> None:
    events = _events(tmp_path, 0, '1000000000 # "Infinite" quota')
    failed = [e for e in events if e["event"] == "ProvisioningRequest" and e["state"] == "Failed"]
    assert len(failed) == 4 and "8 node(s) asked of node pool dws-pool, more than it can hold (--max-nodes=4)" in \
        failed[0]["reason"]
    assert [e["event"] for e in events][-1] == "Deactivated"


def test_a_provisioning_request_no_node_pool_matches_fails_and_the_workload_is_not_admitted(tmp_path: Path) -> None:
    # Without the queued-provisioning toleration no pool can hold the DWS pods: the request is not provisioned.
    queue = tmp_path / "queue.yaml"
    queue.write_text((GUIDE / "dws-tpu-queue.yaml").read_text().replace("nominalQuota: 16", "nominalQuota: 0"))
    job = tmp_path / "job.yaml"
    job.write_text((GUIDE / "rayjob-tpu-v6e-dws.yaml").read_text().replace(
        '              - key: "cloud.google.com/gke-queued"\n                operator: "Exists"\n'
        '                effect: "NoSchedule"\n', ""))
    submit = f"    - {{at: 0s, file: {job}, env: {{JOB_ID: \"1\"}}, runFor: 10m}}\n"
    path = guide_scenario(tmp_path, "    cloud:\n      dws-pool: {queuedDelay: 10m}", submit, "6h", queue=queue)
    events = run_scenario(load_scenario(path)).events
    requests = [e for e in events if e["event"] == "ProvisioningRequest"]
    assert {e["state"] for e in requests} == {"Failed"} and len(requests) == 4, "never Provisioned, retried 3 times"
    assert requests[0]["reason"].endswith(
        "-dws-prov-1 Failed (CapacityIsNotFound): no node pool matches: pod set tpu-group does not tolerate the taint "
        "cloud.google.com/gke-queued=true:NoSchedule of node pool dws-pool")
    checks = [e["state"] for e in events if e["event"] == "AdmissionCheck" or e.get("check") == "dws-prov"]
    assert checks == ["Retry", "Retry", "Retry", "Rejected"]
    kinds = [e["event"] for e in events]
    assert "Admitted" not in kinds and "Started" not in kinds and kinds[-1] == "Deactivated"
