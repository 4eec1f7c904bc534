"""Random outages: seeded stock-out windows over the scenario's horizon, and the fallback they cause."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from flexq.capacity.cloud import random_outages
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import Scenario, ScenarioError, load_scenario
from tests.conftest import GUIDE
from tests.sim.guide_setup import guide_scenario

DAY = 86400


def test_random_outages_are_a_pure_function_of_their_arguments() -> None:
    windows = random_outages(2 * DAY, 4 * 3600, 0, 60 * DAY, "7:pool")
    assert windows == random_outages(2 * DAY, 4 * 3600, 0, 60 * DAY, "7:pool")
    assert windows != random_outages(2 * DAY, 4 * 3600, 0, 60 * DAY, "8:pool")
    assert 15 <= len(windows) <= 45, "about one outage every 2 days and 4 hours"
    assert all(0 < start < end for start, end in windows)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(windows)), "ordered, apart"
    assert windows[-1][0] < 60 * DAY
    later = random_outages(2 * DAY, 4 * 3600, 10 * DAY, 20 * DAY, 1)
    assert later and all(10 * DAY < start < 20 * DAY for start, _ in later)
    with pytest.raises(ValueError, match="must be positive"):
        random_outages(0, 1, 0, 10, 0)


def _scenario(tmp_path: Path, outages: str, submit: str = "", until: str = "until: 10d",
              name: str = "scenario.yaml", fallback: bool = True) -> Path:
    cloud = ("    cloud:\n"
             f"      on-demand-pool: {{stockouts: [{{from: 0s, to: 1h}}], bootTime: 3m, outages: {outages}}}\n"
             "      dws-pool: {queuedDelay: 30m}")
    return guide_scenario(tmp_path, cloud, submit, until.removeprefix("until: ").strip(), name=name,
                          settings=f"    seed: 3\n    fallback: {str(fallback).lower()}\n")


def _windows(scenario: Scenario) -> tuple[tuple[float, float], ...]:
    assert scenario.capacity is not None
    return scenario.capacity.cloud.spec("on-demand-pool", "ct6e-standard-4t").stockouts


def test_outages_are_deterministic_and_follow_the_seed(tmp_path: Path) -> None:
    first = _windows(load_scenario(_scenario(tmp_path, "{meanTimeBetween: 1d, meanDuration: 4h}")))
    again = _windows(load_scenario(_scenario(tmp_path, "{meanTimeBetween: 1d, meanDuration: 4h}", name="b.yaml")))
    assert first == again
    assert first[0] == (0, 3600), "the written stock-outs stay, the drawn ones follow"
    assert len(first) > 2 and first[-1][0] < 10 * DAY, "drawn over the scenario's 10 days"
    assert first[1:] == random_outages(DAY, 4 * 3600, 0, 10 * DAY, "3:on-demand-pool"), "capacity seed and key"
    seeded = _windows(load_scenario(_scenario(tmp_path, "{meanTimeBetween: 1d, meanDuration: 4h, seed: 9}")))
    assert seeded[1:] == random_outages(DAY, 4 * 3600, 0, 10 * DAY, "9:on-demand-pool") != first[1:]
    bounded = _windows(load_scenario(_scenario(
        tmp_path, "{meanTimeBetween: 1d, meanDuration: 4h, from: 2d, for: 3d}", until="")))
    assert bounded[1:] and all(2 * DAY < start < 5 * DAY for start, _ in bounded[1:])


def _job(job_id: int, at: float) -> str:
    return (f"    - {{at: {at}, file: {GUIDE / 'rayjob-tpu-v6e-dws.yaml'}, env: {{JOB_ID: \"{job_id}\"}}, "
            "runFor: 10m}\n")


@pytest.mark.parametrize("fallback", [True, False])
def test_outages_are_stock_outs_that_send_jobs_to_plan_b(tmp_path: Path, fallback: bool) -> None:
    outages = "{meanTimeBetween: 2d, meanDuration: 6h, seed: 1}"
    windows = _windows(load_scenario(_scenario(tmp_path, outages)))[1:]
    start, end = next(w for w in windows if w[1] - w[0] > 1800)
    up = windows[0][0] - 2 * 3600  # well before the first drawn outage, after the written one
    assert up > 3600
    submit = _job(1, start + 60) + _job(2, up)
    result = run_scenario(load_scenario(_scenario(tmp_path, outages, submit, fallback=fallback)))
    by_job = {w.owner.split("-")[-1]: w.key for w in result.workloads}

    def log(job: str) -> list[dict[str, Any]]:
        return [e for e in result.events if e["workload"] == by_job[job]]

    in_outage, in_service = log("1"), log("2")
    started = next(e for e in in_outage if e["event"] == "Started")
    if fallback:
        # flexq races both flavors: Plan A waits out the outage, DWS delivers 30 minutes later and starts the job.
        assert not [e for e in in_outage if e["event"] == "Fallback"]
        assert started["t"] == start + 60 + 1800, "DWS delivers 30 minutes later"
        assert all("dws-pool" in n or "default-pool" in n for n in started["nodes"])
    else:
        assert not [e for e in in_outage if e["event"] == "Fallback"]
        assert started["t"] == end + 180, "waits for the outage to end, then boots"
    assert not [e for e in in_service if e["event"] == "Fallback"]
    assert next(e for e in in_service if e["event"] == "Started")["t"] == up + 180


def test_outages_need_an_end(tmp_path: Path) -> None:
    path = _scenario(tmp_path, "{meanTimeBetween: 1d, meanDuration: 4h}", until="")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert "spec.capacity.cloud.on-demand-pool.outages: random outages need an end" in str(caught.value)
    assert str(caught.value).startswith(f"{path}:")
    with pytest.raises(ScenarioError, match="meanDuration: must be more than 0"):
        load_scenario(_scenario(tmp_path, "{meanTimeBetween: 1d, meanDuration: 0}"))
