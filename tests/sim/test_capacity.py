"""Capacity in virtual time: the issue's acceptance scenarios, each through the scenario runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexq.api import InvalidObject
from flexq.sim.runner import SimResult
from flexq.sim.scenario import ScenarioError, load_capacity, load_scenario
from tests.conftest import GUIDE
from tests.sim.guide_setup import first_event, job, job_events, run_guide

HOUR, DAY = 3600, 86400


def _pool_sizes(result: SimResult) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for e in result.events:
        if e["event"] == "ScaledDown":
            sizes[e["pool"]] = e["nodes"]
    return sizes


def test_guide_flow_with_node_pools(tmp_path: Path) -> None:
    # Job 1 holds Plan A for an hour: DWS's answer after 30 minutes starts job 2 first.
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {available: 4, bootTime: 3m}
      dws-pool: {queuedDelay: 30m}""", job("1", run_for="1h") + job("2", "2s"))
    job1, job2 = job_events(result, "1"), job_events(result, "2")
    started1 = first_event(job1, "Started")
    assert started1["t"] == 180, "on-demand nodes boot in 3 minutes"
    assert [n for n in started1["nodes"] if "on-demand-pool" in n] and len(started1["nodes"]) == 5
    accepted = first_event(job2, "ProvisioningRequest", state="Accepted")
    provisioned = first_event(job2, "ProvisioningRequest", state="Provisioned")
    assert accepted["t"] == 2 and provisioned["t"] == 2 + 30 * 60
    assert accepted["eta"] == provisioned["t"], "the Accepted request says when it expects its nodes"
    assert first_event(job2, "Admitted")["t"] == provisioned["t"]
    assert sum("dws-pool" in n for n in first_event(job2, "Started")["nodes"]) == 4
    assert first_event(job2, "Finished")["t"] == provisioned["t"] + 600
    assert _pool_sizes(result) == {"on-demand-pool": 0, "dws-pool": 0}
    scaled = {e["pool"]: e["t"] for e in result.events if e["event"] == "ScaledDown"}
    assert scaled == {"on-demand-pool": 180 + 3600 + 600, "dws-pool": provisioned["t"] + 600 + 600}


@pytest.mark.parametrize("fallback", [True, False])
def test_plan_a_stocked_out_for_six_hours(tmp_path: Path, fallback: bool) -> None:
    result = run_guide(tmp_path, f"""    cloud:
      on-demand-pool: {{stockouts: [{{from: 0s, to: 6h}}], bootTime: 3m}}
      dws-pool: {{queuedDelay: 30m}}
    fallback: {str(fallback).lower()}""", job("1"), until="8h")
    job1 = job_events(result, "1")
    reserved = [e for e in job1 if e["event"] == "QuotaReserved"]
    if fallback:
        # flexq races both flavors from the start: Plan A waits out its stock-out, DWS answers after 30 minutes.
        assert not [e for e in result.events if e["event"] == "Fallback"]
        unavailable = first_event(job1, "NodesUnavailable")
        assert unavailable["t"] == 0 and "capacity may return in 6h" in unavailable["reason"]
        assert "-variant-on-demand-" in unavailable["variant"]
        assert len(reserved) == 1 and set(reserved[0]["podSets"]["tpu-group"].values()) == {"dws"}
        assert reserved[0]["t"] == 1800 and first_event(job1, "Admitted", t=1800)
        started = first_event(job1, "Started")
        assert started["t"] == 1800 and all("dws-pool" in n or "default-pool" in n for n in started["nodes"])
    else:
        assert set(reserved[0]["podSets"]["tpu-group"].values()) == {"on-demand"}
        assert not [e for e in job1 if e["event"] == "Fallback"]
        waiting = first_event(job1, "NodesUnavailable")
        assert waiting["t"] == 0 and "capacity may return in 6h" in waiting["reason"]
        started = first_event(job1, "Started")
        assert started["t"] == 6 * HOUR + 180, "Kueue-compatible: waits on on-demand until the stock-out ends"
        # ... evicted each time its pods were not ready within 30 minutes (Kueue's waitForPodsReady, on by default
        # since v0.19) and requeued after 60 s doubling (capped at an hour), always on on-demand; its pods are
        # ready at the very moment its last admission's 30 minutes are up: in time.
        evicted = [e["t"] for e in job1 if e["event"] == "Evicted"]
        assert evicted == [1800, 3660, 5580, 7620, 9900, 12660, 16380]
        assert {e["cause"] for e in job1 if e["event"] == "Evicted"} == {"PodsReadyTimeout"}
        assert len(reserved) == 8 and all(set(r["podSets"]["tpu-group"].values()) == {"on-demand"} for r in reserved)


