"""The guide's flow as a scenario: the issue's acceptance, in virtual time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import ScenarioError, load_scenario
from tests import forks
from tests.conftest import GUIDE

SCENARIO = GUIDE / "scenario.yaml"


def _events(result: Any, job: str) -> list[dict[str, Any]]:
    key = next(w.key for w in result.workloads if w.owner == f"RayJob default/{job}")
    return [e for e in result.events if e["workload"] == key]


def test_guide_scenario_places_jobs_as_the_guide_says() -> None:
    result = run_scenario(load_scenario(SCENARIO))
    job1 = _events(result, "rayjob-tpu-v6e-dws-1")
    admitted1 = next(e for e in job1 if e["event"] == "Admitted")
    assert admitted1["t"] == 0
    assert admitted1["podSets"]["head"] == {"cpu": "default-cpu", "memory": "default-cpu"}
    assert set(admitted1["podSets"]["tpu-group"].values()) == {"on-demand"}

    job2 = _events(result, "rayjob-tpu-v6e-dws-2")
    reserved2 = next(e for e in job2 if e["event"] == "QuotaReserved")
    assert reserved2["t"] == 2 and set(reserved2["podSets"]["tpu-group"].values()) == {"dws"}
    admitted2 = next(e for e in job2 if e["event"] == "Admitted")
    assert admitted2["t"] == 300, "not Admitted until the dws-prov check turns Ready"

    job3 = _events(result, "rayjob-tpu-v6e-dws-3")
    assert set(next(e for e in job3 if e["event"] == "QuotaReserved")["podSets"]["tpu-group"].values()) == {"dws"}

    job4 = _events(result, "rayjob-tpu-v6e-dws-4")
    admitted4 = next(e for e in job4 if e["event"] == "Admitted")
    assert admitted4["t"] == 900 and set(admitted4["podSets"]["tpu-group"].values()) == {"on-demand"}
    finished1 = next(e for e in job1 if e["event"] == "Finished")
    assert finished1["t"] == 600 < admitted4["t"]


def test_simulate_twice_gives_identical_logs(tmp_path: Path) -> None:
    outs = []
    for n in range(2):
        path = tmp_path / f"events{n}.jsonl"
        proc = forks.run(["simulate", str(SCENARIO), "--events", str(path), "-o", "json"], text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        outs.append((path.read_bytes(), proc.stdout))
    assert outs[0] == outs[1]
    lines = outs[0][0].decode().splitlines()
    assert all({"t", "event", "workload", "clusterQueue", "reason"} <= set(json.loads(line)) for line in lines)
    summary = json.loads(outs[0][1])
    waits = {row["job"]: row["wait"] for row in summary["workloads"]}
    assert waits == {"RayJob default/rayjob-tpu-v6e-dws-1": 0, "RayJob default/rayjob-tpu-v6e-dws-2": 298,
                     "RayJob default/rayjob-tpu-v6e-dws-3": 1196, "RayJob default/rayjob-tpu-v6e-dws-4": 0}


def test_check_retry_and_rejection(tmp_path: Path) -> None:
    text = SCENARIO.read_text().replace(
        "    - {at: 20m, workload: default/rayjob-tpu-v6e-dws-3, check: dws-prov, state: Ready}",
        "    - {at: 20m, workload: default/rayjob-tpu-v6e-dws-3, check: dws-prov, state: Rejected}\n"
        "    - {at: 6m, workload: default/rayjob-tpu-v6e-dws-2, check: dws-prov, state: Retry}")
    text = text.replace("at: 5m, workload: default/rayjob-tpu-v6e-dws-2",
                        "at: 1m, workload: default/rayjob-tpu-v6e-dws-2")
    text = text.replace("include: [dws-tpu-queue.yaml]", f"include: [{GUIDE / 'dws-tpu-queue.yaml'}]")
    text = text.replace("file: rayjob-tpu-v6e-dws.yaml", f"file: {GUIDE / 'rayjob-tpu-v6e-dws.yaml'}")
    path = tmp_path / "s.yaml"
    path.write_text(text)
    result = run_scenario(load_scenario(path))
    job3 = [e["event"] for e in _events(result, "rayjob-tpu-v6e-dws-3")]
    assert job3[-3:] == ["AdmissionCheck", "Evicted", "Deactivated"]
    # Job 2 was Admitted at 1m; a Retry of its check at 6m evicts it, and it queues again at once (no
    # retryDelayMinutes): it reserves quota again and waits for a fresh verdict.
    job2 = _events(result, "rayjob-tpu-v6e-dws-2")
    assert [e["event"] for e in job2 if e["t"] == 360] == ["AdmissionCheck", "Evicted", "QuotaReserved"]
    assert job2[-1]["event"] == "QuotaReserved"


def test_bad_scenarios_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: flexq.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec:\n"
                    "  submit:\n    - at: soon\n      file: job.yaml\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert "spec.submit[0].at" in str(info.value) and ":6:" in str(info.value)
    path.write_text("apiVersion: flexq.dev/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nspec:\n  untill: 1d\n")
    proc = forks.run(["simulate", str(path)], text=True, timeout=60)
    assert proc.returncode == 1 and "spec.untill" in proc.stderr and "Traceback" not in proc.stderr
