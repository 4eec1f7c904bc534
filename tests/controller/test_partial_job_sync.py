"""A partially admitted Job is started with the pods it was admitted with and, stopped, gets back the pods its
Workload asks for (Kueue's RunWithPodSetsInfo / RestorePodSetsInfo for batch/v1 Job); a Job without
``kueue.x-k8s.io/job-min-parallelism`` keeps its parallelism either way."""

from __future__ import annotations

from typing import Any

import pytest

from flexq.controller.job_sync import inject, restore
from flexq.scheduler.model import Admission, PodSetAssignment


def _job(annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": annotations},
            "spec": {"suspend": True, "parallelism": 20, "completions": 20,
                     "template": {"spec": {"containers": [{"name": "c"}]}}}}


MIN = "kueue.x-k8s.io/job-min-parallelism"
SYNC = "kueue.x-k8s.io/job-completions-equal-parallelism"

# annotations -> (parallelism, completions) started with 9 of 20 pods
CASES: dict[str, tuple[dict[str, str], tuple[int, int]]] = {
    "no minimum": ({}, (20, 20)),
    "minimum": ({MIN: "5"}, (9, 20)),
    "minimum, completions follow": ({MIN: "5", SYNC: "true"}, (9, 9)),
    "minimum, completions kept": ({MIN: "5", SYNC: "false"}, (9, 20)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_started_with_its_admitted_pods_and_stopped_with_all(case: str) -> None:
    annotations, want = CASES[case]
    job = _job(annotations)
    originals = {"main": dict(job["spec"]["template"])}
    inject("Job", job, Admission.of("cq", (PodSetAssignment("main", {"cpu": "f"}, {}, 9),)), {})
    assert (job["spec"]["suspend"], job["spec"]["parallelism"], job["spec"]["completions"]) == (False, *want)
    restore("Job", job, originals, {"main": 20})
    assert (job["spec"]["suspend"], job["spec"]["parallelism"], job["spec"]["completions"]) == (True, 20, 20)
