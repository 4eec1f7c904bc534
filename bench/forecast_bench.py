"""How good and how cheap the forecast is.

    python bench/forecast_bench.py [--hours 24] [--pending 1000] [--case NAME ...] [--seeds 11,12,...] [--no-cost]

Accuracy: the guide's pools (Plan A one 4x4 slice, DWS answering after 20 minutes, room for two DWS slices)
with RayJobs arriving at random for ``--hours``, each running about an hour, replayed on the control plane in
virtual time. At each job's submission and every minute after until it starts, the plane is forked and run ahead
(:func:`flexq.forecast.forecast`, as the live server does), and the forecast start is compared with the start that
followed. Errors are in seconds and as a share of the wait still to come from the moment of the forecast, by what the
job waited for (quota held by another job, a ProvisioningRequest, nothing): with every run time declared (the forecast
knows them), and with none declared (it estimates them from the jobs that finished in the queue), for run times of
40 to 80 minutes and for exponential ones (memoryless: how long a job has run says nothing of how long it will).

Targets (the forecast issue): declared, every forecast within 5% of the wait + 30 s (with no new arrivals: the
declared case is also reported for the forecasts after which no job arrived before the start); undeclared, the
median error under 25% of the wait still to come. Where run times are estimated, the share of starts that fell in
the forecast's likely range (the earliest to the latest start of the ensemble's runs) is reported too, and the median
error as a share of the job's whole wait (from its submission: a later forecast's error against all the job waited).

Cost: a forecast of ``--pending`` waiting workloads behind 100 admitted ones, CPU seconds (target: under 1 s).
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from flexq.control import Basis, RunTime, RunTimes
from flexq.controller.forecasts import run_apart
from flexq.forecast import Lookahead, StepKind, forecast, samples_for
from flexq.scheduler import EventKind
from flexq.sim import Simulation, load_scenario

GUIDE = Path(__file__).resolve().parents[1] / "examples" / "guide"

SCENARIO = """
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {{name: forecast-accuracy}}
spec:
  seed: {seed}
  env: {{ONDEMAND_NODEPOOL: on-demand-pool, DWS_NODEPOOL: dws-pool}}
  include: [{guide}/dws-tpu-queue.yaml]
  capacity:
    pools:
      - {{name: default-pool, machineType: n2-standard-32, numNodes: 2, autoscaling: false}}
      - {{name: on-demand-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 4}}
      - {{name: dws-pool, machineType: ct6e-standard-4t, tpuTopology: 4x4, maxNodes: 8, flexStart: true,
         queuedProvisioning: true}}
    cloud:
      on-demand-pool: {{available: 4, bootTime: 3m}}
      dws-pool: {{queuedDelay: 20m}}
  submit:
    - file: {guide}/rayjob-tpu-v6e-dws.yaml
      env: {{JOB_ID: "f${{INDEX}}"}}
      poisson: {{ratePerHour: 2, for: {hours}h}}
      runFor: {run}
  until: {until}h
"""

COST = """
apiVersion: flexq.dev/v1alpha1
kind: Scenario
metadata: {{name: forecast-cost}}
spec:
  objects:
    - {{apiVersion: kueue.x-k8s.io/v1beta1, kind: ResourceFlavor, metadata: {{name: default}}}}
    - apiVersion: kueue.x-k8s.io/v1beta1
      kind: ClusterQueue
      metadata: {{name: cq}}
      spec:
        namespaceSelector: {{}}
        resourceGroups:
          - coveredResources: [cpu]
            flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: 100}}]}}]
    - {{apiVersion: kueue.x-k8s.io/v1beta1, kind: LocalQueue, metadata: {{name: q, namespace: default}},
       spec: {{clusterQueue: cq}}}}
  submit:
    - at: 0s
      count: {count}
      runFor: {{exponential: 30m}}
      object:
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: "job-${{INDEX}}", labels: {{kueue.x-k8s.io/queue-name: q}}}}
        spec:
          parallelism: 1
          template:
            spec:
              restartPolicy: Never
              containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
  until: 1s
