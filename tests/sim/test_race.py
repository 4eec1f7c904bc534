"""Concurrent admission in virtual time: every job on the first capacity that can start it.

Each scenario runs under both policies (``compare_policies``): ``flexq`` races a variant per flavor,
``kueue-compatible`` does what Kueue does, and the tests compare them job by job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flexq.sim.policies import FLEXQ, KUEUE, PolicyRun, compare_policies
from flexq.sim.scenario import load_scenario
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
    assert _flavor(kueue, "1") == "on-demand" and _row(kueue, "1")["started"] == 3 * 3600 + 180
    assert _flavor(flexq, "1") == "on-demand"
    assert _row(flexq, "1")["started"] == _row(kueue, "1")["started"], "a fallback never makes a job wait longer"
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
