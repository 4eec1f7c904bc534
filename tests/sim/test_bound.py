"""The clairvoyant lower bound: hand-computed cases, and no policy beating it on a week of stock-outs."""

from __future__ import annotations

from pathlib import Path

from flexq.scheduler.model import ClusterQueueSpec, FlavorSpec, PodSet, Quota, ResourceGroup
from flexq.scheduler.quota import QuotaTree
from flexq.scheduler.scheduler import Config
from flexq.sim import bound
from flexq.sim.policies import FLEXQ, KUEUE, LOWER_BOUND, PolicyRun, compare_policies
from flexq.sim.scenario import load_scenario
from tests.conftest import GUIDE
from tests.sim.guide_setup import guide_scenario, job


def _compare(tmp_path: Path, cloud: str, submit: str, until: str = "1d") -> dict[str, PolicyRun]:
    return compare_policies(load_scenario(guide_scenario(tmp_path, "    cloud:\n" + cloud, submit, until)))


def _job(job_id: str, at: str = "0s", run_for: str = "30m") -> str:
    return job(job_id, at, run_for)


def _waits(run: PolicyRun) -> dict[str, float | None]:
    return {str(r["job"]).rsplit("-", 1)[1]: r["wait"] for r in run.rows}


def _flavor(run: PolicyRun, job: str) -> str:
    row = next(r for r in run.rows if str(r["job"]).endswith(f"-{job}"))
    return str(row["flavors"]["tpu-group"]["*"])


def test_bound_takes_dws_when_it_answers_before_plan_a_comes_back(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {stockouts: [{from: 0s, to: 1h}]}\n"
                              "      dws-pool: {queuedDelay: 30m}\n", _job("1", at="10m"))
    assert _waits(runs[LOWER_BOUND]) == {"1": 1800}  # DWS at 10m + 30m, before on-demand at 1h
    assert _flavor(runs[LOWER_BOUND], "1") == "dws"


def test_bound_waits_for_plan_a_when_dws_is_slower(tmp_path: Path) -> None:
    runs = _compare(tmp_path, "      on-demand-pool: {stockouts: [{from: 0s, to: 1h}]}\n"
                              "      dws-pool: {queuedDelay: 2h}\n", _job("1", at="10m"))
    assert _waits(runs[LOWER_BOUND]) == {"1": 3000}  # on-demand back at 1h: 50 minutes after submission
    assert _flavor(runs[LOWER_BOUND], "1") == "on-demand"


def test_bound_knows_the_future_dws_answers(tmp_path: Path) -> None:
    # Plan A out all day; DWS takes 3h for requests made before 1h, 10m for those made after.
    cloud = ("      on-demand-pool: {stockouts: [{from: 0s, to: 1d}]}\n"
             "      dws-pool: {queuedDelayTrace: [{at: 0s, delay: 3h}, {at: 1h, delay: 10m}]}\n")
    runs = _compare(tmp_path, cloud, _job("1"), until="2d")
    assert _waits(runs[LOWER_BOUND]) == {"1": 4200}  # ask at 1h, answered at 1h10m
    assert _waits(runs[FLEXQ])["1"] == 3 * 3600  # the policy asked at once and got the 3h answer


def test_bound_ignores_competition_and_policies_never_beat_it(tmp_path: Path) -> None:
    # One slice of Plan A, DWS in 20 minutes: two jobs at once; the second must wait in any real policy.
    runs = _compare(tmp_path, "      on-demand-pool: {available: 4}\n      dws-pool: {queuedDelay: 20m}\n",
                    _job("1") + _job("2"))
    assert _waits(runs[LOWER_BOUND]) == {"1": 0, "2": 0}
    flexq = _waits(runs[FLEXQ])
    assert flexq["2"] is not None and flexq["2"] >= 1200


def test_bound_of_a_job_nothing_can_hold(tmp_path: Path) -> None:
    # Both pools are stocked out beyond the horizon and DWS never answers: nothing can start.
    runs = _compare(tmp_path, "      on-demand-pool: {stockouts: [{from: 0s, to: 30d}]}\n"
                              "      dws-pool: {queuedDelay: never}\n", _job("1"), until="1d")
    assert _waits(runs[LOWER_BOUND]) == {"1": None}
    assert runs[LOWER_BOUND].rows[0]["state"] == "Pending"


def test_week_of_stockouts_no_policy_beats_the_bound() -> None:
    runs = compare_policies(load_scenario(GUIDE / "scenario-week.yaml"))
    bound = _waits(runs[LOWER_BOUND])
    for policy in (KUEUE, FLEXQ):
        for name, wait in _waits(runs[policy]).items():
            assert wait is None or (bound[name] is not None and bound[name] <= wait), (policy, name)


def test_a_pod_set_across_resource_groups_needs_a_flavor_that_holds_it_in_each() -> None:
    cpu = ResourceGroup(("cpu",), ("c",), {("c", "cpu"): Quota(8000)})
    gpu = ResourceGroup(("nvidia.com/gpu",), ("small", "big"),
                        {("small", "nvidia.com/gpu"): Quota(1000), ("big", "nvidia.com/gpu"): Quota(8000)})
    config = Config({f: FlavorSpec(f) for f in ("c", "small", "big")},
                    {"cq": ClusterQueueSpec("cq", groups=(cpu, gpu))}, {})
    tree = QuotaTree(config.cluster_queues.values(), config.cohorts.values())
    assert bound.candidate_flavors(config, tree, "cq", PodSet("w", 2, {"cpu": 1000, "nvidia.com/gpu": 1000})) == \
        ["c", "big"], "small holds one GPU, not two"
    assert bound.candidate_flavors(config, tree, "cq", PodSet("w", 9, {"cpu": 1000, "nvidia.com/gpu": 1000})) == [], \
        "nine CPUs: no flavor of the cpu group"
    assert bound.candidate_flavors(config, tree, "cq", PodSet("w", 1, {"cpu": 1000, "memory": 1})) == [], \
        "memory: no group"
