"""The RayCluster runtime's bookkeeping, without Ray: the status and objects it publishes, what eviction and
deletion leave, the autoscaler's patch, and which pods port-forward reaches."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from flexq.controller.rayclusters import RayClusterRuntime
from flexq.store import Key, NotFound, Store
from tests.runtime.test_cluster_objects import CLUSTER


@pytest.fixture
def runtime(tmp_path: Path) -> RayClusterRuntime:
    store = Store()
    store.create(Key("ray.io", "rayclusters", "team", "nb"), copy.deepcopy(CLUSTER))
    return RayClusterRuntime(store, tmp_path)


def _names(store: Store, resource: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in store.list_objects("", resource, "team")[0])


def test_ready_publishes_the_service_and_pods_and_suspension_takes_them_away(runtime: RayClusterRuntime) -> None:
    store = runtime.store
    runtime._write("team", "nb", "ready", "", "2026-01-01T00:00:00Z")
    assert store.get(runtime.key("team", "nb"))["status"]["state"] == "ready"
    assert _names(store, "services") == ["nb-head-svc"]
    assert len(_names(store, "pods")) == 3
    runtime.stop("team", "nb", suspended=True)
    assert _names(store, "services") == [] and _names(store, "pods") == []
    status = store.get(runtime.key("team", "nb"))["status"]
    assert status["state"] == "suspended" and "endpoints" not in status


def test_a_deleted_cluster_leaves_nothing(runtime: RayClusterRuntime) -> None:
    runtime._write("team", "nb", "ready", "")
    runtime.store.delete(runtime.key("team", "nb"))
    runtime.stop("team", "nb")
    assert _names(runtime.store, "services") == [] and _names(runtime.store, "pods") == []
    runtime._write("team", "nb", "failed", "late")  # a status for a cluster that is gone is dropped
    with pytest.raises(NotFound):
        runtime.store.get(runtime.key("team", "nb"))


def test_the_autoscaler_patches_the_worker_group(runtime: RayClusterRuntime) -> None:
    runtime._scale("team", "nb", "gpu", 3)
    assert runtime.store.get(runtime.key("team", "nb"))["spec"]["workerGroupSpecs"][0]["replicas"] == 3
    events = runtime.store.list_objects("", "events", "team")[0]
    assert [e["message"] for e in events if e["reason"] == "AutoscalerScaling"] == ["worker group gpu: replicas 2 -> 3"]


def test_port_forward_reaches_the_head_of_a_running_cluster_only(runtime: RayClusterRuntime) -> None:
    runtime._write("team", "nb", "ready", "")
    pods = {p["metadata"]["labels"]["ray.io/node-type"]: p for p in runtime.store.list_objects("", "pods", "team")[0]}
    other: dict[str, Any] = {"metadata": {"name": "x", "labels": {}}, "spec": {}}
    assert runtime.head_ports("team", other) is None, "not a pod of a RayCluster run here"
    assert runtime.head_ports("team", pods["head"]) is None, "no run: not ours (yet)"
    cluster = SimpleNamespace(ports={"gcs-server": 41000, "dashboard": 41001, "client": 41002})
    stored = runtime.store.get(runtime.key("team", "nb"))
    runtime.runs["team/nb"] = SimpleNamespace(obj=stored, cluster=cluster)  # type: ignore[assignment]
    assert runtime.head_ports("team", pods["head"]) == {6379: 41000, 8265: 41001, 10001: 41002}
    with pytest.raises(LookupError, match="is a worker of RayCluster nb"):
        runtime.head_ports("team", pods["worker"])
    cluster.ports = {}
    with pytest.raises(LookupError, match="is not running"):
        runtime.head_ports("team", pods["head"])
