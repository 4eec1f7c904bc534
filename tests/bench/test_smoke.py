"""The benchmarks that ``make bench`` runs, each at a size that takes seconds, so that a change to what they use
shows here and not first in a benchmark run: the scheduler benchmark, and the simulator benchmark's baseline."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                          timeout=300, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_scheduler_benchmark_admits_and_reports() -> None:
    out = _run("scheduler_bench.py", "--queues", "20", "--workloads", "400", "--cohort-size", "5", "--rounds", "2")
    assert "queues=20 cohorts=4 pending=400" in out
    first = re.search(r"first pass: (\d+) admitted", out)
    steady = re.search(r"steady state: (\d+) admitted in [\d.]+s over 2 passes", out)
    assert first and int(first.group(1)) > 0 and steady and int(steady.group(1)) > 0, out


@pytest.mark.long
def test_the_simulator_benchmark_runs_kueues_baseline() -> None:
    out = _run("sim_bench.py", "--only", "baseline", "--repeat", "1")
    assert re.search(r"^baseline\s+15,000\s+[\d,]+\s.*\(15,000 finished, 1 run\(s\)\)$", out, re.MULTILINE), out


def test_the_server_cpu_benchmark_finishes_every_job_and_counts_the_writes() -> None:
    out = _run("server_cpu_bench.py", "--jobs", "300", "--batch", "50")
    figures = json.loads(out.splitlines()[0])
    assert figures["jobs"] == 300 and figures["batch"] == 50
    # A Job's life: created, its Workload stored with its first status, admitted and finished, the Job started and
    # finished, five Events (a workload admitted at once is stored admitted: fewer).
    assert 10 <= figures["writes_per_job"] < 13, figures
    # The queues' statuses, written where their counts changed, at most every 0.1 s: fewer than a Job's. None at all
    # is right too: a run that ends within the gap its first write set leaves the queues empty, as they were written.
    assert 0 <= figures["queue_status_writes_per_job"] < 5 and figures["wall_s"] > 0, figures
    assert figures["api_ms_per_job"] > 0 and figures["controller_ms_per_job"] > 0


def test_the_topology_preemption_benchmark_finds_a_whole_sub_block() -> None:
    for fair in ((), ("--fair",)):
        out = _run("tas_preemption_bench.py", "--hosts", "32", "--repeat", "1", *fair)
        # Every candidate of priority 0-1 before the first of priority 2, then the put-backs, each asks a placement.
        found = re.search(r"^hosts=32 fair=(True|False): [\d.]+s \(best of 1\), (\d+) placements asked, (\d+) victims$",
                          out, re.MULTILINE)
        assert found and int(found.group(2)) > 32 and found.group(3) == "4", out


def test_the_metrics_benchmark_reports_a_scrape(tmp_path: Path) -> None:
    out = tmp_path / "metrics.json"
    figures = json.loads(_run("metrics_bench.py", "--config", "baseline", "--scale", "0.02", "--repeat", "1",
                              "--out", str(out)).splitlines()[0])
    assert figures == json.loads(out.read_text())
    assert (figures["cluster_queues"], figures["local_queues"]) == (30, 30), figures
    assert 0 < figures["largest_piece_mb"] <= figures["mb"] and figures["pieces"] > 1, figures
    assert figures["snapshot_s"] >= 0 and figures["deepcopy_s"] >= 0 and figures["render_s"] > 0, figures
