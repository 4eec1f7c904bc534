"""What a RayCluster of the user's own shows: KubeRay's status, the head Service and the Pods."""

from __future__ import annotations

from typing import Any

from flexq.runtime.cluster_objects import cluster_status, raycluster_objects

CLUSTER: dict[str, Any] = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "nb", "namespace": "team", "uid": "u1", "generation": 3},
    "spec": {"headGroupSpec": {"template": {"spec": {"containers": [
        {"name": "head", "ports": [{"containerPort": 8265, "name": "dashboard"}],
         "resources": {"requests": {"cpu": "1", "memory": "2G"}}}]}}},
             "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 1, "maxReplicas": 4, "template": {
                 "spec": {"containers": [{"name": "w", "resources": {"requests": {"cpu": "500m", "memory": "1G"},
                                                                      "limits": {"nvidia.com/gpu": "1"}}}]}}}]},
}


def test_a_ready_cluster_shows_what_kuberay_shows() -> None:
    status = cluster_status(CLUSTER, "ready", ready_time="2026-01-01T00:00:00Z", stamp="2026-01-01T00:00:05Z")
    assert status["state"] == "ready"
    assert (status["desiredWorkerReplicas"], status["availableWorkerReplicas"], status["readyWorkerReplicas"],
            status["minWorkerReplicas"], status["maxWorkerReplicas"]) == (2, 2, 2, 1, 4)
    assert (status["desiredCPU"], status["desiredMemory"], status["desiredGPU"], status["desiredTPU"]) == (
        "2", "4G", "2", "0")
    assert status["endpoints"] == {"client": "10001", "dashboard": "8265", "gcs-server": "6379"}
    assert status["head"]["serviceName"] == "nb-head-svc" and status["observedGeneration"] == 3
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "HeadPodReady": "True", "RayClusterProvisioned": "True", "RayClusterSuspended": "False"}


def test_a_suspended_cluster_has_no_endpoints() -> None:
    status = cluster_status(CLUSTER, "suspended")
    assert status["state"] == "suspended" and "endpoints" not in status and status["availableWorkerReplicas"] == 0
    assert {c["type"]: c["status"] for c in status["conditions"]}["RayClusterSuspended"] == "True"


def test_the_head_service_selects_the_head_pod() -> None:
    objects = {key.name: obj for key, obj in raycluster_objects(CLUSTER, "Running", {"gpu": ["n1", "n2"]}, "/l", "t")}
    service = objects.pop("nb-head-svc")
    assert [p["port"] for p in service["spec"]["ports"]] == [6379, 8265, 10001]
    heads = [o for o in objects.values() if all(o["metadata"]["labels"].get(k) == v
                                                for k, v in service["spec"]["selector"].items())]
    assert [h["metadata"]["name"][:8] for h in heads] == ["nb-head-"]
    workers = sorted(n for n in objects if "-gpu-worker-" in n)
    assert len(workers) == 2 and sorted(objects[n]["spec"]["nodeName"] for n in workers) == ["n1", "n2"]
    for obj in objects.values():
        assert obj["metadata"]["ownerReferences"][0] == {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "nb",
                                                         "uid": "u1", "controller": True, "blockOwnerDeletion": True}
        assert obj["status"]["phase"] == "Running"
