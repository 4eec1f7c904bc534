"""bench/live_baseline.py at a tiny scale: a real server, the load generator and the runner, and a report
whose figures agree with the config and with each other."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCALE = 0.01


def _bench(out: Path, *options: str, timeout: float, **env: str) -> None:
    """bench/live_baseline.py at ``SCALE``, its report written to ``out``, this tree's flexq imported."""
    pythonpath = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    subprocess.run([sys.executable, str(ROOT / "bench" / "live_baseline.py"), "--scale", str(SCALE), *options,
                    "--timeout", "60", "--out", str(out)], check=True, timeout=timeout, capture_output=True,
                   env={**os.environ, "PYTHONPATH": pythonpath, **env})


def test_live_baseline_smoke(tmp_path: Path) -> None:
    _bench(tmp_path, "--virtual", timeout=120)
    report = json.loads((tmp_path / f"live-baseline-{SCALE:g}.json").read_text())
    config = yaml.safe_load((ROOT / "bench" / "kueue" / "baseline.yaml").read_text())
    expected: dict[str, int] = {}
    for cohorts in config["cohorts"]:
        for queues in cohorts["queuesSets"]:
            for workloads in queues["workloadsSets"]:
                for template in workloads["workloads"]:
                    expected[template["className"]] = expected.get(template["className"], 0) + (
                        cohorts["count"] * queues["count"] * max(1, math.ceil(workloads["count"] * SCALE)))
    assert report["jobs"] == report["finished"] == sum(expected.values())
    assert {c: a["count"] for c, a in report["admission"].items()} == expected
    assert report["creations"]["created"] == report["jobs"] and report["creations"]["refused"] == 0
    assert report["finish_errors"] == []
    # No schedule beats the bound; the ratio is the two figures'.
    assert report["wall_s"] >= report["bound_s"] > 0
    assert abs(report["ratio"] - report["wall_s"] / report["bound_s"]) < 0.01
    for figures in report["admission"].values():
        assert 0 <= figures["avg_s"] <= report["wall_s"] and 0 <= figures["p99_s"] <= report["wall_s"]
    table = (tmp_path / f"live-baseline-{SCALE:g}.md").read_text()
    # Every finished Job's quota held after its end, split at the last creation; the parts average to the whole.
    release = report["release_s"]
    assert 0 < release["p50"] <= release["p99"] <= report["wall_s"]
    parts = [release[k] for k in ("avg_while_creating", "avg_after_creating") if release[k] is not None]
    assert parts and min(parts) - 0.001 <= release["avg"] <= max(parts) + 0.001, release
    assert f"| | {release['avg']} | {release['p50']} | {release['p99']} |" in table
    # The timeline: twenty spans in order, every Job created, first admitted and finished in one of them.
    spans = report["timeline"]
    assert len(spans) == 20 and [s["from_s"] for s in spans] == sorted(s["from_s"] for s in spans)
    for counted in ("created", "admitted", "finished"):
        assert sum(s[counted] for s in spans) == report["jobs"], counted
    assert all(0 <= s["release_avg_s"] <= report["wall_s"] for s in spans)
    assert all(f"| {s['from_s']} | {s['created']:,} | {s['admitted']:,} | {s['finished']:,} |" in table for s in spans)
    # The same config in virtual time: an average a class, its end, and every workload finished in one of the spans
    # (the last span holds what finished after the live run's end).
    assert set(a["virtual_avg_s"] >= 0 for a in report["admission"].values()) == {True}
    assert report["bound_s"] <= report["virtual_wall_s"]
    assert sum(s["virtual_finished"] for s in spans) == report["jobs"]
    assert f"ends at {report['virtual_wall_s']} s." in table
    assert all(f"| {s['finished']:,} | {s['virtual_finished']:,} | {s['release_avg_s']} |" in table for s in spans)
    # CPU per process: the server's, the load generator's (a process of its own), the watcher's and runner's; the
    # generator's lag against the schedule, and the verdict it gives.
    cpu, creations = report["cpu_s"], report["creations"]
    processes = cpu.pop("server_processes")
    assert set(cpu) == {"server", "generator", "runner"} and all(v > 0 for v in cpu.values()), cpu
    assert cpu["server"] == report["server"]["cpu_s"]
    assert list(processes) == ["server"] and abs(processes["server"] - cpu["server"]) <= 0.1  # no API workers
    # (the per-Job figure from the unrounded seconds: within the rounding of the shown ones)
    assert abs(report["server_cpu_ms_per_job"] - cpu["server"] / report["jobs"] * 1000) <= 50 / report["jobs"] + 0.01
    assert 0 <= creations["p99_late_s"] <= creations["max_late_s"]
    assert creations["on_schedule"] == (creations["max_late_s"] <= 1.0)
    assert (f"| {cpu['server']} | {report['server_cpu_ms_per_job']} | {cpu['generator']} | {cpu['runner']} "
            f"| {creations['p99_late_s']} | {'yes' if creations['on_schedule'] else 'no'} |") in table
    server = report["server"]
    assert server["cpu_s"] > 0 and server["peak_rss_mb"] > 10 and server["store_mb"] > 0
    assert f"| {report['wall_s']} | {report['bound_s']} |" in (tmp_path / f"live-baseline-{SCALE:g}.md").read_text()
    # The controller's steps, from the server's /metrics: each Job's workload written twice at least (stored, finished).
    steps = report["controller_steps"]
    assert steps["steps"] >= 1 and steps["busy_s"] > 0
    assert abs(sum(steps["phase_share"].values()) - 1) < 0.01
    assert 2 <= steps["workload_writes_per_job"] <= 6, steps
    assert f"| {steps['steps']:,} | {steps['busy_s']} |" in (tmp_path / f"live-baseline-{SCALE:g}.md").read_text()
    # The server's CPU by thread: the controller's, the event loop's, the API's writes'; together at most the whole.
    threads = steps["thread_cpu_s"]
    assert {"MainThread", "flexq-queue-controller", "flexq-write"} <= set(threads), threads
    assert sum(threads.values()) <= report["server"]["cpu_s"] + 0.5
    assert "| server CPU s by thread | " in (tmp_path / f"live-baseline-{SCALE:g}.md").read_text()


