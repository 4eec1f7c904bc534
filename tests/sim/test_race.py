"""Concurrent admission in virtual time: every job on the first capacity that can start it.

Each scenario runs under both policies (``compare_policies``): ``flexq`` races a variant per flavor,
``kueue-compatible`` does what Kueue does, and the tests compare them job by job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flexq.capacity.driver import CapacityDriver, provisioning_settings
from flexq.capacity.record import Request
from flexq.scheduler.events import Event, EventKind
from flexq.scheduler.scheduler import Scheduler
from flexq.sim.policies import FLEXQ, KUEUE, PolicyRun, compare_policies
from flexq.sim.runner import SimResult, run_scenario
from flexq.sim.scenario import load_scenario
from flexq.timers import Kernel
from tests.conftest import GUIDE
from tests.sim.guide_setup import guide_scenario, job


def _compare(tmp_path: Path, cloud: str, submit: str, until: str = "1d") -> dict[str, PolicyRun]:
    return compare_policies(load_scenario(guide_scenario(tmp_path, "    cloud:\n" + cloud, submit, until)))


def _row(run: PolicyRun, job_id: str) -> dict[str, Any]:
    return next(r for r in run.rows if str(r["job"]).endswith(f"-dws-{job_id}"))


def _flavor(run: PolicyRun, job_id: str) -> str | None:
    flavors = _row(run, job_id)["flavors"]
    return None if flavors is None else str(flavors["tpu-group"]["google.com/tpu"])


def _events(run: PolicyRun, job_id: str, kind: str) -> list[dict[str, Any]]:
    key = _row(run, job_id)["workload"]
    return [e for e in run.events if e["event"] == kind and e["workload"] == key]


def _max_pool(run: PolicyRun, pool: str) -> int:
    return max((sizes.get(pool, (0, 0))[0] for _, sizes in run.nodes), default=0)


def test_plan_a_busy_and_dws_slow_the_waiting_job_takes_plan_a_when_it_frees(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4, bootTime: 3m}\n"
                              "      dws-pool: {queuedDelay: 2h}\n",
                    job("1", run_for="1h") + job("2", "1m", run_for="1h"))
    flexq, kueue = runs[FLEXQ], runs[KUEUE]
    # Job 1 holds Plan A from 3m (boot) to 1h3m; job 2 raced both flavors and starts on Plan A when it frees.
    assert _row(flexq, "1")["started"] == 180 and _flavor(flexq, "1") == "on-demand"
    assert _flavor(flexq, "2") == "on-demand" and _row(flexq, "2")["started"] == 180 + 3600
    withdrawn = [e for e in _events(flexq, "2", "ProvisioningRequest") if e["state"] == "Withdrawn"]
    assert len(withdrawn) == 1 and "before it was provisioned: no cost" in withdrawn[0]["reason"]
    assert _max_pool(flexq, "dws-pool") == 0, "no DWS node was ever brought up"
    assert _row(flexq, "2")["cost"] == _row(flexq, "1")["cost"], "the same hour on the same pool, nothing wasted"
    # Kueue's job 2 waits on DWS for its 2-hour answer.
    assert _flavor(kueue, "2") == "dws" and _row(kueue, "2")["started"] == 60 + 2 * 3600


def test_plan_a_stocked_out_and_dws_never_answers_the_job_starts_when_plan_a_recovers(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4, bootTime: 3m, stockouts: [{from: 0s, to: 3h}]}\n"
                              "      dws-pool: {queuedDelay: never}\n", job("1", run_for="1h"))
    flexq, kueue = runs[FLEXQ], runs[KUEUE]
    # Kueue: admitted on on-demand at once, its pods not ready in 30 minutes, evicted and requeued with backoff (its
    # waitForPodsReady, on by default since v0.19) until an admission at 3h01m, whose nodes boot by 3h04m.
    assert _flavor(kueue, "1") == "on-demand" and _row(kueue, "1")["started"] == 3 * 3600 + 60 + 180
    assert [e["cause"] for e in _events(kueue, "1", "Evicted")] == ["PodsReadyTimeout"] * 5
    # flexq reserves a flavor whose nodes can come: on-demand as the stock-out ends, its nodes up 3 minutes later.
    assert _flavor(flexq, "1") == "on-demand" and _row(flexq, "1")["started"] == 3 * 3600 + 180
    assert _row(flexq, "1")["started"] <= _row(kueue, "1")["started"], "a fallback never makes a job wait longer"
    assert not [e for e in flexq.events if e["event"] == "Fallback"]
    withdrawn = [e for e in _events(flexq, "1", "ProvisioningRequest") if e["state"] == "Withdrawn"]
    assert len(withdrawn) == 1, "the DWS request that never came is withdrawn once Plan A starts the job"


def test_plan_a_stocked_out_and_dws_answers_the_job_runs_on_dws_and_stays(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4, bootTime: 3m, stockouts: [{from: 0s, to: 1h}]}\n"
                              "      dws-pool: {queuedDelay: 20m}\n", job("1", run_for="2h"))
    flexq = runs[FLEXQ]
    assert _flavor(flexq, "1") == "dws" and _row(flexq, "1")["started"] == 20 * 60
    # flexq's own policy never migrates a running job: Plan A's recovery at 1h changes nothing.
    assert not [e for e in flexq.events if e["event"] == "Evicted"]
    assert _row(flexq, "1")["finished"] == 20 * 60 + 2 * 3600


def test_three_jobs_on_the_guides_one_slice_pools_none_is_deactivated(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4, bootTime: 3m}\n"
                              "      dws-pool: {queuedDelay: 1m}\n",
                    job("1", run_for="30m") + job("2", run_for="20m") + job("3", run_for="10m"))
    flexq, kueue = runs[FLEXQ], runs[KUEUE]
    assert not [e for e in flexq.events if e["event"] == "Deactivated"]
    first_free = min(float(_row(flexq, j)["finished"]) for j in ("1", "2"))
    assert _row(flexq, "3")["started"] == first_free, "the third runs as soon as either slice frees"
    waits = [e for e in _events(flexq, "3", "ProvisioningRequest") if "waits for room" in e["reason"]]
    assert waits and "a slice frees at t=" in waits[0]["reason"], "a pool at its maximum is a wait, with an ETA"
    # Kueue fails the request four times ("at its maximum") and deactivates the third job (its issue #5129).
    assert [e["workload"] for e in kueue.events if e["event"] == "Deactivated"] == [_row(kueue, "3")["workload"]]


def test_one_job_at_a_time_no_job_waits_longer_under_flexq(tmp_path: Path) -> None:
    cloud = ("      on-demand-pool: {available: 4, bootTime: 3m,\n"
             "                       stockouts: [{from: 2h, to: 6h}, {from: 12h, to: 13h}]}\n"
             "      dws-pool: {queuedDelay: {exponential: 90m}}\n")
    submit = "".join(job(str(i), f"{i * 3}h", run_for="1h") for i in range(8))
    runs = _compare(tmp_path, cloud, submit, until="2d")
    for i in range(8):
        flexq, kueue = _row(runs[FLEXQ], str(i))["wait"], _row(runs[KUEUE], str(i))["wait"]
        assert flexq is not None and kueue is not None, i
        assert flexq <= kueue, (i, flexq, kueue)


def _kueue_policy_queue(tmp_path: Path, constraints: str = "") -> Path:
    """The guide's queue with its ClusterQueue in v1beta2 asking for Kueue's Concurrent Admission."""
    text = (GUIDE / "dws-tpu-queue.yaml").read_text().replace("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue",
                                                              "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue")
    policy = "  concurrentAdmissionPolicy:\n    migration:\n      mode: TryPreferredFlavors\n" + constraints
    path = tmp_path / "queue.yaml"
    path.write_text(text.replace("  namespaceSelector: {}\n", "  namespaceSelector: {}\n" + policy, 1))
    return path


def _migration_run(tmp_path: Path, run_for: str, constraints: str = "") -> SimResult:
    cloud = ("    cloud:\n      on-demand-pool: {available: 4, bootTime: 3m, stockouts: [{from: 0s, to: 1h}]}\n"
             "      dws-pool: {queuedDelay: 20m}\n")
    return run_scenario(load_scenario(guide_scenario(tmp_path, cloud, job("1", run_for=run_for), "10d",
                                                     queue=_kueue_policy_queue(tmp_path, constraints))))


def _job_events(result: SimResult) -> list[tuple[float, str, str]]:
    key = result.workloads[0].key
    return [(e["t"], e["event"], str(e.get("variant") or e.get("flavor") or "")) for e in result.events
            if e["workload"] == key and e["event"] in ("Started", "Evicted", "Finished")]


def test_try_preferred_flavors_migrates_a_job_that_would_be_cut_short_where_it_runs(tmp_path: Path) -> None:
    # Eight days: more than flex-start's 7-day limit, so moving to Plan A when it recovers finishes it sooner.
    result = _migration_run(tmp_path, "8d")
    events = _job_events(result)
    assert [(t, kind) for t, kind, _v in events] == [(1200, "Started"), (3780, "Evicted"), (3780, "Started"),
                                                      (3780 + 8 * 86400, "Finished")]
    evicted = next(e for e in result.events if e["event"] == "Evicted")
    assert evicted["cause"] == "FlavorMigration" and "more favorable resource flavor on-demand" in evicted["reason"]
    assert result.summary()["workloads"][0]["flavors"]["tpu-group"]["google.com/tpu"] == "on-demand"


def test_no_migration_when_the_job_finishes_sooner_where_it_runs(tmp_path: Path) -> None:
    result = _migration_run(tmp_path, "3h")
    assert [(t, kind) for t, kind, _v in _job_events(result)] == [(1200, "Started"), (1200 + 3 * 3600, "Finished")]
    refused = next(e for e in result.events if "no migration to flavor on-demand" in str(e.get("reason")))
    assert refused["t"] == 3600 and "it finishes sooner where it runs (t=3h20m) than moved (t=4h)" in refused["reason"]
    assert not [e for e in result.events if e["event"] == "ScaledUp"], "no Plan A node booted for a refused move"


def test_last_acceptable_flavor_keeps_a_job_where_it_runs(tmp_path: Path) -> None:
    result = _migration_run(tmp_path, "8d", "      constraints:\n        lastAcceptableFlavorName: default-cpu\n")
    # on-demand is below the last acceptable flavor: the job stays on DWS until its nodes' 7 days are up.
    evictions = [(e["t"], e["cause"]) for e in result.events if e["event"] == "Evicted"]
    assert evictions[0] == (1200 + 7 * 86400, "NodesExpired")


def test_capacity_provisioned_for_a_losing_variant_is_released_and_billed_as_waste() -> None:
    scenario = load_scenario(GUIDE / "scenario-capacity.yaml")
    assert scenario.capacity is not None
    kernel = Kernel()
    notes: list[Any] = []
    driver = CapacityDriver(scenario.capacity, Scheduler(), kernel, notes.extend, lambda _k, _t: None,
                            provisioning_settings({}))
    driver.records.of("default/job-variant-dws-1").request = Request("dws-prov", "job-abc12-dws-prov-1", "dws-pool")
    created, _why = driver.cluster.scale_up("dws-pool", 4, 0.0, booked_for="default/job-variant-dws-1", ready_at=0.0)
    assert len(created) == 4
    kernel.schedule(1800.0, lambda: None)
    kernel.step()  # half an hour later, the variant loses its race
    driver.handle(Event(1800.0, EventKind.FINISHED, "default/job-variant-dws-1", "cluster-queue", "lost",
                        extra={"finishedReason": "VariantWithdrawn", "parent": "default/job-abc12"}))
    hourly = driver.cluster.pools["dws-pool"].hourly
    assert driver.waste == {"default/job-abc12": pytest.approx(4 * hourly / 2)}
    assert driver.costs["default/job-abc12"] == pytest.approx(4 * hourly / 2), "the waste is the job's to pay"
    assert driver.cluster.pool_size("dws-pool") == 0, "released at once, not left to scale down"
    (note,) = [n for n in notes if n.extra.get("state") == "Withdrawn"]
    assert note.workload == "default/job-abc12" and f"released (${4 * hourly / 2:.2f} billed)" in note.reason


MIGRATION_GUARD = """apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {name: migration-guard}
spec:
  objects:
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: reservation}}
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {name: spot}}
    - apiVersion: kueue.x-k8s.io/v1beta2
      kind: ClusterQueue
      metadata: {name: cq}
      spec:
        namespaceSelector: {}
        concurrentAdmissionPolicy: {migration: {mode: TryPreferredFlavors}}
        resourceGroups:
          - coveredResources: [cpu]
            flavors:
              - {name: reservation, resources: [{name: cpu, nominalQuota: 4}]}
              - {name: spot, resources: [{name: cpu, nominalQuota: 16}]}
    - {apiVersion: kueue.x-k8s.io/v1beta2, kind: LocalQueue, metadata: {name: lq, namespace: default},
       spec: {clusterQueue: cq}}
  submit:
