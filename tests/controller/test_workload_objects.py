"""The Workload objects the controller makes for jobs are created without a second validation (they are flexq's
own): each must be one the API accepts, for every job kind and shape the guide and Kueue's samples use."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from flexq.api.kinds import resolve
from flexq.api.validation import validate_object
from flexq.api.versions import convert
from flexq.controller.job_sync import templates
from flexq.controller.object_sync import workload_object
from flexq.jobs.workload import Priorities, make_workload, priority_class_ref
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
                          priority_class_ref(info.kind, job, priorities))
    assert validate_object(obj).kind == "Workload"
    assert [ps["name"] for ps in obj["spec"]["podSets"]] == [ps.name for ps in wl.podsets]


def test_the_workload_names_the_class_its_priority_comes_from() -> None:
    # Kueue's order: the job's WorkloadPriorityClass label, else its pods' PriorityClass, else the global default.
    priorities = Priorities.of({"WorkloadPriorityClass": [{"metadata": {"name": "high"}, "value": 100}],
                                "PriorityClass": [{"metadata": {"name": "batch"}, "value": 10},
                                                  {"metadata": {"name": "usual"}, "value": 5, "globalDefault": True}]})
    by_label = priority_class_ref("Job", BATCH_JOB, priorities)
    assert by_label == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    unlabelled: dict[str, Any] = {**BATCH_JOB, "metadata": {**BATCH_JOB["metadata"], "labels": {
        "kueue.x-k8s.io/queue-name": "user-queue"}}}
    assert priority_class_ref("Job", unlabelled, priorities) == {"group": "scheduling.k8s.io",
                                                                 "kind": "PriorityClass", "name": "usual"}
    pod_class = yaml.safe_load(yaml.safe_dump(unlabelled))
    pod_class["spec"]["template"]["spec"]["priorityClassName"] = "batch"
    ref = priority_class_ref("Job", pod_class, priorities)
    assert ref == {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch"}
    assert priority_class_ref("Job", unlabelled, Priorities()) is None
    wl = make_workload("Job", "batch", pod_class, local_queues={("team", "user-queue"): "cq"},
                       priorities=priorities, created=0.0)
    obj = workload_object(wl, pod_class, "Job", "batch/v1", templates("Job", pod_class), ref)
    assert obj["spec"]["priorityClassRef"] == ref and obj["spec"]["priority"] == 10
    assert validate_object(obj).kind == "Workload"
    # v1beta1 names it priorityClassName and priorityClassSource, and reads back the same.
    old = convert(info_wl := resolve("workload"), obj, "v1beta1")
    assert (old["spec"]["priorityClassName"], old["spec"]["priorityClassSource"]) == (
        "batch", "scheduling.k8s.io/priorityclass")
    assert "priorityClassRef" not in old["spec"] and convert(info_wl, old, "v1beta2")["spec"] == obj["spec"]
    labelled = convert(info_wl, workload_object(wl, BATCH_JOB, "Job", "batch/v1", templates("Job", BATCH_JOB),
                                                by_label), "v1beta1")
    assert labelled["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
