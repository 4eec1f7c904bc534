"""Admissions per second: 1,000 ClusterQueues (100 cohorts of 10), 100,000 pending workloads.

Every ClusterQueue has two flavors (on-demand, spot) of cpu and memory; workloads ask for 1-4 cpu
and 2-8Gi per pod, 1-4 pods, with priorities 0-2. The first pass admits what fits; then, as a steady
state, admitted workloads finish in batches and each pass admits their successors. Reports both.

    python bench/scheduler_bench.py [--queues 1000] [--workloads 100000]
"""

from __future__ import annotations

import argparse
import random
import time

from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Workload,
)
from flexq.scheduler.scheduler import Config, Scheduler

GI = 2**30 * 1000


def build(queues: int, cohort_size: int) -> Config:
    flavors = {"on-demand": FlavorSpec("on-demand"), "spot": FlavorSpec("spot")}
    cqs = {}
    for i in range(queues):
        quotas = {("on-demand", "cpu"): Quota(20_000), ("on-demand", "memory"): Quota(80 * GI),
                  ("spot", "cpu"): Quota(10_000), ("spot", "memory"): Quota(40 * GI)}
        group = ResourceGroup(("cpu", "memory"), ("on-demand", "spot"), quotas)
        cqs[f"cq-{i}"] = ClusterQueueSpec(
            f"cq-{i}", cohort=f"cohort-{i // cohort_size}", groups=(group,),
            within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    return Config(flavors, cqs, {}, {})


def workloads(n: int, queues: int, rng: random.Random) -> list[Workload]:
    out = []
    for i in range(n):
        cpu = rng.randint(1, 4) * 1000
        out.append(Workload(
            namespace="default", name=f"wl-{i}", queue="q", cluster_queue=f"cq-{rng.randrange(queues)}",
            podsets=(PodSet("main", rng.randint(1, 4), {"cpu": cpu, "memory": rng.randint(2, 8) * GI}),),
            priority=rng.randint(0, 2), created=float(i), uid=f"uid-{i}"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=100_000)
    parser.add_argument("--cohort-size", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(1)
    sched = Scheduler(build(args.queues, args.cohort_size))
    pending = workloads(args.workloads, args.queues, rng)
    start = time.perf_counter()
    for wl in pending:
        sched.add(wl, 0.0)
    added = time.perf_counter() - start

    start = time.perf_counter()
    events = sched.schedule(1.0)
    first = time.perf_counter() - start
    admitted = sum(1 for e in events if e.kind.value == "Admitted")

    steady_admitted = 0
    steady_time = 0.0
    now = 2.0
    for _ in range(args.rounds):
        holders = [w for w in sched.workloads() if w.admission is not None]
        rng.shuffle(holders)
        for wl in holders[: max(1, len(holders) // 10)]:
            sched.finish(wl.key, now)
        start = time.perf_counter()
        events = sched.schedule(now)
        steady_time += time.perf_counter() - start
        steady_admitted += sum(1 for e in events if e.kind.value == "Admitted")
        now += 1.0

    print(f"queues={args.queues} cohorts={args.queues // args.cohort_size} pending={args.workloads}")
    print(f"enqueue: {args.workloads / added:,.0f} workloads/s ({added:.2f}s)")
    print(f"first pass: {admitted} admitted in {first:.2f}s = {admitted / first:,.0f} admissions/s")
    print(f"steady state: {steady_admitted} admitted in {steady_time:.2f}s over {args.rounds} passes = "
          f"{steady_admitted / steady_time:,.0f} admissions/s")


if __name__ == "__main__":
    main()
