"""The queue controller rebuilds the scheduler's configuration from the configuration objects it followed in the
change log, not from a listing of the store: after start-up, a queue created, changed or deleted is configured
without reading the others again, and what the controller holds is what the store holds."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from flexq.api.kinds import resolve
from flexq.clock import RealClock
from flexq.controller.queue import _CONFIG_KINDS, QueueController
from flexq.jobs.webhook import job_webhook
from flexq.objects.service import ObjectService
from flexq.scheduler.model import WorkloadState
from flexq.store import Store
from tests.queues import queue_yaml
from tests.support import job

CQ, LQ = resolve("ClusterQueue"), resolve("LocalQueue")





def _second_queue(cpu: int) -> tuple[dict[str, Any], dict[str, Any]]:
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq2"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
              {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu},
                                                {"name": "memory", "nominalQuota": "8Gi"}]}]}]}}
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
          "metadata": {"name": "q2", "namespace": "default"}, "spec": {"clusterQueue": "cq2"}}
    return cq, lq


def _specs(objects: dict[str, list[dict[str, Any]]]) -> dict[str, list[Any]]:
    """Each kind's objects without their statuses and versions (which the view need not follow)."""
    out = {}
    for kind, objs in objects.items():
        out[kind] = []
        for obj in objs:
            obj = copy.deepcopy(obj)
            obj.pop("status", None)
            obj["metadata"].pop("resourceVersion", None)
            out[kind].append(obj)
    return out


def test_queues_changed_after_start_up_are_configured_from_the_changes(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "flexq.db")
    service = ObjectService(store, hooks=[job_webhook])
    try:
        for doc in yaml.safe_load_all(queue_yaml(("default", None), cpu=4)):
            info = resolve(doc["kind"])
            service.create(info, "default" if info.namespaced else "", doc)
        controller = QueueController(service, RealClock())
        controller.resync()
        listed: list[str] = []
        objects = controller._objects

        def listing(kind: str) -> list[dict[str, Any]]:
            listed.append(kind)
            return objects(kind)

        monkeypatch.setattr(controller, "_objects", listing)
        cq, lq = _second_queue(cpu=1)
        service.create(CQ, "", cq)
        service.create(LQ, "default", lq)
        service.create(resolve("job.batch"), "default", job("a", queue="q2", cpu=1).suspended().object())
        controller.sync()
        [wl] = controller.scheduler.workloads()
        assert (wl.cluster_queue, wl.state) == ("cq2", WorkloadState.ADMITTED)
        # The quota raised, the first ClusterQueue deleted: both configured from the changes.
        stored = store.get(service.key(CQ, "", "cq2"))
        stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 3
        service.replace(CQ, "", "cq2", stored)
        service.delete(CQ, "", "cq")
        service.create(resolve("job.batch"), "default", job("b", queue="q2", cpu=2).suspended().object())
        controller.sync()
        assert {w.name.split("-")[1]: w.state for w in controller.scheduler.workloads()} == {
            "a": WorkloadState.ADMITTED, "b": WorkloadState.ADMITTED}
        assert set(controller.scheduler.config.cluster_queues) == {"cq2"}
        assert not _CONFIG_KINDS & set(listed), f"the controller listed the configuration again: {listed}"
        fresh = {kind: store.list_objects(resolve(kind).group, resolve(kind).plural)[0] for kind in _CONFIG_KINDS}
        assert _specs(controller._config.objects(_CONFIG_KINDS)) == _specs(fresh)
    finally:
        store.close()
