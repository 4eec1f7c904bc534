"""Kueue's provisioning example (``site/static/examples/provisioning/``) on a server with no cluster yet: the job's
provisioning check waits and says why (no node pool to provision from), and no ProvisioningRequest is made; once a
cluster with a GPU node pool is created, its ProvisioningRequest is made, of the class the config names and with the
job's three pods."""

from __future__ import annotations

from typing import Any

from tests import admin
from tests.conftest import Server
from tests.support import eventually

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 36Gi}
      - {name: nvidia.com/gpu, nominalQuota: 9}
  admissionChecksStrategy:
    admissionChecks:
      - {name: sample-prov, onFlavors: [default-flavor]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: sample-prov}
spec:
  controllerName: kueue.x-k8s.io/provisioning-request
  parameters: {apiGroup: kueue.x-k8s.io, kind: ProvisioningRequestConfig, name: prov-test-config}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ProvisioningRequestConfig
metadata: {name: prov-test-config}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  managedResources: [nvidia.com/gpu]
  retryStrategy: {backoffLimitCount: 2, backoffBaseSeconds: 0, backoffMaxSeconds: 1800}
"""

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
  annotations: {provreq.kueue.x-k8s.io/maxRunDurationSeconds: "600"}
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["pause"]
        resources:
          requests: {cpu: 100m, memory: 100Mi, nvidia.com/gpu: 1}
          limits: {nvidia.com/gpu: 1}
      restartPolicy: Never
"""


def _items(server: Server, path: str) -> list[dict[str, Any]]:
    response = admin.get(f"{server.url}{path}")
    response.raise_for_status()
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _check(server: Server) -> dict[str, Any]:
    (wl,) = _items(server, "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")
    (check,) = wl["status"]["admissionChecks"]
    return dict(check)


def test_the_example_waits_saying_why_then_asks_once_a_cluster_has_pools(kubectl: Any, flexq: Any,
                                                                         server: Server) -> None:
    assert kubectl("apply", "-f", "-", input=SETUP).code == 0
    created = kubectl("create", "-f", "-", input=JOB)
    assert created.code == 0, created.err

    def waits_saying_why() -> None:
        check = _check(server)
        assert check["state"] == "Pending" and "no cluster has node pools" in check["message"], check

    eventually(waits_saying_why)
    requests = "/apis/autoscaling.x-k8s.io/v1/namespaces/default/provisioningrequests"
    assert _items(server, requests) == []

    assert flexq("container", "clusters", "create", "gpu-cluster", "--machine-type=n2-standard-16",
                 "--num-nodes=1").code == 0
    made = flexq("container", "node-pools", "create", "gpu-pool", "--cluster=gpu-cluster",
                 "--machine-type=g2-standard-4", "--enable-autoscaling", "--num-nodes=0", "--min-nodes=0",
                 "--max-nodes=3")
    assert made.code == 0, made.err

    def asked() -> dict[str, Any]:
        (request,) = _items(server, requests)
        return request

    spec = eventually(asked)["spec"]
    assert spec["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"
    assert [p["count"] for p in spec["podSets"]] == [3]
    assert "no cluster has node pools" not in _check(server).get("message", "")

    def not_found() -> dict[str, Any]:
        (request,) = _items(server, requests)
        conditions = {c["type"]: (c["status"], c["reason"], c["message"])
                      for c in (request.get("status") or {}).get("conditions") or []}
        assert conditions.get("Provisioned", ("",))[0] == "False", conditions
        return conditions

    # The pool has no node yet: capacity is not found, and the autoscaler says so as it does (kubectl shows it).
    assert eventually(not_found) == {
        "Accepted": ("True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler"),
        "Provisioned": ("False", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")}
    shown = kubectl("get", "provisioningrequests", "-o", "jsonpath={.items[0].status.conditions[*].reason}")
    assert shown.code == 0 and shown.out.split() == ["Accepted", "CapacityIsNotFound"], shown.err
