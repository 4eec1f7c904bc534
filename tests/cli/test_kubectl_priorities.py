"""PriorityClass (scheduling.k8s.io/v1) through the real kubectl: a job's pods' class gives its workload priority."""

from __future__ import annotations

import time
from typing import Any

import yaml

from tests.support import job

SETUP = """apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-priority}
value: 1000000
description: Jobs that go first.
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: normal}
value: 100
globalDefault: true
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: plain}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: plain, resources: [{name: cpu, nominalQuota: 8}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: cq}
"""





def test_priority_classes_with_real_kubectl(kubectl: Any) -> None:
    applied = kubectl("apply", "-f", "-", input=SETUP)
    assert applied.code == 0, applied.err
    assert "priorityclass.scheduling.k8s.io/high-priority created" in applied.out
    listed = kubectl("get", "priorityclasses")
    assert listed.code == 0 and listed.out.split("\n")[0].split()[:3] == ["NAME", "VALUE", "GLOBAL-DEFAULT"]
    for name, klass in (("urgent", "high-priority"), ("plain-job", None)):
        made = job(name, queue="q", cpu=1).pod_priority_class(klass).suspended()
        assert kubectl("apply", "-f", "-", input=made.yaml()).code == 0
    deadline = time.monotonic() + 20
    while True:
        items = yaml.safe_load(kubectl("get", "workloads", "-o", "yaml").out)["items"]
        priorities = {w["metadata"]["ownerReferences"][0]["name"]: w["spec"].get("priority") for w in items}
        if len(priorities) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert priorities == {"urgent": 1000000, "plain-job": 100}, "the pods' class, else the global default"
    refs = {w["metadata"]["ownerReferences"][0]["name"]: w["spec"].get("priorityClassRef") for w in items}
    assert refs == {"urgent": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high-priority"},
                    "plain-job": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "normal"}}
    old = yaml.safe_load(kubectl("get", "workloads.v1beta1.kueue.x-k8s.io", "-o", "yaml").out)["items"]
    assert {(w["spec"]["priorityClassName"], w["spec"]["priorityClassSource"]) for w in old} == {
        ("high-priority", "scheduling.k8s.io/priorityclass"), ("normal", "scheduling.k8s.io/priorityclass")}
