"""The oracle: hand-computed schedules, and flexq's policy measured against it on every example scenario."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flexq.sim.policies import FLEXQ, KUEUE, LOWER_BOUND, ORACLE, PolicyRun, compare_policies
from flexq.sim.report import summarize
from flexq.sim.scenario import load_scenario
from tests.conftest import GUIDE
from tests.sim.guide_setup import guide_scenario, job

EXAMPLES = sorted(p for p in (GUIDE.parent).rglob("scenario*.yaml"))


def _compare(tmp_path: Path, cloud: str, submit: str, until: str = "1d") -> dict[str, PolicyRun]:
    return compare_policies(load_scenario(guide_scenario(tmp_path, "    cloud:\n" + cloud, submit, until)))


def _plan(run: PolicyRun) -> dict[str, tuple[Any, Any]]:
    """job id -> (start, TPU flavor)"""
    return {str(r["job"]).rsplit("-", 1)[1]: (r["started"], (r["flavors"] or {}).get("tpu-group", {}).get("*"))
            for r in run.rows}


def test_oracle_takes_plan_a_when_it_frees_before_dws_answers(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4, bootTime: 3m}\n"
                              "      dws-pool: {queuedDelay: 2h}\n",
                    job("1", run_for="1h") + job("2", "1m", run_for="1h") + job("3", "2m", run_for="1h"))
    # Job 1 boots Plan A (3m); job 2 takes Plan A's nodes as job 1 leaves them (no boot); job 3's DWS answer
    # (2m + 2h) comes before Plan A frees again (3h3m).
    assert _plan(runs[ORACLE]) == {"1": (180, "on-demand"), "2": (3780, "on-demand"), "3": (7320, "dws")}


def test_oracle_keeps_arrival_order_and_pool_maximum(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4, bootTime: 1m}\n"
                              "      dws-pool: {queuedDelay: never}\n",
                    job("1", run_for="2h") + job("2", "1m", run_for="10m") + job("3", "2m", run_for="10m"))
    # One slice of Plan A, DWS never answers: one job at a time, in arrival order, each reusing the slice.
    assert _plan(runs[ORACLE]) == {"1": (60, "on-demand"), "2": (60 + 7200, "on-demand"),
                                   "3": (60 + 7200 + 600, "on-demand")}


def test_oracle_holds_quota_while_a_dws_request_waits(tmp_path: Path) -> None:
    # default-cpu holds one Ray head (2 cpus): a job's quota is held from its ProvisioningRequest on, as Kueue holds
    # it, so job 2 asks DWS only when job 1 finishes (1h10m) and starts 10 minutes later, not when the slice frees.
    queue = tmp_path / "queue.yaml"
    queue.write_text((GUIDE / "dws-tpu-queue.yaml").read_text().replace("nominalQuota: 10\n", "nominalQuota: 2\n"))
    scenario = guide_scenario(tmp_path, "    cloud:\n      on-demand-pool: {available: 0}\n"
                                        "      dws-pool: {queuedDelay: 10m}\n",
                              job("1", run_for="1h") + job("2", run_for="1h"), "1d", queue=queue)
    runs = compare_policies(load_scenario(scenario))
    assert _plan(runs[ORACLE]) == {"1": (600, "dws"), "2": (600 + 3600 + 600, "dws")}
    assert _plan(runs[ORACLE]) == {k: (v[0], "dws") for k, v in _plan(runs[FLEXQ]).items()}, "flexq does the same"


def test_oracle_job_nothing_can_hold_never_starts(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {available: 0}\n      dws-pool: {queuedDelay: never}\n",
                    job("1"), until="2d")
    assert _plan(runs[ORACLE]) == {"1": (None, None)}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_flexq_is_near_the_oracle_and_never_above_kueue_on_every_example(path: Path) -> None:
    scenario = load_scenario(path)
    if scenario.capacity is None:
        pytest.skip("no capacity modelled: the policies are the same")
    runs = compare_policies(scenario)
    p95 = {name: summarize(run.rows, run.events, set())["wait"]["p95"] for name, run in runs.items()}
    assert set(p95) == {KUEUE, FLEXQ, ORACLE, LOWER_BOUND}
    assert p95[FLEXQ] <= 1.1 * p95[ORACLE], p95
    assert p95[FLEXQ] <= p95[KUEUE], p95
    assert p95[LOWER_BOUND] <= min(p95[FLEXQ], p95[ORACLE]), p95