@pytest.mark.parametrize("fallback", [False, True])
def test_dws_never_fulfilled_is_retried_then_deactivated(tmp_path: Path, fallback: bool) -> None:
    result = run_guide(tmp_path, f"""    cloud:
      on-demand-pool: {{available: 4, bootTime: 3m}}
      dws-pool: {{queuedDelay: never}}
    fallback: {str(fallback).lower()}""", job("1", run_for="60d") + job("2", "2s"), until="40d")
    job2 = job_events(result, "2")
    failed = [e["t"] for e in job2 if e["event"] == "ProvisioningRequest" and e["state"] == "Failed"]
    accepted = [e["t"] for e in job2 if e["event"] == "ProvisioningRequest" and e["state"] == "Accepted"]
    assert len(accepted) == 4 and len(failed) == 4, "the first try and 3 retries"
    assert [f - a for a, f in zip(accepted, failed, strict=True)] == [7 * DAY] * 4
    assert [a - f for f, a in zip(failed, accepted[1:], strict=False)] == [60, 120, 240], "60 s x 2^(n-1)"
    assert not [e for e in job2 if e["event"] == "Admitted"]
    if fallback:
        # flexq: only the DWS variant is deactivated; the job still races for Plan A, where job 1 runs for 60 days.
        variant = next(e for e in result.events if e["event"] == "Deactivated")
        assert "-variant-dws-" in variant["workload"] and variant["t"] == failed[-1]
        assert not [e for e in job2 if e["event"] == "Deactivated"]
        row = next(r for r in result.summary()["workloads"] if r["workload"] == job2[0]["workload"])
        assert row["state"] == "Pending"
        return
    deactivated = first_event(job2, "Deactivated")
    assert deactivated["t"] == failed[-1] and "dws-prov" in deactivated["reason"]


def test_flex_start_nodes_expire_and_the_workload_is_requeued(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {available: 4}
      dws-pool: {queuedDelay: 10m}""".replace(
        "queuedProvisioning: true}}", "queuedProvisioning: true}}"),
        job("1", run_for="30d") + job("2", "2s", run_for="10d"), until="9d")
    job2 = job_events(result, "2")
    first_start = first_event(job2, "Started")["t"]
    evicted = first_event(job2, "Evicted")
    assert evicted["t"] == first_start + 7 * DAY and "maxRunDuration" in evicted["reason"]
    expired = next(e for e in result.events if e["event"] == "NodesExpired")
    assert expired["t"] == evicted["t"] and expired["pool"] == "dws-pool"
    again = [e for e in job2 if e["event"] == "ProvisioningRequest" and e["state"] == "Accepted"]
    assert len(again) == 2 and again[1]["t"] == evicted["t"], "requeued: a new request for fresh nodes"




def test_max_nodes_not_a_slice_multiple(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("""apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {name: bad}
spec:
  capacity:
    pools:
      - {name: p, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 3}
      - {name: q, machineType: ct6e-standard-4t, maxNodes: 4, queuedProvisioning: true, autoscaling: false}
""")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "spec.capacity.pools[0]" in str(info.value) and "--max-nodes=3 is not a multiple" in str(info.value)
    path.write_text(path.read_text().replace("maxNodes: 3", "maxNodes: 4"))
    with pytest.raises(ScenarioError, match="requires --enable-autoscaling"):
        load_scenario(path)


def test_cost_per_job_flex_start_is_cheaper(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {available: 4, bootTime: 3m}
      dws-pool: {queuedDelay: 30m}""", job("1", run_for="1h") + job("2", "2s"))
    costs = {row["job"].rsplit("-", 1)[-1]: row["cost"] for row in result.summary()["workloads"]}
    # An hour of a 4-host v6e slice ($2.70 per chip-hour, 4 chips a host) plus the head's share of a CPU node; job 2
    # runs 10 minutes on flex-start. Job 1's DWS request was withdrawn before it was provisioned: it cost nothing.
    assert costs["1"] == pytest.approx(4 * 10.80 + 2 / 15.9 * 0.777, abs=0.01)
    assert costs["2"] == pytest.approx(4 * 10.80 * 0.47 / 6 + 2 / 15.9 * 0.777 / 6, abs=0.01)


