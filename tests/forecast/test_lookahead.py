"""The forecast: a simulation paused mid-way, forked and run ahead, foresees what the simulation then does."""

from __future__ import annotations

import copy
import dataclasses
import random
from pathlib import Path

import pytest

from flexq.api import normalize
from flexq.control import Basis, JobQueued
from flexq.forecast import (
    Forecast,
    Lookahead,
    StepKind,
    ensemble,
    forecast,
    samples_for,
    under_each_flavor,
    waiting,
)
from flexq.scheduler import EventKind
from flexq.sim import Simulation, load_scenario

GUIDE = Path(__file__).resolve().parents[2] / "examples" / "guide"

QUOTA = """
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {name: quota-waits}
spec:
  objects:
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {name: default}}
    - apiVersion: kueue.x-k8s.io/v1beta1
      kind: ClusterQueue
      metadata: {name: cq}
      spec:
        namespaceSelector: {}
        resourceGroups:
          - coveredResources: [cpu]
            flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
    - {apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {name: q, namespace: default},
       spec: {clusterQueue: cq}}
  submit:
RUNS
  until: 3d
"""

JOB = """    - at: {at}
      {run}
      object:
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: "job-{i}", labels: {{kueue.x-k8s.io/queue-name: q}}}}
        spec:
          parallelism: {cpus}
          template:
            spec:
              restartPolicy: Never
              containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def _quota_scenario(tmp_path: Path, jobs: list[tuple[str, str | None, int]]) -> Path:
    runs = "".join(JOB.format(at=at, run=f"runFor: {run}" if run else "", i=i, cpus=cpus)
                   for i, (at, run, cpus) in enumerate(jobs))
    path = tmp_path / "quota.yaml"
    path.write_text(QUOTA.replace("RUNS\n", runs))
    return path


def _starts(sim: Simulation) -> dict[str, float]:
    """When each workload's job first started (its pods bound, or its admission without capacity modelled)."""
    out: dict[str, float] = {}
    started = any(e["event"] == EventKind.STARTED.value for e in sim.result.events)
    kind = EventKind.STARTED.value if started else EventKind.ADMITTED.value
    for e in sim.result.events:
        if e["event"] == kind:
            out.setdefault(e["workload"], float(e["t"]))
    return out


def _foresee(path: Path, pause: float) -> tuple[dict[str, Forecast], dict[str, float], list[str], Simulation]:
    """Forecasts made at ``pause``, the starts that followed, and the whole event log of the paused run."""
    sim = Simulation(load_scenario(path))
    sim.run_to(pause)
    made = forecast(sim.plane, pause)
    sim.run_to(None)
    sim.finish()
    return made, _starts(sim), sim.result.log_lines(), sim


@pytest.mark.parametrize(("scenario", "pause"), [
    ("scenario-capacity.yaml", 60.0),   # job 2 waits for DWS, asked 58 s ago: 30 min from its request
    ("scenario-race.yaml", 150.0),      # jobs 2 and 3 race Plan A (busy an hour) and DWS (two hours)
])
def test_declared_run_times_foresee_every_start_exactly(scenario: str, pause: float) -> None:
    path = GUIDE / scenario
    made, starts, log, _sim = _foresee(path, pause)
    # Jobs that arrive after the pause (a week's keep coming) queue behind these, at the same priority.
    assert made, "something waits at the pause"
    assert {k: f.start for k, f in made.items()} == pytest.approx({k: starts[k] for k in made}, abs=1e-3)
    assert all(f.made == pause for f in made.values())
    uninterrupted = Simulation(load_scenario(path))
    assert uninterrupted.run().log_lines() == log, "forking left the simulation as it was"


def test_a_random_dws_answer_is_the_only_error_of_a_forecast_with_declared_run_times() -> None:
    """The week's DWS answers at random (exponential, mean 30 min): with Plan A stocked out, a job waits for quota,
    then for DWS. The forecast expects the answer when the pool's answers so far say (:mod:`flexq.control.
    answer_times`); it is off by exactly how far the cloud's draw fell from that."""
    pause = 122 * 3600.0
    sim = Simulation(load_scenario(GUIDE / "scenario-week.yaml"))
    sim.run_to(pause)
    answers = sim.plane.answer_times.copy()
    made = forecast(sim.plane, pause)
    sim.run_to(None)
    sim.finish()
    starts = _starts(sim)
    assert made and answers.answers("dws-pool") >= 3
    for key, expected in made.items():
        asked = answered = None
        for e in sim.result.events:
            if e["event"] == "ProvisioningRequest" and e["workload"] == key and e["t"] <= starts[key]:
                if e["state"] == "Accepted":
                    asked = float(e["t"])
                elif e["state"] == "Provisioned" and asked is not None:
                    answered = float(e["t"])
        assert asked is not None and answered is not None and expected.start is not None
        left = answers.remaining("dws-pool", pause - asked) if asked < pause else None
        foreseen = pause + left if left is not None else asked + (answers.typical("dws-pool") or 0.0)
        assert expected.start - starts[key] == pytest.approx(foreseen - answered, abs=1e-3)
        assert abs(foreseen - answered) > 1, "the cloud drew an answer of its own"


