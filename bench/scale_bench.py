"""The simulator at a large cluster's scale: wall time and peak memory.

    python bench/scale_bench.py [--fraction F] [--profile] [--out bench/results]

The full scale (``--fraction 1``): 100 node pools of 100 nodes each (10,000 nodes: 90 pools of
n2-standard-16, 10 of TPU v6e 4x4 slices), one ResourceFlavor per pool, 1,000 ClusterQueues in 100
cohorts (10 per pool, each with a tenth of its pool as nominal quota, borrowing within the cohort,
preemption of lower priorities within the queue), 1,000 LocalQueues, three WorkloadPriorityClasses, and
a week of Poisson traffic: 100,000 batch/v1 Jobs, each to a LocalQueue drawn at random, 1 to 8 pods of
4 CPUs and 8 GiB (a TPU queue's jobs: one 4x4 slice, 4 pods of 4 chips), running an exponential time
(mean 6 h on CPUs, 2 h on TPUs). ``--fraction`` scales the pools, queues and jobs down alike (the
week stays a week, each pool keeps its 100 nodes).

Reports, into ``--out`` as ``scale[-F].json`` and ``scale[-F].md``: the time to build the scenario, the
wall time of the run and the CPU time it took (the figure to compare on a machine shared with others), the
peak resident memory of the process (``ru_maxrss``) and its growth over the run, the events, and how the
jobs ended. ``--profile`` adds the functions that dominate the run.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import platform
import pstats
import random
import resource
import time
from pathlib import Path
from typing import Any

from flexq.api.documents import Document
from flexq.capacity.catalog import machine_type
from flexq.capacity.cloud import EmulatedCloud
from flexq.capacity.pools import NodePoolSpec
from flexq.capacity.settings import CapacityConfig
from flexq.sim.arrivals import Submission
from flexq.sim.runner import run_scenario
from flexq.sim.scenario import Scenario

POOLS, NODES_PER_POOL, QUEUES_PER_POOL, TPU_POOLS, JOBS, DAYS = 100, 100, 10, 10, 100_000, 7
KUEUE = "kueue.x-k8s.io/v1beta2"
PRIORITIES = {"low": 100, "normal": 500, "high": 1000}


def _doc(obj: dict[str, Any], index: int) -> Document:
    return Document(obj, "scale_bench", index)


def _queues(pools: int) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in PRIORITIES.items()]
    for p in range(pools):
        tpu = p >= pools - max(1, pools * TPU_POOLS // POOLS)
        objects.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"flavor-{p}"},
                        "spec": {"nodeLabels": {"cloud.google.com/gke-nodepool": f"pool-{p}"}}})
        cpu = NODES_PER_POOL * 16 // QUEUES_PER_POOL
        quota = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": f"{cpu * 4}Gi"}]
        if tpu:
            quota.append({"name": "google.com/tpu", "nominalQuota": NODES_PER_POOL * 4 // QUEUES_PER_POOL})
        for q in range(QUEUES_PER_POOL):
            name = f"cq-{p}-{q}"
            objects.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
                "cohortName": f"cohort-{p}", "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [{"coveredResources": [r["name"] for r in quota],
                                    "flavors": [{"name": f"flavor-{p}", "resources": quota}]}]}})
            objects.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                            "metadata": {"name": f"lq-{p}-{q}", "namespace": "default"},
                            "spec": {"clusterQueue": name}})
    return objects


def _pools(pools: int) -> tuple[NodePoolSpec, ...]:
    out = []
    for p in range(pools):
        tpu = p >= pools - max(1, pools * TPU_POOLS // POOLS)
        machine = machine_type("ct6e-standard-4t" if tpu else "n2-standard-16")
        out.append(NodePoolSpec(f"pool-{p}", machine, "4x4" if tpu else None, min_nodes=NODES_PER_POOL,
                                max_nodes=NODES_PER_POOL, initial_nodes=NODES_PER_POOL, autoscaling=False))
    return tuple(out)


def _job(index: int, pool: int, queue: int, tpu: bool, rng: random.Random) -> dict[str, Any]:
    if tpu:
        pods, requests = 4, {"cpu": "4", "memory": "8Gi", "google.com/tpu": "4"}
    else:
        pods, requests = rng.randint(1, 8), {"cpu": "4", "memory": "8Gi"}
    spec: dict[str, Any] = {"restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}]}
    if tpu:
        spec["tolerations"] = [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"job-{index}", "namespace": "default", "labels": {
                "kueue.x-k8s.io/queue-name": f"lq-{pool}-{queue}",
                "kueue.x-k8s.io/priority-class": rng.choice(list(PRIORITIES))}},
            "spec": {"parallelism": pods, "completions": pods, "template": {"spec": spec}}}


def build(fraction: float, seed: int = 1) -> Scenario:
    pools = max(2, round(POOLS * fraction))
    jobs = max(10, round(JOBS * fraction))
    week = DAYS * 86400.0
    rng = random.Random(seed)
    tpu_pools = max(1, pools * TPU_POOLS // POOLS)
    objects = tuple(_doc(o, i) for i, o in enumerate(_queues(pools)))
    submissions, t = [], 0.0
    for i in range(jobs):
        t += rng.expovariate(jobs / week)
        pool = rng.randrange(pools)
        tpu = pool >= pools - tpu_pools
        run_for = rng.expovariate(1 / (2 * 3600.0 if tpu else 6 * 3600.0))
        submissions.append(Submission(round(t, 3), _doc(_job(i, pool, rng.randrange(QUEUES_PER_POOL), tpu, rng), i),
                                      round(run_for, 3)))
    capacity = CapacityConfig(_pools(pools), EmulatedCloud({}, seed))
    return Scenario("scale", "scale_bench", objects, tuple(submissions), (), None, seed, capacity)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fraction", type=float, default=1.0, help="scale of pools, queues and jobs (default 1)")
    parser.add_argument("--profile", action="store_true", help="profile the run (slower) and report what dominates")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    rss_start = _rss_mib()
    began = time.perf_counter()
    scenario = build(args.fraction)
    build_s = time.perf_counter() - began
    rss_built = _rss_mib()
    profiler = cProfile.Profile() if args.profile else None
    began, cpu_began = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    result = run_scenario(scenario)
    if profiler is not None:
        profiler.disable()
    run_s, cpu_s = time.perf_counter() - began, time.process_time() - cpu_began
    states: dict[str, int] = {}
    for wl in result.workloads:
        states[wl.state.name.lower()] = states.get(wl.state.name.lower(), 0) + 1
    assert scenario.capacity is not None
    figures: dict[str, Any] = {
        "fraction": args.fraction, "pools": len(scenario.capacity.pools),
        "nodes": sum(p.initial_nodes for p in scenario.capacity.pools),
        "clusterQueues": sum(1 for d in scenario.objects if d.obj["kind"] == "ClusterQueue"),
        "jobs": len(scenario.submissions), "virtualDays": round(result.end / 86400, 2),
        "events": len(result.events), "workloads": states,
        "buildSeconds": round(build_s, 2), "runSeconds": round(run_s, 2),
        "runCpuSeconds": round(cpu_s, 2),
        "eventsPerCpuSecond": round(len(result.events) / cpu_s) if cpu_s else None,
        "peakRssMiB": round(_rss_mib(), 1), "rssBeforeMiB": round(rss_start, 1),
        "rssAfterBuildMiB": round(rss_built, 1), "profiled": bool(profiler),
        "python": platform.python_version(), "machine": platform.machine(),
    }
    top: list[str] = []
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        top = [line.rstrip() for line in text.getvalue().splitlines() if line.strip()][-16:]
        figures["profileTop"] = top
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "scale" if args.fraction == 1.0 else f"scale-{args.fraction:g}"
    (args.out / f"{stem}.json").write_text(json.dumps(figures, indent=2) + "\n")
    rows = [f"| {k} | {v} |" for k, v in figures.items() if k != "profileTop"]
    md = ["# Simulator at scale (bench/scale_bench.py)", "", "| figure | value |", "|---|---|", *rows]
    if top:
        md += ["", "What dominates the run (cProfile, by own time):", "", "```", *top, "```"]
    (args.out / f"{stem}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