def test_dws_delay_trace_and_revoked_capacity(tmp_path: Path) -> None:
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {available: 4}
      dws-pool:
        queuedDelay: 30m
        queuedDelayTrace: [{at: 0s, delay: 2h}, {at: 1d, delay: 10m}]
        revokeAfter: 1h""", job("1", run_for="30d") + job("2", "2s", run_for="3h"), until="2d")
    job2 = job_events(result, "2")
    requests = [e for e in job2 if e["event"] == "ProvisioningRequest"]
    first = requests[0]
    assert first["state"] == "Accepted" and first["eta"] == 2 + 2 * HOUR, "the trace says 2h at t=0"
    provisioned = first_event(job2, "ProvisioningRequest", state="Provisioned")
    revoked = first_event(job2, "ProvisioningRequest", state="CapacityRevoked")
    assert revoked["t"] == provisioned["t"] + HOUR
    evicted = first_event(job2, "Evicted")
    assert evicted["t"] == revoked["t"] and "capacity revoked" in evicted["reason"]
    again = [e for e in requests if e["state"] == "Accepted"]
    assert len(again) >= 2 and again[1]["t"] == revoked["t"], "requeued with a fresh request"


def test_booking_expires_when_pods_cannot_start(tmp_path: Path) -> None:
    # The Ray head asks for more CPU than the default pool's node has (and that pool does not autoscale):
    # the provisioned TPU slice stays unused, and its booking expires.
    text_job = (GUIDE / "rayjob-tpu-v6e-dws.yaml").read_text().replace('cpu: "2"', 'cpu: "20"')
    job_file = tmp_path / "big-head.yaml"
    job_file.write_text(text_job)
    queue = (GUIDE / "dws-tpu-queue.yaml").read_text().replace("nominalQuota: 10\n", "nominalQuota: 100\n") \
        .replace("nominalQuota: 16", "nominalQuota: 0")  # Plan A has no TPU quota: the job goes to dws
    queue_file = tmp_path / "queue.yaml"
    queue_file.write_text(queue)
    booking = run_guide(tmp_path, """    cloud:
      on-demand-pool: {available: 0}
      dws-pool: {queuedDelay: 5m}
    fallback: false""", f"    - {{at: 0s, file: {job_file}, env: {{JOB_ID: \"1\"}}, runFor: 10m}}\n", until="2h",
                        queue=queue_file)
    job1 = job_events(booking, "1")
    provisioned = first_event(job1, "ProvisioningRequest", state="Provisioned")
    expired = first_event(job1, "ProvisioningRequest", state="BookingExpired")
    assert expired["t"] == provisioned["t"] + 600
    retry = first_event(job1, "Evicted")
    assert retry["t"] == expired["t"] and "Retry" in retry["reason"]
    assert not [e for e in job1 if e["event"] == "Started"]


def test_capacity_from_a_trace_file(tmp_path: Path) -> None:
    (tmp_path / "plan-a.csv").write_text("time,available\n0s,0\n2h,4  # Plan A comes back after 2 hours\n")
    result = run_guide(tmp_path, """    cloud:
      on-demand-pool: {traceFile: plan-a.csv, bootTime: 3m}
    fallback: false""", job("1"), until="4h")
    started = first_event(job_events(result, "1"), "Started")
    assert started["t"] == 2 * HOUR + 180
    (tmp_path / "plan-a.csv").write_text("0s,zero\n")
    with pytest.raises(ScenarioError, match=r"plan-a\.csv:1: capacity trace"):
        run_guide(tmp_path, """    cloud:
      on-demand-pool: {traceFile: plan-a.csv}""", job("1"))


def test_a_negative_available_count_is_refused_naming_its_field_and_line(tmp_path: Path) -> None:
    """A capacity file's pool with fewer than no machines is refused (the server does not start on it), not read as
    unlimited or as none."""
    path = tmp_path / "capacity.yaml"
    path.write_text("cloud:\n  on-demand-pool:\n    available: -1\n")
    with pytest.raises(InvalidObject) as info:
        load_capacity(path)
    assert [(e.line, e.path) for e in info.value.errors] == [(3, "capacity.cloud.on-demand-pool.available")]
    assert "greater than or equal to 0" in info.value.errors[0].message
    path.write_text("cloud:\n  on-demand-pool:\n    available: 0\n")
    assert load_capacity(path).cloud.spec("on-demand-pool", "ct6e-standard-4t").available == 0