def test_quota_waits_name_the_job_whose_end_frees_it(tmp_path: Path) -> None:
    path = _quota_scenario(tmp_path, [("0s", "1h", 2), ("0s", "2h", 2), ("1s", "30m", 3), ("2s", "1h", 1)])
    made, starts, _log, sim = _foresee(path, 5.0)
    owners = {w.key: w.owner.rsplit("/", 1)[-1] for w in sim.result.workloads}
    by_job = {owners[k]: f for k, f in made.items()}
    assert sorted(by_job) == ["job-2", "job-3"], "jobs 0 and 1 hold the 4 cpus"
    for f in by_job.values():
        assert f.start == starts[f.workload]
        assert f.basis is Basis.DECLARED
        assert f.start is not None and f.wait == f.start - 5.0
    big, small = by_job["job-2"], by_job["job-3"]
    assert small.start == 3600, "job 0's end frees 2 cpus: too few for job 2, job 3 (1 cpu) goes first"
    assert small.steps[-1].kind is StepKind.QUOTA and small.steps[-1].what.endswith("job-0")
    assert big.start == 7200, "job 2 (3 cpus) starts when job 1 (and job 3) end"
    assert big.steps[-1].kind is StepKind.QUOTA and big.steps[-1].at == 7200


def test_a_running_job_of_unknown_run_time_leaves_what_waits_behind_it_unforeseen(tmp_path: Path) -> None:
    path = _quota_scenario(tmp_path, [("0s", None, 4), ("1s", "1h", 2)])
    made, _, _log, _sim = _foresee(path, 5.0)
    (only,) = made.values()
    assert only.start is None and only.basis is Basis.UNKNOWN
    assert "job-0" in only.blocked_by


def test_run_times_learned_from_finished_jobs_make_an_estimate(tmp_path: Path) -> None:
    path = _quota_scenario(tmp_path, [("0s", None, 4), ("1s", "1h", 2)])
    sim = Simulation(load_scenario(path))
    sim.run_to(5.0)
    for seconds in (100.0, 300.0, 200.0):
        sim.plane.run_times.finished("cq", seconds)
    (point,) = Lookahead(sim.plane, 5.0).run().values()
    assert point.basis is Basis.ESTIMATED, "job 0's run time is the mean of the queue's last jobs"
    assert point.start == 200.0, "job 0 started at 0 and is expected to take 200 s"
    (median,) = forecast(sim.plane, 5.0).values()
    assert median.basis is Basis.ESTIMATED and median.start in (100.0, 200.0, 300.0), \
        "the median of the runs with run times drawn from the finished jobs'"


@pytest.mark.parametrize(("waiting", "samples"), [(1, 4), (1000, 4), (1001, 2), (2000, 2), (2001, 0), (50_000, 0)])
def test_a_deep_queue_draws_fewer_samples(waiting: int, samples: int) -> None:
    assert samples_for(waiting) == samples


