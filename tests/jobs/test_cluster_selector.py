"""A RayJob on an existing RayCluster (``spec.clusterSelector``) is not Kueue's, as Kueue skips it: created as
written (never suspended, no queue needed), it gets no workload, and what is shown for it is the submitter Job
alone (the RayCluster is the cluster's own)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.api.object_errors import InvalidObject
from flexq.jobs.webhook import job_webhook
from flexq.jobs.workload import JobError, Priorities, make_workload, selected_cluster
from flexq.objects.service import ObjectService
from flexq.runtime.kuberay_view import kuberay_objects
from flexq.store import Store

ON_NOTEBOOK: dict[str, Any] = {
    "apiVersion": "ray.io/v1", "kind": "RayJob",
    "metadata": {"name": "probe", "namespace": "team", "uid": "u1"},
    "spec": {"entrypoint": "python probe.py", "clusterSelector": {"ray.io/cluster": "notebook"}},
}


@pytest.mark.parametrize(("kind", "spec", "expected"), [
    ("RayJob", {"clusterSelector": {"ray.io/cluster": "notebook"}}, "notebook"),
    ("RayJob", {"clusterSelector": {}}, None),
    ("RayJob", {"rayClusterSpec": {}}, None),
    ("RayCluster", {"clusterSelector": {"ray.io/cluster": "notebook"}}, None),
    ("Job", {}, None),
])
def test_selected_cluster(kind: str, spec: dict[str, Any], expected: str | None) -> None:
    assert selected_cluster(kind, {"metadata": {"name": "x"}, "spec": spec}) == expected


def test_the_webhook_leaves_it_as_written() -> None:
    service = ObjectService(Store())  # no LocalQueue at all: a queued job would be refused
    job = copy.deepcopy(ON_NOTEBOOK)
    job_webhook(service, resolve("rayjob"), job, None)
    assert job == ON_NOTEBOOK


def test_a_queued_rayjob_still_needs_a_queue() -> None:
    service = ObjectService(Store())
    job = copy.deepcopy(ON_NOTEBOOK)
    del job["spec"]["clusterSelector"]
    with pytest.raises(InvalidObject, match=r"kueue\.x-k8s\.io/queue-name"):
        job_webhook(service, resolve("rayjob"), job, None)


def test_it_has_no_workload() -> None:
    with pytest.raises(JobError, match="runs on the existing RayCluster notebook"):
        make_workload("RayJob", "ray.io", ON_NOTEBOOK, local_queues={("team", "default"): "cq"},
                      priorities=Priorities.of({}), created=0.0)


def test_only_the_submitter_is_shown() -> None:
    shown = kuberay_objects(ON_NOTEBOOK, "Running", {}, "/tmp/log", "", with_cluster=False)
    assert sorted(key.resource for key, _ in shown) == ["jobs", "pods"]
    assert shown[0][0].name == "probe" and shown[1][0].name.startswith("probe-")
