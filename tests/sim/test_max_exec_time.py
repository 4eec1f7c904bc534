"""Kueue's maximum execution time in a scenario: a job labelled ``kueue.x-k8s.io/max-exec-time-seconds: N`` is
deactivated once its workload has been admitted N seconds (Evicted ``DeactivatedDueToMaximumExecutionTimeExceeded``),
and its run ends there; a job without the label runs its course."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flexq.sim.runner import run_scenario
from flexq.sim.scenario import load_scenario
from tests.queues import queue_yaml
from tests.support import job


def _job(name: str, limit: str | None) -> dict[str, Any]:
    made: dict[str, Any] = job(name, queue="q", cpu="1").object()
    if limit is not None:
        made["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = limit
    return made


def _story(tmp_path: Path, limit: str) -> list[tuple[float, str, str, str]]:
    scenario = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "max-exec"},
                "spec": {"objects": list(yaml.safe_load_all(queue_yaml(("default-flavor", None)))),
                         "submit": [{"at": "0s", "runFor": "1h", "object": _job("limited", limit)},
                                    {"at": "0s", "runFor": "2m", "object": _job("free", None)}],
                         "until": "2h"}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return [(e["t"], e["event"], str(e["workload"]).split("/")[1].removeprefix("job-").rsplit("-", 1)[0],
             str(e.get("cause", e["reason"]))) for e in run_scenario(load_scenario(path)).events
            if e["event"] in ("Admitted", "Evicted", "Deactivated", "Finished")]


def test_a_job_past_its_maximum_execution_time_is_deactivated(tmp_path: Path) -> None:
    assert _story(tmp_path, "30") == [
        (0, "Admitted", "limited", "The workload is admitted"),
        (0, "Admitted", "free", "The workload is admitted"),
        (30, "Evicted", "limited", "DeactivatedDueToMaximumExecutionTimeExceeded"),
        (30, "Deactivated", "limited", "The maximum execution time (30s) exceeded"),
        (120, "Finished", "free", "JobFinished")]


def test_a_label_kueue_would_not_read_bounds_nothing(tmp_path: Path) -> None:
    assert [s[1:3] for s in _story(tmp_path, "0")] == [
        ("Admitted", "limited"), ("Admitted", "free"), ("Finished", "free"), ("Finished", "limited")]
