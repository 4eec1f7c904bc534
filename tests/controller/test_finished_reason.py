"""A workload's ``Finished`` condition says how its job ended, as Kueue writes it (reason Succeeded or Failed, the
job's own message), and keeps saying so when its status is written again later."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from flexq.api.kinds import resolve
from flexq.objects.service import ObjectService
from flexq.scheduler.model import WorkloadState
from flexq.store import Store
from tests.support import controller_on_store, queued_job


def _rayjob(name: str) -> dict[str, Any]:
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"entrypoint": "python /app/train.py", "rayClusterSpec": {"headGroupSpec": {
                "rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray", "resources": {"requests": {"cpu": "1"}}}]}}}}}}


def _ended(kind: str, condition: str, message: str) -> dict[str, Any]:
    if kind == "RayJob":
        status: dict[str, Any] = {"jobStatus": "SUCCEEDED" if condition == "Complete" else "FAILED",
                                  "jobDeploymentStatus": "Complete" if condition == "Complete" else "Failed"}
        if message:
            status["message"] = message
        return status
    cond: dict[str, Any] = {"type": condition, "status": "True"}
    if message:
        cond["message"] = message
    return {"conditions": [cond]}


# kind, how the job ends (its condition, its message) → the Finished condition's reason and message
CASES: dict[str, tuple[str, str, str, str, str]] = {
    "job completes": ("job.batch", "Complete", "", "Succeeded", "Job finished successfully"),
    "job completes, with its message": ("job.batch", "Complete", "Reached expected number of succeeded pods",
                                        "Succeeded", "Reached expected number of succeeded pods"),
    "job fails": ("job.batch", "Failed", "Job has reached the specified backoff limit",
                  "Failed", "Job has reached the specified backoff limit"),
    "job fails, no message": ("job.batch", "Failed", "", "Failed", "Job failed"),
    "rayjob fails": ("rayjob.ray.io", "Failed", "configmap \"jax-train-script\" not found",
                     "Failed", "configmap \"jax-train-script\" not found"),
    "rayjob succeeds": ("rayjob.ray.io", "Complete", "", "Succeeded", "Job finished successfully"),
}


def _finished(store: Store) -> dict[str, Any]:
    [wl] = store.list_objects("kueue.x-k8s.io", "workloads", "default")[0]
    [cond] = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
    return {k: cond[k] for k in ("status", "reason", "message")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_finished_says_how_the_job_ended_and_keeps_it(tmp_path: Path, case: str) -> None:
    kind, condition, message, reason, expected = CASES[case]
    store, service, controller = controller_on_store(tmp_path)
    try:
        info = resolve(kind)
        body = queued_job("a") if info.kind == "Job" else _rayjob("a")
        service.create(info, "default", body)
        controller.sync()
        controller.sync()
        [wl] = controller.scheduler.workloads()
        assert wl.state is WorkloadState.ADMITTED
        _patch_status(service, kind, _ended(info.kind, condition, message))
        controller.sync()
        assert wl.state is WorkloadState.FINISHED
        assert _finished(store) == {"status": "True", "reason": reason, "message": expected}
        # A later write of the workload's status (here: the job reports its training metrics) keeps how it ended.
        _patch_status(service, kind, {**_ended(info.kind, condition, message), "trainingMetrics": {"loss": 0.5}})
        controller.sync()
        [stored] = store.list_objects("kueue.x-k8s.io", "workloads", "default")[0]
        assert stored["status"].get("trainingMetrics") == {"loss": 0.5}, "the status was not written again"
        assert _finished(store) == {"status": "True", "reason": reason, "message": expected}
    finally:
        store.close()


def _patch_status(service: ObjectService, kind: str, status: dict[str, Any]) -> None:
    info = resolve(kind)
    current = service.get(info, "default", "a")
    service.replace(info, "default", "a", {**current, "status": status}, subresource="status")


def _reasons(store: Store, name: str, kind: str) -> dict[str, str]:
    """The Events about the object ``kind``/``name``, by reason: their messages."""
    return {e["reason"]: e["message"] for e in store.list_objects("", "events", "default")[0]
            if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == kind}


@pytest.mark.parametrize("kind", ["job.batch", "rayjob.ray.io"])
def test_a_workloads_end_is_told_on_its_job_as_kueue_tells_it(tmp_path: Path, kind: str) -> None:
    """Kueue's job reconciler records ``FinishedWorkload`` on the job ("Workload 'ns/name' is declared finished");
    the workload itself gets no Event for its end."""
    store, service, controller = controller_on_store(tmp_path)
    try:
        info = resolve(kind)
        service.create(info, "default", queued_job("a") if info.kind == "Job" else _rayjob("a"))
        controller.sync()
        controller.sync()
        [wl] = controller.scheduler.workloads()
        _patch_status(service, kind, _ended(info.kind, "Complete", ""))
        controller.sync()
        assert wl.state is WorkloadState.FINISHED
        on_job = _reasons(store, "a", info.kind)
        assert on_job.get("FinishedWorkload") == f"Workload 'default/{wl.name}' is declared finished", on_job
        assert {"CreatedWorkload", "Started"} <= set(on_job)
        on_workload = _reasons(store, wl.name, "Workload")
        assert on_workload == {  # Kueue's messages: the waits since queued and since reserved, here none
            "QuotaReserved": "Quota reserved in ClusterQueue cq, wait time since queued was 0s",
            "Admitted": "Admitted by ClusterQueue cq, wait time since reservation was 0s"}, on_workload
        [event] = [e for e in store.list_objects("", "events", "default")[0] if e["reason"] == "FinishedWorkload"]
        assert event["involvedObject"]["uid"] == service.get(info, "default", "a")["metadata"]["uid"]
        assert event["involvedObject"]["apiVersion"] == service.get(info, "default", "a")["apiVersion"]
    finally:
        store.close()


def test_a_workload_that_waited_says_how_long_in_its_quota_reserved_event(tmp_path: Path) -> None:
    store, service, controller = controller_on_store(tmp_path, cpu=1)
    try:
        for name in ("a", "b"):
            service.create(resolve("job.batch"), "default", queued_job(name))
        controller.sync()
        controller.sync()
        waiting = next(wl for wl in controller.scheduler.workloads() if wl.state is WorkloadState.PENDING)
        time.sleep(1.2)
        _patch_status(service, "job.batch", _ended("Job", "Complete", ""))  # "a" ends: "b" is admitted
        controller.sync()
        assert waiting.state is WorkloadState.ADMITTED
        told = _reasons(store, waiting.name, "Workload")
        assert told["QuotaReserved"] == "Quota reserved in ClusterQueue cq, wait time since queued was 1s", told
        assert told["Admitted"] == "Admitted by ClusterQueue cq, wait time since reservation was 0s", told
    finally:
        store.close()
