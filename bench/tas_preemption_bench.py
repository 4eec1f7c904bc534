"""Preemption for topology: how long one search for victims takes when the placement, not the quota, is short.

``--hosts`` hosts of 5 cpus, four a sub-block, four sub-blocks a block (GKE's levels), each holding one admitted
4-cpu pod: one of each sub-block of priority 2, the others of priority 0 or 1; the ClusterQueue's quota holds
everything. A priority-3 workload of four 5-cpu pods that must share a sub-block arrives: Kueue's order takes the
lowest priority first, so the search goes through three quarters of the hosts' workloads, asking the placement with
each, before a priority-2 one makes a sub-block whole, then puts back those it did not need, asking it again
(their evictions are left pending: no victim preempts in turn). Reports the CPU seconds of the scheduling pass that
preempts, the placements asked and the victims, each run alike (``--seed``).

    python bench/tas_preemption_bench.py [--hosts 256] [--fair] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flexq.scheduler import tas
from flexq.scheduler.domains import HOSTNAME
from flexq.scheduler.fair_preemption import STRATEGIES
from flexq.scheduler.model import (
    ClusterQueueSpec,
    FlavorSpec,
    PodSet,
    PreemptionPolicy,
    Quota,
    ResourceGroup,
    Taint,
    TopologyRequest,
    Workload,
)
from flexq.scheduler.scheduler import Config, Scheduler

CPU = 1000
BLOCK, SUBBLOCK = "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"


@dataclass
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int] = field(default_factory=lambda: {"cpu": 5 * CPU, "pods": 110_000})
    taints: tuple[Taint, ...] = ()
    pods: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def ready(self, now: float) -> bool:
        return True


def scheduler(hosts: int, fair: bool) -> Scheduler:
    flavors = {"tas": FlavorSpec("tas", {}, topology="gke", levels=(BLOCK, SUBBLOCK, HOSTNAME))}
    group = ResourceGroup(("cpu",), ("tas",), {("tas", "cpu"): Quota(10 * hosts * CPU)})
    cq = ClusterQueueSpec("cq", groups=(group,), within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY)
    s = Scheduler(Config(flavors, {cq.name: cq}, {}, fair_sharing=STRATEGIES if fair else None),
                  instant_eviction=False)
    nodes = [Node(f"h{i:05d}", {BLOCK: f"b{i // 16}", SUBBLOCK: f"b{i // 16}-s{i // 4 % 4}", HOSTNAME: f"h{i:05d}"})
             for i in range(hosts)]
    s.nodes = lambda: nodes
    return s


def job(name: str, priority: int, pods: int, cpus: int, level: str) -> Workload:
    podset = PodSet("main", pods, {"cpu": cpus * CPU}, topology=TopologyRequest(level, required=True))
    return Workload("default", name, "lq", "cq", (podset,), priority=priority, uid=name)


def run(hosts: int, fair: bool, seed: int) -> tuple[float, int, int]:
    """(seconds of the preempting pass, placements asked in it, victims)."""
    rng = random.Random(seed)
    s = scheduler(hosts, fair)
    high = {4 * b + rng.randrange(4) for b in range(hosts // 4)}
    for i in range(hosts):  # one at a time: workload i on host i
        s.add(job(f"w{i:05d}", 2 if i in high else rng.randint(0, 1), 1, 4, HOSTNAME), float(i))
        s.schedule(float(i))
    asked = 0
    names = vars(tas)  # the module's own name for domains.place, which its topology check calls
    place = names["place"]

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal asked
        asked += 1
        return place(*args, **kwargs)

    names["place"] = counted
    try:
        s.add(job("urgent", 3, 4, 5, SUBBLOCK), float(hosts + 1))
        start = time.process_time()
        events = s.schedule(float(hosts + 1))
        seconds = time.process_time() - start
    finally:
        names["place"] = place
    victims = sum(1 for e in events if e.kind.value == "Preempted")
    return seconds, asked, victims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=256)
    parser.add_argument("--fair", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    best = None
    for _ in range(args.repeat):
        seconds, asked, victims = run(args.hosts, args.fair, args.seed)
        best = seconds if best is None else min(best, seconds)
    print(f"hosts={args.hosts} fair={args.fair}: {best:.3f}s (best of {args.repeat}), {asked} placements asked, "
          f"{victims} victims")


if __name__ == "__main__":
    main()
