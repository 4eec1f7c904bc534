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


def _on_ray_pool(store: Store) -> None:
    """The RayCluster admitted onto a node pool of an existing Ray cluster (whose dashboard answers nothing here)."""
    store.create(Key("flexq.dev", "nodepools", "", "ray-a"),
                 {"apiVersion": "flexq.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "ray-a"},
                  "spec": {"rayAddress": "http://127.0.0.1:9"}})
    obj = store.get(Key("ray.io", "rayclusters", "team", "nb"))
    obj["spec"]["suspend"] = False
    obj["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "ray-a"}
    store.update(Key("ray.io", "rayclusters", "team", "nb"), obj)


def test_a_raycluster_on_an_existing_ray_cluster_is_that_cluster_across_a_restart(runtime: RayClusterRuntime) -> None:
    store = runtime.store
    _on_ray_pool(store)
    runtime.start("team", "nb")
    assert (runtime.runs, list(runtime.remote)) == ({}, ["team/nb"]), "nothing started here"
    assert store.get(runtime.key("team", "nb"))["status"]["state"] == "ready"
    messages = [e["message"] for e in store.list_objects("", "events", "team")[0]]
    assert any("the RayCluster is RayCluster nb, the Ray cluster of node pool ray-a (its dashboard "
               "http://127.0.0.1:9): nothing is started here" in m for m in messages), messages
    head = next(p for p in store.list_objects("", "pods", "team")[0]
                if p["metadata"]["labels"].get("ray.io/node-type") == "head")
    with pytest.raises(LookupError, match=r"reach its dashboard at http://127\.0\.0\.1:9"):
        runtime.head_ports("team", head)
    assert runtime.running("team", "nb") is None, "its dashboard does not answer: not running"
    again = RayClusterRuntime(store, runtime.home)
    again.recover()
    assert (again.runs, list(again.remote)) == ({}, ["team/nb"]), "a restart takes the existing cluster up again"
    again.stop("team", "nb", suspended=True)
    assert again.remote == {} and store.get(runtime.key("team", "nb"))["status"]["state"] == "suspended"
