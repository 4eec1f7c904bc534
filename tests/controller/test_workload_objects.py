"""The Workload objects the controller makes for jobs are created without a second validation (they are flexq's
own): each must be one the API accepts, for every job kind and shape the guide and Kueue's samples use."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from flexq.api.kinds import resolve
from flexq.api.validation import validate_object
from flexq.controller.job_sync import templates
from flexq.controller.object_sync import workload_object
from flexq.jobs.workload import Priorities, make_workload
from tests.conftest import guide_text

BATCH_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "sample", "namespace": "team", "uid": "u-1",
                 "labels": {"kueue.x-k8s.io/queue-name": "user-queue",
                            "kueue.x-k8s.io/priority-class": "high"}},
    "spec": {"parallelism": 3, "completions": 3, "suspend": True,
             "template": {"spec": {"restartPolicy": "Never", "containers": [
                 {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}},
}


def _guide_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load(guide_text("rayjob-tpu-v6e-dws.yaml", JOB_ID="1"))
    job["metadata"].update(namespace="default", uid="u-2")
    return job


@pytest.mark.parametrize("job", [BATCH_JOB, _guide_job()], ids=["batch-job", "guide-rayjob"])
def test_a_controller_made_workload_is_valid(job: dict[str, Any]) -> None:
    info = resolve(job["kind"].lower())
    priorities = Priorities.of({"WorkloadPriorityClass": [{"metadata": {"name": "high"}, "value": 100}]})
    wl = make_workload(info.kind, info.group, job, local_queues={(job["metadata"]["namespace"], "user-queue"): "cq"},
                       priorities=priorities, created=0.0)
    obj = workload_object(wl, job, info.kind, info.api_version(), templates(info.kind, job),
                          job["metadata"]["labels"].get("kueue.x-k8s.io/priority-class"))
    assert validate_object(obj).kind == "Workload"
    assert [ps["name"] for ps in obj["spec"]["podSets"]] == [ps.name for ps in wl.podsets]
