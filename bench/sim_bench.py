"""Simulator speed on Kueue's own scheduler-performance configs, in virtual time.

    python bench/sim_bench.py [--only baseline|large-scale] [--profile]

For each config (bench/kueue/, the numbers of Kueue's test/performance/scheduler/configs): the time to
load it, the best and the median time to run it, the events per second (best run), the CPU seconds of the
load and the best run, and the target for those CPU seconds (issue #33: baseline, 15,000 workloads, under
the 7.7 s it took at commit 8995cdd; large-scale, 1,000 ClusterQueues and 50,000 workloads, under 15 s).
The machine is shared: compare figures only with runs alternated on it, and read the CPU column.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
from pathlib import Path

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario

CONFIGS = {"baseline": 7.7, "large-scale": 15.0}
"""CPU seconds (load and best run) each config must stay under."""
HERE = Path(__file__).parent / "kueue"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(CONFIGS))
    parser.add_argument("--profile", action="store_true", help="print the 25 most expensive functions")
    parser.add_argument("--repeat", type=int, default=3, help="runs per config: the best and the median are shown "
                        "(this machine's speed varies by a quarter from run to run)")
    args = parser.parse_args()
    print(f"{'config':<12} {'workloads':>9} {'events':>8} {'load s':>7} {'best s':>7} {'median s':>8} "
          f"{'events/s':>9} {'cpu s':>7} {'target s':>8}  result")
    for name, target in CONFIGS.items():
        if args.only and name != args.only:
            continue
        start, cpu_start = time.perf_counter(), time.process_time()
        scenario = load_scenario(HERE / f"{name}.yaml")
        load_s, load_cpu = time.perf_counter() - start, time.process_time() - cpu_start
        times: list[float] = []
        cpus: list[float] = []
        profiler = cProfile.Profile() if args.profile else None
        result = None
        for _ in range(1 if profiler is not None else max(1, args.repeat)):
            result = None  # the previous run's objects go before the next run starts, as in a fresh process
            gc.collect()
            if profiler is not None:
                profiler.enable()
            began, cpu_began = time.perf_counter(), time.process_time()
            result = run_scenario(scenario)
            times.append(time.perf_counter() - began)
            cpus.append(time.process_time() - cpu_began)
            if profiler is not None:
                profiler.disable()
        assert result is not None
        best, median = min(times), statistics.median(times)
        finished = sum(1 for w in result.workloads if w.state.value == "Finished")
        cpu = load_cpu + min(cpus)
        verdict = "met" if cpu <= target else "MISSED"
        print(f"{name:<12} {len(result.workloads):>9,} {len(result.events):>8,} {load_s:>7.2f} {best:>7.2f} "
              f"{median:>8.2f} {len(result.events) / best:>9,.0f} {cpu:>7.2f} {target:>8.1f}  {verdict} "
              f"({finished:,} finished, {len(times)} run(s))")
        if profiler is not None:
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
