"""The queue controller passes over its own writes to workloads and jobs when it reads the change log back (they
say what it decided), and still acts on anyone else's write to the same objects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flexq.api.kinds import KindInfo, resolve
from flexq.clock import RealClock
from flexq.controller.queue import QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.scheduler.model import WorkloadState
from flexq.store import Change, Key, Store
from tests.queues import queue_yaml

QUEUES = queue_yaml(("default", None))


def _job(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}}


def test_own_writes_are_passed_over_and_others_are_read(tmp_path: Path) -> None:
    store = Store(tmp_path / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook])
    for doc in yaml.safe_load_all(QUEUES):
        info = resolve(doc["kind"])
        service.create(info, "default" if info.namespaced else "", doc)
    controller = QueueController(service, RealClock())
    controller.resync()
    read: list[tuple[str, str, str]] = []
    dispatch = controller._dispatch

    def recording(info: KindInfo, change: Change) -> None:
        read.append((info.kind, change.type.value, change.key.name))
        dispatch(info, change)

    controller._dispatch = recording  # type: ignore[method-assign]
    try:
        service.create(resolve("job.batch"), "default", _job("a"))
        controller.sync()  # the Job is read: its Workload made and admitted, the Job started
        controller.sync()  # what that step wrote comes back
        [wl] = controller.scheduler.workloads()
        assert wl.state is WorkloadState.ADMITTED
        jobs_and_workloads = [r for r in read if r[0] in ("Job", "Workload")]
        assert jobs_and_workloads == [("Job", "ADDED", "a")], "the controller read back its own writes"
        assert not controller._own, "its own writes were not all passed over"
        # Someone else deactivates the workload: read, and acted on.
        key = Key("kueue.x-k8s.io", "workloads", "default", wl.name)
        stored = store.get(key)
        stored["spec"]["active"] = False
        store.update(key, stored)
        controller.sync()
        assert ("Workload", "MODIFIED", wl.name) in read
        assert controller.scheduler.held(wl.key).state is WorkloadState.INACTIVE
        # The Job finishes, as its runner says: read, and the workload finished.
        job_key = Key("batch", "jobs", "default", "a")
        job = store.get(job_key)
        job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
        store.update(job_key, job, subresource="status")
        controller.sync()
        assert ("Job", "MODIFIED", "a") in read
    finally:
        store.close()
