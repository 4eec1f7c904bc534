"""A queue controller on a store of its own, stepped by the test (``sync``), and the jobs it is given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from flexq.api.kinds import resolve
from flexq.clock import RealClock
from flexq.controller import QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.store import Store
from tests.queues import queue_yaml


def queued_job(name: str) -> dict[str, Any]:
    """A one-pod, one-cpu batch Job in ``default``, queued to ``q``."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}}


def controller_on_store(tmp_path: Path, cpu: int = 4, objects: str | None = None) -> tuple[
        Store, ObjectService, QueueController]:
    """A store with the queue objects (``cq`` with ``cpu`` of quota, ``q``; or the YAML ``objects``), its object
    service, and a queue controller that has read it (not running: each test steps it with ``sync``)."""
    store = Store(tmp_path / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook])
    for doc in yaml.safe_load_all(objects if objects is not None else queue_yaml(("default", None), cpu=cpu)):
        info = resolve(doc["kind"])
        service.create(info, "default" if info.namespaced else "", doc)
    controller = QueueController(service, RealClock())
    controller.resync()
    return store, service, controller


class CountedScheduler:
    """The scheduler as the queue-status writer (``flexq.controller.queue_counts``) sees it: no workloads, ``cpu``
    millicores of flavor ``default`` in use and ``nominal`` of it in every queue, no fair sharing."""

    def __init__(self, cpu: int = 0, nominal: int = 0) -> None:
        self.cpu, self.quota = cpu, nominal

    def workload(self, key: str) -> None:
        return None

    def workload_keys(self) -> list[str]:
        return []

    def queue_usage(self, name: str) -> dict[Any, int]:
        return {("default", "cpu"): self.cpu} if self.cpu else {}

    def nominal(self, name: str, fr: Any) -> int:
        return self.quota

    def weighted_shares(self) -> None:
        return None
