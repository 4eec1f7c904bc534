"""A job's queue label, as Kueue's job webhook keeps it: free to change while the job waits (suspended), fixed once
the queue has started it, by an update or a patch alike."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.api.object_errors import InvalidObject
from flexq.jobs.webhook import job_webhook
from flexq.jobs.workload import QUEUE_LABEL
from flexq.objects.service import ObjectService
from flexq.store import Store
from tests.support import job

JOB: dict[str, Any] = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "train", "namespace": "default", "labels": {QUEUE_LABEL: "lq"}},
    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "app"}]}}},
}
PATH = f"metadata.labels[{QUEUE_LABEL}]"


@pytest.fixture
def service() -> Iterator[ObjectService]:
    store = Store()
    try:
        yield ObjectService(store, hooks=[job_webhook])
    finally:
        store.close()


def _start(service: ObjectService) -> None:
    """What the controller does on admission: un-suspend the job (written to the store, past the webhook)."""
    key = service.key(resolve("job"), "default", "train")
    job = service.store.get(key)
    job["spec"]["suspend"] = False
    service.store.update(key, job)


def _relabel(service: ObjectService, how: str, queue: str | None) -> dict[str, Any]:
    info = resolve("job")
    if how == "patch":
        return service.patch(info, "default", "train", "application/merge-patch+json",
                             {"metadata": {"labels": {QUEUE_LABEL: queue}}})
    job = service.get(info, "default", "train")
    if queue is None:
        del job["metadata"]["labels"][QUEUE_LABEL]
    else:
        job["metadata"]["labels"][QUEUE_LABEL] = queue
    return service.replace(info, "default", "train", job)


@pytest.mark.parametrize("how", ["update", "patch"])
def test_a_waiting_job_may_move_to_another_queue(service: ObjectService, how: str) -> None:
    service.create(resolve("job"), "default", JOB)
    moved = _relabel(service, how, "other")
    assert moved["metadata"]["labels"][QUEUE_LABEL] == "other" and moved["spec"]["suspend"] is True


@pytest.mark.parametrize(("how", "queue"), [("update", "other"), ("patch", "other"), ("update", None)])
def test_a_started_jobs_queue_is_immutable(service: ObjectService, how: str, queue: str | None) -> None:
    service.create(resolve("job"), "default", JOB)
    _start(service)
    with pytest.raises(InvalidObject) as refused:
        _relabel(service, how, queue)
    (error,) = refused.value.errors
    assert (error.path, error.message) == (PATH, f'Invalid value: "{queue or ""}": field is immutable')
    assert service.get(resolve("job"), "default", "train")["metadata"]["labels"][QUEUE_LABEL] == "lq"
    kept = _relabel(service, how, "lq") if queue else None
    assert kept is None or kept["spec"]["suspend"] is False, "an update that keeps the queue is accepted"


SETUP = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: small}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: small, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: other, namespace: default}
spec: {clusterQueue: cq}
"""





@pytest.mark.kubectl
def test_kubectl_label_overwrite_moves_a_waiting_job_only(kubectl: Any) -> None:
    jobs = [job(name, queue="lq", cpu=cpu).namespace(None).yaml() for name, cpu in (("fits", 1), ("waits", 8))]
    applied = kubectl("apply", "-f", "-", input="---\n".join([SETUP, *jobs]))
    assert applied.code == 0, applied.err
    deadline = time.monotonic() + 30
    while kubectl("get", "job", "fits", "-o", "jsonpath={.spec.suspend}").out != "false":
        assert time.monotonic() < deadline, "the job that fits was not started"
        time.sleep(0.3)
    refused = kubectl("label", "job", "fits", f"{QUEUE_LABEL}=other", "--overwrite")
    assert refused.code != 0
    assert f'{PATH}: Invalid value: "other": field is immutable' in refused.err, refused.err
    moved = kubectl("label", "job", "waits", f"{QUEUE_LABEL}=other", "--overwrite")
    assert moved.code == 0, moved.err
    for name, queue in (("fits", "lq"), ("waits", "other")):
        labels = json.loads(kubectl("get", "job", name, "-o", "jsonpath={.metadata.labels}").out)
        assert labels[QUEUE_LABEL] == queue, (name, labels)
