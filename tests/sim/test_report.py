"""Reports: hand-checked numbers on the guide's scenario, and the policy comparison on a week of traffic."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from flexq.sim.report import percentile
from tests import forks
from tests.conftest import GUIDE


def _simulate(scenario: Path, out: Path, *extra: str) -> dict[str, dict[str, object]]:
    proc = forks.run(["simulate", str(scenario), "--report", str(out), *extra], text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary: dict[str, dict[str, object]] = json.loads((out / "summary.json").read_text())
    return summary


def test_percentiles() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([180.0, 1800.0], 50) == 990.0
    assert percentile([180.0, 1800.0], 95) == pytest.approx(1719.0)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_guide_scenario_report_numbers(tmp_path: Path) -> None:
    summary = _simulate(GUIDE / "scenario-capacity.yaml", tmp_path)["flexq"]
    # Job 1 starts when on-demand nodes have booted (3 minutes); job 2 when DWS delivers (30 minutes after
    # its submission at 2 s, before job 1 frees Plan A at 1h3m): waits 180 s and 1800 s.
    assert summary["wait"] == {"jobs": 2, "p50": 990.0, "p95": 1719.0, "max": 1800.0, "mean": 990.0}
    # An hour each: a 4-host v6e slice on demand ($10.80 a host-hour) and on flex-start (47% of it), plus the
    # heads' shares of the CPU node; the DWS request job 1 raced with was withdrawn unprovisioned: nothing wasted.
    assert summary["cost"] == {"on-demand": 43.3, "flex-start": 20.4, "total": 63.7, "wasted": 0.0}
    assert summary["peakWaiting"] == 2, "two jobs wait (from 2 s to 3m): their variants are not counted"
    assert summary["fallbacks"] == 0 and summary["finished"] == 2
    with (tmp_path / "jobs.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["job"], r["wait"], r["flavors"]) for r in rows] == [
        ("RayJob default/rayjob-tpu-v6e-dws-1", "180", "head=default-cpu;tpu-group=on-demand"),
        ("RayJob default/rayjob-tpu-v6e-dws-2", "1800", "head=default-cpu;tpu-group=dws"),
    ]
    page = (tmp_path / "report.html").read_text()
    assert page.count("<svg") >= 2 and "p95 wait" in page and "http" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""), "self-contained: no external assets"


def test_week_of_stockouts_flexq_beats_kueue(tmp_path: Path) -> None:
    summary = _simulate(GUIDE / "scenario-week.yaml", tmp_path, "--compare")
    flexq, kueue, bound = summary["flexq"], summary["kueue-compatible"], summary["lower-bound"]
    assert flexq["jobs"] == kueue["jobs"] == bound["jobs"] > 100
    assert kueue["wait"]["p95"] >= flexq["wait"]["p95"] >= bound["wait"]["p95"]  # type: ignore[index]
    assert set(flexq["pools"]) == {"default-pool", "on-demand-pool", "dws-pool"}  # type: ignore[arg-type]
    assert flexq["pools"]["dws-pool"]["peakNodes"] == 16  # type: ignore[index]
    assert flexq["fallbacks"] == kueue["fallbacks"] == 0, "flexq races both flavors instead of falling back"
    assert kueue["wait"]["p95"] > flexq["wait"]["p95"]  # type: ignore[index]
    assert kueue["wait"]["p95"] >= flexq["wait"]["p95"]  # type: ignore[index]
    assert kueue["wait"]["max"] > flexq["wait"]["max"]  # type: ignore[index]


def test_pool_prices_override_the_catalog(tmp_path: Path) -> None:
    text = (GUIDE / "scenario-capacity.yaml").read_text().replace("include: [dws-tpu-queue.yaml]",
                                                                  f"include: [{GUIDE / 'dws-tpu-queue.yaml'}]")
    text = text.replace("file: rayjob-tpu-v6e-dws.yaml", f"file: {GUIDE / 'rayjob-tpu-v6e-dws.yaml'}")
    costs = []
    for price in (2.70, 5.40):  # the catalog's on-demand price of a ct6e-standard-4t node, then twice that
        priced = text.replace("numNodes: 1, autoscaling: false}", "numNodes: 1, autoscaling: false, pricePerHour: 0}")
        priced = priced.replace("minNodes: 0, maxNodes: 4}", f"minNodes: 0, maxNodes: 4, pricePerHour: {price}}}", 1)
        path = tmp_path / f"priced-{price}.yaml"
        path.write_text(priced)
        costs.append(_simulate(path, tmp_path / f"report-{price}")["flexq"]["cost"])
    assert costs[0]["on-demand"] > 0 and costs[1]["on-demand"] == pytest.approx(2 * costs[0]["on-demand"], abs=0.02)
    assert costs[0]["flex-start"] == costs[1]["flex-start"] > 3  # the DWS pool keeps the catalog's price