def test_past_the_depth_for_samples_the_forecast_is_the_run_with_mean_run_times(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _quota_scenario(tmp_path, [("0s", None, 4), ("1s", "1h", 2)])
    sim = Simulation(load_scenario(path))
    sim.run_to(5.0)
    for seconds in (100.0, 300.0, 1000.0):
        sim.plane.run_times.finished("cq", seconds)
    (point,) = Lookahead(sim.plane, 5.0).run().values()
    assert point.start == pytest.approx(1400 / 3) and point.basis is Basis.ESTIMATED
    (median,) = forecast(sim.plane, 5.0).values()
    assert median.start in (100.0, 300.0, 1000.0), "one of the drawn runs: four samples and the point, the median"
    monkeypatch.setattr("flexq.forecast.lookahead.DEEP", 0)  # one waiting workload is now past twice the depth
    (deep,) = forecast(sim.plane, 5.0).values()
    assert deep == point


def _median_run(ordered: list[Forecast]) -> Forecast:
    """The forecast of the run whose start is the median, with the range of the runs' starts where all foresaw one."""
    chosen = ordered[len(ordered) // 2]
    likely = None if ordered[-1].start is None or ordered[0].start is None else (ordered[0].start, ordered[-1].start)
    return dataclasses.replace(chosen, likely=likely)


def test_each_estimate_is_the_whole_forecast_of_the_run_whose_start_is_the_median(tmp_path: Path) -> None:
    """The ensemble against its rule applied to whole runs: the point and four samples each run and forecast every
    waiting job; a job's forecast is the one whose start is the median (none last, equal starts in the order of the
    runs, the point's first), as that run made it."""
    path = _quota_scenario(tmp_path, [("0s", None, 2), ("0s", None, 2), *[("1s", None, 1 + i % 3) for i in range(12)]])
    sim = Simulation(load_scenario(path))
    sim.run_to(5.0)
    for seconds in (100.0, 300.0, 300.0, 1000.0):
        sim.plane.run_times.finished("cq", seconds)
    pristine = Lookahead(sim.plane, 5.0)
    runs = [copy.deepcopy(pristine).run()]
    for n in range(samples_for(len(pristine.targets))):
        sample = copy.deepcopy(pristine)
        sample.rng = random.Random(n)
        runs.append(sample.run())
    rule = {key: _median_run(sorted((run[key] for run in runs), key=lambda f: (f.start is None, f.start or 0.0)))
            for key in runs[0]}
    made = ensemble(pristine)
    assert made == rule and len(made) == 12 and all(f.basis is Basis.ESTIMATED for f in made.values())
    assert all(f.likely is not None and f.likely[0] <= (f.start or 0.0) <= f.likely[1] for f in made.values())
    assert any(f.likely is not None and f.likely[0] < f.likely[1] for f in made.values()), "the runs disagree"
    assert len({f.start for f in made.values()}) > 3 and any(made[k] != runs[0][k] for k in made), \
        "starts spread, and some forecasts taken from a drawn run"


def test_a_fork_shares_the_workloads_values_and_leaves_the_plane_as_it_was(tmp_path: Path) -> None:
    """Pod sets and admissions are values, shared by the fork; the workloads themselves are copied, so running the
    fork ahead (job 0 ends, job 1 is admitted) changes nothing of the plane's."""
    path = _quota_scenario(tmp_path, [("0s", "1h", 4), ("1s", "1h", 2)])
    sim = Simulation(load_scenario(path))
    sim.run_to(5.0)
    before = {wl.key: (wl.state, wl.admission) for wl in sim.plane.scheduler.workloads()}
    ahead = Lookahead(sim.plane, 5.0)
    for wl in sim.plane.scheduler.workloads():
        copied = ahead.plane.scheduler.held(wl.key)
        assert copied is not wl and copied.podsets is wl.podsets and copied.admission is wl.admission
    (waiting_one,) = ahead.run().values()
    assert waiting_one.start == 3600.0
    assert {wl.key: (wl.state, wl.admission) for wl in sim.plane.scheduler.workloads()} == before
    assert sum(wl.admission is None for wl in sim.plane.scheduler.workloads()) == 1


def test_what_if_a_job_were_submitted_now(tmp_path: Path) -> None:
    path = _quota_scenario(tmp_path, [("0s", "1h", 4)])
    sim = Simulation(load_scenario(path))
    sim.run_to(5.0)
    before = sim.result.log_lines()
    waiting_before = waiting(sim.plane)
    (queued,) = sim.result.workloads
    extra = sim.plane.workload_for("Job", "batch", {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "what-if", "namespace": "default", "uid": "u-1",
                     "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {"parallelism": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}, 5.0)
    made = forecast(sim.plane, 5.0, extra=[(JobQueued(extra, 5.0), 600.0)])
    assert made[extra.key].start == 3600, "it would start when the 4 cpus job ends"
    assert sim.result.log_lines() == before and waiting(sim.plane) == waiting_before, "nothing was submitted"
    assert not sim.plane.scheduler.knows(extra.key) and sim.plane.scheduler.knows(queued.key)


def test_what_if_under_each_flavor_it_could_race_on() -> None:
    """A guide job submitted while Plan A is busy for an hour and DWS answers in two: held to on-demand it starts when
    Plan A frees, held to dws when DWS answers; racing both, it starts at the sooner of the two."""
    scenario = load_scenario(GUIDE / "scenario-race.yaml")
    sim = Simulation(scenario)
    sim.run_to(150.0)
    before = sim.result.log_lines()
    info, obj = normalize(scenario.submissions[-1].document)
    obj["metadata"].update(name="what-if", uid="u-what-if")
    wl = sim.plane.workload_for(info.kind, info.group, obj, 150.0)
    wl.uid = "u-what-if"
    queued = JobQueued(wl, 150.0)
    held = under_each_flavor(sim.plane, 150.0, queued, 3600.0)
    assert list(held) == ["on-demand", "dws"], "its TPU workers could take either; the head's flavor does not race"
    for flavor, f in held.items():
        assert f.start is not None and flavor in f.flavors, (flavor, f)
    assert held["on-demand"].start != held["dws"].start
    raced = forecast(sim.plane, 150.0, extra=[(queued, 3600.0)])[wl.key]
    assert raced.start == min(f.start for f in held.values() if f.start is not None), "the sooner of the two"
    assert sim.result.log_lines() == before and not sim.plane.scheduler.knows(wl.key), "nothing was submitted"
    sim.run_to(None)
    assert [e for e in sim.result.events if e["workload"].startswith("default/what-if")] == []