def test_live_baseline_split_smoke(tmp_path: Path) -> None:
    """``--split``: two servers on one SQLite file, the client talking to the one that does not lead; every Job
    finishes, and both servers are gone afterwards."""
    homes = tmp_path / "homes"  # the run's servers keep their state under it (its temporary folder)
    homes.mkdir()
    _bench(tmp_path, "--split", timeout=150, TMPDIR=str(homes))
    report = json.loads((tmp_path / f"live-baseline-split-{SCALE:g}.json").read_text())
    assert report["jobs"] == report["finished"] > 0 and report["creations"]["refused"] == 0
    assert report["finish_errors"] == []
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _server_under(p, homes)]
    assert left == [], "a server of the split run was left running"


def _server_under(proc: Path, homes: Path) -> bool:
    try:
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:  # it ended meanwhile
        return False
    return b"flexq.cli.main" in argv and any(str(homes).encode() in a for a in argv)


# (when the live run's last workload finished; virtual-time finishing times) -> finished in each of the timeline's spans
SPANS: dict[str, tuple[float, list[float], list[int]]] = {
    "each span as the live run's": (3.0, [0.1, 0.99, 1.0, 1.99, 2.0, 2.5], [2, 2, 2]),
    "either side of a boundary the report rounds (to 0.73): each once": (1.1, [0.7333, 0.7339], [0, 1, 1]),
    "after the live run's end: the last span": (2.0, [0.5, 3.0, 9.0], [1, 0, 2]),
    "before the first span: the first": (3.0, [-0.1, 0.0], [2, 0, 0]),
    "none finished": (3.0, [], [0, 0, 0]),
}


@dataclass
class _Run:
    t0: float = 0.0
    answered: list[float] = field(default_factory=list)
    admitted: dict[str, float] = field(default_factory=dict)
    finished_at: list[float] = field(default_factory=list)
    release: list[float] = field(default_factory=list)
    release_sent: list[float] = field(default_factory=list)


@pytest.mark.parametrize("case", sorted(SPANS))
def test_virtual_time_finishes_fall_in_the_timelines_spans(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from live_report import timeline, timeline_markdown

    end, finished, expected = SPANS[case]
    spans = timeline(_Run(finished_at=[end]), parts=3, virtual=finished)
    assert [s["virtual_finished"] for s in spans] == expected
    assert sum(s["virtual_finished"] for s in spans) == len(finished)  # each time in one span
    assert sum(s["finished"] for s in spans) == 1
    assert "| in virtual time |" in timeline_markdown(spans)[1]
    assert "in virtual time" not in "".join(timeline_markdown(timeline(_Run(finished_at=[end]), parts=3)))
