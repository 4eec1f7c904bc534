"""Kueue's maximum execution time in a scenario: a job labelled ``kueue.x-k8s.io/max-exec-time-seconds: N`` is
deactivated once its workload has been admitted N seconds (Evicted ``DeactivatedDueToMaximumExecutionTimeExceeded``),
and its run ends there; a job without the label runs its course, or, under the ``ClusterQueueMaxExecutionTime`` gate
(KEP-7029, an alpha), its ClusterQueue's ``spec.workloadDefaults.maximumExecutionTimeSeconds``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
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


def _story(tmp_path: Path, limit: str | None, default: int | None = None,
           gate: bool | None = None) -> list[tuple[float, str, str, str]]:
    objects = list(yaml.safe_load_all(queue_yaml(("default-flavor", None))))
    if default is not None:
        next(o for o in objects if o["kind"] == "ClusterQueue")["spec"]["workloadDefaults"] = {
            "maximumExecutionTimeSeconds": default}
    spec: dict[str, Any] = {"objects": objects,
                            "submit": [{"at": "0s", "runFor": "1h", "object": _job("limited", limit)},
                                       {"at": "0s", "runFor": "2m", "object": _job("free", None)}],
                            "until": "2h"}
    if gate is not None:
        spec["kueueConfig"] = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                               "featureGates": {"ClusterQueueMaxExecutionTime": gate}}
    scenario = {"apiVersion": "flexq.dev/v1alpha1", "kind": "Scenario", "metadata": {"name": "max-exec"},
                "spec": spec}
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


def test_a_cluster_queues_default_bounds_the_jobs_that_say_nothing_under_its_gate(tmp_path: Path) -> None:
    """KEP-7029: with the gate on, a job without the label takes its ClusterQueue's default (``free`` is deactivated
    at 60 s); a job's own label wins over it (``limited`` at 30 s)."""
    assert _story(tmp_path, "30", default=60, gate=True) == [
        (0, "Admitted", "limited", "The workload is admitted"),
        (0, "Admitted", "free", "The workload is admitted"),
        (30, "Evicted", "limited", "DeactivatedDueToMaximumExecutionTimeExceeded"),
        (30, "Deactivated", "limited", "The maximum execution time (30s) exceeded"),
        (60, "Evicted", "free", "DeactivatedDueToMaximumExecutionTimeExceeded"),
        (60, "Deactivated", "free", "The maximum execution time (60s) exceeded")]


@pytest.mark.parametrize("gate", [None, False])
def test_a_cluster_queues_default_changes_nothing_with_its_gate_off(tmp_path: Path, gate: bool | None) -> None:
    """The gate is an alpha, off unless turned on, as its proposal has it."""
    assert [s[1:3] for s in _story(tmp_path, None, default=60, gate=gate)] == [
        ("Admitted", "limited"), ("Admitted", "free"), ("Finished", "free"), ("Finished", "limited")]
