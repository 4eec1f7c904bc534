"""What a Ready admission check asks of a job's pods (its ``podSetUpdates``) is in the job's pod template when the job
starts, as Kueue's job reconciler writes it: labels, annotations and node selector added, tolerations appended; an
update that sets a key the template holds with another value stops the job from starting (its workload finishes,
``FailedToStart``), as does one that disagrees with another check's (both clocks: tests/control/test_plane.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.controller import QueueController
from flexq.objects.service import ObjectService
from tests.queues import queue_yaml
from tests.support import controller_on_store, queued_job

CHECK = """apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: custom}
spec: {controllerName: example.com/custom}
"""

UPDATE = {"name": "main", "labels": {"team": "ml"}, "annotations": {"example.com/reserved": "r-1"},
          "nodeSelector": {"example.com/rack": "r7"},
          "tolerations": [{"key": "example.com/reserved", "operator": "Exists", "effect": "NoSchedule",
                           "tolerationSeconds": 30}]}


def _setup(tmp_path: Path) -> tuple[ObjectService, QueueController]:
    queues = queue_yaml(("default", "pool-a")).replace(
        "  namespaceSelector: {}\n", "  namespaceSelector: {}\n  admissionChecks: [custom]\n")
    _, service, controller = controller_on_store(tmp_path, objects=CHECK + "---\n" + queues)
    return service, controller


def _workload(service: ObjectService) -> dict[str, Any]:
    (wl,) = service.store.list_objects("kueue.x-k8s.io", "workloads", "default")[0]
    return wl


def _set_check(service: ObjectService, update: dict[str, Any]) -> None:
    """What the check's controller does: the check Ready, with its podSetUpdates, on the workload's status."""
    wl = _workload(service)
    checks = [{**c, "state": "Ready", "message": "reserved", "podSetUpdates": [update]}
              for c in wl["status"]["admissionChecks"]]
    service.patch(resolve("workloads.kueue.x-k8s.io"), "default", wl["metadata"]["name"],
                  "application/merge-patch+json", {"status": {"admissionChecks": checks}}, subresource="status")


def _job(service: ObjectService) -> dict[str, Any]:
    return service.store.get(service.key(resolve("job.batch"), "default", "j"))


def _started_with(tmp_path: Path, template_meta: dict[str, Any], update: dict[str, Any]) -> tuple[
        dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The job's template before the check turned Ready (as created, with the Job's defaults), the job and its
    workload after."""
    service, controller = _setup(tmp_path)
    job = queued_job("j")
    job["spec"]["template"]["metadata"] = template_meta
    job["spec"]["template"]["spec"]["tolerations"] = [{"key": "own", "operator": "Exists"}]
    service.create(resolve("job.batch"), "default", job)
    controller.sync()
    before = _job(service)
    assert before["spec"]["suspend"] is True, "the check is pending: the job waits"
    _set_check(service, update)
    controller.sync()
    controller.sync()  # a job that could not start: its workload's end is written by the step after (at once, live)
    return before["spec"]["template"], _job(service), _workload(service)


def test_a_ready_checks_pod_set_updates_are_in_the_started_jobs_template(tmp_path: Path) -> None:
    before, job, wl = _started_with(tmp_path, {"labels": {"app": "train"}}, UPDATE)
    assert job["spec"]["suspend"] is False
    template = job["spec"]["template"]
    assert template["metadata"]["labels"] == {**before["metadata"]["labels"], "team": "ml"}
    assert before["metadata"]["labels"]["app"] == "train"
    assert template["metadata"]["annotations"] == {"example.com/reserved": "r-1"}
    assert template["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "pool-a", "example.com/rack": "r7"}
    assert template["spec"]["tolerations"] == [{"key": "own", "operator": "Exists"}, UPDATE["tolerations"][0]]
    conditions = {c["type"]: (c["status"], c["reason"]) for c in wl["status"]["conditions"]}
    assert conditions["Admitted"] == ("True", "Admitted")
    assert conditions["PodsReady"] == ("True", "Started"), "its job started (no runtime: its pods count as ready)"


@pytest.mark.parametrize(("meta", "field", "held", "asked"), [
    ({"labels": {"team": "infra"}}, "labels", "infra", "ml"),
    ({"annotations": {"example.com/reserved": "r-0"}}, "annotations", "r-0", "r-1"),
])
def test_an_update_the_template_disagrees_with_finishes_the_workload_and_the_job_stays_suspended(
        tmp_path: Path, meta: dict[str, Any], field: str, held: str, asked: str) -> None:
    before, job, wl = _started_with(tmp_path, meta, UPDATE)
    assert job["spec"]["suspend"] is True and job["spec"]["template"] == before, "the job is untouched"
    finished = next(c for c in wl["status"]["conditions"] if c["type"] == "Finished")
    ready = next(c for c in wl["status"]["conditions"] if c["type"] == "PodsReady")
    assert (ready["status"], ready["reason"]) == ("False", "WaitForStart"), "its job never started"
    key = next(iter(meta[field]))
    assert (finished["status"], finished["reason"], finished["message"]) == (
        "True", "FailedToStart", f'in admission check "custom": invalid admission check PodSetUpdate: conflict for '
        f"{field}: conflict for key={key}, value1={held}, value2={asked}")


def _pod_started_with(tmp_path: Path, labels: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A plain Pod (Kueue's pod integration) with ``labels``, its check Ready with UPDATE: the pod and its workload."""
    service, controller = _setup(tmp_path)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q", **labels}},
           "spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}
    service.create(resolve("pods"), "default", pod)
    controller.sync()
    _set_check(service, UPDATE)
    controller.sync()
    controller.sync()
    return service.store.get(service.key(resolve("pods"), "default", "p")), _workload(service)


def test_a_plain_pods_updates_are_in_the_pod_once_its_gate_is_lifted(tmp_path: Path) -> None:
    got, _ = _pod_started_with(tmp_path, {})
    assert "schedulingGates" not in got["spec"], "admitted: its gate is lifted"
    assert got["metadata"]["labels"]["team"] == "ml" and got["metadata"]["annotations"]["example.com/reserved"] == "r-1"
    assert got["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "pool-a", "example.com/rack": "r7"}
    assert got["spec"]["tolerations"][-1] == UPDATE["tolerations"][0]


def test_a_plain_pod_that_disagrees_keeps_its_gate_and_its_workload_finishes(tmp_path: Path) -> None:
    got, wl = _pod_started_with(tmp_path, {"team": "infra"})
    assert got["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert got["metadata"]["labels"]["team"] == "infra" and "nodeSelector" not in got["spec"]
    finished = next(c for c in wl["status"]["conditions"] if c["type"] == "Finished")
    assert finished["reason"] == "FailedToStart" and "conflict for labels: conflict for key=team" in finished["message"]
