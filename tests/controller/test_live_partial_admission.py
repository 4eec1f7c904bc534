"""Kueue's partial admission on the live server, with the real kubectl: Kueue's ``sample-job-partial-admission.yaml``
(parallelism 20, ``kueue.x-k8s.io/job-min-parallelism: "5"``) in a queue with room for 9 pods is admitted with 9
(its Workload's ``minCount`` 5, its admission's ``count`` 9) and started with ``parallelism: 9``; the webhook refuses
a minimum that is not below the Job's pods, naming the annotation, as Kueue's does."""

from __future__ import annotations

from typing import Any

import yaml

from tests import admin
from tests.conftest import Server
from tests.queues import queue_yaml
from tests.sim.test_partial_admission import SAMPLE
from tests.support import condition, eventually


def _get(server: Server, path: str) -> dict[str, Any]:
    response = admin.get(f"{server.url}{path}")
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def test_the_sample_job_starts_with_the_pods_that_fit(kubectl: Any, server: Server) -> None:
    assert kubectl("apply", "-f", "-", input=queue_yaml(("default-flavor", None), cpu=9)).code == 0
    created = kubectl("create", "-f", "-", input=SAMPLE)
    assert created.code == 0, created.err

    def admitted() -> dict[str, Any]:
        items = _get(server, "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")["items"]
        assert items and condition(items[0], "Admitted") == "True"
        return items[0]

    wl = eventually(admitted)
    assert wl["spec"]["podSets"][0]["count"] == 20 and wl["spec"]["podSets"][0]["minCount"] == 5
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 9

    def started() -> dict[str, Any]:
        job = _get(server, "/apis/batch/v1/namespaces/default/jobs/sample-job-partial-admission")
        assert job["spec"]["suspend"] is False
        return job

    spec = eventually(started)["spec"]
    assert (spec["parallelism"], spec["completions"]) == (9, 20)


def test_a_minimum_not_below_the_jobs_pods_is_refused(kubectl: Any, server: Server) -> None:
    assert kubectl("apply", "-f", "-", input=queue_yaml(("default-flavor", None))).code == 0
    job = yaml.safe_load(SAMPLE)
    for value, message in (("20", "Invalid value: 20: should be between 0 and 19"),
                           ("five", 'Invalid value: "five"')):
        job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = value
        refused = kubectl("create", "-f", "-", input=yaml.safe_dump(job))
        assert refused.code != 0
        assert "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]" in refused.err and message in refused.err
    assert _get(server, "/apis/batch/v1/namespaces/default/jobs")["items"] == []
