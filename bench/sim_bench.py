"""Simulator speed on Kueue's own scheduler-performance configs, in virtual time.

    python bench/sim_bench.py [--only baseline|large-scale] [--profile]

For each config (bench/kueue/, the numbers of Kueue's test/performance/scheduler/configs): the time to
load it, the time to run it, the events per second, and the target (baseline, 15,000 workloads: 5 s;
large-scale, 1,000 ClusterQueues and 50,000 workloads: 60 s).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

CONFIGS = {"baseline": 5.0, "large-scale": 60.0}
HERE = Path(__file__).parent / "kueue"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(CONFIGS))
    parser.add_argument("--profile", action="store_true", help="print the 25 most expensive functions")
    args = parser.parse_args()
    print(f"{'config':<12} {'workloads':>9} {'events':>8} {'load s':>7} {'run s':>7} {'cpu s':>7} "
          f"{'events/s':>9} {'target s':>8}  result")
    for name, target in CONFIGS.items():
        if args.only and name != args.only:
            continue
        start = time.perf_counter()
        scenario = load_scenario(HERE / f"{name}.yaml")
        loaded = time.perf_counter()
        cpu = time.process_time()
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        result = run_scenario(scenario)
        if profiler is not None:
            profiler.disable()
        ran = time.perf_counter()
        cpu = time.process_time() - cpu
        run_s = ran - loaded
        finished = sum(1 for w in result.workloads if w.state.value == "Finished")
        verdict = "met" if run_s + (loaded - start) <= target else "MISSED"
        print(f"{name:<12} {len(result.workloads):>9,} {len(result.events):>8,} {loaded - start:>7.2f} "
              f"{run_s:>7.2f} {cpu:>7.2f} {len(result.events) / run_s:>9,.0f} {target:>8.0f}  {verdict}"
              f" ({finished:,} finished)")
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