"""


class KnownRunTimes(RunTimes):
    """Run times as a forecast would know them if it knew their true distribution (uniform between ``low`` and
    ``high`` seconds) instead of the finished jobs': its mean for the point run, a draw for a sample, and for a job
    running ``elapsed`` the same conditioned on its having run that long. What no forecast of unsaid run times can
    beat by knowing them better (``--case floor``)."""

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = low, high

    def of(self, key: str, cluster_queue: str, rng: random.Random | None = None) -> RunTime:
        known = super().of(key, cluster_queue)
        if known.basis is not Basis.ESTIMATED:
            return known
        return RunTime(rng.uniform(self.low, self.high) if rng is not None else (self.low + self.high) / 2,
                       Basis.ESTIMATED)

    def remaining(self, key: str, cluster_queue: str, elapsed: float, rng: random.Random | None = None) -> RunTime:
        known = self.of(key, cluster_queue)
        if known.seconds is None or known.basis is not Basis.ESTIMATED:
            return super().remaining(key, cluster_queue, elapsed, rng)
        low = min(max(self.low, elapsed), self.high)
        end = rng.uniform(low, self.high) if rng is not None else (low + self.high) / 2
        return RunTime(end - elapsed if end > elapsed else 0.0, Basis.ESTIMATED)

    def copy(self) -> KnownRunTimes:
        other = KnownRunTimes(self.low, self.high)
        plain = super().copy()
        other.declared, other.limits, other._finished = plain.declared, plain.limits, plain._finished
        return other


def _starts(sim: Simulation) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in sim.result.events:
        if e["event"] == EventKind.STARTED.value:
            out.setdefault(e["workload"], float(e["t"]))
    return out


def _cause(steps: tuple[object, ...]) -> str:
    kinds = {getattr(s, "kind", None) for s in steps}
    if StepKind.QUOTA in kinds:
        return "quota"
    if StepKind.PROVISIONING in kinds:
        return "provisioning"
    return "none"


class Sample(NamedTuple):
    """A forecast against the start that followed."""

    error: float
    """Seconds between the forecast start and the start."""
    to_come: float
    """Seconds from the forecast to the start: the wait still to come (the targets' share is of this)."""
    whole: float
    """Seconds from the job's submission to its start: its whole wait."""
    quiet: bool
    """No job arrived between the forecast and the start."""
    inside: bool | None
    """The start fell in the forecast's likely range (None: it gave none)."""


def accuracy(path: Path, declared: bool, known: RunTimes | None = None) -> tuple[dict[str, list[Sample]], int]:
    """Every forecast with a start (:data:`Sample`), by cause, and how many foresaw no start; forecasts every minute
    of virtual time. ``known``: the run times the forecasts take (:class:`KnownRunTimes`), instead of learning them
    from the finished jobs."""
    scenario = load_scenario(path)
    sim = Simulation(scenario, declare_run_times=declared)
    if known is not None:
        sim.plane.run_times = known
    end = scenario.until or 0.0
    made: list[tuple[float, str, float | None, str, tuple[float, float] | None]] = []
    t = 0.0
    while t < end:
        arrivals = sorted(s.at for s in scenario.submissions if t < s.at < t + 60)
        for at in [*arrivals, t + 60]:
            sim.run_to(at)
            for key, f in forecast(sim.plane, at).items():
                made.append((at, key, f.start if f.basis is not Basis.UNKNOWN else None, _cause(f.steps), f.likely))
        t += 60
    sim.run_to(None)
    sim.finish()
    starts = _starts(sim)
    first_cause: dict[str, str] = {}
    submitted: dict[str, float] = {}
    arrived = sorted(s.at for s in scenario.submissions)
    by_cause: dict[str, list[Sample]] = {}
    unforeseen = 0
    for at, key, start, cause, likely in made:
        cause = first_cause.setdefault(key, cause)  # the job's cause: what its first forecast saw
        since = submitted.setdefault(key, at)  # its first forecast is made when it arrives
        actual = starts.get(key)
        if actual is None:
            continue
        if start is None:
            unforeseen += 1
            continue
        quiet = bisect.bisect_right(arrived, at) == bisect.bisect_right(arrived, actual)
        inside = None if likely is None else likely[0] <= actual <= likely[1]
        by_cause.setdefault(cause, []).append(Sample(abs(start - actual), actual - at, actual - since, quiet, inside))
    return by_cause, unforeseen


def _report(title: str, by_cause: dict[str, list[Sample]], share: float, slack: float) -> None:
    print(f"\n{title}")
    _table(by_cause, share, slack)


def _table(by_cause: dict[str, list[Sample]], share: float, slack: float) -> None:
    print(f"  {'waited for':<13} {'forecasts':>9} {'median err s':>12} {'p90 err s':>9} {'median err %':>12} "
          f"{'p90 err %':>9} {'within target':>13} {'in likely range':>15} {'median err % of whole wait':>26}")
    rows = sorted(by_cause.items())
    rows.append(("all", [pair for _, pairs in rows for pair in pairs]))
    for cause, pairs in rows:
        if not pairs:
            continue
        errors = sorted(p.error for p in pairs)
        shares = sorted(p.error / p.to_come for p in pairs if p.to_come > 60)
        of_whole = [p.error / p.whole for p in pairs if p.whole > 60]
        within = sum(1 for p in pairs if p.error <= share * max(p.to_come, 0) + slack)
        ranged = [p.inside for p in pairs if p.inside is not None]
        inside = f"{100 * sum(ranged) / len(ranged):.1f}% of {len(ranged)}" if ranged else "-"
        p90 = errors[int(0.9 * (len(errors) - 1))]
        print(f"  {cause:<13} {len(pairs):>9} {statistics.median(errors):>12.1f} {p90:>9.1f} "
              f"{100 * statistics.median(shares) if shares else 0:>11.1f}% "
              f"{100 * shares[int(0.9 * (len(shares) - 1))] if shares else 0:>8.1f}% "
              f"{100 * within / len(pairs):>12.1f}% {inside:>15} "
              f"{100 * statistics.median(of_whole) if of_whole else 0:>25.1f}%")


def cost(pending: int, learned: bool = False, apart: bool = False) -> tuple[float, int]:
    """CPU seconds of a forecast of ``pending`` waiting workloads behind 100 admitted ones; ``learned``: their queue
    has finished jobs, so run times are estimates and the forecast an ensemble (as many samples as the depth
    allows); ``apart``: as the live server makes it, the fork here and the run in a child process (its CPU counted
    too: :func:`flexq.controller.forecasts.run_apart`)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cost.yaml"
        path.write_text(COST.format(count=pending + 100))
        sim = Simulation(load_scenario(path))
        sim.run_to(0.5)
        if learned:  # the jobs' run times unsaid, their queue's last jobs' known
            sim.plane.run_times.declared.clear()
            for seconds in (900.0, 1800.0, 3600.0):
                sim.plane.run_times.finished("cq", seconds)
        began = time.thread_time()
        if apart:
            made, child = run_apart(Lookahead(sim.plane, 0.5))
            return time.thread_time() - began + child, len(made)
        made = forecast(sim.plane, 0.5)
        return time.thread_time() - began, len(made)


def _share(pairs: list[Sample]) -> float:
    """The median error as a share of the wait still to come."""
    shares = [p.error / p.to_come for p in pairs if p.to_come > 60]
    return statistics.median(shares) if shares else 0.0


CASES: dict[str, tuple[str, str, bool, RunTimes | None]] = {
    "declared": ("declared run times (exponential, mean 1h)", "{exponential: 1h}", True, None),
    "uniform": ("no run time declared, run times 40m to 80m (estimated from finished jobs)", "{uniform: [40m, 80m]}",
                False, None),
    "exponential": ("no run time declared, exponential run times, mean 1h (memoryless: the hardest to foresee)",
                    "{exponential: 1h}", False, None),
    "floor": ("no run time declared, run times 40m to 80m, the forecast knowing their true distribution (the floor "
              "of the estimated case)", "{uniform: [40m, 80m]}", False, KnownRunTimes(2400, 4800)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=24, help="hours of arrivals (virtual time)")
    parser.add_argument("--pending", type=int, default=1000, help="waiting workloads for the cost figure")
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="the cases to run (repeatable; default: declared, uniform, exponential; floor: the "
                             "uniform case forecast knowing the run times' true distribution)")
    parser.add_argument("--seeds", default="11", help="the traffic's seeds, comma-separated: each case runs once a "
                                                      "seed, its figures pooled (each seed's median share shown)")
    parser.add_argument("--cost", action=argparse.BooleanOptionalAction, default=True,
                        help="the forecast's CPU cost at --pending waiting workloads (--no-cost: accuracy alone)")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "accuracy.yaml"
        for name in args.case or ["declared", "uniform", "exponential"]:
            label, run, declared, known = CASES[name]
            began = time.process_time()
            by_cause: dict[str, list[Sample]] = {}
            unforeseen = 0
            apart: list[str] = []
            for seed in seeds:
                path.write_text(SCENARIO.format(guide=GUIDE, hours=args.hours, until=args.hours + 48, run=run,
                                                seed=seed))
                made, missed = accuracy(path, declared, known.copy() if known is not None else None)
                unforeseen += missed
                for cause, pairs in made.items():
                    by_cause.setdefault(cause, []).extend(pairs)
                apart.append(f"seed {seed}: {100 * _share([p for ps in made.values() for p in ps]):.1f}%")
            share, slack = (0.05, 30.0) if declared else (0.25, 0.0)
            _report(f"{label}: {time.process_time() - began:.1f} s CPU; {unforeseen} forecasts had no start or "
                    "only a latest one (jobs of unknown run time running: none had finished yet)", by_cause,
                    share, slack)
            if len(seeds) > 1:
                print("  median error % of the wait to come, all causes, by seed: " + "; ".join(apart))
            if declared:  # the target's condition: nothing new arrives before the job starts
                print("  of them, the forecasts after which no job arrived before the start:")
                _table({cause: [p for p in pairs if p.quiet] for cause, pairs in by_cause.items()}, share, slack)
    if args.cost:
        _costs(args.pending)


def _costs(pending: int) -> None:
    seconds, n = cost(pending)
    print(f"\nforecast of {n} waiting workloads behind 100 admitted: {seconds:.3f} s CPU (target: under 1 s)")
    for depth in (pending, 4 * pending):
        seconds, n = cost(depth, learned=True)
        print(f"the same, {n} waiting, run times estimated from finished jobs (an ensemble of "
              f"{samples_for(n)} samples and the point): {seconds:.3f} s CPU")
    if hasattr(os, "fork"):
        seconds, n = cost(pending, learned=True, apart=True)
        print(f"the same, {n} waiting, estimated, as the live server makes it (the run in a child process of its "
              f"own): {seconds:.3f} s CPU")


if __name__ == "__main__":
    main()