""" + "".join(f"""    - at: {at}
      runFor: 10m
      object:
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: {name}, labels: {{kueue.x-k8s.io/queue-name: lq}}}}
        spec:
          template:
            spec:
              restartPolicy: Never
              containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: 4}}}}}}]
""" for name, at in (("a", "0s"), ("b", "1m")))


def test_no_migration_without_node_pools_when_the_job_finishes_sooner_where_it_runs(tmp_path: Path) -> None:
    # a holds the reservation from 0 to 10m; b runs on spot from 1m. At 10m b's reservation variant is admitted: moved,
    # b would start over and end at 20m; where it runs it ends at 11m, so it stays.
    path = tmp_path / "scenario.yaml"
    path.write_text(MIGRATION_GUARD)
    result = run_scenario(load_scenario(path))
    b = next(r for r in result.summary()["workloads"] if r["job"] == "Job default/b")
    assert (b["flavors"], b["started"], b["finished"]) == ({"main": {"cpu": "spot"}}, 60, 660)
    assert not [e for e in result.events if e["event"] == "Evicted"]
    refused = next(e for e in result.events if "no migration to flavor reservation" in str(e.get("reason")))
    assert refused["t"] == 600 and "it finishes sooner where it runs (t=11m) than moved (t=20m)" in refused["reason"]
